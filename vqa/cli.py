"""`python -m vqa fit|validate|test|predict --config configs/vqa/<name>.yaml`."""

from __future__ import annotations

from lightning.pytorch.cli import LightningArgumentParser

from captioning.allocator import keep_freed_memory
from captioning.checkpoints import CheckpointError
from captioning.cli import CheckpointSafeCLI, show_progress_messages
from vqa.datamodule import VqaDataModule
from vqa.module import VqaModule
from vqa.prediction_writer import AnswerResultsWriter


class VqaCLI(CheckpointSafeCLI):
    """The project's LightningCLI (checkpoints as data, written atomically) with the predict writer under
    `--writer.*`."""

    checkpoint_kind = "VQA"
    checkpoint_required = ("question_vocabulary", "answers")

    def add_arguments_to_parser(self, parser: LightningArgumentParser) -> None:
        parser.add_lightning_class_args(AnswerResultsWriter, "writer")


def main(args: list[str] | None = None) -> VqaCLI:
    show_progress_messages()
    keep_freed_memory()
    try:
        return VqaCLI(VqaModule, VqaDataModule, save_config_kwargs={"overwrite": True}, args=args)
    except CheckpointError as error:
        raise SystemExit(f"error: {error}") from None
