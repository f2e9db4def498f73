"""Validation and test as one pass told its stage, for the project's LightningModules (`EvaluatedByStage`)."""

from __future__ import annotations

from typing import Any

from torch import Tensor

from core.training.gathering import computed_on_rank_zero, gather_by_key, log_on_every_rank


class EvaluatedByStage:
    """Mixin for a LightningModule whose validation and test are the same pass on another split: Lightning's four
    hooks become one `_evaluation_step(batch, stage)` and one epoch end, told the stage ("val" or "test").

    The step keeps what it needs by item index, in `self._outputs` (the model's output: a caption, an answer) and
    `self._correctness` (attention correctness, where the item has ground truth). At the epoch's end they are gathered from every process (`core.training.gathering`), scored
    once by `_metrics(stage, outputs, correctness)` and logged by every process; `progress_metrics` names, without
    the stage, the scores the progress bar shows.
    """

    progress_metrics: tuple[str, ...] = ()

    def _evaluation_step(self, batch: dict, stage: str) -> None:
        raise NotImplementedError

    def _metrics(self, stage: str, outputs: dict[int, Any], correctness: dict[int, Tensor]) -> dict[str, float]:
        raise NotImplementedError

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._outputs: dict[int, Any] = {}
        self._correctness: dict[int, Tensor] = {}

    def _evaluation_epoch_end(self, stage: str) -> None:
        outputs, correctness = gather_by_key(self._outputs), gather_by_key(self._correctness)
        self._outputs, self._correctness = {}, {}
        metrics = computed_on_rank_zero(lambda: self._metrics(stage, outputs, correctness))
        log_on_every_rank(self, metrics, prog_bar={f"{stage}/{name}" for name in self.progress_metrics})

    def validation_step(self, batch: dict, batch_idx: int) -> None:
        self._evaluation_step(batch, "val")

    def on_validation_epoch_end(self) -> None:
        self._evaluation_epoch_end("val")

    def test_step(self, batch: dict, batch_idx: int) -> None:
        self._evaluation_step(batch, "test")

    def on_test_epoch_end(self) -> None:
        self._evaluation_epoch_end("test")
