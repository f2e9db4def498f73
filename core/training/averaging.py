"""`python -m captioning.averaging OUT.ckpt A.ckpt B.ckpt ... [--weights WA WB ...]` (and `python -m vqa.averaging`):
a weighted average of the weights of several checkpoints of one model.

Fine-tuning runs that start from the same checkpoint stay close to it in weight space. Their weights can then
be averaged into one model ("model soups", Wortsman et al. 2022; checkpoint averaging in machine translation),
which often scores above each of them and costs nothing at inference. `docs/results.md` shows an example:
the self-critical soft model (reward CIDEr-D) averaged with its continuation under the reward
CIDEr-D + 5 x METEOR. Choose the weights on the validation split, like any other setting.

The checkpoints must be of one model, or their average means nothing. They must be the same kind of model,
with the same weight names and shapes and the same hyper-parameters. The only settings that may differ are
those of training and decoding, which each task lists in the kind of its checkpoints
(`CheckpointKind.training_settings`). The vocabularies must be the same too, since a word's row in one embedding must
be that word's row in the other. Anything else is refused, with a message that names the file.

The result keeps the first checkpoint's hyper-parameters and no optimiser or loop state. It is a model to test,
bundle (`python -m captioning.bundle`) and serve, not a run to resume. Its `averaged_from` entry records each
source's path as given, epoch, step and weight.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Sequence

import torch
from jsonargparse import ArgumentParser

from core.training.checkpoint_kinds import CheckpointKind
from core.training.checkpoints import ENCODER_WEIGHTS, CheckpointError, Loadable, read_checkpoint, write_checkpoint


def model_defining(value: Any, settings: frozenset[str]) -> Any:
    """A hyper-parameter's value without the training settings nested in it (`settings`, a kind's
    `training_settings`)."""
    if isinstance(value, dict):
        return {key: model_defining(item, settings) for key, item in value.items() if key not in settings}
    return value


def average_checkpoints(checkpoints: Sequence[dict[str, Any]], weights: Sequence[float]) -> dict[str, Any]:
    """The averaged checkpoint of `checkpoints` (as `read_checkpoint` gives them) with these weights.

    Weights must be non-negative. They are divided by their sum. A tensor equal in every checkpoint, such as
    a frozen encoder's weight or an integer counter, is kept as it is. The checkpoints are assumed to be of one
    model: `average` checks that before it calls this.
    """
    if len(weights) != len(checkpoints) or len(checkpoints) < 2:
        raise ValueError(
            f"give at least two checkpoints and one weight each, got {len(checkpoints)} and {len(weights)}"
        )
    if any(w < 0 for w in weights) or sum(weights) <= 0:
        raise ValueError(f"weights must be non-negative and not all zero, got {list(weights)}")
    shares = [w / sum(weights) for w in weights]
    first = checkpoints[0]["state_dict"]
    state = {}
    for name, tensor in first.items():
        others = [checkpoint["state_dict"][name] for checkpoint in checkpoints[1:]]
        if not tensor.is_floating_point() or all(torch.equal(tensor, other) for other in others):
            state[name] = tensor
            continue
        total = torch.zeros_like(tensor, dtype=torch.float64)
        for share, checkpoint in zip(shares, checkpoints):
            total += share * checkpoint["state_dict"][name].to(torch.float64)
        state[name] = total.to(tensor.dtype)
    kept = ("pytorch-lightning_version", "hyper_parameters", ENCODER_WEIGHTS)  # a compact copy's mark stays
    averaged = {key: value for key, value in checkpoints[0].items() if key in kept}
    averaged["state_dict"] = state
    return averaged


def check_same_model(checkpoints: Sequence[dict[str, Any]], paths: Sequence[Path], kind: CheckpointKind) -> None:
    """Raise CheckpointError, naming the file, when a checkpoint is not of `kind`, or not of the same model as the
    first."""
    reference, reference_path = checkpoints[0], paths[0]
    settings = kind.training_settings  # what checkpoints of one model may differ in
    for checkpoint, path in zip(checkpoints, paths):
        if not kind.describes(checkpoint.get("hyper_parameters") or {}):
            raise CheckpointError(f"{path} is not a {kind.name} checkpoint: only {kind.name} checkpoints average here")
    for checkpoint, path in zip(checkpoints[1:], paths[1:]):
        ours, theirs = reference.get("hyper_parameters", {}), checkpoint.get("hyper_parameters", {})
        for name in sorted((ours.keys() | theirs.keys()) - settings):
            if model_defining(ours.get(name), settings) != model_defining(theirs.get(name), settings):
                raise CheckpointError(
                    f"{path} differs from {reference_path} in {name!r}: only checkpoints of one model "
                    "(the same vocabulary, sizes and attention) can be averaged"
                )
        ours, theirs = reference["state_dict"], checkpoint["state_dict"]
        if ours.keys() != theirs.keys():
            different = sorted(ours.keys() ^ theirs.keys())
            raise CheckpointError(
                f"{path} has other weights than {reference_path} ({', '.join(different[:3])}, ...): only checkpoints "
                "of one model can be averaged, all of them training checkpoints or all compact copies (which "
                "leave a frozen encoder's weights to its package)"
            )
        for name, tensor in ours.items():
            if tensor.shape != theirs[name].shape:
                raise CheckpointError(
                    f"{path}: weight {name} has shape {tuple(theirs[name].shape)}, "
                    f"{tuple(tensor.shape)} in {reference_path}; only checkpoints of one model can be averaged"
                )


def average(
    sources: Sequence[Path], target: Path, *, model_class: type[Loadable], weights: Sequence[float] | None = None
) -> dict[str, Any]:
    """Average the checkpoints `sources` of one `model_class` model into `target` and check that it loads as one;
    returns the written dictionary."""
    weights = list(weights) if weights is not None else [1.0] * len(sources)
    if len(weights) != len(sources):
        raise ValueError(f"give one weight per checkpoint: {len(sources)} checkpoints, {len(weights)} weights")
    checkpoints = [read_checkpoint(path) for path in sources]  # an older checkpoint's options as read today
    for checkpoint, path in zip(checkpoints, sources):
        if "state_dict" not in checkpoint:
            raise CheckpointError(f"{path} holds no model weights (no 'state_dict'): give a training checkpoint")
    check_same_model(checkpoints, sources, model_class.checkpoint_kind)
    averaged = average_checkpoints(checkpoints, weights)
    averaged["averaged_from"] = [
        {"path": str(path), "epoch": c.get("epoch"), "global_step": c.get("global_step"), "weight": float(w)}
        for path, c, w in zip(sources, checkpoints, weights)
    ]
    write_checkpoint(averaged, target)
    model_class.load(target)  # the average loads as the model it came from
    return averaged


def main(argv: Sequence[str] | None = None, *, model_class: type[Loadable], prog: str) -> int:
    """The command line of `prog` (`python -m captioning.averaging`, `python -m vqa.averaging`) for `model_class`."""
    parser = ArgumentParser(
        prog=prog,
        description="Average the weights of checkpoints of one model (runs fine-tuned from the same start).",
    )
    parser.add_argument("target", type=Path, help="where to write the averaged checkpoint")
    parser.add_argument("sources", type=Path, nargs="+", help="two or more checkpoints of one model")
    parser.add_argument(
        "--weights", type=float, nargs="+", default=None, help="one weight per checkpoint (default: equal)"
    )
    args = parser.parse_args(argv)
    try:
        averaged = average(args.sources, args.target, model_class=model_class, weights=args.weights)
    except (FileNotFoundError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    parts = ", ".join(f"{entry['path']} x {entry['weight']:g}" for entry in averaged["averaged_from"])
    print(f"{args.target}: the average of {parts}")
    return 0

