"""What a run shows in TensorBoard besides its metrics: a few validation images, at every validation epoch, with
what the model says about them and where it looked.

Lightning's `TensorBoardLogger` (the logger of configs/trainer.yaml) already writes every logged metric as a scalar.
`ValidationSamples` adds, for the first `count` items of the validation split (the same items every epoch, so
epochs compare), under the tags `samples/1`, `samples/2`, ...:

* a text: the generated caption beside a reference, or the question, the predicted answer and the right one;
* a picture: the photo, then one attention overlay per word or per hop, drawn by `core.maps.overlays.word_grid` as
  the export's grid.png is.

Each task says what its model makes of those items (`captioning.tensorboard.CaptionSamples`,
`vqa.tensorboard.AnswerSamples`); this module holds the rest. The items come from the validation loader's own
dataset, as the validation steps read them (cached features when the run caches them), so showing them costs one
small extra forward pass (a beam search for captions) per validation epoch, on the first process only. It changes
nothing in the run (the random state is put back), does nothing during the sanity check before training, and
nothing at all when the run logs elsewhere (CSV, or no logger).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import lightning as L
import numpy as np
import torch
from lightning.pytorch.callbacks import Callback
from lightning.pytorch.loggers import TensorBoardLogger
from lightning.pytorch.utilities import move_data_to_device
from PIL import Image
from torch import Tensor

from core.maps.overlays import heat_maps, word_grid

TAG = "samples"  # the tags are samples/1 .. samples/count, an image and a text each


@dataclass(frozen=True)
class Sample:
    """One validation item as TensorBoard shows it.

    Args:
        photo: the image as the dataset loads it (its own size).
        text: what the model said about it, and what it should have said (Markdown, as TensorBoard renders it).
        titles: the title of each attention map: the caption's words, or "hop 1", "hop 2", ...
        weights: (len(titles), L) attention weights over the encoder's grid, one row per map.
        photo_title: the title over the photo's own tile.
    """

    photo: Image.Image
    text: str
    titles: Sequence[str]
    weights: Tensor
    photo_title: str = ""


class ValidationSamples(Callback):
    """Shows the first `count` validation items in TensorBoard at the end of every validation epoch (see the
    module docstring); a task's subclass says what its model makes of them, in `samples`.

    Args:
        count: how many validation items to show, from the start of the split (0 shows none).
    """

    def __init__(self, *, count: int = 4) -> None:
        if count < 0:
            raise ValueError(f"count must be at least 0, got {count}")
        self.count = count

    def samples(self, trainer: L.Trainer, model: L.LightningModule, batch: dict) -> list[Sample]:
        """What `model` makes of `batch`, the first `count` validation items as one validation batch (its "index"
        gives each item's position in the split)."""
        raise NotImplementedError

    @torch.no_grad()
    def on_validation_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        writer = tensorboard_writer(trainer)
        if writer is None or self.count == 0 or trainer.sanity_checking or trainer.global_rank != 0:
            return
        cuda = [pl_module.device] if pl_module.device.type == "cuda" else []
        with torch.random.fork_rng(devices=cuda):  # the run's random numbers stay as they would be without this
            batch = self._first_items(trainer, pl_module)
            if batch is None:
                return
            with trainer.precision_plugin.forward_context():  # autocast or not, as in the validation steps
                samples = self.samples(trainer, pl_module, batch)
        step = logged_step(trainer)
        grid = pl_module.encoder.grid_shape
        for number, sample in enumerate(samples, start=1):
            maps = heat_maps(sample.weights, grid, sample.photo.size)
            picture = word_grid(sample.photo, sample.titles, maps, image_title=sample.photo_title)
            writer.add_image(f"{TAG}/{number}", np.asarray(picture), step, dataformats="HWC")
            writer.add_text(f"{TAG}/{number}", sample.text, step)

    def _first_items(self, trainer: L.Trainer, model: L.LightningModule) -> dict | None:
        """The first `count` items of the (first) validation loader's dataset, collated as the loader does and on
        the model's device; None when there are none."""
        loader = trainer.val_dataloaders
        loader = loader[0] if isinstance(loader, (list, tuple)) else loader
        if loader is None or len(loader.dataset) == 0:
            return None
        items = [loader.dataset[i] for i in range(min(self.count, len(loader.dataset)))]
        batch = move_data_to_device(loader.collate_fn(items), model.device)
        return trainer.precision_plugin.convert_input(batch)


def logged_step(trainer: L.Trainer) -> int:
    """The step Lightning logs this validation epoch's metrics at, so that TensorBoard shows the pictures and texts
    at the same step as the scores: the count of optimiser steps taken before the batch that ended the epoch (one
    less than `trainer.global_step` there). Lightning keeps it in a private counter; `global_step` if that is gone."""
    return getattr(trainer.fit_loop.epoch_loop, "_batches_that_stepped", trainer.global_step)


def tensorboard_writer(trainer: L.Trainer):
    """The SummaryWriter of the trainer's first TensorBoardLogger; None when it has none."""
    for logger in trainer.loggers:
        if isinstance(logger, TensorBoardLogger):
            return logger.experiment
    return None
