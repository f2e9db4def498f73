"""Fine-tuning the encoder's top blocks: one training step's encoder work, from the cached trunk against images.

    python benchmarks/fine_tuning.py [--variant 2] [--image-size 256] [--trainable-blocks 1 2] [--batch-size 32]
                                     [--warmup 2] [--repeats 5]
    taskset -c 0 python benchmarks/fine_tuning.py        # one core

With `trainable_blocks`, the data module caches the input of the first fine-tuned block (`FeatureCache`, the
encoder's frozen trunk) and every step runs only the top blocks on it (`Encoder.annotations`); with
`--data.cache_features false` every step runs the whole encoder on the images. This times what differs between
the two in one optimiser step: the encoder's forward in train mode (its top blocks in train mode, the trunk in
eval mode, as `Encoder.train` sets them), the backward of a loss on its annotation vectors down to the top
blocks' weights, and Adam on them. The rest of a step (the question model, the attention hops, the classifier)
is the same in both and is left out. The inputs are a batch of random images, and the trunk outputs of that
batch stored as float16, as the cache holds them. Everything runs in this process, one setting after the other.

Prints one JSON line: per setting, `cached` and `images` steps/s (median, min, max over `--repeats` timings
of one step each, after `--warmup` untimed steps), their `speedup`, and the cached trunk's size per image.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Sequence

import torch
from harness import Clock, cpu_info, match_threads_to_cpus, rates, summary

from core.model.encoder import EfficientNetLite


def step_rates(encoder: EfficientNetLite, inputs: torch.Tensor, *, warmup: int, repeats: int) -> tuple[list[float], float]:
    """Steps/s of forward (train mode), backward and Adam on `inputs` (images or cached trunk outputs)."""
    optimizer = torch.optim.Adam([p for p in encoder.parameters() if p.requires_grad], lr=1e-4)
    encoder.train()

    def step() -> None:
        annotations = encoder.annotations(inputs)  # (B, L, D)
        annotations.square().mean().backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    clock = Clock()
    return rates(step, items=1, warmup=warmup, repeats=repeats, clock=clock), clock.cpu_share()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python benchmarks/fine_tuning.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--variant", type=int, default=2)
    parser.add_argument("--image-size", type=int, default=256)
    parser.add_argument("--trainable-blocks", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    match_threads_to_cpus()

    torch.manual_seed(0)
    images = torch.randn(args.batch_size, 3, args.image_size, args.image_size)  # (B, 3, S, S)
    results = {}
    for blocks in args.trainable_blocks:
        encoder = EfficientNetLite(variant=args.variant, image_size=args.image_size, trainable_blocks=blocks)
        with torch.inference_mode():
            cached = encoder.eval().trunk(images).half()  # (B, h*w, C) as the cache stores it
        cached_rates, cached_share = step_rates(encoder, cached, warmup=args.warmup, repeats=args.repeats)
        image_rates, image_share = step_rates(encoder, images, warmup=args.warmup, repeats=args.repeats)
        channels, height, width = encoder.trunk_shape
        results[f"top{blocks}"] = {
            "cached_steps_per_s": summary(cached_rates, 2),
            "images_steps_per_s": summary(image_rates, 2),
            "speedup": round(statistics.median(cached_rates) / statistics.median(image_rates), 1),
            "cpu_share": {"cached": cached_share, "images": image_share},
            "trunk_per_image": {"shape": [height * width, channels], "kib_float16": height * width * channels * 2 / 1024},
        }
    print(json.dumps({
        "encoder": f"EfficientNet-Lite{args.variant} at {args.image_size} px", "batch_size": args.batch_size,
        "results": results, "cpu": cpu_info(),
    }))


if __name__ == "__main__":
    main()
