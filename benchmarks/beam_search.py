"""Beam search throughput: images per second captioned with `captioning.search.beam_search`, 20 steps each.

    python benchmarks/beam_search.py [--grids 7 14] [--beams 3 5] [--path fast readable] [--images 100]
                                     [--repeats 5] [--precision 32-true|bf16-mixed]
    taskset -c 0,1 python benchmarks/beam_search.py        # the goal's setting: 2 cores

The goal, on 2 cores, at beam 5: at least 147 images/s with a 7x7 grid and 63 images/s with a 14x14 grid
(100 images searched together, 20 words, embedding / decoder / attention size 512, feature size 1280,
vocabulary 2600). Beam 3 is measured too, without a goal.

The search is the one the model uses for evaluation, prediction and the demo (`CaptioningModule.generate`):
all images and all beams as one batch, on cached float16 grids made float32, the decoder in eval mode, soft
attention (the expectation read). Every search runs exactly `--length` steps: `max_length` is the length, and
the untrained decoder's output bias for `<end>` is set to -1e9 so no beam ever ends early (the search stops
early only when every beam has emitted `<end>`). The script checks that every caption came back with
`--length` words. The grids are uniform random in [0, 6), the range of EfficientNet-Lite's ReLU6 features.
Float32 by default; `--precision bf16-mixed` runs the search under bfloat16 autocast, as Lightning's
`Trainer(precision="bf16-mixed")` (the Flickr8k configs' setting) runs `test` and `predict` on the CPU.
`--path` picks the decoder's paths to measure: `fast` (`fast_path=True`, the default model) and `readable`
(`fast_path=False`, the plain code of the model files); both by default, each path's figures printed under its
name, on the same grids. The goals are for the fast path; the readable one's figures show what
the fast path (`core.model.fast_path`, `captioning.fast_unroll`) buys.

Each figure is the median over `--repeats` timed searches, after `--warmup` untimed ones; `cpu_share` is the
CPU seconds / (wall seconds x threads) over those searches (see `harness.Clock`): well under 1 means something
else was running on the same cores. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence

import torch
from harness import (
    FEATURE_DIM,
    PAPER_SIZES,
    PATHS,
    VOCABULARY,
    Clock,
    all_met,
    cpu_info,
    made_up_vocabulary,
    match_threads_to_cpus,
    paper_sized_decoder,
    rates,
    summary,
)

from captioning.decoder import ShowAttendTell
from captioning.search import beam_search
from data.vocabulary import Vocabulary

GOALS = {(5, 7): 147.0, (5, 14): 63.0}  # images/s on 2 cores, by (beam size, grid side)
NEVER = -1e9  # the <end> logit's bias, so that no beam ends before max_length


def make_decoder(grid: int, vocabulary: Vocabulary, seed: int = 0, *, fast_path: bool = True) -> ShowAttendTell:
    """An untrained decoder as `CaptioningModule.set_vocabulary` builds it, in eval mode, that never says <end>."""
    decoder = paper_sized_decoder(grid, vocabulary, seed, fast_path=fast_path).eval()
    with torch.no_grad():
        decoder.out.bias[vocabulary.end_id] = NEVER
    return decoder


def parse_arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python benchmarks/beam_search.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--grids", type=int, nargs="+", default=[7, 14], help="grid sides (default 7 14)")
    parser.add_argument("--beams", type=int, nargs="+", default=[3, 5], help="beam sizes (default 3 5)")
    parser.add_argument(
        "--path", nargs="+", default=list(PATHS), choices=tuple(PATHS), help="decoder paths (default fast readable)"
    )
    parser.add_argument("--images", type=int, default=100, help="images searched together (default 100)")
    parser.add_argument("--length", type=int, default=20, help="words per caption: search steps (default 20)")
    parser.add_argument("--warmup", type=int, default=1, help="untimed searches first (default 1)")
    parser.add_argument("--repeats", type=int, default=5, help="timed searches; the median is reported (default 5)")
    parser.add_argument(
        "--precision", default="32-true", choices=("32-true", "bf16-mixed"),
        help="32-true (default) or bf16-mixed (autocast to bfloat16, as Lightning's option)",
    )
    args = parser.parse_args(argv)
    if min(args.images, args.length, args.repeats, *args.beams) < 1 or args.warmup < 0:
        parser.error("--images, --length, --repeats and the beam sizes must be at least 1, --warmup at least 0")
    return args


def measure(grid: int, path: str, vocabulary: Vocabulary, args: argparse.Namespace) -> dict[int, dict]:
    """Every beam size on one grid size with one decoder path: figures by beam size."""
    decoder = make_decoder(grid, vocabulary, fast_path=PATHS[path])
    torch.manual_seed(grid)  # the same grids for every path
    inputs = (torch.rand(args.images, grid * grid, FEATURE_DIM) * 6).half()  # (N, L, D) as the cache stores it
    lengths: set[int] = set()

    def search(beam_size: int) -> None:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.precision == "bf16-mixed"):
            generated = beam_search(
                decoder,
                inputs.float(),  # Encoder.annotations on cached grids
                start_id=vocabulary.start_id,
                end_id=vocabulary.end_id,
                max_length=args.length,
                beam_size=beam_size,
            )
        lengths.update(len(tokens) for tokens in generated.tokens)

    figures = {}
    for beam_size in args.beams:
        clock = Clock()
        measured = rates(
            lambda: search(beam_size), items=args.images, warmup=args.warmup, repeats=args.repeats, clock=clock
        )
        figures[beam_size] = {"images_per_s": summary(measured), "cpu_share": clock.cpu_share()}
    if lengths != {args.length}:
        raise SystemExit(f"error: captions of {sorted(lengths)} words came back, expected {args.length} words each")
    return figures


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_arguments(argv)
    match_threads_to_cpus()
    vocabulary = made_up_vocabulary(VOCABULARY)
    results: dict[str, dict] = {path: {} for path in args.path}
    met: dict[str, dict] = {path: {} for path in args.path}
    for grid in args.grids:
        for path in args.path:
            for beam_size, setting in measure(grid, path, vocabulary, args).items():
                name = f"beam{beam_size}_{grid}x{grid}"
                results[path][name] = setting
                goal = GOALS.get((beam_size, grid))
                met[path][name] = None if goal is None else setting["images_per_s"]["median"] >= goal
    figures = {
        "benchmark": "beam_search",
        "unit": "images/s (median)",
        "images": args.images,
        "steps": args.length,
        "precision": args.precision,
        "sizes": PAPER_SIZES,
        "timing": {"warmup_searches": args.warmup, "timings": args.repeats},
        "results": results,
        "goal": {f"beam{beam}_{grid}x{grid}": value for (beam, grid), value in GOALS.items()} | {"cores": 2},
        "goal_met": met,
        "all_goals_met": {path: all_met(by_name) for path, by_name in met.items()},
        "cpu": cpu_info(),
    }
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
