"""`python -m captioning fit|validate|test|predict --config configs/captioning/<name>.yaml`."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from jsonargparse.typing import PositiveInt
from lightning.pytorch.cli import LightningArgumentParser

from captioning.command import HELP
from captioning.datamodule import CaptionDataModule
from captioning.decoder import Read
from captioning.metrics import configured_backend
from captioning.module import CaptioningModule
from captioning.tensorboard import CaptionSamples
from core.training.cli import CheckpointSafeCLI
from core.training.results import ResultsWriter


class CaptioningCLI(CheckpointSafeCLI):
    """The project's LightningCLI (checkpoints as data, written atomically) with the predict writer under
    `--writer.*`, and the decoding settings of validate/test/predict, which a checkpoint's own settings would
    otherwise win over: `--inference`, how a trained model reads the image, and `--beam_size`,
    `--length_penalty`, `--no_repeat_ngram_size` and `--complete_phrases` of the beam search. A few validation
    images with their captions and attention go to TensorBoard every validation epoch (`--tensorboard.count`)."""

    command_help = HELP

    def add_arguments_to_parser(self, parser: LightningArgumentParser) -> None:
        parser.add_lightning_class_args(CaptionResultsWriter, "writer")
        parser.add_lightning_class_args(CaptionSamples, "tensorboard")
        parser.add_argument(
            "--inference",
            type=Optional[type[Read]],
            default=None,
            help="read with captioning.decoder.Expectation, ArgMax or Sample instead of the model's setting",
        )
        parser.add_argument(
            "--beam_size", type=Optional[PositiveInt], default=None, help="beam width instead of the model's setting"
        )
        parser.add_argument(
            "--length_penalty",
            type=Optional[float],
            default=None,
            help="rank beams by log-probability / length^this instead of the model's setting",
        )
        parser.add_argument(
            "--no_repeat_ngram_size",
            type=Optional[int],
            default=None,
            help="never write an n-gram of this size twice in a caption (0: allow) instead of the model's setting",
        )
        parser.add_argument(
            "--complete_phrases",
            type=Optional[bool],
            default=None,
            help="never end a caption on an article, preposition or conjunction (or allow it) instead of the "
            "model's setting",
        )

    def _use_decoding_settings(self) -> None:
        config = self.config[self.config.subcommand]
        if config.get("inference") is not None:
            self.model.attention.inference = config.inference
        if config.get("beam_size") is not None:
            self.model.hparams.beam_size = config.beam_size
        if config.get("length_penalty") is not None:
            self.model.hparams.length_penalty = config.length_penalty
        if config.get("no_repeat_ngram_size") is not None:
            self.model.hparams.no_repeat_ngram_size = config.no_repeat_ngram_size
        if config.get("complete_phrases") is not None:
            self.model.hparams.complete_phrases = config.complete_phrases

    def before_validate(self) -> None:
        self._use_decoding_settings()

    def before_test(self) -> None:
        self._use_decoding_settings()

    def before_predict(self) -> None:
        self._use_decoding_settings()


class CaptionResultsWriter(ResultsWriter):
    """Writes `predict` results in the COCO results format, [{"image_id", "caption"}], as one JSON file.

    Args:
        output: the results JSON file.
    """

    noun = "captions"

    def __init__(self, *, output: Path = Path("captions.json")) -> None:
        super().__init__(output=output)

    def result(self, item: dict[str, Any]) -> dict[str, Any]:
        return {"image_id": image_id_of(item["path"]), "caption": item["caption"]}


def image_id_of(path: str) -> int | str:
    """COCO ids are integers: a file named 000000391895.jpg or 391895.jpg gives 391895; others keep their stem."""
    stem = Path(path).stem
    digits = stem.rsplit("_", 1)[-1]
    return int(digits) if digits.isdigit() else stem


def main(args: list[str] | None = None) -> CaptioningCLI:
    try:  # a $CAPTION_METRICS_BACKEND of another kind ends the command now, not at its first validation
        configured_backend()
    except ValueError as error:
        raise SystemExit(f"error: {error}") from None
    return CaptioningCLI.main(CaptioningModule, CaptionDataModule, args)
