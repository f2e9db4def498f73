"""Writes `predict` results in the official VQA results format, [{"question_id", "answer"}], as one JSON file.

Under DDP each process answers its own share of the questions; the results are gathered and global rank 0
writes the one file, in the order of the questions, as a single process would.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lightning as L
from lightning.pytorch.callbacks import BasePredictionWriter

from captioning.gathering import gather_by_key
from captioning.prediction_writer import write_json_atomically


class AnswerResultsWriter(BasePredictionWriter):
    """Collects every predicted answer, from every process, and writes them once, atomically, at the end of
    `predict`.

    Args:
        output: the results JSON file.
    """

    def __init__(self, *, output: Path = Path("answers.json")) -> None:
        super().__init__(write_interval="epoch")
        self.output = Path(output)

    def write_on_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, predictions: Any, batch_indices: Any) -> None:
        by_index = gather_by_key({
            item["index"]: {"question_id": item["question_id"], "answer": item["answer"]}
            for batch in predictions
            for item in batch
        })
        if trainer.is_global_zero:
            write_json_atomically(self.output, [by_index[index] for index in sorted(by_index)])
            pl_module.print(f"wrote {len(by_index)} answers to {self.output}")
