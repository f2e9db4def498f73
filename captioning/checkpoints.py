"""Reading a model checkpoint as data: `torch.load(weights_only=True)`, so no pickled code ever runs, and a
clear error for a missing file, a file that needs code to load, or a checkpoint of another kind of model.

Shared by every LightningModule of the project (captioning and VQA), whose hyper-parameters are plain data
(see `captioning.hparams`), so a model is rebuilt from its checkpoint alone.
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any, TypeVar

import lightning as L
import torch
from lightning.pytorch.cli import instantiate_module

M = TypeVar("M", bound=L.LightningModule)


def read_checkpoint(path: str | Path, *, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """The checkpoint's dictionary, read without executing pickled code."""
    try:
        checkpoint = torch.load(path, map_location=map_location, weights_only=True)
    except FileNotFoundError:
        raise FileNotFoundError(f"checkpoint not found: {path}") from None
    except pickle.UnpicklingError as error:
        raise ValueError(f"{path} is not a plain-data checkpoint and was not loaded: {error}") from None
    except (RuntimeError, EOFError) as error:
        raise ValueError(f"{path} is not a readable checkpoint (truncated or not a torch file): {error}") from None
    if not isinstance(checkpoint, dict):
        raise ValueError(f"{path} is not a Lightning checkpoint (it holds a {type(checkpoint).__name__})")
    return checkpoint


def load_module(cls: type[M], path: str | Path, *, required: tuple[str, ...], kind: str, map_location="cpu") -> M:
    """A `cls` model rebuilt from the checkpoint's hyper-parameters and weights, in eval mode.

    `required` names the hyper-parameters every `cls` checkpoint has (its vocabularies); a checkpoint
    without them is another kind of model and is refused with a message naming `kind`.
    """
    checkpoint = read_checkpoint(path, map_location=map_location)
    hparams = dict(checkpoint.get("hyper_parameters") or {})
    if any(not hparams.get(name) for name in required) or "state_dict" not in checkpoint:
        raise ValueError(f"{path} is not a {kind} checkpoint (it has no {' or '.join(required)} or no weights)")
    hparams.pop("_instantiator", None)
    hparams.pop("_class_path", None)
    model = instantiate_module(cls, hparams)
    model.load_state_dict(checkpoint["state_dict"])
    return model.eval()
