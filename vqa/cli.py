"""`python -m vqa fit|validate|test|predict --config configs/vqa/<name>.yaml`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lightning.pytorch.cli import LightningArgumentParser

from core.training.cli import CheckpointSafeCLI
from core.training.results import ResultsWriter
from vqa.command import HELP
from vqa.datamodule import VqaDataModule
from vqa.module import VqaModule
from vqa.tensorboard import AnswerSamples


class AnswerResultsWriter(ResultsWriter):
    """Writes `predict` results in the official VQA results format, [{"question_id", "answer"}], as one JSON file.

    Args:
        output: the results JSON file.
    """

    noun = "answers"

    def __init__(self, *, output: Path = Path("answers.json")) -> None:
        super().__init__(output=output)

    def result(self, item: dict[str, Any]) -> dict[str, Any]:
        return {"question_id": item["question_id"], "answer": item["answer"]}


class VqaCLI(CheckpointSafeCLI):
    """The project's LightningCLI (checkpoints as data, written atomically) with the predict writer under
    `--writer.*`, and a few validation questions with their answers and attention in TensorBoard every validation
    epoch (`--tensorboard.count`)."""

    command_help = HELP

    def add_arguments_to_parser(self, parser: LightningArgumentParser) -> None:
        parser.add_lightning_class_args(AnswerResultsWriter, "writer")
        parser.add_lightning_class_args(AnswerSamples, "tensorboard")


def main(args: list[str] | None = None) -> VqaCLI:
    return VqaCLI.main(VqaModule, VqaDataModule, args)
