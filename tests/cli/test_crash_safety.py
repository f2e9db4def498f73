"""Nothing is lost on a crash: a training run killed with SIGKILL mid-epoch and resumed from its last checkpoint
ends with exactly the weights of the same run never stopped (with soft attention, and with hard attention, whose
sampled locations and REINFORCE baseline must resume too); a run whose loss or weights turn NaN stops with
a message naming the problem and keeps its last good checkpoint."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import lightning as L
import pytest
import torch

from core.training.checkpoints import read_checkpoint
from core.training.resume import ResumableLoader
from tests.helpers import CAPTIONING_CONFIGS as CONFIGS
from tests.helpers import CSV_LOGGER, REPO, TINY_LOCAL_CNN, config_options

TESTS = Path(__file__).resolve().parent


class StallAfter(L.Callback):
    """Stops making progress after global step `step` (as a hung process would), so the kill from outside
    lands mid-run, after the checkpoints of the steps before it, whatever the machine's speed."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if trainer.global_step >= self.step:
            time.sleep(600)


class NanGradients(L.Callback):
    """Turns every gradient into NaN before the optimiser step of global step `at_step` (counted from 1), as an
    overflow would, so the weights after that step are NaN while the loss that led there was finite."""

    def __init__(self, at_step: int) -> None:
        self.at_step = at_step

    def on_before_optimizer_step(self, trainer, pl_module, optimizer) -> None:
        if trainer.global_step + 1 == self.at_step:
            for parameter in pl_module.parameters():
                if parameter.grad is not None:
                    parameter.grad.fill_(float("nan"))


def model_checkpoint(dirpath: Path, every: int) -> dict:
    """last.ckpt every `every` steps. The config's own ModelCheckpoint (best val BLEU-4) is merged into this one
    by the argument parser, so what it sets and this one must not is set back here."""
    return {
        "class_path": "lightning.pytorch.callbacks.ModelCheckpoint",
        "init_args": {"dirpath": str(dirpath), "every_n_train_steps": every, "save_last": True, "save_top_k": 0,
                      "monitor": None, "mode": "min", "filename": None},
    }


def tiny_fit(run_dir: Path, cache: Path, callbacks: list[dict], *extra: str, logged: bool = True,
             config: str = "shapes_soft.yaml") -> list[str]:
    """`fit` arguments for a tiny ShapesWorld model of `config`, training only (no validation), logging every step
    to a CSV file under `run_dir` (or not at all)."""
    logger = [CSV_LOGGER, f"--trainer.logger.init_args.save_dir={run_dir}"] if logged else ["--trainer.logger=false"]
    return [
        "fit", *config_options(CONFIGS / config),
        "--data.dataset.init_args.train_size=8", "--data.dataset.init_args.val_size=4",
        "--data.dataset.init_args.test_size=4", "--data.dataset.init_args.heldout_size=4",
        "--model.decoder.embed_dim=16", "--model.decoder.decoder_dim=16", "--model.decoder.attention_dim=16",
        "--trainer.limit_val_batches=0", "--trainer.num_sanity_val_steps=0", "--trainer.log_every_n_steps=1",
        "--trainer.enable_progress_bar=false", "--seed_everything=0", "--data.train_references=null",
        "--model.initial_weights=null", *TINY_LOCAL_CNN,
        f"--trainer.callbacks={json.dumps(callbacks)}", f"--data.cache_dir={cache}",
        f"--trainer.default_root_dir={run_dir}", *logger, *extra,
    ]


def fit_process(args: list[str], cwd: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "captioning", *args], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, env={**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(TESTS)])},
    )


def finished(process: subprocess.Popen, timeout: float = 300) -> str:
    """The process's stderr, after checking that it succeeded."""
    stdout, stderr = process.communicate(timeout=timeout)
    assert process.returncode == 0, f"stdout:\n{stdout[-3000:]}\nstderr:\n{stderr[-5000:]}"
    return stderr


def train_logged(metrics_csv: Path, name: str = "train/loss") -> dict[int, float]:
    """step -> the value of `name` (train/loss by default) in one CSV log."""
    with metrics_csv.open() as file:
        return {int(row["step"]): float(row[name]) for row in csv.DictReader(file) if row.get(name)}


@pytest.mark.slow
@pytest.mark.parametrize("config", ["shapes_soft.yaml", "shapes_hard.yaml"], ids=["soft", "hard"])
def test_a_run_killed_mid_epoch_and_resumed_ends_with_the_weights_of_the_run_never_stopped(tmp_path, config):
    """40 (image, caption) pairs in batches of 10: 4 steps an epoch, 3 epochs, last.ckpt every 3 steps (3, 6 and
    9 are mid-epoch), dropout 0.3 and a per-epoch learning-rate decay, so the data order, the random state,
    the optimiser and the scheduler must all resume exactly. Hard attention adds, from the same random state,
    the choice of sampling or reading the expectation for each minibatch and the sampled locations, and the
    REINFORCE baseline, a buffer of the model."""
    cache = tmp_path / "cache"
    common = ["--data.batch_size=10", "--trainer.max_epochs=3", "--trainer.deterministic=true"]

    whole_dir = tmp_path / "whole"
    whole = fit_process(tiny_fit(whole_dir, cache, [model_checkpoint(whole_dir / "ckpt", 3)], *common, config=config),
                        tmp_path)
    finished(whole)
    final = read_checkpoint(whole_dir / "ckpt" / "last.ckpt")
    assert final["global_step"] == 12

    crashed_dir = tmp_path / "crashed"
    last = crashed_dir / "ckpt" / "last.ckpt"
    stall = {"class_path": "test_crash_safety.StallAfter", "init_args": {"step": 5}}
    callbacks = [model_checkpoint(crashed_dir / "ckpt", 3), stall]
    crashed = fit_process(tiny_fit(crashed_dir, cache, callbacks, *common, config=config), tmp_path)
    deadline = time.monotonic() + 240
    while not last.exists() and crashed.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    crashed.send_signal(signal.SIGKILL)
    crashed.communicate(timeout=60)
    assert crashed.returncode == -signal.SIGKILL, "the run ended before it could be killed"
    step = read_checkpoint(last)["global_step"]
    assert step == 3  # in the middle of epoch 0 (4 steps an epoch): the rest of it and its end are redone

    resumed = fit_process(tiny_fit(crashed_dir, cache, [model_checkpoint(crashed_dir / "ckpt", 3)], *common,
                                   "--ckpt_path=last", config=config), tmp_path)
    stderr = finished(resumed)
    assert "not resumable" not in stderr  # Lightning's warning for a loader that cannot resume mid-epoch
    resumed_final = read_checkpoint(last)
    assert resumed_final["global_step"] == 12
    assert resumed_final["state_dict"].keys() == final["state_dict"].keys()
    for name, weight in final["state_dict"].items():  # the hard model's baseline, "attention.baseline", included
        torch.testing.assert_close(resumed_final["state_dict"][name], weight, rtol=0, atol=0, msg=name)
    # the resumed run's own log (the killed one's was never flushed) has the losses of the steps it ran
    whole_log = next(whole_dir.rglob("metrics.csv"))
    resumed_log = max(crashed_dir.rglob("metrics.csv"), key=lambda p: p.stat().st_mtime)
    whole_losses, resumed_losses = train_logged(whole_log), train_logged(resumed_log)
    assert sorted(whole_losses) == list(range(12)) and len(resumed_losses) == 12 - step
    assert resumed_losses == pytest.approx({s: whole_losses[s] for s in resumed_losses}, rel=1e-6, abs=1e-7)
    if config == "shapes_hard.yaml":  # the same minibatches sampled, and the same baseline, step by step
        sampled = train_logged(whole_log, "train/sampled")
        assert any(sampled[s] for s in resumed_losses)  # sampled minibatches after the kill too (seed 0: 4 and 5)
        assert final["state_dict"]["attention.baseline"] < 0  # an average of log-likelihoods, moved from 0
        for name in ["train/sampled", "train/baseline"]:
            whole_values = train_logged(whole_log, name)
            expected = {s: whole_values[s] for s in resumed_losses}
            assert train_logged(resumed_log, name) == pytest.approx(expected, rel=1e-6, abs=1e-7), name


def test_the_training_loader_resumes_in_the_middle_of_its_epoch():
    data = list(range(23))
    loader = ResumableLoader(data, batch_size=5, seed=7)
    loader.order.set_epoch(2)
    epoch = iter(loader)
    seen = [next(epoch).tolist() for _ in range(2)]
    state = loader.state_dict()
    assert state == {"seed": 7, "epoch": 2, "batches": 2}
    rest = [batch.tolist() for batch in epoch]

    fresh = ResumableLoader(data, batch_size=5, seed=0)
    fresh.load_state_dict(state)
    fresh.order.set_epoch(2)  # what Lightning does at the start of the resumed epoch
    assert [batch.tolist() for batch in fresh] == rest and len(fresh) == 5
    assert sorted(sum(seen + rest, [])) == data
    fresh.order.set_epoch(3)  # the next epoch starts at its beginning, in another order
    assert sum(len(batch) for batch in fresh) == len(data)
    again = ResumableLoader(data, batch_size=5, seed=7)
    again.order.set_epoch(2)
    assert [batch.tolist() for batch in again] == seen + rest


# -- NaN and infinity ------------------------------------------------------------------------------------------


def nan_fit(tmp_path: Path, *extra: str, callbacks: list[dict] = ()) -> tuple[list[str], Path]:
    checkpoints = tmp_path / "ckpt"
    args = tiny_fit(tmp_path / "run", tmp_path / "cache", [model_checkpoint(checkpoints, 1), *callbacks],
                    "--trainer.max_steps=6", "--data.batch_size=8", *extra, logged=False)
    return args, checkpoints / "last.ckpt"


def assert_good_checkpoint(path: Path, step: int) -> None:
    kept = read_checkpoint(path)
    assert kept["global_step"] == step
    assert all(bool(torch.isfinite(t).all()) for t in kept["state_dict"].values() if t.is_floating_point())
    from captioning.module import CaptioningModule

    CaptioningModule.load(path)


@pytest.mark.slow
def test_a_loss_that_turns_nan_stops_the_run_by_name_and_keeps_the_last_checkpoint(tmp_path):
    """A learning rate of 1e30: the first step's weights are finite but huge, the second step's loss is not."""
    from captioning.cli import main

    args, last = nan_fit(tmp_path, "--model.learning_rate=1e30")
    with pytest.raises(FloatingPointError, match=r"train loss became (nan|inf|-inf); stopping"):
        main(args)
    assert_good_checkpoint(last, step=1)


@pytest.mark.slow
def test_weights_that_turn_nan_are_not_saved_and_the_run_stops(tmp_path):
    """Gradients that overflow at step 4 make NaN weights behind a finite loss: the checkpoint of step 4 is
    refused, so last.ckpt still holds step 3."""
    from captioning.cli import main

    overflow = {"class_path": f"{__name__}.NanGradients", "init_args": {"at_step": 4}}  # this module, in this process
    args, last = nan_fit(tmp_path, callbacks=[overflow])
    with pytest.raises(FloatingPointError, match=r"holds NaN or infinite values; .*last\.ckpt was not written"):
        main(args)
    assert_good_checkpoint(last, step=3)
    assert [p.name for p in last.parent.iterdir()] == ["last.ckpt"]
