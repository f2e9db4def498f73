"""Attention overlays from `python -m captioning predict`, as a prediction callback:

    python -m captioning predict --ckpt_path best.ckpt --data.predict_path photos/ \
        --trainer.callbacks+=captioning.overlay_writer.OverlayWriter --trainer.callbacks.init_args.output_dir overlays/

writes for every photo the same folder as `python -m captioning.export` (see `captioning.export`), batch by
batch, next to the captions JSON of `CaptionResultsWriter`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import lightning as L
from lightning.pytorch.callbacks import BasePredictionWriter

from captioning.export import output_folder, write_caption_overlays
from data.images import ImageLoadError, load_image


class OverlayWriter(BasePredictionWriter):
    """Writes each predicted caption's overlays, grid, GIF and caption.json into `output_dir/<image stem>/`.

    The data module hands the model squashed square tensors, so the original photo is read again from the
    item's path to draw on it at its own size.

    Args:
        output_dir: the folder that receives one subfolder per image.
    """

    def __init__(self, *, output_dir: Path) -> None:
        super().__init__(write_interval="batch")
        self.output_dir = Path(output_dir)
        self._taken: set[str] = set()

    def on_predict_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._taken = set()

    def write_on_batch_end(
        self,
        trainer: L.Trainer,
        pl_module: L.LightningModule,
        prediction: Any,
        batch_indices: Sequence[int] | None,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int,
    ) -> None:
        for item in prediction:
            try:
                image = load_image(item["path"])
            except ImageLoadError as error:  # changed or removed since the data module read it
                pl_module.print(f"no overlays for {item['path']}: {error}")
                continue
            folder = output_folder(self.output_dir, Path(item["path"]), self._taken)
            write_caption_overlays(
                image,
                words=item["words"],
                weights=item["weights"],
                grid=pl_module.encoder.grid_size,
                out_dir=folder,
                source=item["path"],
            )
