"""The VQA CLI end to end, the way a user runs it: the VQA v2, EasyVQA and ShapesWorld configs through fit, then test
and predict from the checkpoint alone, with the official results format (the DAQUAR config's runs:
test_vqa_daquar_cli.py)."""

import functools
import json
import math
import re
from pathlib import Path

import pytest
import torch

from tests.helpers import VQA2_FILES, config_options, make_vqa_layout, metrics_of, run_in_process, run_module
from tests.helpers import VQA_CONFIGS as CONFIGS

SMALL_SHAPES = [
    "--data.dataset.init_args.train_size=24",
    "--data.dataset.init_args.val_size=8",
    "--data.dataset.init_args.test_size=8",
    "--data.dataset.init_args.heldout_size=8",
    "--data.batch_size=16",
    "--data.eval_batch_size=16",
]


def run_cli(*args: str, cwd: Path) -> None:
    """`python -m vqa args...`, in this process (`tests.helpers.run_in_process`)."""
    run_in_process("vqa", *args, cwd=cwd)


@pytest.mark.slow
def test_vqa2_config_runs_on_the_official_layout(tmp_path):
    make_vqa_layout(tmp_path / "vqa2", VQA2_FILES)
    run_cli(
        "fit", "--config", str(CONFIGS / "vqa2_san.yaml"), f"--data.dataset.init_args.root={tmp_path / 'vqa2'}",
        "--trainer.fast_dev_run=true", "--data.num_workers=0", "--data.batch_size=4",
        "--model.encoder.init_args.image_size=224", f"--data.cache_dir={tmp_path / 'cache'}",
        f"--trainer.default_root_dir={tmp_path / 'run'}", cwd=tmp_path,
    )


@pytest.mark.slow
def test_easyvqa_config_fast_dev_run(tmp_path):
    pytest.importorskip("easy_vqa")
    # fine-tuning the top block on images through the whole encoder, so no feature cache of 4000 images is built
    run_cli(
        "fit", *config_options(CONFIGS / "easyvqa_san.yaml"), "--trainer.fast_dev_run=true",
        "--model.encoder.init_args.trainable_blocks=1", "--data.cache_features=false",
        "--data.batch_size=8", "--data.eval_batch_size=8",
        f"--trainer.default_root_dir={tmp_path / 'run'}", cwd=tmp_path,
    )


@pytest.mark.slow
def test_shapes_fit_then_test_and_predict_from_the_checkpoint_alone(tmp_path):
    run_dir, cache = tmp_path / "run", f"--data.cache_dir={tmp_path / 'cache'}"
    run_cli(
        "fit", "--config", str(CONFIGS / "shapes_san.yaml"), *SMALL_SHAPES, "--trainer.max_epochs=1", cache,
        f"--trainer.default_root_dir={run_dir}", f"--trainer.logger.init_args.save_dir={run_dir}", cwd=tmp_path,
    )
    best = next(run_dir.rglob("best.ckpt"))
    state = torch.load(best, weights_only=True, map_location="cpu")
    assert state["hyper_parameters"]["question_vocabulary"][:4] == ["<pad>", "<start>", "<end>", "<unk>"]
    assert "yes" in state["hyper_parameters"]["answers"]

    tested = run_module(  # its printed table is read
        "vqa", "test", "--config", str(CONFIGS / "shapes_san.yaml"), *SMALL_SHAPES, f"--ckpt_path={best}", cache,
        f"--trainer.default_root_dir={tmp_path / 'test'}", f"--trainer.logger.init_args.save_dir={tmp_path / 'test'}",
        cwd=tmp_path,
    )
    for name in ["test/accuracy", "test/accuracy/yes/no", "test/accuracy/number", "test/accuracy/other",
                 "test/attention_correctness/hop1", "test/attention_correctness/hop2"]:
        assert name in tested.stdout, name
    for hop in (1, 2):  # each hop's mean attention entropy, between one cell (0) and uniform (ln 196)
        value = float(re.search(rf"test/attention_entropy/hop{hop}\s*│\s*([\d.]+)", tested.stdout).group(1))
        assert 0 < value <= math.log(196) + 1e-4

    output = tmp_path / "answers.json"
    run_cli(
        "predict", "--config", str(CONFIGS / "shapes_san.yaml"), *SMALL_SHAPES, f"--ckpt_path={best}", cache,
        f"--writer.output={output}", f"--trainer.default_root_dir={tmp_path / 'predict'}", "--trainer.logger=false",
        cwd=tmp_path,
    )
    from data.shapes_vqa import ShapesWorldVqa
    from vqa.module import VqaModule

    model = VqaModule.load(best)
    results = json.loads(output.read_text())
    expected = ShapesWorldVqa(train_size=24, val_size=8, test_size=8, heldout_size=8).questions("test")
    assert sorted(r["question_id"] for r in results) == sorted(q.question_id for q in expected)
    assert all(set(r) == {"question_id", "answer"} and r["answer"] in model.answer_vocabulary for r in results)

    # a checkpoint of the other model is refused by name, both ways
    with pytest.raises(ValueError, match="not a VQA checkpoint"):
        torch.save({"state_dict": {}, "hyper_parameters": {"vocabulary": ["<pad>"]}}, tmp_path / "captioning.ckpt")
        VqaModule.load(tmp_path / "captioning.ckpt")
    from captioning.module import CaptioningModule

    with pytest.raises(ValueError, match="not a captioning checkpoint"):
        CaptioningModule.load(best)


@pytest.mark.slow
def test_cli_tests_a_compact_checkpoint_as_it_tests_the_full_one(tmp_path):
    """`test --ckpt_path` takes a bundled (compact) checkpoint, whose encoder weights come from their package, and
    scores it as it scores the same model's full checkpoint."""
    from core.training.checkpoints import read_checkpoint
    from vqa.bundled import SHAPES_SAN
    from vqa.module import VqaModule

    compact = read_checkpoint(SHAPES_SAN)
    full = {**compact, "state_dict": VqaModule.load(SHAPES_SAN).state_dict()}  # every weight, float32
    del full["encoder_weights"]
    torch.save(full, tmp_path / "full.ckpt")
    scores = {}
    for name, path in (("compact", SHAPES_SAN), ("full", tmp_path / "full.ckpt")):
        run_cli(
            "test", "--config", str(CONFIGS / "shapes_san.yaml"), *SMALL_SHAPES, f"--ckpt_path={path}",
            f"--data.cache_dir={tmp_path / 'cache'}", f"--trainer.default_root_dir={tmp_path / name}",
            f"--trainer.logger.init_args.save_dir={tmp_path / name}", cwd=tmp_path,
        )
        scores[name] = metrics_of(tmp_path / name)
    assert scores["compact"]["test/accuracy"] > 0.5  # the bundled model, not an untrained one
    assert scores["compact"] == pytest.approx(scores["full"], abs=1e-6)


def test_vqa_model_answers_a_typed_question_with_top_answers_and_hop_maps(tmp_path):
    from vqa.module import VqaModule
    from vqa.san import StackedAttention

    model = VqaModule(question_vocabulary=["<pad>", "<start>", "<end>", "<unk>", "what", "colour"],
                      answers=["red", "blue", "green"], question_dim=16, embed_dim=8,
                      san=functools.partial(StackedAttention, attention_dim=8)).eval()
    image = torch.randn(3, 224, 224)
    answered = model.answer(image, "What colour?", top=5)
    assert [a for a, _ in answered.answers] and len(answered.answers) == 3
    probabilities = [p for _, p in answered.answers]
    assert probabilities == sorted(probabilities, reverse=True) and sum(probabilities) == pytest.approx(1.0, abs=1e-5)
    assert answered.weights.shape == (2, model.encoder.num_locations)
    from vqa.questions import QuestionError

    with pytest.raises(QuestionError):
        model.answer(image, "")
