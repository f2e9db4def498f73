"""The training precision that fits the machine: bfloat16 autocast where it is faster, float32 elsewhere.

bfloat16 autocast is a speed trick, and only on hardware that multiplies bfloat16 faster than float32: a GPU
that supports it (`torch.cuda.is_bf16_supported()`), or a CPU with fast bfloat16 units (AMX, some AVX-512 BF16
parts). On a CPU without them the bfloat16 product is emulated and slower — on one 2-core AVX-512 BF16 machine
without AMX the product ran at 107 GFLOP/s against 236 for float32, and decoder training in `bf16-mixed` at 0.8x
its float32 speed — so a CPU is asked: `probe_matmul` times a few matrix products of the decoder's size in both
dtypes (about 0.1 s) and `choose_precision` takes bfloat16 only when it was clearly faster.

The CLI (`core.training.cli`) applies this when `trainer.precision` is left null (the configs' default): the choice and
the probe's figures are logged in one line, and an explicit `--trainer.precision` is always used as given.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import lru_cache

import torch

#: The probe's product: a batch of 32 grids of 7 x 7 = 49 annotation vectors (1568 rows) of EfficientNet-Lite0's
#: 1280 channels through a 512-wide projection, the attention's largest matrix product in captioning training.
PROBE_SHAPE = (32 * 49, 1280, 512)

#: How much faster the bfloat16 product must be for bfloat16 to be chosen: a margin against timing noise, so a
#: machine where the two are close keeps float32 (the precision every result of the project was computed in).
MIN_SPEEDUP = 1.1

BF16 = "bf16-mixed"
FP32 = "32-true"


@dataclass(frozen=True)
class MatmulTimings:
    """Seconds per matrix product of `PROBE_SHAPE` in each dtype (the fastest of the repeats)."""

    float32: float
    bfloat16: float

    @property
    def speedup(self) -> float:
        """How many times faster the bfloat16 product is (below 1: slower)."""
        return self.float32 / self.bfloat16

    def gflops(self, seconds: float) -> float:
        rows, inner, columns = PROBE_SHAPE
        return 2 * rows * inner * columns / seconds / 1e9

    def __str__(self) -> str:
        return f"bfloat16 {self.gflops(self.bfloat16):.0f} vs float32 {self.gflops(self.float32):.0f} GFLOP/s"


@dataclass(frozen=True)
class PrecisionChoice:
    """The precision chosen (a Lightning `Trainer(precision=...)` value) and why, in words."""

    precision: str
    reason: str


def probe_matmul(*, repeats: int = 3) -> MatmulTimings:
    """Time products of `PROBE_SHAPE` on the CPU in float32 and bfloat16, alternating so that load from other
    processes falls on both; first one untimed product of a grid's 49 rows in each dtype (it allocates and picks
    the kernel). A dtype whose product already took more than twice the other's is not timed again: it cannot be
    chosen, and where the CPU emulates bfloat16 (1 GFLOP/s on one machine) each of its products takes seconds.
    Takes about 0.1 s on 2 cores where the two are close."""
    rows, inner, columns = PROBE_SHAPE
    generator = torch.Generator().manual_seed(0)
    operands = {}
    for dtype in (torch.float32, torch.bfloat16):
        a = torch.randn(rows, inner, generator=generator).to(dtype)
        b = torch.randn(inner, columns, generator=generator).to(dtype)
        torch.mm(a[:49], b)  # warm-up
        operands[dtype] = (a, b)
    fastest = dict.fromkeys(operands, float("inf"))
    for _ in range(repeats):
        for dtype, (a, b) in operands.items():
            others = min(seconds for other, seconds in fastest.items() if other != dtype)
            if fastest[dtype] < float("inf") and fastest[dtype] > 2 * others:  # timed, and cannot be chosen
                continue
            started = time.perf_counter()
            torch.mm(a, b)
            fastest[dtype] = min(fastest[dtype], time.perf_counter() - started)
    return MatmulTimings(float32=fastest[torch.float32], bfloat16=fastest[torch.bfloat16])


@lru_cache(maxsize=1)
def cpu_timings() -> MatmulTimings:
    """`probe_matmul` once per process: the CLI may build several trainers, the machine stays the same."""
    return probe_matmul()


def uses_cuda(accelerator: object) -> bool:
    """Whether a Trainer given `accelerator` ("auto", "gpu", "cuda", "cpu", an Accelerator, ...) trains on CUDA."""
    name = accelerator if isinstance(accelerator, str) else type(accelerator).__name__.lower()
    if name in ("gpu", "cuda") or name.startswith("cuda"):
        return True
    return name == "auto" and torch.cuda.is_available()


def choose_precision(
    *,
    cuda: bool,
    cuda_bf16: bool = False,
    cpu: MatmulTimings | None = None,
    accelerator: str = "cpu",
) -> PrecisionChoice:
    """bfloat16 autocast on a CUDA device that supports it and on a CPU whose bfloat16 product was at least
    `MIN_SPEEDUP` times faster than float32 in `cpu` (the probe's figures); float32 otherwise.

    Args:
        cuda: training runs on a CUDA device.
        cuda_bf16: that device supports bfloat16 (`torch.cuda.is_bf16_supported()`).
        cpu: the probe's timings, when training runs on the CPU.
        accelerator: the accelerator's name, for an accelerator neither CUDA nor CPU (float32 there).
    """
    if cuda:
        if cuda_bf16:
            return PrecisionChoice(BF16, "this GPU supports bfloat16")
        return PrecisionChoice(FP32, "this GPU has no bfloat16 support")
    if cpu is None:
        return PrecisionChoice(FP32, f"no probe for accelerator {accelerator!r}")
    if cpu.speedup >= MIN_SPEEDUP:
        return PrecisionChoice(BF16, f"this CPU's bfloat16 product is {cpu.speedup:.2f}x float32's: {cpu}")
    return PrecisionChoice(FP32, f"this CPU's bfloat16 product is {cpu.speedup:.2f}x float32's: {cpu}")


def precision_for(accelerator: object) -> PrecisionChoice:
    """The precision that fits the machine a Trainer given `accelerator` trains on (probing the CPU if needed)."""
    if uses_cuda(accelerator):
        return choose_precision(cuda=True, cuda_bf16=torch.cuda.is_bf16_supported())
    name = accelerator if isinstance(accelerator, str) else type(accelerator).__name__
    if name in ("auto", "cpu") or name.lower().startswith("cpu"):
        return choose_precision(cuda=False, cpu=cpu_timings())
    return choose_precision(cuda=False, accelerator=str(name))
