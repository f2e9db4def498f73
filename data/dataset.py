"""What every dataset of the project is, of captions or of questions: pictures in named splits, and the boxes of the
objects in them.

`SplitDataset` is the base of `data.captions.CaptionDataset` and `data.vqa.VqaDataset`; each adds what its samples
are. `Box` is an object's place in a picture: a caption word's object, the region a question is about.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass


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


class SplitDataset(abc.ABC):
    """A dataset split into named parts ("train", "val", "test", ...), each read in a fixed order."""

    @property
    @abc.abstractmethod
    def name(self) -> str:
        """A short name that, with a split, identifies the images (part of the feature-cache key)."""

    @property
    @abc.abstractmethod
    def splits(self) -> tuple[str, ...]:
        """The split names this dataset provides."""

    def _check_split(self, split: str) -> None:
        """ValueError naming the known splits, for a split this dataset does not have."""
        if split not in self.splits:
            raise ValueError(f"{type(self).__name__} has no split {split!r}; known splits: {', '.join(self.splits)}")
