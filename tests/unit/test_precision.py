"""The precision chosen for the machine (`core.training.precision`) and how the CLI applies it (`core.training.cli`)."""

import logging
import sys

import pytest
import torch

from captioning.cli import CaptioningCLI
from captioning.datamodule import CaptionDataModule
from captioning.module import CaptioningModule
from core.training import precision
from core.training.cli import CHOSEN_PRECISION
from core.training.precision import BF16, FP32, PROBE_SHAPE, MatmulTimings, choose_precision, probe_matmul
from tests.helpers import CAPTIONING_CONFIGS

FASTER_BF16 = MatmulTimings(float32=0.010, bfloat16=0.005)  # a CPU with AMX: bfloat16 twice as fast
SLOWER_BF16 = MatmulTimings(float32=0.009, bfloat16=0.019)  # AVX-512 BF16 without AMX: about half as fast


def test_a_cpu_with_a_faster_bfloat16_product_trains_in_bfloat16() -> None:
    assert choose_precision(cuda=False, cpu=FASTER_BF16).precision == BF16


def test_a_cpu_with_a_slower_bfloat16_product_trains_in_float32() -> None:
    assert choose_precision(cuda=False, cpu=SLOWER_BF16).precision == FP32


def test_a_bfloat16_product_barely_faster_keeps_float32() -> None:
    close = MatmulTimings(float32=0.0100, bfloat16=0.0095)  # 1.05x: within timing noise
    assert choose_precision(cuda=False, cpu=close).precision == FP32


def test_a_gpu_trains_in_bfloat16_when_it_supports_it() -> None:
    assert choose_precision(cuda=True, cuda_bf16=True).precision == BF16
    assert choose_precision(cuda=True, cuda_bf16=False).precision == FP32


def test_the_reason_gives_the_probes_figures() -> None:
    reason = choose_precision(cuda=False, cpu=SLOWER_BF16).reason
    assert "0.47x" in reason and "GFLOP/s" in reason


def test_the_probe_returns_positive_timings() -> None:
    timings = probe_matmul()
    assert timings.float32 > 0 and timings.bfloat16 > 0


class FakeProducts:
    """torch.mm on a clock of its own: a product of `rows` rows takes seconds[dtype] x rows / PROBE_SHAPE's rows."""

    def __init__(self, seconds: dict[torch.dtype, float]) -> None:
        self.seconds = seconds
        self.now = 0.0
        self.full_products: dict[torch.dtype, int] = dict.fromkeys(seconds, 0)

    def mm(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        self.now += self.seconds[a.dtype] * a.shape[0] / PROBE_SHAPE[0]
        self.full_products[a.dtype] += a.shape[0] == PROBE_SHAPE[0]
        return a[:, :1]

    def clock(self) -> float:
        return self.now


@pytest.mark.parametrize(
    ("bfloat16_seconds", "bfloat16_products"),
    [(2.0, 1), (0.02, 3), (0.05, 3)],
    ids=["emulated: timed once", "faster: timed every time", "slower within 2x: timed every time"],
)
def test_the_probe_stops_timing_a_dtype_that_cannot_win(monkeypatch, bfloat16_seconds, bfloat16_products) -> None:
    """On a CPU that emulates bfloat16 each of its products takes seconds: one is enough to rule it out."""
    fake = FakeProducts({torch.float32: 0.03, torch.bfloat16: bfloat16_seconds})
    monkeypatch.setattr(torch, "mm", fake.mm)
    monkeypatch.setattr(precision.time, "perf_counter", fake.clock)
    timings = probe_matmul(repeats=3)
    assert fake.full_products == {torch.float32: 3, torch.bfloat16: bfloat16_products}
    assert timings.float32 == pytest.approx(0.03) and timings.bfloat16 == pytest.approx(bfloat16_seconds)


# -- through the CLI: a null trainer.precision is chosen, a given one is kept ------------------------------------


def built_trainer(monkeypatch, timings: MatmulTimings, *options: str):
    """The Trainer the captioning CLI builds from shapes_soft.yaml and `options`, with the CPU probe's figures
    replaced by `timings` (nothing runs: `run=False`)."""
    monkeypatch.setattr(precision, "cpu_timings", lambda: timings)
    monkeypatch.delenv(CHOSEN_PRECISION, raising=False)
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    args = ["--config", str(CAPTIONING_CONFIGS / "shapes_soft.yaml"), "--trainer.accelerator=cpu",
            "--trainer.logger=false", "--choose_precision=true", *options]
    monkeypatch.setattr(sys, "argv", ["captioning"])  # LightningCLI warns when given both args and pytest's argv
    return CaptioningCLI(CaptioningModule, CaptionDataModule, args=args, run=False).trainer


@pytest.mark.parametrize(("timings", "expected"), [(FASTER_BF16, BF16), (SLOWER_BF16, FP32)])
def test_a_null_precision_is_chosen_by_the_probe_and_logged_once(monkeypatch, caplog, timings, expected) -> None:
    with caplog.at_level(logging.INFO, logger="core.training.cli"):
        trainer = built_trainer(monkeypatch, timings)
    assert trainer.precision == expected
    said = [record.getMessage() for record in caplog.records if record.getMessage().startswith("precision:")]
    assert len(said) == 1 and expected in said[0] and "GFLOP/s" in said[0]


@pytest.mark.parametrize(("timings", "given"), [(FASTER_BF16, FP32), (SLOWER_BF16, BF16)])
def test_a_given_precision_is_never_overridden(monkeypatch, caplog, timings, given) -> None:
    with caplog.at_level(logging.INFO, logger="core.training.cli"):
        trainer = built_trainer(monkeypatch, timings, f"--trainer.precision={given}")
    assert trainer.precision == given
    assert not [record for record in caplog.records if record.getMessage().startswith("precision:")]


def test_without_choose_precision_a_null_precision_stays_float32(monkeypatch, caplog) -> None:
    """A config that does not ask (ShapesWorld's, the tests') trains in float32 whatever the probe would say."""
    with caplog.at_level(logging.INFO, logger="core.training.cli"):
        trainer = built_trainer(monkeypatch, FASTER_BF16, "--choose_precision=false")
    assert trainer.precision == FP32
    assert not [record for record in caplog.records if record.getMessage().startswith("precision:")]
