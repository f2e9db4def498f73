"""Decoder training throughput: captions per second for one full optimiser step, and its peak memory.

    python benchmarks/decoder_training.py [--grids 7 14] [--attention soft hard] [--path fast readable]
                                          [--steps 5] [--repeats 5] [--precision 32-true|bf16-mixed]
    taskset -c 0,1 python benchmarks/decoder_training.py        # the goal's setting: 2 cores

The goal, on 2 cores: at least 160 captions/s with a 7x7 grid and 90 captions/s with a 14x14 grid (batch 32,
20 words, embedding / decoder / attention size 512, feature size 1280, vocabulary 2600).

One step is what `CaptioningModule.training_step` does on a batch of cached features, without Lightning
around it: the cached float16 grids made float32 (`Encoder.annotations`), the teacher-forced unroll of
`ShowAttendTell` with the attention mode's training read, the mode's loss (`SoftAttention`: cross-entropy
plus the doubly stochastic penalty; `HardAttention`: the REINFORCE objective with its baseline and entropy
term), the finiteness check, the baseline update (`observe`), backward, and the (fused) Adam step of
`adam_with_epoch_decay` with the gradients cleared (`zero_grad`, as Lightning does). The model is in train mode
(dropout on). Hard attention is measured with `expectation_probability=0`, so every step samples its
locations and pays for the REINFORCE term (the paper's 0.5 would make half the steps soft ones). Float32
by default (`--precision 32-true`); `--precision bf16-mixed` runs forward and loss under bfloat16 autocast, as
Lightning's `Trainer(precision="bf16-mixed")` (the Flickr8k configs' setting) does on the CPU. `--path` picks
the decoder's paths to measure: `fast` (`fast_path=True`, the default model) and `readable` (`fast_path=False`,
the plain code of the model files); both by default, each path's figures printed under its name. The goals are
for the fast path; the readable one's figures show what the fast path (`core.model.fast_path`, `captioning.fast_unroll`) buys.

The captions are random words of the vocabulary, none padding: `<start>` + 19 words + `<end>`, 20 decoder
steps with 20 real targets each. The grids are uniform random in [0, 6), the range of EfficientNet-Lite's
ReLU6 features.

Each setting (grid x attention) runs in a child process of its own, so that its memory figure is its own:
`peak_rss_mib` is the child's resident-set high-water mark (`resource.getrusage(RUSAGE_SELF).ru_maxrss`,
which counts the interpreter and torch too), `setup_rss_mib` its resident set just before the first step
(model, optimiser and batch built, nothing run), so `peak - setup` is what training steps add. Throughput is
the median over `--repeats` timings of `--steps` steps each, after `--warmup` untimed steps; `cpu_share`
is the child's CPU seconds / (wall seconds x threads) over those timings (see `harness.Clock`): well under 1
means something else was running on the same cores.

Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

import torch
from harness import (
    FEATURE_DIM,
    PAPER_SIZES,
    PATHS,
    VOCABULARY,
    Clock,
    all_met,
    cpu_info,
    current_rss_mib,
    made_up_vocabulary,
    match_threads_to_cpus,
    paper_sized_decoder,
    peak_rss_mib,
    rates,
    run_child,
    summary,
)
from torch import Tensor, nn

from captioning.objectives import AttentionObjective, HardAttention, SoftAttention
from core.training.optimization import adam_with_epoch_decay
from data.vocabulary import Vocabulary

GOALS = {7: 160.0, 14: 90.0}  # captions/s on 2 cores, by grid side
LEARNING_RATE = 4e-4  # CaptioningModule's default
PRECISIONS = ("32-true", "bf16-mixed")  # Lightning's names
CHILD_TIMEOUT_S = 1800


def make_attention(name: str) -> AttentionObjective:
    """The attention mode by name; hard attention always samples (see the module docstring)."""
    if name == "soft":
        return SoftAttention()
    if name == "hard":
        return HardAttention(expectation_probability=0.0)
    raise ValueError(f"unknown attention {name!r}")


class TrainingStep:
    """One optimiser step of the captioning model on a fixed batch of cached grids, as the LightningModule does
    it (`CaptioningModule._teacher_forced_loss`, `training_step`, `configure_optimizers`) minus Lightning.

    Args:
        grid: the grid side (L = grid * grid locations).
        attention: "soft" or "hard".
        batch_size: captions per step.
        words: decoder steps per caption (the caption is `<start>`, words - 1 words, `<end>`).
        vocabulary: words in the vocabulary, the four specials included.
        seed: seeds the model, the batch and the sampled locations.
        fast_path: the decoder's `fast_path` flag.
        precision: "32-true", or "bf16-mixed": forward and loss under `torch.autocast("cpu", torch.bfloat16)`,
            as Lightning's `Trainer(precision="bf16-mixed")` runs a training step on the CPU.
    """

    def __init__(
        self, *, grid: int, attention: str, batch_size: int = 32, words: int = 20, vocabulary: int = VOCABULARY,
        seed: int = 0, precision: str = "32-true", fast_path: bool = True,
    ) -> None:
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
        self.autocast = precision == "bf16-mixed"
        self.vocabulary = made_up_vocabulary(vocabulary)
        v = self.vocabulary
        self.decoder = paper_sized_decoder(grid, v, seed, fast_path=fast_path).train()
        self.attention = make_attention(attention).train()
        frozen_encoder = nn.Module()  # cached grids: the encoder is frozen and has no trainable parameter
        self.optimizer = adam_with_epoch_decay(
            self.decoder.parameters(), frozen_encoder, learning_rate=LEARNING_RATE, encoder_learning_rate=1e-4,
            lr_decay=1.0, fused=True,  # as the modules run it without a float16 loss scaler (`FusedAdamClipping`)
        )["optimizer"]
        self.inputs = (torch.rand(batch_size, grid * grid, FEATURE_DIM) * 6).half()  # (B, L, D) as the cache stores it
        words_ids = torch.randint(len(Vocabulary.SPECIALS), len(v), (batch_size, words - 1))
        start = torch.full((batch_size, 1), v.start_id)
        end = torch.full((batch_size, 1), v.end_id)
        self.captions = torch.cat([start, words_ids, end], 1)  # (B, T+1) <start> w1 .. w19 <end>
        self.batch_size = batch_size

    def loss(self) -> Tensor:
        """Forward and loss, as `_teacher_forced_loss` in training: -> the scalar to minimise."""
        captions = self.captions
        read = self.attention.training_read()
        features = self.inputs.float()  # Encoder.annotations on cached grids
        out = self.decoder(features, captions[:, :-1], read)
        terms = self.attention.loss(out, captions[:, 1:], pad_id=self.vocabulary.pad_id, label_smoothing=0.0)
        if not torch.isfinite(terms.total):
            raise FloatingPointError(f"loss became {terms.total.item()}")
        self.attention.observe(terms, lambda value: value)  # one process: the mean over processes is itself
        return terms.total

    def __call__(self) -> None:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.autocast):
            loss = self.loss()
        loss.backward()
        self.optimizer.step()
        self.optimizer.zero_grad()


def measure(grid: int, attention: str, path: str, args: argparse.Namespace) -> dict:
    """One setting, in this process: throughput summary and memory."""
    step = TrainingStep(
        grid=grid, attention=attention, batch_size=args.batch_size, words=args.words, precision=args.precision,
        fast_path=PATHS[path],
    )
    setup_rss = current_rss_mib()
    for _ in range(args.warmup):
        step()

    def steps() -> None:
        for _ in range(args.steps):
            step()

    clock = Clock()
    measured = rates(steps, items=args.steps * args.batch_size, warmup=0, repeats=args.repeats, clock=clock)
    return {
        "captions_per_s": summary(measured),
        "cpu_share": clock.cpu_share(),
        "setup_rss_mib": setup_rss,
        "peak_rss_mib": peak_rss_mib(),
        "threads": torch.get_num_threads(),
    }


def parse_arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python benchmarks/decoder_training.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--grids", type=int, nargs="+", default=[7, 14], help="grid sides (default 7 14)")
    parser.add_argument("--attention", nargs="+", default=["soft", "hard"], choices=("soft", "hard"))
    parser.add_argument(
        "--path", nargs="+", default=list(PATHS), choices=tuple(PATHS), help="decoder paths (default fast readable)"
    )
    parser.add_argument("--batch-size", type=int, default=32, help="captions per step (default 32)")
    parser.add_argument("--words", type=int, default=20, help="decoder steps per caption (default 20)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps first (default 3)")
    parser.add_argument("--steps", type=int, default=5, help="steps per timing (default 5)")
    parser.add_argument("--repeats", type=int, default=5, help="timings; the median is reported (default 5)")
    parser.add_argument(
        "--precision", default="32-true", choices=PRECISIONS,
        help="32-true (default) or bf16-mixed (autocast to bfloat16, as Lightning's option)",
    )
    parser.add_argument("--one", nargs=3, metavar=("ATTENTION", "GRID", "PATH"), help=argparse.SUPPRESS)  # a child's
    args = parser.parse_args(argv)
    if min(args.steps, args.repeats, args.batch_size, args.words - 1) < 1 or args.warmup < 0:
        parser.error("--steps, --repeats and --batch-size must be at least 1, --words at least 2, --warmup at least 0")
    return args


def child_arguments(args: argparse.Namespace, attention: str, grid: int, path: str) -> list[str]:
    return [
        "--batch-size", str(args.batch_size), "--words", str(args.words), "--warmup", str(args.warmup),
        "--steps", str(args.steps), "--repeats", str(args.repeats), "--precision", args.precision,
        "--one", attention, str(grid), path,
    ]  # fmt: skip


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_arguments(argv)
    match_threads_to_cpus()
    if args.one is not None:
        attention, grid, path = args.one
        print(json.dumps(measure(int(grid), attention, path, args)))
        return
    results: dict[str, dict] = {path: {} for path in args.path}
    met: dict[str, dict] = {path: {} for path in args.path}
    for grid in args.grids:
        for attention in args.attention:
            name = f"{attention}_{grid}x{grid}"
            for path in args.path:
                arguments = child_arguments(args, attention, grid, path)
                results[path][name] = run_child(Path(__file__), arguments, CHILD_TIMEOUT_S)
                goal = GOALS.get(grid)
                met[path][name] = None if goal is None else results[path][name]["captions_per_s"]["median"] >= goal
    figures = {
        "benchmark": "decoder_training",
        "unit": "captions/s (median)",
        "batch_size": args.batch_size,
        "words": args.words,
        "precision": args.precision,
        "sizes": PAPER_SIZES,
        "timing": {"warmup_steps": args.warmup, "steps_per_timing": args.steps, "timings": args.repeats},
        "memory": "peak_rss_mib: resource.getrusage ru_maxrss of a child process running only that setting",
        "results": results,
        "goal": {f"{grid}x{grid}": GOALS[grid] for grid in args.grids if grid in GOALS} | {"cores": 2},
        "goal_met": met,
        "all_goals_met": {path: all_met(by_name) for path, by_name in met.items()},
        "cpu": cpu_info(),
    }
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
