"""CIDEr-D of sampled captions against a fixed corpus of references, fast enough to be a training reward.

The formula is coco-caption's `Cider` (pycocoevalcap's `CiderScorer`, which is CIDEr-D: clipped n-gram
counts and a Gaussian length penalty, sigma 6): for n = 1..4 each caption becomes a tf-idf vector over its
n-grams, idf = log(#images) - log(max(1, df)); the score is 10 x the mean over n and over the image's
references of the clipped cosine similarity times exp(-(length difference)^2 / (2 sigma^2)). As in
coco-caption, the "length" is the caption's count of bigrams.

coco-caption recomputes document frequencies and every reference vector at each call, from the references it
is given. For self-critical training the references are the training split's, fixed for the whole run, so
here the document frequencies come from all of them, as the self-critical paper (Rennie et al. 2017) does,
and each image's reference vectors are made once, when first needed. Captions are token-id sequences (the
model's vocabulary) rather than strings, so scoring a sampled caption needs no decoding.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

NGRAMS = 4
SIGMA = 6.0

Ngram = tuple[int, ...]


def ngram_counts(tokens: Sequence[int], n: int = NGRAMS) -> Counter[Ngram]:
    """How often each 1..n-gram of a token sequence occurs."""
    return Counter(tuple(tokens[i : i + k]) for k in range(1, n + 1) for i in range(len(tokens) - k + 1))


class _Vector:
    """A caption's tf-idf weights per n-gram order, their norms, and its coco-caption length."""

    __slots__ = ("weights", "norms", "length")

    def __init__(self, counts: Counter[Ngram], idf: "CiderD") -> None:
        self.weights: list[dict[Ngram, float]] = [{} for _ in range(NGRAMS)]
        squares = [0.0] * NGRAMS
        self.length = 0
        for ngram, frequency in counts.items():
            order = len(ngram) - 1
            weight = frequency * idf.idf(ngram)
            self.weights[order][ngram] = weight
            squares[order] += weight * weight
            if order == 1:  # coco-caption counts bigrams as the length
                self.length += frequency
        self.norms = [math.sqrt(s) for s in squares]

    def similarity(self, reference: "_Vector") -> float:
        """The mean over n-gram orders of the clipped cosine similarity, with the length penalty."""
        penalty = math.exp(-((self.length - reference.length) ** 2) / (2 * SIGMA**2))
        total = 0.0
        for order in range(NGRAMS):
            mine, theirs = self.weights[order], reference.weights[order]
            dot = sum(min(weight, theirs.get(ngram, 0.0)) * theirs.get(ngram, 0.0) for ngram, weight in mine.items())
            if self.norms[order] != 0 and reference.norms[order] != 0:
                dot /= self.norms[order] * reference.norms[order]
            total += dot * penalty
        return total / NGRAMS


class CiderD:
    """CIDEr-D against a fixed corpus of references.

    Args:
        references: for every image, its reference captions as token-id sequences (no start or end token).
            The document frequencies (in how many images' references an n-gram occurs) come from all of them.
    """

    def __init__(self, references: Sequence[Sequence[Sequence[int]]]) -> None:
        if not references:
            raise ValueError("CIDEr-D needs reference captions for at least one image")
        self.references = references
        self.document_frequency: Counter[Ngram] = Counter()
        for captions in references:
            self.document_frequency.update({ngram for caption in captions for ngram in ngram_counts(caption)})
        self.log_images = math.log(len(references))
        self._reference_vectors: dict[int, list[_Vector]] = {}

    def idf(self, ngram: Ngram) -> float:
        return self.log_images - math.log(max(1.0, self.document_frequency[ngram]))

    def score(self, caption: Sequence[int], image: int) -> float:
        """CIDEr-D of one caption (token ids) against the references of image number `image`."""
        references = self._references_of(image)
        candidate = _Vector(ngram_counts(caption), self)
        return 10.0 * sum(candidate.similarity(reference) for reference in references) / len(references)

    def scores(self, captions: Sequence[Sequence[int]], images: Sequence[int]) -> list[float]:
        """CIDEr-D of each caption against the references of its image."""
        return [self.score(caption, image) for caption, image in zip(captions, images, strict=True)]

    def _references_of(self, image: int) -> list[_Vector]:
        if image not in self._reference_vectors:
            captions = self.references[image]
            if not captions:
                raise ValueError(f"image {image} has no reference captions")
            self._reference_vectors[image] = [_Vector(ngram_counts(caption), self) for caption in captions]
        return self._reference_vectors[image]
