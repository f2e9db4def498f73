"""What a Stacked Attention Network could answer if every hop looked exactly where it should.

`GroundTruthHops` is a Lightning callback that gives each attention hop its map from the question's ground-truth
regions instead of letting it compute one: hop k reads the k-th region the question names (ShapesWorld-VQA lists
them in the order a person would look: for "is the square to the left of the circle?" the circle, then the
square; for "what colour is the object to the left of the square?" the square, then the object), or the last
region when the question names fewer, spread evenly over the cells the region covers; a question without regions
is read uniformly. Everything else, the question model, the hops' queries and the classifier, is the config's
model, trained as usual.

The score of such a run is a ceiling for attention: the gap between it and the same run without the callback is
what better maps could still earn, and what it leaves unanswered is not the attention's doing (the read-out, the
question vector, or too few examples of a question family).

    python -m vqa fit --config configs/vqa/shapes_san.yaml \
        --trainer.callbacks+=experiments.ground_truth_hops.GroundTruthHops
    python -m vqa test --config configs/vqa/shapes_san.yaml --ckpt_path ... \
        --trainer.callbacks+=experiments.ground_truth_hops.GroundTruthHops

Run from the repository root. Only datasets with regions (ShapesWorld-VQA) have anything to give. Figures in
docs/experiments.md (attention quality, ShapesWorld-VQA).
"""

from __future__ import annotations

from functools import partial
from typing import Any

import lightning as L
import torch
from torch import Tensor

from core.maps.measures import box_masks


def ground_truth_maps(regions: Tensor, counts: Tensor, *, grid: tuple[int, int], hops: int) -> Tensor:
    """(B, K, L) maps: hop k spread evenly over region min(k, count - 1), uniform where a question has none.

    Args:
        regions: (B, R, 4) normalised boxes, the first `counts[b]` of row b real.
        counts: (B,) how many regions each question has.
        grid: (rows, columns) of the encoder's grid.
    """
    batch, slots = regions.shape[:2]
    cells = grid[0] * grid[1]
    maps = torch.full((batch, hops, cells), 1.0 / cells)
    if slots == 0:
        return maps
    masks = box_masks(regions.reshape(batch * slots, 4).float(), *grid).view(batch, slots, cells)  # (B, R, L)
    for b, count in enumerate(counts.tolist()):
        for k in range(hops if count > 0 else 0):
            mask = masks[b, min(k, count - 1)]
            if mask.sum() > 0:
                maps[b, k] = mask / mask.sum()
    return maps


def _read_given(weights: Tensor, query: Tensor, regions: Tensor, prepared: Any) -> tuple[Tensor, Tensor]:
    """An attention hop's forward with its map given: the context sum_i p_i v_i (B, d) and the map (B, L)."""
    weights = weights.to(regions.device, regions.dtype)
    return torch.bmm(weights.unsqueeze(1), regions).squeeze(1), weights


class GroundTruthHops(L.Callback):
    """Before every step, sets the first `given` hops of `pl_module.san` (all of them when None) to read their
    ground-truth maps for the batch; the hops after them compute their own. After the step the hops compute their
    own maps again, so a forward outside the steps (the TensorBoard samples at the end of validation, a batch of
    another size) runs the model's own attention.

    `given=1` measures whether the second hop can learn to find "the object to the left of the square" once the
    first hop is on the square: what is left of the gap then lies with the first hop.
    """

    def __init__(self, *, given: int | None = None) -> None:
        if given is not None and given < 1:
            raise ValueError(f"given must be at least 1 (or None for every hop), got {given}")
        self.given = given

    def _give(self, pl_module: Any, batch: dict) -> None:
        hops = pl_module.san.hops[: self.given]
        grid = pl_module.encoder.grid_shape
        maps = ground_truth_maps(batch["regions"].cpu(), batch["region_count"].cpu(), grid=grid, hops=len(hops))
        for k, hop in enumerate(hops):
            hop.forward = partial(_read_given, maps[:, k])  # this module's call only; its parameters stay as they are

    @staticmethod
    def _take_back(pl_module: Any) -> None:
        for hop in pl_module.san.hops:
            hop.__dict__.pop("forward", None)  # the class's forward again

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        self._give(pl_module, batch)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self._take_back(pl_module)

    def on_validation_batch_start(self, trainer, pl_module, batch, batch_idx, dataloader_idx=0) -> None:
        self._give(pl_module, batch)

    def on_validation_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0) -> None:
        self._take_back(pl_module)

    def on_test_batch_start(self, trainer, pl_module, batch, batch_idx, dataloader_idx=0) -> None:
        self._give(pl_module, batch)

    def on_test_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0) -> None:
        self._take_back(pl_module)

    def on_predict_batch_start(self, trainer, pl_module, batch, batch_idx, dataloader_idx=0) -> None:
        self._give(pl_module, batch)

    def on_predict_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0) -> None:
        self._take_back(pl_module)
