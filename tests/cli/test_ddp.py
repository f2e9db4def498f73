"""Lightning DDP on two CPU processes through both CLIs: `fit` runs (validation included), `test` on two
processes reports the metrics one process reports for the same checkpoint and data, and `predict` writes one
complete results file; `core.training.gathering`, which makes that so, on two plain gloo processes; and hard attention's
REINFORCE baseline, which must stay one value on both processes of a `fit`.

The evaluated splits have an odd number of samples, so Lightning's DistributedSampler repeats one to pad the
second process's shard: the metrics match only when every process's records are gathered and the repeat is
counted once. The checkpoints are the bundled trained models (a model a few steps old captions every image
alike, which would hide a wrong gathering).
"""

import importlib
import json
import os
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import lightning as L
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from core.training.checkpoints import read_checkpoint
from core.training.gathering import computed_on_rank_zero, gather_by_key
from tests.helpers import REPO, TINY_LOCAL_CNN, config_options, metrics_of, run_module

pytestmark = pytest.mark.slow  # every test here trains or serves in subprocesses

DDP = ["--trainer.strategy=ddp", "--trainer.devices=2", "--trainer.accelerator=cpu"]
QUIET = ["--trainer.enable_progress_bar=false", "--trainer.enable_model_summary=false"]


def shapes(dataset: str, *, test_size: int) -> list[str]:
    """ShapesWorld(-VQA) with tiny splits; val and test odd, so a DDP shard is padded with a repeat."""
    return [
        f"--data.dataset={dataset}",
        "--data.dataset.init_args.train_size=16",
        "--data.dataset.init_args.val_size=5",
        f"--data.dataset.init_args.test_size={test_size}",
        "--data.dataset.init_args.heldout_size=1",
        "--data.batch_size=8",
        "--data.eval_batch_size=4",
    ]


def full_checkpoint(bundled: Path, model_class: type, target: Path) -> Path:
    """A bundled compact checkpoint with its encoder's weights put back: a plain Lightning checkpoint that
    `--ckpt_path` restores."""
    checkpoint = torch.load(bundled, weights_only=True, map_location="cpu")
    checkpoint.pop("encoder_weights", None)
    checkpoint["state_dict"] = model_class.load(bundled).state_dict()
    torch.save(checkpoint, target)
    return target


def logged_to(run_dir: Path) -> list[str]:
    """CSV metrics under run_dir (the configs' logger; given in full for runs without a config)."""
    return [
        f"--trainer.default_root_dir={run_dir}",
        "--trainer.logger=lightning.pytorch.loggers.CSVLogger",
        f"--trainer.logger.init_args.save_dir={run_dir}",
    ]


def metrics_on_one_and_two(module: str, data: list[str], checkpoint: Path, tmp_path: Path, monkeypatch) -> tuple[dict, dict]:
    """`test` of the checkpoint (which alone defines the model) on one process, then on two: the metrics each
    logged. The one-process run is the CLI's `main` in this process, which spares an interpreter start."""
    one, two = tmp_path / "test_one", tmp_path / "test_two"
    monkeypatch.setattr(sys, "argv", [module])  # the CLI reads `args`, not pytest's own arguments
    importlib.import_module(f"{module}.cli").main(["test", *data, f"--ckpt_path={checkpoint}", *logged_to(one)])
    run_module(module, "test", *data, f"--ckpt_path={checkpoint}", *DDP, *logged_to(two), cwd=tmp_path)
    return metrics_of(one), metrics_of(two)


def gather_and_score_on(rank: int, init_file: str) -> None:
    """One of two gloo processes: what `core.training.gathering` gives each of them."""
    # a process left waiting for the other fails after a minute instead of hanging the suite
    dist.init_process_group(
        "gloo", init_method=f"file://{init_file}", rank=rank, world_size=2, timeout=timedelta(minutes=1)
    )
    try:
        # 5 samples on 2 processes: rank 1's shard is padded with sample 0 again (its value differs here only to
        # show which copy is kept)
        own = {0: "a", 2: "c", 4: "e"} if rank == 0 else {1: "b", 3: "d", 0: "a, the repeat"}
        assert gather_by_key(own) == {0: "a", 1: "b", 2: "c", 3: "d", 4: "e"}
        assert computed_on_rank_zero(lambda: {"scored on": dist.get_rank()}) == {"scored on": 0}

        def fail() -> dict:
            raise ValueError("no references for image 7")

        # raised on every process (not only on rank 0, leaving rank 1 waiting for the scores)
        with pytest.raises((ValueError, RuntimeError), match="no references for image 7"):
            computed_on_rank_zero(fail)
    finally:
        dist.destroy_process_group()


def test_records_are_gathered_once_per_sample_and_scored_once_for_all_processes(tmp_path):
    mp.spawn(gather_and_score_on, args=(str(tmp_path / "rendezvous"),), nprocs=2)


class RecordBaseline(L.Callback):
    """Writes, after every training step, the hard-attention baseline, whether the minibatch was sampled and its
    padded caption length, to `path` with the process's rank appended: one JSON line a step."""

    def __init__(self, path: str) -> None:
        self.path = path

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        record = {
            "step": trainer.global_step,
            "baseline": pl_module.attention.baseline.item(),
            "sampled": trainer.callback_metrics["train/sampled"].item(),
            "length": batch["captions"].shape[1],
        }
        with open(f"{self.path}.rank{trainer.global_rank}", "a") as file:
            file.write(json.dumps(record) + "\n")


def fit_watched(args: list[str], cwd: Path, records: Path, stall: float = 15) -> list[list[dict]]:
    """`python -m captioning fit args` with a RecordBaseline writing to `records`: what each process recorded.
    The run and its second process are killed, and the test fails, when the records stop growing for `stall`
    seconds mid-run (a process waiting for the other in a collective hangs until gloo's 30-minute timeout)."""
    with (cwd / "fit.log").open("w+") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "captioning", "fit", *args], cwd=cwd, stdout=log, stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONPATH": str(REPO)}, start_new_session=True,  # its own group, to kill both
        )
        size, changed = 0, time.monotonic()
        while process.poll() is None:
            now_size = sum(path.stat().st_size for path in cwd.glob(f"{records.name}.rank*"))
            if now_size != size:
                size, changed = now_size, time.monotonic()
            if time.monotonic() - changed > (stall if size else 300):  # the first step comes after the start-up
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
                steps = [len(path.read_text().splitlines()) for path in sorted(cwd.glob(f"{records.name}.rank*"))]
                pytest.fail(f"training hung after {steps} steps on the two processes")
            time.sleep(0.2)
        log.seek(0)
        assert process.returncode == 0, log.read()[-5000:]
    return [[json.loads(line) for line in Path(f"{records}.rank{rank}").read_text().splitlines()] for rank in (0, 1)]


def test_hard_attention_keeps_one_baseline_on_two_processes_and_validates(tmp_path):
    """REINFORCE's moving-average baseline is averaged over the processes after every sampled minibatch: both
    processes hold the same value after each step (bit for bit), having made the same choice of sampling or
    reading the expectation, and the run completes, also when the two processes' minibatches have captions of
    different lengths (which a real dataset's minibatches have: in minibatches of 2 the processes' generators
    drift apart). The run's validation on two processes scores the captions and saves the best checkpoint."""
    records = tmp_path / "baseline"
    record = {"class_path": "tests.cli.test_ddp.RecordBaseline", "init_args": {"path": str(records)}}
    args = [
        *config_options(REPO / "configs" / "captioning" / "shapes_hard.yaml"),
        *shapes("data.shapes.ShapesWorld", test_size=1), "--data.batch_size=2", *QUIET, *DDP,
        *logged_to(tmp_path / "fit"), f"--data.cache_dir={tmp_path / 'cache'}", "--trainer.max_epochs=1",
        "--trainer.limit_train_batches=5", "--trainer.num_sanity_val_steps=0",
        "--model.decoder.embed_dim=8", "--model.decoder.decoder_dim=16", "--model.decoder.attention_dim=8",
        "--seed_everything=0",
        "--model.initial_weights=null", "--data.train_references=null", *TINY_LOCAL_CNN,  # a tiny model, every reference
        f"--trainer.callbacks+={json.dumps(record)}",
    ]
    ranks = fit_watched(args, tmp_path, records, stall=60)  # the validation after the last step adds no record
    assert [r["step"] for r in ranks[0]] == [1, 2, 3, 4, 5]
    lengths = [[r.pop("length") for r in steps] for steps in ranks]
    assert lengths[0] != lengths[1]  # in minibatches of 2, the processes' captions are padded to other lengths
    assert ranks[1] == ranks[0]  # the same choice of reading and the same baseline on both at every step
    sampled = [bool(r["sampled"]) for r in ranks[0]]
    assert any(sampled) and not all(sampled)  # seed 0: both kinds of minibatch
    baselines = [r["baseline"] for r in ranks[0]]
    assert all(b < 0 for b in baselines[sampled.index(True):])  # an average of log-likelihoods, moved from 0
    for previous, now, was_sampled in zip([0.0, *baselines], baselines, sampled):
        assert (now != previous) == was_sampled  # only a sampled minibatch moves it
    # the checkpoint saved at the end holds that baseline
    saved = read_checkpoint(next((tmp_path / "fit").rglob("last.ckpt")))["state_dict"]["attention.baseline"]
    assert saved.item() == baselines[-1]
    assert {p.name for p in (tmp_path / "fit").rglob("*.ckpt")} >= {"best.ckpt", "last.ckpt"}  # monitored val/BLEU-4
    assert {"val/BLEU-4", "val/CIDEr", "val/attention_correctness"} <= set(metrics_of(tmp_path / "fit"))


def test_captioning_test_on_two_processes_scores_as_one(tmp_path, monkeypatch):
    """`test` of the bundled soft model on two processes reports the scores one process reports. (A captioning `fit` on
    two processes, validation included, is the hard-attention test's run.)"""
    data = [*shapes("data.shapes.ShapesWorld", test_size=7), *QUIET, f"--data.cache_dir={tmp_path / 'cache'}"]

    from captioning.bundled import SHAPES_SOFT
    from captioning.module import CaptioningModule

    checkpoint = full_checkpoint(SHAPES_SOFT, CaptioningModule, tmp_path / "soft.ckpt")
    one, two = metrics_on_one_and_two("captioning", data, checkpoint, tmp_path, monkeypatch)
    assert one["test/BLEU-4"] > 0.3 and one["test/attention_correctness"] > 0.1  # a model that tells images apart
    for name in ["BLEU-1", "BLEU-4", "METEOR", "ROUGE-L", "CIDEr", "attention_correctness"]:
        assert two[f"test/{name}"] == pytest.approx(one[f"test/{name}"], rel=1e-5, abs=1e-6), name


def test_vqa_fit_test_and_predict_on_two_processes(tmp_path, monkeypatch):
    config = ["--config", str(REPO / "configs" / "vqa" / "shapes_san.yaml")]
    # 3 test images x 5 questions: 15 questions
    data = [*shapes("data.shapes_vqa.ShapesWorldVqa", test_size=3), *QUIET, f"--data.cache_dir={tmp_path / 'cache'}"]

    fit_dir = tmp_path / "fit"
    run_module(
        "vqa", "fit", *config, *data, *DDP, *logged_to(fit_dir), "--trainer.max_epochs=1",
        "--trainer.limit_train_batches=2", "--trainer.num_sanity_val_steps=0",
        "--model.embed_dim=8", "--model.question_dim=16", "--model.san.attention_dim=8",
        "--model.san.classifier_hidden=16", cwd=tmp_path,
    )
    assert {p.name for p in fit_dir.rglob("*.ckpt")} >= {"best.ckpt", "last.ckpt"}  # monitored val/accuracy
    assert {"val/accuracy", "val/attention_correctness/hop1"} <= set(metrics_of(fit_dir))

    from data.shapes_vqa import ShapesWorldVqa
    from vqa.bundled import SHAPES_SAN
    from vqa.module import VqaModule

    checkpoint = full_checkpoint(SHAPES_SAN, VqaModule, tmp_path / "san.ckpt")
    one, two = metrics_on_one_and_two("vqa", data, checkpoint, tmp_path, monkeypatch)
    assert 0.3 < one["test/accuracy"] < 1.0  # right and wrong answers: a lost or repeated question shows
    # overall, per answer type, per question type, per hop
    evaluated = {name for name in one if name.startswith(("test/accuracy", "test/attention_correctness"))}
    assert evaluated == {name for name in two if name.startswith(("test/accuracy", "test/attention_correctness"))}
    for name in sorted(evaluated):
        assert two[name] == pytest.approx(one[name], rel=1e-5, abs=1e-6), name

    # predict on two processes: one file with every question once, in the split's order
    output = tmp_path / "answers.json"
    run_module(
        "vqa", "predict", *data, f"--ckpt_path={checkpoint}", *DDP, f"--writer.output={output}",
        f"--trainer.default_root_dir={tmp_path / 'predict'}", "--trainer.logger=false", cwd=tmp_path,
    )
    questions = ShapesWorldVqa(train_size=16, val_size=5, test_size=3, heldout_size=1).questions("test")
    assert len(questions) % 2 == 1
    results = json.loads(output.read_text())
    assert [r["question_id"] for r in results] == [q.question_id for q in questions]


def test_a_ddp_run_leaves_its_process_group_closed(tmp_path, monkeypatch):
    """Lightning closes only NCCL process groups; a gloo one left open is torn down with the interpreter, where
    its threads can fail a finished run ("terminate called without an active exception"). The CLI closes it."""
    from vqa.bundled import SHAPES_SAN
    from vqa.cli import main
    from vqa.module import VqaModule

    checkpoint = full_checkpoint(SHAPES_SAN, VqaModule, tmp_path / "san.ckpt")
    data = [*shapes("data.shapes_vqa.ShapesWorldVqa", test_size=3), *QUIET, f"--data.cache_dir={tmp_path / 'cache'}"]
    monkeypatch.setattr(sys, "argv", ["vqa"])
    one_process_ddp = ["--trainer.strategy=ddp", "--trainer.devices=1", "--trainer.accelerator=cpu"]
    main(["test", *data, f"--ckpt_path={checkpoint}", *one_process_ddp, *logged_to(tmp_path / "test")])
    assert metrics_of(tmp_path / "test")["test/accuracy"] > 0.3  # the run did happen, in a process group
    assert not dist.is_initialized()
