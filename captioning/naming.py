"""Naming what the captions never named: the encoder's ImageNet head as tags, new words, and a search that says them.

A captioner trained on Flickr8k can only say Flickr8k's words, and says them about everything: a bear becomes "a
brown dog", a laptop nothing at all. Yet its encoder's own ImageNet classifier knows bananas, laptops and zebras.
Three steps, after the novel-object captioning literature:

1. **Tags** (`core.model.imagenet`): the encoder's ImageNet head, its 1000 classes turned into caption words
   through WordNet (tabby -> cat, espresso -> coffee), each word's probability the sum of its classes'. The head
   reads the photo at the size it was trained at, 224 px (`HEAD_SIZE`): on the same pass as a 384-px captioner's
   grid its probabilities flatten (espresso 0.90 -> 0.11 on scikit-image's coffee photo; on 300 Flickr8k photos
   the top class agreed with the 224-px one's for 44% of them, docs/experiments.md), and the summed breeds of
   "dog" then take 12% of every photo. A 224-px captioner's grid is the head's input itself: one pass.
2. **New words** (DCC, Hendricks et al. 2016): a word the caption vocabulary lacks ("zebra") gets the decoder rows
   (embedding, output) of a close word it has ("horse"): the nearest vocabulary noun under WordNet's hypernyms,
   the most frequent at the nearest shared ancestor (`anchor_words`). The decoder then reads and scores "zebra" as
   it would "horse", and draws its map at that step like any other word's.
3. **Constrained beam search** (Anderson et al. 2017, `captioning.search.beam_search`): the one or two most
   confident tags become words for the caption to hold ("zebra" or "zebras"), so the new word goes where the model
   would have put its anchor. A new word is always said, and never without its tag; a word the model trained on is
   said only where saying it costs the caption less than `value` (the head may be sure of a word the caption cannot
   hold naturally). Optionally, a class word the head finds absent while it is sure of something else is not said
   either (`absent_below`: the dog in a bear photo).

`ObjectNaming` holds the options (a `CaptioningModule`'s `naming`, or `Captioner.caption(..., name_objects=True)`);
`Namer` is them bound to one model: its tagger, its vocabulary with the new words, its decoder with their rows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor

from captioning.decoder import CaptionDecoder
from captioning.object_words import DEFAULT_WORDS, ObjectWords
from captioning.search import Constraints
from core.model.encoder import EfficientNetLite, Encoder
from core.model.imagenet import TOO_GENERAL, ClassWords, Tag
from data.vocabulary import Vocabulary


class ObjectNaming:
    """How a caption names what the ImageNet head sees (the module's docstring).

    Args:
        threshold: a tag at least this probable becomes a word for the caption to hold.
        max_constraints: at most this many tags constrain one caption (each doubles the search's beams).
        absent_below: while a tag is at least `threshold` probable, a caption word the head knows (one of its words)
            whose probability is below this is not said; 0 never stops a word.
        value: how much log-probability (per length^length_penalty, as beam search ranks captions) saying a tag of
            a word the model was trained on is worth: such a word, which the model knows where to put, goes into the
            caption only where it costs less than this (`Constraints.values`). A new word is always said, as is every
            tag with None.
        corners: the head also reads the photo's four corners (crops of three quarters of each side, at 224 px), and
            a word's probability is its highest in any of the five views: an object that fills a corner but not the
            photo is named too (on coco-boxes, docs/experiments.md). False reads the whole photo once.
        words: the object word list whose class names (dog, cup, ...) name ImageNet classes first; None: the one
            that ships, `captioning/object_words.json`.
    """

    def __init__(
        self,
        *,
        threshold: float = 0.5,
        max_constraints: int = 2,
        absent_below: float = 0.0,
        value: float | None = 1.0,
        corners: bool = True,
        words: Path | None = None,
    ) -> None:
        if not 0.0 < threshold <= 1.0:
            raise ValueError(f"threshold must be in (0, 1], got {threshold}")
        if not 0 <= max_constraints <= Constraints.MAX:
            raise ValueError(f"max_constraints must be from 0 to {Constraints.MAX}, got {max_constraints}")
        if not 0.0 <= absent_below < threshold:
            raise ValueError(f"absent_below must be from 0 to below threshold {threshold}, got {absent_below}")
        if value is not None and value <= 0:
            raise ValueError(f"value must be above 0 (or None: every confident tag said), got {value}")
        self.threshold, self.max_constraints, self.absent_below = threshold, max_constraints, absent_below
        self.value, self.corners = value, corners
        self.words = None if words is None else str(words)  # a string: checkpoints hold plain data


DEFAULT_NAMING = ObjectNaming()
"""The options `Captioner`, the export command and the app name objects with unless told others: one object, so that
the `Namer` a model makes for it is made once."""


def anchor_words(new: dict[str, object], vocabulary: Vocabulary, *, candidates: int | None = None) -> dict[str, str]:
    """For each new word (mapped to its WordNet synset), the vocabulary word whose rows it borrows.

    The anchor is found where the two meet in WordNet: walking up the new word's hypernyms, the first ancestor
    shared with the first noun sense of some of the vocabulary's words (its `candidates` most frequent ones, ids 4 to
    candidates + 3, when given; a vocabulary is ordered by count) gives the most frequent of those (zebra -> equine
    -> horse; laptop -> computer). Ancestors that name nothing one could point at (`TOO_GENERAL`, or within three
    steps of WordNet's root: entity, physical entity, object) are not meeting points; a word that meets none borrows
    the rows of the most frequent candidate that is a physical object.
    """
    from nltk.corpus import wordnet

    meeting: dict[object, str] = {}  # ancestor synset -> the most frequent vocabulary word under it
    physical = wordnet.synset("physical_entity.n.01")
    fallback = None
    last = None if candidates is None else len(Vocabulary.SPECIALS) + candidates
    for word in vocabulary.tokens[len(Vocabulary.SPECIALS) : last]:
        senses = wordnet.synsets(word, "n") if word.isalpha() and word not in TOO_GENERAL else []
        if not senses:
            continue
        ancestors = {senses[0], *senses[0].closure(lambda synset: synset.hypernyms())}
        if fallback is None and physical in ancestors:
            fallback = word
        for ancestor in ancestors:
            meeting.setdefault(ancestor, word)  # tokens run from the most frequent: the first word stays
    anchors = {}
    for word, synset in new.items():
        level, seen, found = [synset], {synset}, None
        while level and found is None:
            shared = [
                meeting[a] for a in level if a in meeting and a.min_depth() > 3 and _first_lemma(a) not in TOO_GENERAL
            ]
            if shared:
                found = min(shared, key=vocabulary.index)
            level = [parent for node in level for parent in node.hypernyms() if parent not in seen]
            seen.update(level)
        anchors[word] = found or fallback or vocabulary.tokens[len(Vocabulary.SPECIALS)]
    return anchors


def _first_lemma(synset) -> str:
    return synset.lemma_names()[0].lower()


@dataclass
class SearchInputs:
    """What the search is given for a batch of photos: their tags, the words each must hold, the words each may not."""

    tags: list[list[Tag]]
    constraints: Constraints  # with what meeting each is worth
    never: Tensor  # (B, V') True where photo b may not say word v


HEAD_SIZE = 224  # the input size EfficientNet-Lite0's ImageNet head was trained at


class Namer:
    """`ObjectNaming` bound to one model: the tagger, the vocabulary with the new words, the decoder with their rows.

    Args:
        naming: the options.
        decoder: the model's trained decoder (left as it is; `decoder` here is a copy with the new rows).
        vocabulary: the model's vocabulary (new words get ids from its size up).
        encoder: the model's encoder: an `EfficientNetLite`, whose package ships the ImageNet head.
    """

    def __init__(
        self, *, naming: ObjectNaming, decoder: CaptionDecoder, vocabulary: Vocabulary, encoder: Encoder
    ) -> None:
        if not isinstance(encoder, EfficientNetLite):
            raise ValueError(
                f"naming objects needs an encoder with an ImageNet head (EfficientNetLite); this model's is "
                f"{type(encoder).__name__}: caption without naming objects"
            )
        self.naming, self.encoder = naming, encoder
        same = encoder.input_shape == (HEAD_SIZE, HEAD_SIZE) and encoder.output_stride == 32 and encoder.frozen
        # the head's own reading of the photo: the model's encoder when it reads 224 px, else the same weights at 224
        self.head = encoder if same else EfficientNetLite(variant=encoder.variant, image_size=HEAD_SIZE).eval()
        self.head.to(next(decoder.parameters()).device)
        object_words = ObjectWords.read(naming.words or DEFAULT_WORDS)
        preferred = [name for name in object_words.class_names.values() if name.isalpha()]
        self.class_words = ClassWords(preferred=preferred, known=vocabulary.tokens[len(Vocabulary.SPECIALS) :])
        new = {
            word: self.class_words.synsets[self.class_words.classes_of(word)[0]]
            for word in self.class_words.vocabulary
            if word not in vocabulary
        }
        self.anchors = anchor_words(new, vocabulary)  # new word -> its anchor
        self.vocabulary = Vocabulary([*vocabulary.tokens, *new])  # the old ids unchanged, new words after them
        anchor_ids = torch.tensor([vocabulary.index(self.anchors[word]) for word in new], dtype=torch.long)
        self.decoder = decoder.with_words(anchor_ids.to(next(decoder.parameters()).device))
        self.new_ids = torch.arange(len(vocabulary), len(self.vocabulary))  # (N,)
        # each word of the head as the ids a caption may say it by: the word, and its plural where the vocabulary
        # has one
        self.word_ids = [self._forms(word) for word in self.class_words.vocabulary]
        self.objects = {word for word in self.class_words.vocabulary if self._names_an_object(word, preferred)}

    def _names_an_object(self, word: str, preferred: list[str]) -> bool:
        """Whether a tag's word names an object a caption should hold: a class name of the object word list, or a
        word of an ImageNet class that is neither a structure (buildings, shops, bridges, fences) nor a geological
        formation (cliffs, valleys): those are scenes, which a caption already places its objects in."""
        from nltk.corpus import wordnet

        if word in preferred:
            return True
        scenes = {wordnet.synset("structure.n.01"), wordnet.synset("geological_formation.n.01")}
        for index in self.class_words.classes_of(word):
            synset = self.class_words.synsets[index]
            if not scenes & {synset, *synset.closure(lambda s: s.hypernyms())}:
                return True
        return False

    def _forms(self, word: str) -> tuple[int, ...]:
        forms = (word, word + "s", word + "es", word[:-1] + "ies" if word.endswith("y") else word)
        return tuple(dict.fromkeys(self.vocabulary.index(form) for form in forms if form in self.vocabulary))

    def head_logits(self, images: Tensor, features: Tensor) -> Tensor:
        """ImageNet logits (B, N, 1000) of N views of photos given as the model's encoder reads them: images
        (B, 3, H, W) (its normalisation, which every EfficientNet-Lite shares) with their annotation vectors
        (B, L, D). The whole photo, then with `corners` its four corners."""
        views = [features if self.head is self.encoder else self._read(images)]
        if self.naming.corners:
            height, width = images.shape[-2:]
            h, w = 3 * height // 4, 3 * width // 4
            for top, left in ((0, 0), (0, width - w), (height - h, 0), (height - h, width - w)):
                views.append(self._read(images[..., top : top + h, left : left + w]))
        return torch.stack([self.head.classify(view) for view in views], dim=1)  # (B, N, 1000)

    def _read(self, images: Tensor) -> Tensor:
        """The head's annotation vectors (B, 49, D) of images (B, 3, h, w) resized to its 224 px."""
        return self.head(F.interpolate(images, size=(HEAD_SIZE, HEAD_SIZE), mode="bilinear", antialias=True))

    def search_inputs(self, images: Tensor, features: Tensor) -> SearchInputs:
        """Tags, constraints and stopped words for photos: images (B, 3, H, W) as the model's encoder reads them,
        and their annotation vectors (B, L, D)."""
        naming = self.naming
        classes, words = self.class_words.probabilities(self.head_logits(images, features))  # (B, N, 1000), (B, N, W)
        probabilities = words.max(dim=1).values  # (B, W) each word's highest in any view
        tags = self.class_words.tags_of(probabilities, classes.max(dim=1).values, top=5)
        never = torch.zeros(len(features), len(self.vocabulary), dtype=torch.bool, device=features.device)
        never[:, self.new_ids.to(features.device)] = True  # a new word only where its tag asks for it
        constraints, values = [], []
        new_words = set(self.vocabulary.tokens[len(self.vocabulary) - len(self.new_ids) :])
        index = {word: position for position, word in enumerate(self.class_words.vocabulary)}
        for b, photo_tags in enumerate(tags):
            confident = [t for t in photo_tags if t.probability >= naming.threshold and t.word in self.objects]
            confident = confident[: naming.max_constraints]
            photo_constraints = [self.word_ids[index[tag.word]] for tag in confident]
            for ids in photo_constraints:
                never[b, list(ids)] = False
            if confident and naming.absent_below > 0:
                absent = (probabilities[b] < naming.absent_below).nonzero().flatten().tolist()
                for word_id in absent:
                    never[b, list(self.word_ids[word_id])] = True
            constraints.append(photo_constraints)
            gated = naming.value if naming.value is not None else math.inf
            values.append([math.inf if tag.word in new_words else gated for tag in confident])
        return SearchInputs(tags=tags, constraints=Constraints(constraints, values), never=never)
