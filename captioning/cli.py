"""`python -m captioning fit|validate|test|predict --config configs/captioning/<name>.yaml`."""

from __future__ import annotations

from lightning.pytorch.cli import LightningArgumentParser, LightningCLI

from captioning.datamodule import CaptionDataModule
from captioning.module import CaptioningModule
from captioning.prediction_writer import CaptionResultsWriter


class CaptioningCLI(LightningCLI):
    """LightningCLI with the predict writer under `--writer.*`."""

    def add_arguments_to_parser(self, parser: LightningArgumentParser) -> None:
        parser.add_lightning_class_args(CaptionResultsWriter, "writer")


def main(args: list[str] | None = None) -> CaptioningCLI:
    return CaptioningCLI(
        CaptioningModule,
        CaptionDataModule,
        save_config_kwargs={"overwrite": True},
        args=args,
    )
