"""The captioning CLI end to end, the way a user runs it: fit, then test and predict from the checkpoint alone (each
config's fast_dev_run: test_fast_dev_runs.py)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from PIL import Image

from tests.helpers import CAPTIONING_CONFIGS as CONFIGS
from tests.helpers import CSV_LOGGER, REPO, SMALL_SHAPES, TINY_LOCAL_CNN, config_options, metrics_of, run_cli, run_module

pytestmark = pytest.mark.slow  # every test here trains or serves in subprocesses


def test_shapes_fit_then_test_and_predict_from_the_checkpoint_alone(tmp_path):
    run_dir = tmp_path / "run"
    run_cli(
        "fit", "--config", str(CONFIGS / "shapes_soft.yaml"), *SMALL_SHAPES, *TINY_LOCAL_CNN,
        "--trainer.max_epochs=1", f"--data.cache_dir={tmp_path / 'cache'}",
        f"--trainer.default_root_dir={run_dir}", f"--trainer.logger.init_args.save_dir={run_dir}",
        cwd=tmp_path,
    )
    checkpoints = sorted(run_dir.rglob("*.ckpt"))
    assert {p.name for p in checkpoints} >= {"best.ckpt", "last.ckpt"}, checkpoints
    best = next(p for p in checkpoints if p.name == "best.ckpt")
    # the checkpoint is plain data: it loads without unpickling code, and carries the vocabulary
    state = torch.load(best, weights_only=True, map_location="cpu")
    assert state["hyper_parameters"]["vocabulary"][:4] == ["<pad>", "<start>", "<end>", "<unk>"]
    assert "circle" in state["hyper_parameters"]["vocabulary"]
    assert {"val/BLEU-4", "val/attention_correctness"} <= set(metrics_of(run_dir))

    # the same checkpoint loads in Python and captions an image
    from captioning.module import CaptioningModule
    from data.shapes import ShapesWorld

    model = CaptioningModule.load(best)
    world = ShapesWorld(train_size=1, val_size=1, test_size=2, heldout_size=1)
    image = model.encoder.transform()(world.load(world.samples("test")[0]))
    caption = model.caption(image.unsqueeze(0))[0]
    assert caption and set(caption.split()) <= set(model.vocabulary.tokens)
    with pytest.raises(ValueError, match="not a captioning checkpoint"):
        torch.save({"state_dict": {}}, tmp_path / "other.ckpt")
        CaptioningModule.load(tmp_path / "other.ckpt")

    # test needs only the checkpoint plus where the data is
    tested = run_module(
        "captioning", "test", "--config", str(CONFIGS / "shapes_soft.yaml"), *SMALL_SHAPES, f"--ckpt_path={best}",
        f"--data.cache_dir={tmp_path / 'cache'}", f"--trainer.default_root_dir={tmp_path / 'test'}",
        f"--trainer.logger.init_args.save_dir={tmp_path / 'test'}",
        "--model.decoder.embed_dim=8",  # ignored: from the ckpt
        cwd=tmp_path, as_user=True,  # scored as a user's run is: with the Java tools, whose tokenizer counts its tokens
    )
    for name in ["BLEU-1", "BLEU-4", "METEOR", "ROUGE-L", "CIDEr", "attention_correctness"]:
        assert f"test/{name}" in tested.stdout
    # scored from another run folder, as the README does: no Lightning note about the checkpoint callback's folder,
    # no tokenizer chatter, and no metric for the penalty, whose weight shapes_soft.yaml sets to 0
    output = tested.stdout + tested.stderr
    unwanted = ("dirpath has changed", "PTBTokenizer tokenized", "FLOPs", "test/penalty")
    assert [notice for notice in unwanted if notice in output] == [], output

    # predict over a folder: COCO results format, unreadable files reported and skipped
    images = tmp_path / "photos"
    images.mkdir()
    for n, sample in enumerate(world.samples("test")):
        world.load(sample).save(images / f"COCO_val2014_00000000042{n}.jpg")
    (images / "broken.jpg").write_bytes(b"not an image")
    output = tmp_path / "results.json"
    predicted = run_module(
        "captioning", "predict", f"--ckpt_path={best}", f"--data.predict_path={images}", f"--writer.output={output}",
        f"--trainer.default_root_dir={tmp_path / 'predict'}", "--trainer.logger=false",
        cwd=tmp_path,
    )
    results = json.loads(output.read_text())
    assert sorted(r["image_id"] for r in results) == [420, 421]
    assert all(isinstance(r["caption"], str) and r["caption"] for r in results)
    assert "broken.jpg" in predicted.stdout + predicted.stderr

    # the decoding settings of the command line win over the checkpoint's: greedy here, as in Python
    greedy = tmp_path / "greedy.json"
    run_cli(
        "predict", f"--ckpt_path={best}", f"--data.predict_path={images}", f"--writer.output={greedy}",
        "--beam_size=1", "--length_penalty=0.5", "--no_repeat_ngram_size=1", "--complete_phrases=false",
        f"--trainer.default_root_dir={tmp_path / 'predict'}", "--trainer.logger=false", cwd=tmp_path,
    )
    from data.images import load_image

    model.hparams.update(no_repeat_ngram_size=1, complete_phrases=False)  # no word twice, any last word
    expected = {}
    for n in range(len(world.samples("test"))):
        image = model.encoder.transform()(load_image(images / f"COCO_val2014_00000000042{n}.jpg"))
        expected[420 + n] = model.caption(image.unsqueeze(0), beam_size=1)[0]
    assert {r["image_id"]: r["caption"] for r in json.loads(greedy.read_text())} == expected


def test_a_rectangular_read_runs_from_fit_to_the_exported_overlays(tmp_path):
    """`image_size` as [height, width]: the tiny local CNN reads 64 x 96 px, an 8 x 12 grid (stride 8), through
    training, attention correctness, the checkpoint and `captioning.export`'s caption.json and overlays."""
    run_dir = tmp_path / "run"
    run_cli(
        "fit", "--config", str(CONFIGS / "shapes_soft.yaml"), *SMALL_SHAPES, *TINY_LOCAL_CNN,
        "--model.encoder.init_args.image_size=[64, 96]", "--trainer.max_epochs=1",
        f"--data.cache_dir={tmp_path / 'cache'}",
        f"--trainer.default_root_dir={run_dir}", f"--trainer.logger.init_args.save_dir={run_dir}",
        cwd=tmp_path,
    )
    assert 0.0 <= metrics_of(run_dir)["val/attention_correctness"] <= 1.0
    last = next(run_dir.rglob("last.ckpt"))
    from captioning.module import CaptioningModule

    assert CaptioningModule.load(last).encoder.grid_shape == (8, 12)
    photo = tmp_path / "photo.png"
    Image.new("RGB", (150, 100), (40, 90, 200)).save(photo)
    run_module("captioning.export", str(last), str(photo), "--output", str(tmp_path / "overlays"), cwd=tmp_path)
    record = json.loads((tmp_path / "overlays" / "photo" / "caption.json").read_text())
    assert record["grid_size"] == [8, 12] and record["image_size"] == [150, 100]
    assert all(len(row) == 96 and sum(row) == pytest.approx(1.0, abs=1e-5) for row in record["weights"])
    assert Image.open(tmp_path / "overlays" / "photo" / "grid.png").width > 150


def logged_steps(run_dir: Path, names: list[str]) -> list[dict[str, float]]:
    """The rows of a run's metrics.csv that have all `names`, in step order."""
    import csv

    rows = []
    for path in sorted(run_dir.rglob("metrics.csv")):
        for row in csv.DictReader(path.open()):
            if all(row.get(name) for name in names):
                rows.append({"step": int(row["step"]), **{name: float(row[name]) for name in names}})
    return sorted(rows, key=lambda r: r["step"])


def test_hard_attention_baseline_is_logged_saved_and_resumed(tmp_path):
    """b_k = 0.9 b_{k-1} + 0.1 r_k at every logged step, across a save and a resume from the checkpoint."""
    run_dir = tmp_path / "run"
    common = [
        *config_options(CONFIGS / "shapes_hard.yaml"), *SMALL_SHAPES, f"--data.cache_dir={tmp_path / 'cache'}",
        f"--trainer.default_root_dir={run_dir}", CSV_LOGGER, f"--trainer.logger.init_args.save_dir={run_dir}",
        "--trainer.log_every_n_steps=1", "--model.attention.init_args.expectation_probability=0.0",
        "--model.attention.init_args.inference=captioning.decoder.ArgMax",
        "--trainer.limit_val_batches=0",  # the baseline is a training matter; skipping validation saves minutes
        "--model.initial_weights=null", "--data.train_references=null",  # from scratch, on every reference: 15 steps
        *TINY_LOCAL_CNN,
    ]
    run_cli("fit", *common, "--trainer.max_epochs=1", cwd=tmp_path)
    first = logged_steps(run_dir, ["train/baseline", "train/reward"])
    last = next(run_dir.rglob("last.ckpt"))
    saved = torch.load(last, weights_only=True, map_location="cpu")
    assert saved["state_dict"]["attention.baseline"].item() == pytest.approx(first[-1]["train/baseline"], abs=1e-6)

    run_cli("fit", *common, "--trainer.max_epochs=2", f"--ckpt_path={last}", cwd=tmp_path)
    rows = logged_steps(run_dir, ["train/baseline", "train/reward"])
    assert len(rows) > len(first) >= 10 and [r["step"] for r in rows] == list(range(len(rows)))
    baseline = 0.0
    for row in rows:
        baseline = 0.9 * baseline + 0.1 * row["train/reward"]
        assert row["train/baseline"] == pytest.approx(baseline, rel=1e-4, abs=1e-5), row["step"]

    # the hard model loads as plain data and reads with its inference mode: ArgMax, one location per word
    from captioning.module import CaptioningModule
    from captioning.objectives import HardAttention

    resumed = max(run_dir.rglob("last.ckpt"), key=lambda p: p.stat().st_mtime)
    assert resumed != last
    model = CaptioningModule.load(resumed)
    assert isinstance(model.attention, HardAttention)
    assert model.attention.baseline.item() == pytest.approx(rows[-1]["train/baseline"], abs=1e-6)
    # images: the encoder is trained with the model
    generated = model.generate(torch.randn(2, 3, *model.encoder.input_shape))
    for weights in generated.weights:
        assert torch.equal(weights.sum(-1), torch.ones(len(weights))) and set(weights.unique().tolist()) <= {0.0, 1.0}


def test_a_beam_width_below_one_is_refused_before_anything_runs(tmp_path):
    from captioning.bundled import SHAPES_SOFT

    result = subprocess.run(
        [sys.executable, "-m", "captioning", "test", "--config", str(CONFIGS / "shapes_soft.yaml"),
         f"--ckpt_path={SHAPES_SOFT}", "--beam_size=0"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
        env={**__import__("os").environ, "PYTHONPATH": str(REPO)},
    )
    assert result.returncode == 2 and 'Parser key "beam_size"' in result.stderr and "v>0" in result.stderr
    assert not (tmp_path / "runs").exists()  # refused while parsing: nothing was built or written
