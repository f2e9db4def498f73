"""How the Trainer reads and writes checkpoint files in this project: as data, atomically, never with NaN weights.

Lightning's own `TorchCheckpointIO` leaves `torch.load`'s `weights_only` to torch's default (which an
environment variable can turn off) and writes through an fsspec transaction whose temporary file lives in the
system's temp folder, then is moved without fsync. `SafeCheckpointIO` replaces both for local files:

* `load_checkpoint` is `captioning.checkpoints.read_checkpoint`: `weights_only=True` always, so resuming
  (`fit --ckpt_path`) or testing a checkpoint someone sent you can never run code pickled into it;
* `save_checkpoint` is `captioning.checkpoints.write_checkpoint` (temporary file in the same folder, fsync,
  `os.replace`), and refuses weights that are not finite: a run whose weights turned NaN stops with a
  FloatingPointError instead of overwriting `last.ckpt`, so the last good checkpoint survives.

The project's CLIs install it by default (`with_safe_checkpoint_io`); a config that names its own CheckpointIO
plugin keeps it. Remote paths (s3://, ...) go through Lightning's implementation, still read as data.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

import torch
from fsspec.implementations.local import LocalFileSystem
from lightning.fabric.utilities.cloud_io import get_filesystem
from lightning.fabric.utilities.types import _PATH
from lightning.pytorch.plugins.io import CheckpointIO, TorchCheckpointIO

from captioning.checkpoints import read_checkpoint, write_checkpoint


class SafeCheckpointIO(TorchCheckpointIO):
    """TorchCheckpointIO that reads checkpoints as plain data and writes them atomically (module docstring)."""

    def save_checkpoint(self, checkpoint: dict[str, Any], path: _PATH, storage_options: Optional[Any] = None) -> None:
        check_finite_weights(checkpoint, path)
        if storage_options is not None or not _is_local(path):
            super().save_checkpoint(checkpoint, path, storage_options)
            return
        write_checkpoint(checkpoint, path)

    def load_checkpoint(
        self,
        path: _PATH,
        map_location: Optional[Callable] = lambda storage, location: storage,
        weights_only: Optional[bool] = None,
    ) -> dict[str, Any]:
        if not _is_local(path):
            return super().load_checkpoint(path, map_location=map_location, weights_only=True)
        return read_checkpoint(path, map_location=map_location)


def check_finite_weights(checkpoint: dict[str, Any], path: _PATH) -> None:
    """Raise FloatingPointError naming the first weight of `checkpoint["state_dict"]` holding NaN or infinity."""
    for name, tensor in (checkpoint.get("state_dict") or {}).items():
        if isinstance(tensor, torch.Tensor) and tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            raise FloatingPointError(
                f"weight {name} holds NaN or infinite values; {path} was not written, so the previous checkpoint "
                "there is kept (lower the learning rate or clip gradients and resume from it)"
            )


def with_safe_checkpoint_io(plugins: Any) -> list[Any]:
    """The Trainer's `plugins` argument (None, one plugin or a list) plus a SafeCheckpointIO, unless it already
    names a CheckpointIO plugin of its own."""
    chosen = [] if plugins is None else list(plugins) if isinstance(plugins, (list, tuple)) else [plugins]
    if any(isinstance(plugin, CheckpointIO) for plugin in chosen):
        return chosen
    return [*chosen, SafeCheckpointIO()]


def _is_local(path: _PATH) -> bool:
    return isinstance(get_filesystem(path), LocalFileSystem)
