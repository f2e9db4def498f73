"""`python -m captioning fit|validate|test|predict --config configs/captioning/<name>.yaml`."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Optional

from jsonargparse.typing import PositiveInt
from lightning.pytorch.cli import LightningArgumentParser, LightningCLI

from captioning.allocator import keep_freed_memory
from captioning.checkpoint_io import with_safe_checkpoint_io
from captioning.checkpoints import CheckpointError, check_kind, check_weights_fit, read_checkpoint
from captioning.datamodule import CaptionDataModule
from captioning.module import CaptioningModule
from captioning.prediction_writer import CaptionResultsWriter
from captioning.reading import Read
from captioning.resume import RandomState


class CheckpointSafeCLI(LightningCLI):
    """LightningCLI for the project's models, with its checkpoint rules in every subcommand:

    * a `--ckpt_path` file is read as data and must be a checkpoint of `checkpoint_kind`, whose weights fit the
      model its hyper-parameters build; otherwise a CheckpointError names the file, before anything runs;
    * the Trainer reads and writes checkpoints with `SafeCheckpointIO` (as data, atomically, never NaN weights)
      unless the config names a CheckpointIO plugin;
    * the `RandomState` callback is always added, so a run resumed mid-epoch continues exactly.
    """

    checkpoint_kind = "captioning"
    checkpoint_required: tuple[str, ...] = ("vocabulary",)

    def __init__(self, *args: Any, trainer_defaults: dict[str, Any] | None = None, **kwargs: Any) -> None:
        defaults = dict(trainer_defaults or {})
        given = defaults.get("callbacks") or []
        defaults["callbacks"] = [*(given if isinstance(given, list) else [given]), RandomState()]
        self._checkpoint: tuple[str, dict[str, Any]] | None = None
        super().__init__(*args, trainer_defaults=defaults, **kwargs)

    def _parse_ckpt_path(self) -> None:
        # LightningCLI reads the file's hyper-parameters here; check the file first, so a bad one is reported
        # by name instead of failing inside torch or the argument parser
        subcommand = self.config.get("subcommand")
        path = self.config[subcommand].get("ckpt_path") if subcommand else None
        if path and Path(path).is_file():
            checkpoint = read_checkpoint(path)
            check_kind(checkpoint, path, required=self.checkpoint_required, kind=self.checkpoint_kind)
            self._checkpoint = (path, checkpoint)
        super()._parse_ckpt_path()

    def instantiate_classes(self) -> None:
        super().instantiate_classes()
        if self._checkpoint is not None:
            path, checkpoint = self._checkpoint
            self._checkpoint = None
            check_weights_fit(self.model, checkpoint, path)

    def instantiate_trainer(self, **kwargs: Any) -> Any:
        configured = self._get(self.config_init, "trainer", default={}).get("plugins")
        kwargs["plugins"] = with_safe_checkpoint_io(kwargs.get("plugins", configured))
        return super().instantiate_trainer(**kwargs)


class CaptioningCLI(CheckpointSafeCLI):
    """The project's LightningCLI (checkpoints as data, written atomically) with the predict writer under
    `--writer.*`, and the decoding settings of validate/test/predict, which a checkpoint's own settings would
    otherwise win over: `--inference`, how a trained model reads the image, and `--beam_size` and
    `--length_penalty` of the beam search."""

    def add_arguments_to_parser(self, parser: LightningArgumentParser) -> None:
        parser.add_lightning_class_args(CaptionResultsWriter, "writer")
        parser.add_argument(
            "--inference",
            type=Optional[type[Read]],
            default=None,
            help="read with captioning.reading.Expectation, ArgMax or Sample instead of the model's setting",
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

    def _use_decoding_settings(self) -> None:
        config = self.config[self.config.subcommand]
        if config.get("inference") is not None:
            self.model.attention.inference = config.inference
        if config.get("beam_size") is not None:
            self.model.hparams.beam_size = config.beam_size
        if config.get("length_penalty") is not None:
            self.model.hparams.length_penalty = config.length_penalty

    def before_validate(self) -> None:
        self._use_decoding_settings()

    def before_test(self) -> None:
        self._use_decoding_settings()

    def before_predict(self) -> None:
        self._use_decoding_settings()


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
    keep_freed_memory()
    try:
        return CaptioningCLI(
            CaptioningModule,
            CaptionDataModule,
            save_config_kwargs={"overwrite": True},
            args=args,
        )
    except CheckpointError as error:
        raise SystemExit(f"error: {error}") from None
