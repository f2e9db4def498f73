"""How much of this machine's float32 matmul rate the decoder's training step achieves.

    python benchmarks/matmul_efficiency.py [--grids 7 14] [--attention soft hard] [--steps 5] [--repeats 5]
                                           [--precision 32-true|bf16-mixed]
    taskset -c 0,1 python benchmarks/matmul_efficiency.py        # the goal's setting: 2 cores

The goal, on 2 cores: the training step of `decoder_training.py` achieves at least 0.5 of the rate of a plain
float32 matrix product measured in the same run.

* `matmul_gflops`: `torch.mm` of two random 2048 x 2048 float32 matrices, 2 * 2048^3 floating-point operations
  each; the median of `--mm-repeats` products after 2 warm-ups, measured before the training steps and again
  after them (`before`, `after`; the rate used is the median of both sets).
* `flops_per_step`: the floating-point operations of one training step (the same `TrainingStep` as
  `decoder_training.py`: forward, loss, backward, Adam step), counted by torch's own counter
  `torch.utils.flop_counter.FlopCounterMode` while one step runs. It counts the matrix products (mm, addmm,
  bmm, ... in forward and backward: the LSTM's gates, the attention, the output layer) and nothing
  elementwise (tanh, softmax, the optimiser), so the figure is the step's matmul work. `by_op` splits it.
* `achieved_gflops`: flops_per_step x steps/s, steps/s the median of `--repeats` timings of `--steps` steps
  after `--warmup` untimed ones, as in `decoder_training.py` (here all settings run in this process).
* `efficiency`: achieved_gflops / matmul_gflops (the float32 rate, whatever `--precision`).
* `--precision bf16-mixed` times the step under bfloat16 autocast (as `decoder_training.py --precision
  bf16-mixed`); the same 2048 x 2048 product in bfloat16 is then measured too (`matmul_gflops_bf16`), and
  `efficiency_bf16` is achieved_gflops / that rate: how close the step comes to the rate of the dtype it runs in.
* `cpu_share`: CPU seconds / (wall seconds x threads) while timed (see `harness.Clock`): well under 1 means
  something else was running on the same cores.

Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Sequence

import torch
from decoder_training import PRECISIONS, TrainingStep
from harness import Clock, cpu_info, match_threads_to_cpus, rates, summary
from torch.utils.flop_counter import FlopCounterMode

GOAL = 0.5
MM_SIZE = 2048


def matmul_rates(repeats: int, clock: Clock, warmup: int = 2, dtype: torch.dtype = torch.float32) -> list[float]:
    """GFLOP/s of `repeats` products of two MM_SIZE x MM_SIZE matrices of `dtype`."""
    a, b = torch.randn(MM_SIZE, MM_SIZE, dtype=dtype), torch.randn(MM_SIZE, MM_SIZE, dtype=dtype)
    out = torch.empty(MM_SIZE, MM_SIZE, dtype=dtype)
    flops = 2 * MM_SIZE**3
    for _ in range(warmup):
        torch.mm(a, b, out=out)
    measured = []
    for _ in range(repeats):
        clock.start()
        torch.mm(a, b, out=out)
        measured.append(flops / clock.stop() / 1e9)
    return measured


def count_flops(step: TrainingStep) -> tuple[int, dict[str, int]]:
    """The floating-point operations of one training step, in total and by aten op."""
    counter = FlopCounterMode(display=False)
    with counter:
        step()
    by_op = {str(op): int(n) for op, n in counter.get_flop_counts()["Global"].items()}
    return int(counter.get_total_flops()), by_op


def parse_arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python benchmarks/matmul_efficiency.py", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--grids", type=int, nargs="+", default=[7, 14], help="grid sides (default 7 14)")
    parser.add_argument("--attention", nargs="+", default=["soft", "hard"], choices=("soft", "hard"))
    parser.add_argument("--batch-size", type=int, default=32, help="captions per step (default 32)")
    parser.add_argument("--words", type=int, default=20, help="decoder steps per caption (default 20)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed training steps first (default 3)")
    parser.add_argument("--steps", type=int, default=5, help="training steps per timing (default 5)")
    parser.add_argument("--repeats", type=int, default=5, help="timings of the training step (default 5)")
    parser.add_argument("--mm-repeats", type=int, default=10, help="timed products, before and after (default 10)")
    parser.add_argument(
        "--precision", default="32-true", choices=PRECISIONS, help="32-true (default) or bf16-mixed (bfloat16 autocast)"
    )
    args = parser.parse_args(argv)
    if min(args.steps, args.repeats, args.mm_repeats, args.batch_size, args.words - 1) < 1 or args.warmup < 0:
        parser.error("--steps, --repeats, --mm-repeats, --batch-size must be at least 1, --words at least 2")
    return args


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_arguments(argv)
    match_threads_to_cpus()
    mm_clock = Clock()
    before = matmul_rates(args.mm_repeats, mm_clock)
    settings = []
    for grid in args.grids:
        for attention in args.attention:
            step = TrainingStep(
                grid=grid, attention=attention, batch_size=args.batch_size, words=args.words, precision=args.precision
            )
            flops, by_op = count_flops(step)  # also the first warm-up step

            def steps() -> None:
                for _ in range(args.steps):
                    step()

            for _ in range(args.warmup):
                step()
            clock = Clock()
            steps_per_s = rates(steps, items=args.steps, warmup=0, repeats=args.repeats, clock=clock)
            settings.append((f"{attention}_{grid}x{grid}", flops, by_op, steps_per_s, clock.cpu_share()))
            del step
    after = matmul_rates(args.mm_repeats, mm_clock)
    matmul = statistics.median(before + after)
    bf16 = args.precision == "bf16-mixed"
    matmul_bf16 = statistics.median(matmul_rates(args.mm_repeats, Clock(), dtype=torch.bfloat16)) if bf16 else None
    results, met = {}, {}
    for name, flops, by_op, steps_per_s, cpu_share in settings:
        achieved = flops * statistics.median(steps_per_s) / 1e9
        results[name] = {
            "flops_per_step": flops,
            "by_op": by_op,
            "steps_per_s": summary(steps_per_s, digits=3),
            "captions_per_s": round(statistics.median(steps_per_s) * args.batch_size, 1),
            "achieved_gflops": round(achieved, 1),
            "efficiency": round(achieved / matmul, 3),
            "cpu_share": cpu_share,
        }
        if bf16:
            results[name]["efficiency_bf16"] = round(achieved / matmul_bf16, 3)
        met[name] = achieved / matmul >= GOAL
    figures = {
        "benchmark": "matmul_efficiency",
        "flop_counter": "torch.utils.flop_counter.FlopCounterMode (matrix products only, forward and backward)",
        "matmul": f"torch.mm float32 {MM_SIZE}x{MM_SIZE}",
        "matmul_gflops": {
            "median": round(matmul, 1),
            "before": summary(before),
            "after": summary(after),
            "cpu_share": mm_clock.cpu_share(),
        },
        "matmul_gflops_bf16": None if matmul_bf16 is None else round(matmul_bf16, 1),
        "precision": args.precision,
        "batch_size": args.batch_size,
        "words": args.words,
        "results": results,
        "goal": {"efficiency": GOAL, "cores": 2},
        "goal_met": met,
        "all_goals_met": all(met.values()),
        "cpu": cpu_info(),
    }
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
