"""Writes `predict` results in the COCO results format, [{"image_id", "caption"}], as one JSON file.

Under DDP each process captions its own share of the images; the results are gathered and global rank 0
writes the one file, in the order of the images, as a single process would.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import lightning as L
from lightning.pytorch.callbacks import BasePredictionWriter

from captioning.gathering import gather_by_key


def image_id_of(path: str) -> int | str:
    """COCO ids are integers: a file named 000000391895.jpg or 391895.jpg gives 391895; others keep their stem."""
    stem = Path(path).stem
    digits = stem.rsplit("_", 1)[-1]
    return int(digits) if digits.isdigit() else stem


def write_json_atomically(path: Path, value: Any) -> None:
    """Write JSON to a temporary file next to `path`, then rename it into place: never a half-written file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, suffix=".tmp") as handle:
        json.dump(value, handle, indent=1)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(handle.name, 0o666 & ~umask)  # a temporary file is private (0600); results are ordinary files
    os.replace(handle.name, path)


class CaptionResultsWriter(BasePredictionWriter):
    """Collects every predicted caption, from every process, and writes them once, atomically, at the end of
    `predict`.

    Args:
        output: the results JSON file.
    """

    def __init__(self, *, output: Path = Path("captions.json")) -> None:
        super().__init__(write_interval="epoch")
        self.output = Path(output)

    def write_on_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, predictions: Any, batch_indices: Any) -> None:
        by_index = gather_by_key({
            item["index"]: {"image_id": image_id_of(item["path"]), "caption": item["caption"]}
            for batch in predictions
            for item in batch
        })
        if trainer.is_global_zero:
            write_json_atomically(self.output, [by_index[index] for index in sorted(by_index)])
            pl_module.print(f"wrote {len(by_index)} captions to {self.output}")
