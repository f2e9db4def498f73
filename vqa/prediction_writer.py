"""Writes `predict` results in the official VQA results format, [{"question_id", "answer"}], as one JSON file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lightning as L
from lightning.pytorch.callbacks import BasePredictionWriter

from captioning.prediction_writer import write_json_atomically


class AnswerResultsWriter(BasePredictionWriter):
    """Collects every predicted answer and writes them once, atomically, at the end of `predict`.

    Args:
        output: the results JSON file.
    """

    def __init__(self, *, output: Path = Path("answers.json")) -> None:
        super().__init__(write_interval="epoch")
        self.output = Path(output)

    def write_on_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, predictions: Any, batch_indices: Any) -> None:
        results = [item for batch in predictions for item in batch]
        write_json_atomically(self.output, results)
        pl_module.print(f"wrote {len(results)} answers to {self.output}")
