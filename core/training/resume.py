"""What a checkpoint needs so that a run killed mid-epoch and resumed from it ends exactly as if never stopped.

Lightning saves and restores the weights, the optimiser, the schedulers and its loop counters, so after a resume
it knows it is at batch k of epoch e. Two things it does not restore, and that decide the batches and the
dropout masks that follow:

* where the training data loader was in its shuffled order. A plain shuffling DataLoader draws a new order
  from the global random generator, so a resumed epoch would see other images than the lost part of the epoch,
  some twice and some never. `ResumableLoader` shuffles by (seed, epoch) alone, counts the batches it has
  handed out, and has `state_dict` / `load_state_dict`, which Lightning (2.2+) saves in every checkpoint and
  gives back on a mid-epoch resume: the loader then skips the batches already trained on.
* the random generators (torch CPU and CUDA, Python's, NumPy's), which dropout and hard attention's sampling
  draw from. `RandomState` is a callback that makes them a function of the training steps alone and keeps
  their state after the last training batch in the checkpoint; a resumed run starts from that state.

With both (installed by default by `python -m captioning` / `python -m vqa`), `fit --ckpt_path last.ckpt`
after a crash ends with the same weights as the run that was never stopped (tests/test_crash_safety.py),
given the same seed (`seed_everything`, 0 in every config), the same number of processes and deterministic
data (no random augmentation in DataLoader workers). Batches are counted as they leave the loader, which
matches the batches trained on because Lightning does not prefetch from a loader whose length it knows (all
map-style datasets); DataLoader workers and their own prefetching do not change the count. Under DDP each
process shuffles its own share, and every process gets rank 0's generators back on resume: the same state
they all had, since Lightning seeds them alike.

A third thing concerns what a resumed run keeps, not its weights: a resumed fit logs to a new `logs/version_N/`,
and Lightning's ModelCheckpoint then forgets the scores of the checkpoints it kept as best (its folder changed), so
the first validation after a resume was saved as the new folder's `best.ckpt` even when it scored lower than the
run's best. `BestCheckpoint` (the tasks' best-checkpoint callback, configs/captioning.yaml and configs/vqa.yaml)
brings them into the new folder with their scores, and keeps the run folder's `best.ckpt` pointing at the best one,
whichever version folder holds it.
"""

from __future__ import annotations

import os
import random
import shutil
from collections.abc import Iterator
from typing import Any

import lightning as L
import numpy as np
import torch
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.utilities import rank_zero_only
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler


class SkippingShuffle(DistributedSampler):
    """DistributedSampler's shuffle (one order per seed and epoch, this process's share of it) that can start
    part-way through an epoch. A DistributedSampler, so Lightning's DDP keeps it instead of injecting its own.

    Args:
        dataset: the samples to shuffle.
        num_replicas: the number of processes sharing each epoch (the Trainer's world size).
        rank: this process's share.
        seed: the shuffle's seed, the same in every process.
    """

    def __init__(self, dataset: Dataset, *, num_replicas: int = 1, rank: int = 0, seed: int = 0) -> None:
        super().__init__(dataset, num_replicas=num_replicas, rank=rank, shuffle=True, seed=seed)
        self.skip = 0

    def set_epoch(self, epoch: int) -> None:
        if epoch != self.epoch:
            self.skip = 0  # a skip belongs to the epoch it was loaded for
        super().set_epoch(epoch)

    def __iter__(self) -> Iterator[int]:
        indices = list(super().__iter__())[self.skip :]
        self.skip = 0
        return iter(indices)


class ResumableLoader(DataLoader):
    """A shuffling training DataLoader whose place in the epoch is saved in checkpoints and restored on resume.

    Args:
        dataset: the training samples.
        batch_size: samples per batch.
        seed: the shuffle's seed; epoch e's order depends only on (seed, e).
        num_replicas, rank: the Trainer's world size and this process's rank, for DDP.
        **options: any other DataLoader argument but sampler, batch_sampler and shuffle (collate_fn,
            num_workers, ...).
    """

    def __init__(
        self,
        dataset: Dataset,
        *,
        batch_size: int,
        seed: int,
        num_replicas: int = 1,
        rank: int = 0,
        **options: Any,
    ) -> None:
        order = SkippingShuffle(dataset, num_replicas=num_replicas, rank=rank, seed=seed)
        # its own generator, so that starting an epoch never draws from the global one (see `RandomState`)
        generator = torch.Generator().manual_seed(seed)
        super().__init__(dataset, batch_size=batch_size, sampler=order, generator=generator, **options)
        self.order = order
        self.served = 0  # batches of the current epoch handed out (skipped ones included)

    def __iter__(self) -> Iterator[Any]:
        # A generator: the underlying iterator (and its workers' first index requests) starts at the first
        # batch, after Lightning's `set_epoch`, which comes between `iter()` and the first `next()`.
        self.served = self.order.skip // self.batch_size
        for batch in super().__iter__():
            self.served += 1
            yield batch

    def state_dict(self) -> dict[str, int]:
        return {"seed": self.order.seed, "epoch": self.order.epoch, "batches": self.served}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.order.seed = int(state["seed"])
        self.order.epoch = int(state["epoch"])
        self.order.skip = int(state["batches"]) * self.batch_size


def split_loader(
    dataset: Dataset, *, batch_size: int, collate_fn: Any, num_workers: int = 0, shuffle: bool = False, trainer: Any = None
) -> DataLoader:
    """A split's batches: in order, or shuffled and resumable mid-epoch from a checkpoint (`ResumableLoader`, its
    shard of the `trainer`'s processes), for training. Workers, when there are any, are kept between epochs."""
    options = dict(batch_size=batch_size, collate_fn=collate_fn, num_workers=num_workers, persistent_workers=num_workers > 0)
    if not shuffle:
        return DataLoader(dataset, **options)
    return ResumableLoader(
        dataset,
        seed=shuffle_seed(),
        num_replicas=trainer.world_size if trainer is not None else 1,
        rank=trainer.global_rank if trainer is not None else 0,
        **options,
    )


def shuffle_seed() -> int:
    """The seed `seed_everything` set (`torch.initial_seed()`), folded to the range every generator accepts."""
    return torch.initial_seed() % 2**31


class RandomState(L.Callback):
    """Keeps training's random numbers a function of the training steps alone, and saves them in checkpoints.

    A fresh run seeds the generators from the run's seed when training starts, so the work before it (a
    feature cache built or found, the sanity check) does not matter. The generators' state is taken after
    every training batch and put back before the next one, so whatever draws in between (validation, a data
    loader starting, a checkpoint) never shifts the dropout masks or the sampled attention of the steps that
    follow. A checkpoint holds the state taken after its last batch, and a resumed run puts it back before
    its first batch: exactly where the uninterrupted run was.
    """

    def __init__(self) -> None:
        self._after_last_batch: dict[str, Any] | None = None

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self._after_last_batch is None:  # a fresh run; a resumed one has the state of its checkpoint
            seed = torch.initial_seed()
            torch.manual_seed(seed)
            random.seed(seed)
            np.random.seed(seed % 2**32)

    def on_train_batch_start(
        self, trainer: L.Trainer, pl_module: L.LightningModule, batch: Any, batch_idx: int
    ) -> None:
        if self._after_last_batch is not None:
            _set_generators(self._after_last_batch)

    def on_train_batch_end(
        self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        self._after_last_batch = _generators()

    def state_dict(self) -> dict[str, Any]:
        return self._after_last_batch if self._after_last_batch is not None else _generators()

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self._after_last_batch = state_dict


def _generators() -> dict[str, Any]:
    """The state of torch's CPU and CUDA generators, Python's and NumPy's, as plain data (tensors, tuples)."""
    name, keys, *rest = np.random.get_state()
    return {
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
        "python": random.getstate(),
        "numpy": (name, torch.from_numpy(keys.astype(np.int64)), *rest),
    }


def _set_generators(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    if state["cuda"] and torch.cuda.is_available() and len(state["cuda"]) == torch.cuda.device_count():
        torch.cuda.set_rng_state_all(state["cuda"])
    random.setstate(state["python"])
    name, keys, *rest = state["numpy"]
    np.random.set_state((name, keys.numpy().astype(np.uint32), *rest))


RUN_BEST = "best.ckpt"
"""The name of the link, in the run folder itself (`trainer.default_root_dir`, e.g. runs/shapes_soft/best.ckpt), to the
best checkpoint its latest fit kept: a path that stays right whatever `logs/version_N/` the fit, or a `test` run
before it, wrote to."""


class BestCheckpoint(ModelCheckpoint):
    """Lightning's ModelCheckpoint, keeping the run's best checkpoints across a resume into a new folder, and a
    stable path to the best one.

    When the checkpoint a fit resumes from was written in another folder (each resumed fit logs to a new
    `logs/version_N/`), the files it kept as best are copied into this run's folder under their names, with their
    scores (a copy, not a link: a save that writes into an existing file would change the old folder's too). Each
    folder's `best.ckpt` is then the best of the whole run so far, and a later validation replaces it only when it
    scores higher. Lightning's own keeps only `best_model_path` and would save the next validation as best whatever
    its score.

    Whenever it saves the best checkpoint it keeps (with no `monitor`, the latest), the run folder's `RUN_BEST`
    is made to point at it: a relative symbolic link (a copy where links cannot be made, as on Windows without the
    right), so commands and docs can name `runs/NAME/best.ckpt` instead of a version folder that any other
    subcommand run in the same folder moves on.
    """

    def _save_checkpoint(self, trainer: L.Trainer, filepath: str) -> None:
        super()._save_checkpoint(trainer, filepath)
        if filepath == self.best_model_path:
            # Lightning's own helper for `save_last="link"`: rank 0 links (or copies), every rank waits for it
            self._link_checkpoint(trainer, filepath, os.path.join(trainer.default_root_dir, RUN_BEST))

    @property
    def state_key(self) -> str:
        # Lightning's key, under its class name: a checkpoint written with Lightning's ModelCheckpoint restores into
        # this one, and the reverse
        return "ModelCheckpoint" + super().state_key.removeprefix(type(self).__qualname__)

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        kept = state_dict.get("best_k_models") or {}
        previous = state_dict.get("dirpath", self.dirpath)
        if not (self.dirpath and previous and previous != self.dirpath and kept):
            super().load_state_dict(state_dict)
            return
        here = {path: os.path.join(self.dirpath, os.path.basename(path)) for path in kept if os.path.isfile(path)}
        if len(here) < len(kept):  # a kept file is gone: Lightning's behaviour, which keeps nothing but the path
            super().load_state_dict(state_dict)
            return
        _bring(here)
        super().load_state_dict({
            **state_dict,
            "dirpath": self.dirpath,
            "best_k_models": {here[path]: score for path, score in kept.items()},
            "best_model_path": here.get(state_dict.get("best_model_path"), state_dict.get("best_model_path")),
            "kth_best_model_path": here.get(state_dict.get("kth_best_model_path"), ""),
            "last_model_path": "",  # the old folder's last.ckpt stays where it is
        })  # fmt: skip


@rank_zero_only
def _bring(files: dict[str, str]) -> None:
    """Each file of `files` (old path -> new path) copied to its new path (once: a resume that fails and is run
    again finds it there)."""
    for old, new in files.items():
        if not os.path.exists(new):
            os.makedirs(os.path.dirname(new), exist_ok=True)
            shutil.copy2(old, new)
