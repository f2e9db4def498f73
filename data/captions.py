"""The common shape of a captioning dataset: splits of images, each with reference captions.

Every reader (Karpathy JSON, raw COCO, the synthetic ShapesWorld) returns the same records, so the
rest of the project never needs to know where the captions came from.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from pathlib import Path

from PIL import Image


@dataclass(frozen=True)
class Box:
    """An axis-aligned box in coordinates normalised to the image: 0 is left/top, 1 is right/bottom."""

    x0: float
    y0: float
    x1: float
    y1: float

    def __post_init__(self) -> None:
        if not (0.0 <= self.x0 < self.x1 <= 1.0 and 0.0 <= self.y0 < self.y1 <= 1.0):
            raise ValueError(f"box {self} is not a non-empty box inside the unit square")

    @property
    def area(self) -> float:
        return (self.x1 - self.x0) * (self.y1 - self.y0)

    def mirrored(self) -> Box:
        """The same box in the image flipped left to right."""
        return Box(x0=1.0 - self.x1, y0=self.y0, x1=1.0 - self.x0, y1=self.y1)


@dataclass(frozen=True)
class GroundedWord:
    """A caption word that names an object, and that object's box.

    `position` indexes the caption's tokens as `data.vocabulary.tokenize` returns them (0 is the first word,
    before any start token is added).
    """

    position: int
    box: Box


@dataclass(frozen=True)
class CaptionSample:
    """One image and its reference captions.

    Args:
        image_id: identifier unique within the dataset (used in result files and the feature cache).
        captions: the raw reference captions.
        path: the image file, for datasets on disk; None for images rendered in memory.
        grounding: one tuple per caption (same order) of the words that name an object, when the dataset
            knows where the objects are (ShapesWorld); empty otherwise.
    """

    image_id: str
    captions: tuple[str, ...]
    path: Path | None = None
    grounding: tuple[tuple[GroundedWord, ...], ...] = field(default=())


class CaptionDataset(abc.ABC):
    """A captioning dataset split into named parts ("train", "val", "test", ...)."""

    @property
    @abc.abstractmethod
    def name(self) -> str:
        """A short name that, with a split, identifies the images (part of the feature-cache key)."""

    @property
    @abc.abstractmethod
    def splits(self) -> tuple[str, ...]:
        """The split names this dataset provides."""

    @abc.abstractmethod
    def samples(self, split: str) -> list[CaptionSample]:
        """The samples of one split, in a fixed order. Raises ValueError naming the known splits."""

    @abc.abstractmethod
    def load(self, sample: CaptionSample) -> Image.Image:
        """The sample's image as an RGB PIL image."""

    def _check_split(self, split: str) -> None:
        if split not in self.splits:
            raise ValueError(f"{type(self).__name__} has no split {split!r}; known splits: {', '.join(self.splits)}")
