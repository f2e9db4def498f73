"""What the throughput benchmarks share: thread and CPU facts, medians, peak memory, one child per setting.

Not a benchmark itself; `decoder_training.py`, `beam_search.py`, `feature_extraction.py` and
`matmul_efficiency.py` import it (run as `python benchmarks/<name>.py`, this folder is on `sys.path`).
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # the project's packages, when run from a checkout without installing it

from captioning.decoder import ShowAttendTell  # noqa: E402
from core.model.attention import AdditiveScore  # noqa: E402  (after the path above)
from data.vocabulary import Vocabulary  # noqa: E402

# The paper's model sizes, which the decoder benchmarks measure.
FEATURE_DIM = 1280  # EfficientNet-Lite0's annotation vectors
SIZE = 512  # embedding, decoder and attention size
VOCABULARY = 2600
PAPER_SIZES = {"embed": SIZE, "decoder": SIZE, "attention": SIZE, "feature": FEATURE_DIM, "vocabulary": VOCABULARY}
"""The sizes above as the benchmarks print them."""
PATHS = {"fast": True, "readable": False}
"""The decoder's two paths by name, as `--path` takes them: its `fast_path` flag."""


def match_threads_to_cpus() -> None:
    """Use at most one torch thread per CPU this process may run on.

    torch sizes its thread pool from the machine, not from the affinity mask, so under `taskset -c 1` it
    would run two threads on one core and time their contention. OMP_NUM_THREADS, when set, still wins.
    """
    if "OMP_NUM_THREADS" not in os.environ:
        torch.set_num_threads(max(1, min(torch.get_num_threads(), len(os.sched_getaffinity(0)))))


def cpu_info() -> dict:
    """torch's intra-op thread count and the CPUs this process may run on (taskset narrows them)."""
    return {
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "cpus_usable": len(os.sched_getaffinity(0)),
        "cpus_machine": os.cpu_count(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
    }


def summary(values: Sequence[float], digits: int = 1) -> dict:
    """median, min and max of some measurements, rounded, and how many there were."""
    return {
        "median": round(statistics.median(values), digits),
        "min": round(min(values), digits),
        "max": round(max(values), digits),
        "n": len(values),
    }


class Clock:
    """Wall time and this process's CPU time (all threads, user and system) between `start` and `stop`.

    `cpu_share` = CPU seconds / (wall seconds x torch threads): near 1 when every thread had a core to itself
    all along, lower when something else ran on the same cores (or the threads waited on each other), which
    makes a figure suspect.
    """

    def __init__(self) -> None:
        self.wall = self.cpu = 0.0

    def start(self) -> None:
        self._wall, self._cpu = time.perf_counter(), time.process_time()

    def stop(self) -> float:
        """Adds the interval to the totals and returns its wall seconds."""
        wall = time.perf_counter() - self._wall
        self.wall += wall
        self.cpu += time.process_time() - self._cpu
        return wall

    def cpu_share(self) -> float:
        return round(self.cpu / (self.wall * torch.get_num_threads()), 3) if self.wall else float("nan")


def all_met(met: dict[str, bool | None]) -> bool | None:
    """Whether every goal that was judged is met; None when none was (a setting without a goal is None)."""
    judged = [value for value in met.values() if value is not None]
    return all(judged) if judged else None


def rates(
    work: Callable[[], object], *, items: int, warmup: int, repeats: int, clock: Clock | None = None
) -> list[float]:
    """`items / seconds` of `repeats` calls of `work`, after `warmup` untimed calls (timed on `clock` too)."""
    clock = clock or Clock()
    for _ in range(warmup):
        work()
    measured = []
    for _ in range(repeats):
        clock.start()
        work()
        measured.append(items / clock.stop())
    return measured


def peak_rss_mib() -> float:
    """This process's resident-set high-water mark (getrusage's ru_maxrss, KiB on Linux), in MiB.

    It covers everything the process ever held (the interpreter, torch, the model, every step), so a
    benchmark runs each setting in a child process of its own and reads it there.
    """
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def current_rss_mib() -> float:
    """This process's resident set now (VmRSS from /proc/self/status), in MiB; nan where that file is absent."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return float("nan")


def paper_sized_decoder(grid: int, vocabulary: Vocabulary, seed: int = 0, *, fast_path: bool = True) -> ShowAttendTell:
    """An untrained decoder of the paper's sizes over a grid x grid grid, as `CaptioningModule.set_vocabulary`
    builds it with the module's defaults (seeded); `fast_path` False for the readable path."""
    torch.manual_seed(seed)
    return ShowAttendTell(
        vocab_size=len(vocabulary),
        feature_dim=FEATURE_DIM,
        grid_shape=(grid, grid),
        embed_dim=SIZE,
        decoder_dim=SIZE,
        attention_dim=SIZE,
        dropout=0.5,
        score=AdditiveScore,
        state_from_image=True,
        fast_path=fast_path,
    )


def made_up_vocabulary(size: int) -> Vocabulary:
    """A vocabulary of `size` tokens: the four specials and made-up words w0, w1, ..."""
    return Vocabulary([*Vocabulary.SPECIALS, *(f"w{i}" for i in range(size - len(Vocabulary.SPECIALS)))])


def run_child(script: Path, arguments: Sequence[str], timeout_s: float) -> dict:
    """Run `python script arguments...` with this process's environment and CPUs; its last stdout line is JSON."""
    done = subprocess.run(
        [sys.executable, str(script), *arguments],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )
    if done.returncode != 0:
        command = " ".join([script.name, *arguments])
        raise SystemExit(f"error: {command} failed ({done.returncode}):\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])
