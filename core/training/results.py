"""Results files: JSON written atomically, and the `predict` writer both tasks subclass.

Under DDP each process predicts its own share of a dataset; `ResultsWriter` gathers every process's results
and global rank 0 writes the one file, in the order of the dataset, as a single process would.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import lightning as L
from lightning.pytorch.callbacks import BasePredictionWriter

from core.training.gathering import gather_by_key


def write_json_atomically(path: Path, value: Any) -> None:
    """Write JSON to a temporary file next to `path`, then rename it into place: never a half-written file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, suffix=".tmp") as handle:
        json.dump(value, handle, indent=1)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(handle.name, 0o666 & ~umask)  # a temporary file is private (0600); results are ordinary files
    os.replace(handle.name, path)


class ResultsWriter(BasePredictionWriter):
    """Collects every prediction, from every process, and writes them once, atomically, at the end of `predict`
    as a JSON list in dataset order. A subclass says what one result looks like (`result`) and what it is
    called (`noun`, for the closing message).

    Args:
        output: the results JSON file.
    """

    noun = "results"

    def __init__(self, *, output: Path) -> None:
        super().__init__(write_interval="epoch")
        self.output = Path(output)

    def result(self, item: dict[str, Any]) -> dict[str, Any]:
        """The JSON record of one predicted item (a dict the LightningModule's `predict_step` returned)."""
        raise NotImplementedError

    def write_on_epoch_end(
        self, trainer: L.Trainer, pl_module: L.LightningModule, predictions: Any, batch_indices: Any
    ) -> None:
        by_index = gather_by_key({item["index"]: self.result(item) for batch in predictions for item in batch})
        if trainer.is_global_zero:
            write_json_atomically(self.output, [by_index[index] for index in sorted(by_index)])
            pl_module.print(f"wrote {len(by_index)} {self.noun} to {self.output}")
