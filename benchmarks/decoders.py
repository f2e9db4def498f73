"""Two or more trained captioners side by side on this CPU, in one run: how fast each decoder trains and captions.

    python benchmarks/decoders.py --models captioning/bundled/flickr8k_soft.ckpt \
        runs/flickr8k_transformer/best.ckpt [--batch-size 32] [--words 12]
    taskset -c 0 python benchmarks/decoders.py --models ...      # one core, as the Flickr8k runs train

For each checkpoint, on its own vocabulary and encoder grid, with float32 weights:

- `training_captions_per_s`: captions per second of one optimiser step as `CaptioningModule.training_step` takes it
  on cached features (teacher-forced loss of the model's attention objective, backward, Adam with fused update),
  batches of `--batch-size` captions of `--words` words plus <end> (Flickr8k's mean caption has 11.8 words), in
  train mode; `epoch_minutes` is Flickr8k's 30000 training captions at that rate (the training loop alone:
  validation and Lightning's own work come on top);
- `beam_captions_per_s`: images per second captioned by `CaptioningModule.generate` with the model's beam width
  and rules (`--beam-size` sets the width), `--images` images searched together, in eval mode;
- `parameters`: the decoder's trainable parameters.

The features are uniform random in [0, 6) (EfficientNet-Lite's ReLU6 range) and the captions random words, so
beam captions may end early or run to the model's max_length as a trained model does on such input: compare
models on the same run, not with figures of another machine. Each figure is the median of `--repeats` timings
after `--warmup` untimed ones. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

import torch
from harness import Clock, cpu_info, match_threads_to_cpus, rates, summary

from captioning.module import CaptioningModule

FLICKR8K_TRAINING_CAPTIONS = 30000


def training_step(model: CaptioningModule, optimizer: torch.optim.Optimizer, batch: dict) -> None:
    """One teacher-forced optimiser step, as `training_step` and Lightning's loop take it (no logging)."""
    captions = batch["captions"]
    out = model.decoder(model.features(batch["inputs"]), captions[:, :-1], model.attention.training_read())
    terms = model.attention.loss(out, captions[:, 1:], pad_id=model.vocabulary.pad_id, label_smoothing=0.0)
    optimizer.zero_grad(set_to_none=True)
    terms.total.backward()
    optimizer.step()


def measure(path: Path, args: argparse.Namespace) -> dict:
    """The figures of one checkpoint (see the module docstring)."""
    model = CaptioningModule.load(path)
    torch.manual_seed(0)
    vocabulary, locations, feature_dim = model.vocabulary, model.encoder.num_locations, model.encoder.feature_dim
    features = torch.rand(args.batch_size, locations, feature_dim) * 6  # (B, L, D), cached grids made float32
    words = torch.randint(len(vocabulary.SPECIALS), len(vocabulary), (args.batch_size, args.words))
    start = torch.full((args.batch_size, 1), vocabulary.start_id)
    end = torch.full((args.batch_size, 1), vocabulary.end_id)
    batch = {"inputs": features, "captions": torch.cat([start, words, end], 1)}  # (B, words + 2)
    model.train()
    optimizer = torch.optim.Adam(model.decoder.parameters(), lr=1e-4, fused=True)
    training = rates(
        lambda: training_step(model, optimizer, batch), items=args.batch_size, warmup=args.warmup, repeats=args.repeats
    )
    model.eval()
    images = torch.rand(args.images, locations, feature_dim) * 6
    clock = Clock()
    with torch.inference_mode():
        searching = rates(
            lambda: model.generate(images, beam_size=args.beam_size), items=args.images, warmup=1,
            repeats=args.repeats, clock=clock,
        )  # fmt: skip
    per_s = summary(training)
    return {
        "checkpoint": str(path),
        "decoder": type(model.decoder).__name__,
        "parameters": sum(p.numel() for p in model.decoder.parameters() if p.requires_grad),
        "grid": list(model.encoder.grid_shape),
        "training_captions_per_s": per_s,
        "epoch_minutes": round(FLICKR8K_TRAINING_CAPTIONS / per_s["median"] / 60, 1),
        "beam_size": args.beam_size or model.hparams.beam_size,
        "beam_captions_per_s": summary(searching),
        "beam_cpu_share": clock.cpu_share(),
    }


def parse_arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python benchmarks/decoders.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", type=Path, nargs="+", required=True, help="captioning checkpoints to compare")
    parser.add_argument("--batch-size", type=int, default=32, help="captions per training step (default 32)")
    parser.add_argument("--words", type=int, default=12, help="words per training caption, <end> aside (default 12)")
    parser.add_argument("--images", type=int, default=50, help="images searched together (default 50)")
    parser.add_argument("--beam-size", type=int, default=None, help="beam width (default: each model's own)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed training steps first (default 2)")
    parser.add_argument("--repeats", type=int, default=5, help="timings; the median is reported (default 5)")
    args = parser.parse_args(argv)
    if min(args.batch_size, args.words, args.images, args.repeats) < 1 or args.warmup < 0:
        parser.error("--batch-size, --words, --images and --repeats must be at least 1, --warmup at least 0")
    missing = [str(path) for path in args.models if not path.is_file()]
    if missing:
        parser.error(f"no such checkpoint: {', '.join(missing)}")
    return args


def measured_models(args: argparse.Namespace) -> list[dict]:
    """`measure` of every checkpoint; one that cannot be read as a captioning model ends the run in one line."""
    try:
        return [measure(path, args) for path in args.models]
    except ValueError as error:  # CheckpointError: not a checkpoint, or not a captioning one
        raise SystemExit(f"error: {error}") from None


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_arguments(argv)
    match_threads_to_cpus()
    figures = {
        "benchmark": "decoders",
        "batch_size": args.batch_size,
        "words": args.words,
        "images": args.images,
        "models": measured_models(args),
        "threads": torch.get_num_threads(),
        "cpu": cpu_info(),
    }
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
