"""Mirror images for training: a photo flipped left to right, and its text changed to match.

A mirror image is a new, correct training example only if the words still describe it: "what is on the left
side of the bed?" asked about the mirrored photo becomes "what is on the right side of the bed?", with the same
answer. Everything else a question or caption says (colours, counts, objects, "above", "behind") is unchanged
by the flip. The encoder sees the mirrored photo itself, so with a feature cache its trunk outputs are
exact, cached once like the photo's own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from PIL import Image, ImageOps
from torch import Tensor

# The words that name a side, each with the word for the other side; tokens as `data.vocabulary.tokenize` makes them.
SIDE_WORDS = {"left": "right", "right": "left", "leftmost": "rightmost", "rightmost": "leftmost"}


def mirror_image(image: Image.Image) -> Image.Image:
    """The photo flipped left to right."""
    return ImageOps.mirror(image)


def mirror_words(words: Iterable[str]) -> list[str]:
    """The words with left and right swapped (see SIDE_WORDS); every other word as it was."""
    return [SIDE_WORDS.get(word, word) for word in words]


@dataclass(frozen=True)
class MirrorView:
    """A split seen in a mirror, for training on each example or its mirror image at random.

    Attributes:
        inputs: image index -> the mirror image's (L, D) cached grid or (3, S, S) image, indexed like the photos.
        words: for each example, its word ids with the sides swapped (`mirror_words`).
    """

    inputs: Callable[[int], Tensor]
    words: Sequence[Sequence[int]]
