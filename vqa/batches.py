"""Torch datasets that turn VQA questions into model inputs: the image's grid (or image), the question's word
ids, its target over the answer classes and its ground-truth regions where known.

Images come through captioning's `CachedInputs` / `ImageInputs`, indexed by image, so an image asked about
many times is stored and encoded once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import Tensor
from torch.utils.data import Dataset

from captioning.mirroring import MirrorView
from data.vqa import VqaSample

MAX_REGIONS = 4  # ground-truth boxes kept per question (ShapesWorld scenes have at most 4 objects)


class Questions(Dataset):
    """The questions of a split.

    Args:
        inputs: image index -> (L, D) grid or (3, S, S) image.
        samples: the questions.
        image_index: for each question, the index of its image in `inputs`.
        words: for each question, its word ids (already truncated, at least one id).
        target: question -> (A,) target over the answer classes; None when not training or evaluating.
        mirror: when given, each item is the question or, with probability 1/2 (drawn from torch's generator),
            its mirror image: the mirrored photo, the sides swapped in the question, its regions flipped. The
            answer is the same either way.
    """

    def __init__(
        self,
        inputs: Callable[[int], Tensor],
        samples: Sequence[VqaSample],
        image_index: Sequence[int],
        words: Sequence[Sequence[int]],
        target: Callable[[VqaSample], Tensor] | None,
        mirror: MirrorView | None = None,
    ) -> None:
        self.inputs, self.samples, self.image_index, self.words, self.target = inputs, samples, image_index, words, target
        self.mirror = mirror

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, index: int) -> dict:
        sample = self.samples[index]
        mirrored = self.mirror is not None and bool(torch.rand(()) < 0.5)
        inputs, words = (self.mirror.inputs, self.mirror.words) if mirrored else (self.inputs, self.words)
        regions = torch.zeros(MAX_REGIONS, 4)
        for r, box in enumerate(sample.regions[:MAX_REGIONS]):
            box = box.mirrored() if mirrored else box
            regions[r] = torch.tensor([box.x0, box.y0, box.x1, box.y1])
        item = {
            "inputs": inputs(self.image_index[index]),
            "question": torch.tensor(words[index]),
            "length": len(words[index]),
            "index": index,
            "regions": regions,  # (R, 4) normalised boxes
            "region_count": min(len(sample.regions), MAX_REGIONS),
        }
        if self.target is not None:
            item["targets"] = self.target(sample)  # (A,)
        return item
