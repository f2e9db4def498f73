"""`python -m vqa fit|validate|test|predict --config configs/vqa/<name>.yaml`."""

from __future__ import annotations

from lightning.pytorch.cli import LightningArgumentParser, LightningCLI

from captioning.cli import show_progress_messages
from vqa.datamodule import VqaDataModule
from vqa.module import VqaModule
from vqa.prediction_writer import AnswerResultsWriter


class VqaCLI(LightningCLI):
    """LightningCLI with the predict writer under `--writer.*`."""

    def add_arguments_to_parser(self, parser: LightningArgumentParser) -> None:
        parser.add_lightning_class_args(AnswerResultsWriter, "writer")


def main(args: list[str] | None = None) -> VqaCLI:
    show_progress_messages()
    return VqaCLI(VqaModule, VqaDataModule, save_config_kwargs={"overwrite": True}, args=args)
