"""The common shape of a captioning dataset: splits of images, each with reference captions.

Every reader (Karpathy JSON, raw COCO, the synthetic ShapesWorld) returns the same records, so the
rest of the project never needs to know where the captions came from.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from pathlib import Path

from PIL import Image

from data.dataset import Box, SplitDataset


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


class CaptionDataset(SplitDataset):
    """A captioning dataset split into named parts ("train", "val", "test", ...): images with reference captions."""

    @abc.abstractmethod
    def samples(self, split: str) -> list[CaptionSample]:
        """The samples of one split, in a fixed order. Raises ValueError naming the known splits."""

    @abc.abstractmethod
    def load(self, sample: CaptionSample) -> Image.Image:
        """The sample's image as an RGB PIL image."""
