"""Model inputs shared by both tasks' datasets, and the collate function that pads them.

An input is either a cached grid (L, D), the output of the encoder's frozen trunk, or a preprocessed image
(3, S, S) when the data module does not cache or when images arrive from outside a dataset (predict); the
model tells the two apart by their number of dimensions.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from PIL import Image
from torch import Tensor


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
