"""What a run shows while it works: the training progress bar and the progress of long one-time phases.

* `training_progress_bar()`: Lightning's own bar (Rich when installed, else tqdm) without the logger's `v_num`,
  which is the run folder's version number shown as a metric ("v_num: 0.000"), not something that changes;
* `CountedModelSummary`: Lightning's model summary table without its FLOPs column and total when nothing counted
  them (Lightning counts FLOPs only for a model with an `example_input_array`, and otherwise says "Total FLOPs: 0");
* `phase_progress`: one display per phase (e.g. encoding one split into the feature cache). On a terminal it is
  one tqdm bar that redraws in place (and follows the terminal's width, so a narrow tmux pane does not wrap it
  into a new line per update); when stderr is not a terminal (a log file, CI, a pipe) it writes at most
  `LOG_LINES` one-line messages instead of a bar's hundreds of carriage-return updates.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterable, Iterator
from typing import Any, TypeVar

from lightning.pytorch.callbacks import ModelSummary, RichProgressBar, TQDMProgressBar
from lightning.pytorch.callbacks.progress.progress_bar import ProgressBar
from lightning.pytorch.utilities.imports import _RICH_AVAILABLE
from lightning.pytorch.utilities.model_summary.model_summary import _format_summary_table  # its table, without FLOPs

logger = logging.getLogger(__name__)
SUMMARY_LOG = logging.getLogger("lightning.pytorch.callbacks.model_summary")  # where Lightning's summary goes

T = TypeVar("T")

#: The most lines `phase_progress` writes for one phase when stderr is not a terminal (the last says it is done).
LOG_LINES = 5


def _without_version(metrics: dict[str, Any]) -> dict[str, Any]:
    metrics.pop("v_num", None)
    return metrics


class TrainingBar(TQDMProgressBar):
    """Lightning's tqdm progress bar without `v_num`."""

    def get_metrics(self, trainer: Any, pl_module: Any) -> dict[str, Any]:
        return _without_version(super().get_metrics(trainer, pl_module))


class RichTrainingBar(RichProgressBar):
    """Lightning's Rich progress bar without `v_num`."""

    def get_metrics(self, trainer: Any, pl_module: Any) -> dict[str, Any]:
        return _without_version(super().get_metrics(trainer, pl_module))


def training_progress_bar() -> ProgressBar:
    """The bar Lightning would choose by default (Rich when installed, else tqdm), without `v_num`."""
    return RichTrainingBar() if _RICH_AVAILABLE else TrainingBar()


class CountedModelSummary(ModelSummary):
    """Lightning's (plain) model summary, without FLOPs where none were counted."""

    @staticmethod
    def summarize(
        summary_data: list[tuple[str, list[str]]],
        total_parameters: int,
        trainable_parameters: int,
        model_size: float,
        total_training_modes: dict[str, int],
        total_flops: int,
        **summarize_kwargs: Any,
    ) -> None:
        if total_flops:
            ModelSummary.summarize(
                summary_data, total_parameters, trainable_parameters, model_size, total_training_modes, total_flops
            )
            return
        columns = [column for column in summary_data if column[0] != "FLOPs"]
        table = _format_summary_table(total_parameters, trainable_parameters, model_size, total_training_modes, 0, *columns)
        SUMMARY_LOG.info("\n" + table.rsplit("\n", 1)[0])  # the last line is the FLOPs total


def on_terminal() -> bool:
    """Whether stderr, where progress is shown, is an interactive terminal."""
    return bool(getattr(sys.stderr, "isatty", lambda: False)())


def phase_progress(items: Iterable[T], *, total: int, desc: str) -> Iterator[T]:
    """`items` (`total` batches), showing how far the phase `desc` is: a bar redrawn in place on a terminal, at
    most `LOG_LINES` log lines otherwise."""
    if on_terminal():
        try:
            from tqdm.auto import tqdm
        except ImportError:
            pass
        else:
            yield from tqdm(items, total=total, desc=desc, unit="batch", dynamic_ncols=True, leave=True)
            return
    every = max(1, -(-total // (LOG_LINES - 1)))  # LOG_LINES - 1 steps, then the last item
    for done, item in enumerate(items, start=1):
        yield item
        if done == total or done % every == 0:
            logger.info("%s: %d of %d batches (%d%%)", desc, done, total, 100 * done // max(total, 1))
