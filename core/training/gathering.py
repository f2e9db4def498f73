"""Evaluation records and results gathered from every process of a distributed (DDP) run.

Under DDP each process evaluates one shard of a split, and for validation and test Lightning's
DistributedSampler pads the shards to one length by repeating samples. Corpus-level metrics (BLEU, CIDEr, the
VQA accuracy per question type) cannot be averaged over shards, so the models keep their records by sample
index; here the records of all processes are merged (a repeated sample collapses into one entry), the whole
split is scored once, on global rank 0, and every process logs the same numbers. With one process each
function does the plain single-process thing.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Mapping
from typing import TYPE_CHECKING, TypeVar

import torch.distributed as dist

if TYPE_CHECKING:
    import lightning as L

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
T = TypeVar("T")


def _world_size() -> int:
    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1


def gather_by_key(records: Mapping[K, V]) -> dict[K, V]:
    """Every process's records in one dictionary, the same on every process.

    A key held by several processes (a sample the DistributedSampler repeated to pad a shard) keeps the value of
    the lowest rank: each computed it from the same sample. Values travel pickled, so keep them on the CPU.
    """
    world_size = _world_size()
    if world_size == 1:
        return dict(records)
    shards: list[dict[K, V] | None] = [None] * world_size
    dist.all_gather_object(shards, dict(records))
    merged: dict[K, V] = {}
    for shard in shards:
        for key, value in shard.items():
            merged.setdefault(key, value)
    return merged


def computed_on_rank_zero(compute: Callable[[], T]) -> T:
    """`compute()` run on global rank 0 only, its result sent to every process.

    Scorers can be heavy (METEOR and the PTB tokenizer start a Java process): once per run, not once per GPU.
    When `compute` raises on rank 0 every process raises, so none waits for a result that never comes.
    """
    if _world_size() == 1:
        return compute()
    outcome: list[tuple[bool, object] | None] = [None]
    error: Exception | None = None
    if dist.get_rank() == 0:
        try:
            outcome[0] = (True, compute())
        except Exception as raised:  # re-raised below, after the other processes are told
            error = raised
            outcome[0] = (False, f"{type(raised).__name__}: {raised}")
    dist.broadcast_object_list(outcome, src=0)
    succeeded, value = outcome[0]
    if error is not None:
        raise error
    if not succeeded:
        raise RuntimeError(f"global rank 0 failed to compute the evaluation metrics: {value}")
    return value


def log_on_every_rank(module: L.LightningModule, metrics: Mapping[str, float], *, prog_bar: Collection[str] = ()) -> None:
    """Log metrics that every process holds with the same values (from `computed_on_rank_zero`).

    Every process logs every key, so callbacks that monitor one (ModelCheckpoint, EarlyStopping) agree across
    processes. `sync_dist` with a max reduction marks the values as already taken over all devices (Lightning
    otherwise warns about unsynchronised epoch-level values) and returns each one bit for bit, where a mean over
    N equal copies may round.
    """
    for name, value in metrics.items():
        module.log(name, value, prog_bar=name in prog_bar, sync_dist=True, reduce_fx="max")
