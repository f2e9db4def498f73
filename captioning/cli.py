"""`python -m captioning fit|validate|test|predict --config configs/captioning/<name>.yaml`."""

from __future__ import annotations

import logging

from lightning.pytorch.cli import LightningArgumentParser, LightningCLI

from captioning.datamodule import CaptionDataModule
from captioning.module import CaptioningModule
from captioning.prediction_writer import CaptionResultsWriter


class CaptioningCLI(LightningCLI):
    """LightningCLI with the predict writer under `--writer.*`."""

    def add_arguments_to_parser(self, parser: LightningArgumentParser) -> None:
        parser.add_lightning_class_args(CaptionResultsWriter, "writer")


def show_progress_messages() -> None:
    """Let the project's INFO messages (feature cache hits and builds) reach the console."""
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(message)s"))
    for name in ("captioning", "data", "vqa"):
        logger = logging.getLogger(name)
        logger.setLevel(logging.INFO)
        if not logger.handlers:
            logger.addHandler(handler)


def main(args: list[str] | None = None) -> CaptioningCLI:
    show_progress_messages()
    return CaptioningCLI(
        CaptioningModule,
        CaptionDataModule,
        save_config_kwargs={"overwrite": True},
        args=args,
    )
