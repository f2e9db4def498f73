"""The encoder's two memory layouts: EfficientNet-Lite's forward with `fast_path=False` (torch's default NCHW layout)
against `fast_path=True` (channels-last, NHWC, the default; `core.model.fast_path`).

    python benchmarks/encoder_layout.py [--sizes 224 384] [--batches 1 32] [--repeats 10]
    taskset -c 0 python benchmarks/encoder_layout.py      # one thread
    taskset -c 0,1 python benchmarks/encoder_layout.py    # two threads

For each input side and batch size, both encoders (Lite0, frozen, eval mode, under `torch.inference_mode`, as the app
and the feature cache run them) encode the same random batch: three untimed passes, then the median of `--repeats`
timed ones, in milliseconds per batch. Also the largest difference between the two paths' features. Prints one
JSON line: `results["<side>px_batch<n>"]` = {"default_layout_ms", "channels_last_ms", "speedup", "max_difference"}.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable, Sequence

import torch
from harness import cpu_info, match_threads_to_cpus

from core.model.encoder import EfficientNetLite


def median_ms(run: Callable[[], object], repeats: int) -> float:
    """The median wall time of `run` in ms, after three untimed calls."""
    for _ in range(3):
        run()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def compare(side: int, batch: int, repeats: int) -> dict:
    """Both layouts on one random batch (batch, 3, side, side)."""
    images = torch.randn(batch, 3, side, side, generator=torch.Generator().manual_seed(0))
    encoders = {flag: EfficientNetLite(image_size=side, fast_path=flag) for flag in (False, True)}
    with torch.inference_mode():
        features = {flag: encoder(images) for flag, encoder in encoders.items()}  # (batch, L, D)
        times = {flag: median_ms(lambda e=encoder: e(images), repeats) for flag, encoder in encoders.items()}
    return {
        "default_layout_ms": round(times[False], 1),
        "channels_last_ms": round(times[True], 1),
        "speedup": round(times[False] / times[True], 2),
        "max_difference": float((features[False] - features[True]).abs().max()),
    }


def parse_arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python benchmarks/encoder_layout.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[224, 384], help="input sides in pixels")
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 32], help="batch sizes")
    parser.add_argument("--repeats", type=int, default=10, help="timed passes of each (default 10)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_arguments(argv)
    match_threads_to_cpus()
    results = {
        f"{side}px_batch{batch}": compare(side, batch, args.repeats) for side in args.sizes for batch in args.batches
    }
    print(json.dumps({"benchmark": "encoder_layout", "cpu": cpu_info(), "repeats": args.repeats, "results": results}))


if __name__ == "__main__":
    main()
