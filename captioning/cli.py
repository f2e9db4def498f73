"""`python -m captioning fit|validate|test|predict --config configs/captioning/<name>.yaml`."""

from __future__ import annotations

import logging
from typing import Optional

from lightning.pytorch.cli import LightningArgumentParser, LightningCLI

from captioning.datamodule import CaptionDataModule
from captioning.module import CaptioningModule
from captioning.prediction_writer import CaptionResultsWriter
from captioning.reading import Read


class CaptioningCLI(LightningCLI):
    """LightningCLI with the predict writer under `--writer.*` and `--inference`, how a trained model reads the
    image at validate/test/predict time (a checkpoint's own settings otherwise win over the command line)."""

    def add_arguments_to_parser(self, parser: LightningArgumentParser) -> None:
        parser.add_lightning_class_args(CaptionResultsWriter, "writer")
        parser.add_argument(
            "--inference",
            type=Optional[type[Read]],
            default=None,
            help="read with captioning.reading.Expectation, ArgMax or Sample instead of the model's setting",
        )

    def _use_inference_read(self) -> None:
        chosen = self.config[self.config.subcommand].get("inference")
        if chosen is not None:
            self.model.attention.inference = chosen

    def before_validate(self) -> None:
        self._use_inference_read()

    def before_test(self) -> None:
        self._use_inference_read()

    def before_predict(self) -> None:
        self._use_inference_read()


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
