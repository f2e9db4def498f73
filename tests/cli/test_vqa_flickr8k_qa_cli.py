"""Flickr8k-QA as a user makes and uses it: `python -m vqa.caption_questions` on a tiny Karpathy-layout caption file,
then `python -m vqa fit` and `test` of `flickr8k_qa_san.yaml` on what it wrote (the three photo splits, answers
scored by question type and WUPS)."""

from pathlib import Path

import pytest

from tests.helpers import VQA_CONFIGS as CONFIGS
from tests.helpers import karpathy_file, metrics_of, run_in_process
from vqa.caption_questions import main as make_questions


@pytest.mark.slow
def test_the_generated_set_trains_and_tests_with_the_config(tmp_path: Path):
    assert make_questions([str(karpathy_file(tmp_path / "flickr8k")), str(tmp_path / "qa"), "--cap-share", "1"]) == 0
    run_dir = tmp_path / "run"
    common = [
        "--config", str(CONFIGS / "flickr8k_qa_san.yaml"), f"--data.dataset.init_args.root={tmp_path / 'qa'}",
        "--data.num_workers=0", "--data.batch_size=4", f"--data.cache_dir={tmp_path / 'cache'}",
        f"--trainer.default_root_dir={run_dir}", f"--trainer.logger.init_args.save_dir={run_dir}",
    ]  # fmt: skip
    run_in_process("vqa", "fit", *common, "--trainer.max_epochs=1", cwd=tmp_path)
    checkpoint = next(run_dir.rglob("best.ckpt"))
    run_in_process("vqa", "test", *common, f"--ckpt_path={checkpoint}", cwd=tmp_path)
    metrics = metrics_of(run_dir)
    # the test split's two questions are object questions: accuracy per question type, and WUPS beside it
    assert {"test/accuracy/question_type/object", "test/wups@0.9", "test/wups@0.0"} <= set(metrics)
    assert "test/accuracy/question_type/color" not in metrics
    assert {"val/accuracy/question_type/object", "val/accuracy/question_type/location"} <= set(metrics)
    assert 0.0 <= metrics["test/accuracy"] <= 1.0
