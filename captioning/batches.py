"""Torch datasets that turn caption samples into model inputs, and the collate function that pads them.

An input is either a cached grid (L, D), the output of the encoder's frozen trunk, or a preprocessed image
(3, S, S) when the data module does not cache or when images arrive from outside a dataset (predict); the
model tells the two apart by their number of dimensions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from torch import Tensor
from torch.utils.data import Dataset

from data.captions import CaptionSample

MAX_GROUNDED_WORDS = 16


class CachedInputs:
    """Inputs read from a memory-mapped feature cache (N, L, D) float16."""

    def __init__(self, features: np.ndarray) -> None:
        self.features = features

    def __len__(self) -> int:
        return len(self.features)

    def __call__(self, index: int) -> Tensor:
        return torch.from_numpy(np.array(self.features[index]))  # (L, D) float16, copied out of the read-only map


class ImageInputs:
    """Inputs loaded and preprocessed from images, when features are not cached."""

    def __init__(self, load: Callable[[int], Image.Image], transform: Callable[[Image.Image], Tensor], size: int) -> None:
        self.load, self.transform, self.size = load, transform, size

    def __len__(self) -> int:
        return self.size

    def __call__(self, index: int) -> Tensor:
        return self.transform(self.load(index))  # (3, S, S)


class CaptionPairs(Dataset):
    """Every (image, reference caption) pair of a split, for teacher-forced training."""

    def __init__(self, inputs: Callable[[int], Tensor], captions: Sequence[Sequence[Sequence[int]]]) -> None:
        self.inputs = inputs
        self.pairs = [(image, caption) for image, refs in enumerate(captions) for caption in refs]

    def __len__(self) -> int:
        return len(self.pairs)

    def __getitem__(self, index: int) -> dict:
        image, caption = self.pairs[index]
        return {"inputs": self.inputs(image), "captions": torch.tensor(caption), "index": image}


class EvaluationImages(Dataset):
    """Each image of a split once, with its first reference caption (for the validation loss and attention
    correctness) and that caption's grounded words, when the dataset has them."""

    def __init__(
        self,
        inputs: Callable[[int], Tensor],
        captions: Sequence[Sequence[Sequence[int]]],
        samples: Sequence[CaptionSample],
    ) -> None:
        self.inputs, self.captions, self.samples = inputs, captions, samples

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, index: int) -> dict:
        sample = self.samples[index]
        grounded = sample.grounding[0][:MAX_GROUNDED_WORDS] if sample.grounding else ()
        positions = torch.full((MAX_GROUNDED_WORDS,), -1, dtype=torch.long)
        boxes = torch.zeros(MAX_GROUNDED_WORDS, 4)
        for g, word in enumerate(grounded):
            positions[g] = word.position
            boxes[g] = torch.tensor([word.box.x0, word.box.y0, word.box.x1, word.box.y1])
        return {
            "inputs": self.inputs(index),
            "captions": torch.tensor(self.captions[index][0]),
            "index": index,
            "grounded_positions": positions,  # (G,) word positions, -1 = none
            "grounded_boxes": boxes,  # (G, 4)
        }


class ImageFiles(Dataset):
    """Image files to caption (predict). A file that cannot be read yields None and is reported, not fatal."""

    def __init__(self, paths: Sequence[Path], load: Callable[[Path], Image.Image], transform: Callable) -> None:
        self.paths, self.load, self.transform = list(paths), load, transform

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int) -> dict:
        path = self.paths[index]
        try:
            image = self.transform(self.load(path))
        except ValueError as error:  # data.images.ImageLoadError names the file
            return {"error": str(error), "path": str(path)}
        return {"inputs": image, "path": str(path), "index": index}


def pad_batch(items: list[dict], pad_id: int = 0, padded: tuple[str, ...] = ("captions",)) -> dict:
    """Stack a list of samples; the word sequences under `padded` keys are right-padded with pad_id to the
    longest in the batch. Items that carry an "error" are reported under "errors" instead."""
    errors = [item for item in items if "error" in item]
    items = [item for item in items if "error" not in item]
    batch: dict = {"errors": [(e["path"], e["error"]) for e in errors]}
    if not items:
        return batch
    for key in items[0]:
        values = [item[key] for item in items]
        if key in padded:
            batch[key] = torch.nn.utils.rnn.pad_sequence(values, batch_first=True, padding_value=pad_id)  # (B, T)
        elif isinstance(values[0], Tensor):
            batch[key] = torch.stack(values)
        elif isinstance(values[0], int):
            batch[key] = torch.tensor(values)
        else:
            batch[key] = values
    return batch
