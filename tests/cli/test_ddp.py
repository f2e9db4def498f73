"""Lightning DDP on two CPU processes through both CLIs: `fit` runs (validation included), `test` on two
processes reports the metrics one process reports for the same checkpoint and data, and `predict` writes one
complete results file; and `core.gathering`, which makes that so, on two plain gloo processes.

The evaluated splits have an odd number of samples, so Lightning's DistributedSampler repeats one to pad the
second process's shard: the metrics match only when every process's records are gathered and the repeat is
counted once. The checkpoints are the bundled trained models (a model a few steps old captions every image
alike, which would hide a wrong gathering).
"""

import importlib
import json
import sys
from datetime import timedelta
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from core.gathering import computed_on_rank_zero, gather_by_key
from tests.helpers import REPO, metrics_of, run_module

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
    """One of two gloo processes: what `core.gathering` gives each of them."""
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


def test_captioning_fit_and_test_on_two_processes(tmp_path, monkeypatch):
    config = ["--config", str(REPO / "configs" / "captioning" / "shapes_soft.yaml")]
    data = [*shapes("data.shapes.ShapesWorld", test_size=7), *QUIET, f"--data.cache_dir={tmp_path / 'cache'}"]

    fit_dir = tmp_path / "fit"
    run_module(
        "captioning", "fit", *config, *data, *DDP, *logged_to(fit_dir), "--trainer.max_epochs=1",
        "--trainer.limit_train_batches=2", "--trainer.num_sanity_val_steps=0",
        "--model.embed_dim=8", "--model.decoder_dim=16", "--model.attention_dim=8", cwd=tmp_path,
    )
    assert {p.name for p in fit_dir.rglob("*.ckpt")} >= {"best.ckpt", "last.ckpt"}  # monitored val/BLEU-4
    assert {"val/BLEU-4", "val/CIDEr", "val/attention_correctness"} <= set(metrics_of(fit_dir))

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
        "--model.embed_dim=8", "--model.question_dim=16", "--model.attention_dim=8", "--model.classifier_hidden=16",
        cwd=tmp_path,
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
