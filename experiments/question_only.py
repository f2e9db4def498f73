"""How much a VQA model's answers owe to the photo: the same training and test with the photo taken away.

`WithoutThePhoto` is a Lightning callback that zeroes the image's region vectors (or pixels) of every batch
before the model sees it, in training, validation, test and predict alike. The model is otherwise the one the
config builds, so its score is what the question alone earns under the same recipe: every attention hop then
reads the same blank grid, and only the question vector decides the answer. The gap between this run and the
same run without the callback is what the photo adds.

    python -m vqa fit --config configs/vqa/daquar_san.yaml --data.dataset.init_args.root PATH/TO/daquar \
        --data.dataset.init_args.single_word_answers true --trainer.default_root_dir runs/daquar_question_only \
        --trainer.callbacks+=experiments.question_only.WithoutThePhoto
    python -m vqa test ... --ckpt_path ... --trainer.callbacks+=experiments.question_only.WithoutThePhoto

Run from the repository root (the callback is found as `experiments.question_only`). Figures in
docs/experiments.md (DAQUAR).
"""

from __future__ import annotations

from typing import Any

import lightning as L


class WithoutThePhoto(L.Callback):
    """Zeroes `batch["inputs"]` (cached grids (B, L, D) or images (B, 3, S, S)) before every step."""

    @staticmethod
    def _blank(batch: Any) -> None:
        batch["inputs"].zero_()

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        self._blank(batch)

    def on_validation_batch_start(self, trainer, pl_module, batch, batch_idx, dataloader_idx=0) -> None:
        self._blank(batch)

    def on_test_batch_start(self, trainer, pl_module, batch, batch_idx, dataloader_idx=0) -> None:
        self._blank(batch)

    def on_predict_batch_start(self, trainer, pl_module, batch, batch_idx, dataloader_idx=0) -> None:
        self._blank(batch)
