"""The LightningCLI both tasks build on: the project's checkpoint rules in every subcommand."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from lightning.pytorch.cli import LightningCLI

from core.checkpoints import (
    check_kind,
    check_weights_fit,
    read_checkpoint,
    with_safe_checkpoint_io,
)
from core.resume import RandomState


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
        # LightningCLI's own version reads the file's hyper-parameters into the config; this one checks the file
        # first, so a bad one is reported by name instead of failing inside torch or the argument parser, and
        # reads it through `read_checkpoint`, which brings class paths of moved modules up to date
        subcommand = self.config.get("subcommand")
        path = self.config[subcommand].get("ckpt_path") if subcommand else None
        if not (path and Path(path).is_file()):
            return
        checkpoint = read_checkpoint(path)
        check_kind(checkpoint, path, required=self.checkpoint_required, kind=self.checkpoint_kind)
        self._checkpoint = (path, checkpoint)
        hparams = dict(checkpoint.get("hyper_parameters") or {})
        hparams.pop("_instantiator", None)
        if "_class_path" in hparams:
            hparams = {"class_path": hparams.pop("_class_path"), "dict_kwargs": hparams}
        if hparams:
            self.config = self.parser.parse_object({subcommand: {"model": hparams}}, self.config)

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


def show_progress_messages() -> None:
    """Let the project's INFO messages (feature cache hits and builds) reach the console."""
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(message)s"))
    for name in ("captioning", "data", "vqa"):
        logger = logging.getLogger(name)
        logger.setLevel(logging.INFO)
        if not logger.handlers:
            logger.addHandler(handler)


