"""Train a SAN whose hops are pulled toward where the encoder's ImageNet head sees the object a question is about.

Why: on coco-boxes the Flickr8k-QA model's last hop peaks inside the asked-about object less often than the photo's
centre point (docs/results.md, "Where the Flickr8k-QA model's hops look"); nothing in its training says where an
object is. The encoder's own ImageNet classifier does, without boxes: its class activation map (Zhou et al. CVPR
2016: the classifier's weights of a class applied to every cell's features instead of to their mean) lights up
where the encoder sees that class. On coco-boxes it peaks inside the named object's boxes more often than the
SAN's hops do (docs/experiments.md, Flickr8k-QA).

The teacher's map for one question:

1. The question's object word (`object_word`): the answer of an object question ("what runs through the grass?":
   dog), the noun a color or number question names ("what is the color of the shirt?": shirt; "how many dogs ...":
   dog); a location question has none (its answer is the place around the object).
2. Its ImageNet classes (`ImageNetWords.classes_of`): the classes under the word's first WordNet noun sense (dog:
   the 118 breeds); a word that names a person (WordNet's person.n.01), whom ImageNet has no class for, takes the
   classes of persons and of what people wear (clothing, headdress, footwear). A word with no class gets no map.
3. The map: the head's per-cell logits of those classes, weighted by the photo's probabilities among them, then a
   softmax over cells at `temperature`.

The loss adds `teacher_weight * KL(teacher's map || hop's map)`, averaged over hops and over the batch's questions
that have a map, to the answer loss. By default the head reads the batch's own frozen stride-32 grid, so the encoder
must be the config's frozen EfficientNet-Lite. With `teacher_size` a multiple of the encoder's side (448 for 224),
the head reads each training photo at that size instead and its finer map is summed onto the SAN's grid (2 x 2
cells to one): on coco-boxes those maps point at persons and other objects far more often than the 224-px ones
(docs/experiments.md). They are computed once, before the first step, and again when a run resumes: every training
photo with a map through the encoder at that size (about 25 min for Flickr8k-QA on 2 CPU cores).

    python experiments/hop_teacher.py fit --config configs/vqa/flickr8k_qa_san.yaml \
        --data.dataset.init_args.root PATH/TO/flickr8k_qa --model.teacher_weight 1

The checkpoints are plain `VqaModule` ones (the two options are left out of them): test, export and ground them
with `python -m vqa` and `python -m vqa.hop_grounding` as any other. Figures in docs/experiments.md.
"""

from __future__ import annotations

from collections import defaultdict
from functools import lru_cache

import torch
from lightning.pytorch.utilities import rank_zero_info
from torch import Tensor

from core.model.encoder import EfficientNetLite
from core.model.imagenet import imagenet_synsets
from core.training.wordnet import ensure_wordnet
from data.caption_questions import COLORS
from data.vocabulary import tokenize
from data.vqa import VqaSample
from vqa.cli import VqaCLI
from vqa.datamodule import VqaDataModule
from vqa.module import VqaModule

#: Hyper-parameters of this experiment only, left out of the checkpoints it writes.
OWN_OPTIONS = ("teacher_weight", "temperature", "teacher_size", "place_teacher")
TEACHER_BATCH = 32  # photos the head reads at once when `teacher_size` is larger than the encoder's
#: What ImageNet shows of a person, who has no class of its own: the few person classes and what people wear.
PERSON_ROOTS = ("person.n.01", "clothing.n.01", "headdress.n.01", "footwear.n.02")
SUBJECT_WORDS = 4  # how many words after "the" `place_subject` reads: a number and modifiers, then the noun


def object_word(sample: VqaSample) -> str | None:
    """The word of the object a Flickr8k-QA question is about (the module's docstring, step 1), or None."""
    words = tokenize(sample.question)
    if sample.question_type == "object":
        return sample.answer or None
    if sample.question_type == "color" and words[-2:-1] == ["the"]:
        return words[-1]  # "what is the color of the shirt", "what color is the shirt"
    if sample.question_type == "number" and words[:2] == ["how", "many"] and len(words) > 2:
        return words[2]  # "how many dogs ...": the plural, made singular by `classes_of`
    return None


def place_subject(sample: VqaSample, words: ImageNetWords) -> str | None:
    """What a location question asks about, the first word after "where is / does ... the" that names ImageNet
    classes and is no colour ("where does the white dog chase a ball?": dog, though "white" names a person in
    WordNet; "where is the young boy running?": boy), or None. With `place_teacher`, a location question's hops
    are pulled toward its subject, not toward its answer."""
    tokens = tokenize(sample.question)
    if sample.question_type != "location" or tokens[:1] != ["where"] or tokens[2:3] != ["the"]:
        return None
    return next((word for word in tokens[3:3 + SUBJECT_WORDS] if word not in COLORS and words.classes_of(word)), None)


class ImageNetWords:
    """Which of the 1000 ImageNet classes a word names, through WordNet (the module's docstring, step 2)."""

    def __init__(self) -> None:
        ensure_wordnet()
        from nltk.corpus import wordnet

        self._wordnet = wordnet
        self._ancestors = [set(s.closure(lambda x: x.hypernyms())) | {s} for s in imagenet_synsets()]
        self._person = wordnet.synset("person.n.01")

    @lru_cache(maxsize=None)
    def classes_of(self, word: str) -> tuple[int, ...]:
        """The class indices under the word's first noun sense (or a person's roots); () for none."""
        base = self._wordnet.morphy(word, "n")
        senses = self._wordnet.synsets(base, "n") if base else []
        if not senses:
            return ()
        first = senses[0]
        if first == self._person or self._person in first.closure(lambda x: x.hypernyms()) or base == "people":
            roots = {self._wordnet.synset(name) for name in PERSON_ROOTS}
        else:
            roots = {first}
        return tuple(i for i, ancestors in enumerate(self._ancestors) if ancestors & roots)


def activation_maps(features: Tensor, classifier: torch.nn.Linear, classes: Tensor, temperature: float) -> Tensor:
    """The head's map of each question's classes.

    Args:
        features: (B, L, D) the stride-32 grid the head pools.
        classifier: the head's linear layer, D -> 1000.
        classes: (B, 1000) true at each question's classes (every row has at least one).
        temperature: the softmax's over cells.

    Returns:
        (B, L) maps that sum to 1.
    """
    cells = classifier(features.float())  # (B, L, 1000) a logit per cell and class
    image = classifier(features.float().mean(dim=1))  # (B, 1000) the photo's logits
    weights = torch.softmax(image.masked_fill(~classes, float("-inf")), dim=-1)  # (B, 1000) among its classes
    maps = torch.einsum("blc,bc->bl", cells, weights)  # (B, L)
    return torch.softmax(maps / temperature, dim=-1)


def summed_cells(maps: Tensor, pool: int) -> Tensor:
    """Maps (..., rows, columns) on a grid `pool` times coarser (..., rows / pool, columns / pool), each cell the
    sum of its pool x pool cells, so a map that sums to 1 still does (a 448-px map on the 224-px grid)."""
    return torch.nn.functional.avg_pool2d(maps.unsqueeze(-3), pool).squeeze(-3) * pool**2


class HopTeacher(VqaModule):
    """`VqaModule` whose training loss adds `teacher_weight` times the KL divergence from the ImageNet head's map
    of each question's object to each hop's map (the module's docstring).

    Args:
        teacher_weight: the weight of the divergence against the answer loss.
        temperature: of the teacher's softmax over cells. At 4 the teacher's maps are about as spread as the hops'
            own (2.98 nats of at most ln 49 = 3.89 on 31 Flickr8k-QA training questions; 1.33 at 1): the teacher
            says where, not how sharply (sharper maps were measured to point worse).
        teacher_size: the size the head reads each training photo at (the module's docstring); None for the
            encoder's own.
        place_teacher: give a location question the map of what it asks about (`place_subject`: "where does the
            dog run?": dog), which it otherwise lacks: the SAN then finds the dog before it reads what is around.
        **kwargs: `VqaModule`'s own options.
    """

    def __init__(
        self,
        *,
        teacher_weight: float = 1.0,
        temperature: float = 4.0,
        teacher_size: int | None = None,
        place_teacher: bool = False,
        **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        if teacher_weight < 0 or temperature <= 0:
            raise ValueError(f"teacher_weight must be >= 0 and temperature > 0, got {teacher_weight}, {temperature}")
        self.teacher_weight, self.temperature, self.place_teacher = teacher_weight, temperature, place_teacher
        encoder = self.encoder
        if not isinstance(encoder, EfficientNetLite) or not encoder.frozen or encoder.output_stride != 32:
            raise ValueError("the ImageNet head reads the frozen stride-32 grid of an EfficientNetLite encoder")
        height, width = encoder.input_shape
        self.teacher_size = teacher_size or height
        if height != width or self.teacher_size % height:
            raise ValueError(f"teacher_size must be a multiple of the encoder's square side {encoder.input_shape}, "
                             f"got {teacher_size}")
        self._classes: Tensor | None = None  # (N, 1000) bool, per training question; built on the first step
        self._maps: Tensor | None = None  # (N, L) the finer head's maps, when teacher_size is larger

    def _training_classes(self) -> Tensor:
        if self._classes is None:
            words = ImageNetWords()
            samples = self.trainer.datamodule.questions("train")
            classes = torch.zeros(len(samples), 1000, dtype=torch.bool)
            for i, sample in enumerate(samples):
                word = object_word(sample) or (place_subject(sample, words) if self.place_teacher else None)
                if word is not None:
                    classes[i, list(words.classes_of(word))] = True
            self._classes = classes
            mapped = int(classes.any(dim=1).sum())
            rank_zero_info(f"hop teacher: a map for {mapped} of {len(samples)} training questions")
        return self._classes

    def _finer_maps(self) -> Tensor:
        """(N, L) each training question's map from the head at `teacher_size` px, summed onto the SAN's grid; zeros
        for a question without one. Computed once per run, photo by photo."""
        if self._maps is None:
            classes, samples = self._training_classes(), self.trainer.datamodule.questions("train")
            dataset = self.trainer.datamodule.dataset
            head = EfficientNetLite(variant=self.encoder.variant, image_size=self.teacher_size).eval()
            transform, pool = head.transform(), self.teacher_size // self.encoder.input_shape[0]
            asked = defaultdict(list)  # photo -> its questions with a map
            for i, sample in enumerate(samples):
                if classes[i].any():
                    asked[sample.image_id].append(i)
            photos = list(asked)
            maps = torch.zeros(len(samples), self.encoder.num_locations)
            with torch.inference_mode():
                for start in range(0, len(photos), TEACHER_BATCH):
                    chunk = photos[start : start + TEACHER_BATCH]
                    features = head(torch.stack([transform(dataset.load(p)) for p in chunk]))  # (P, L', 1280)
                    rows = [i for p in chunk for i in asked[p]]
                    owner = torch.tensor([k for k, p in enumerate(chunk) for _ in asked[p]])
                    fine = activation_maps(features[owner], head.net._fc, classes[rows], self.temperature)  # (Q, L')
                    maps[rows] = summed_cells(fine.view(len(rows), *head.grid_shape), pool).flatten(1)  # (Q, L)
                    if start // TEACHER_BATCH % 50 == 0:
                        done = start + len(chunk)
                        rank_zero_info(f"hop teacher at {self.teacher_size} px: {done} of {len(photos)} photos")
            self._maps = maps
        return self._maps

    def training_step(self, batch: dict, batch_idx: int) -> Tensor:
        loss, out = self._step(batch, "train")
        classes = self._training_classes()[batch["index"].cpu()].to(out.weights.device)  # (B, 1000)
        has = classes.any(dim=1)  # (B,)
        if not bool(has.any()):
            return loss
        if self.teacher_size != self.encoder.input_shape[0]:
            target = self._finer_maps()[batch["index"].cpu()][has.cpu()].to(out.weights.device)  # (N, L)
        else:
            with torch.no_grad():
                features = self.encoder.annotations(batch["inputs"][has])  # (N, L, 1280)
                target = activation_maps(features, self.encoder.net._fc, classes[has], self.temperature)  # (N, L)
        hops = out.weights[has].float().clamp_min(1e-12)  # (N, K, L)
        kl = (target[:, None] * (target[:, None].clamp_min(1e-12).log() - hops.log())).sum(-1)  # (N, K)
        self.log("train/hop_kl", kl.mean(), batch_size=len(batch["length"]))
        return loss + self.teacher_weight * kl.mean()

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        super().on_save_checkpoint(checkpoint)
        for name in OWN_OPTIONS:
            checkpoint["hyper_parameters"].pop(name, None)


def main(args: list[str] | None = None) -> VqaCLI:
    return VqaCLI.main(HopTeacher, VqaDataModule, args)


if __name__ == "__main__":
    main()
