"""The Transformer decoder through the commands a user runs: `python -m captioning fit` with `model.decoder` set to
it, `test` on its checkpoint, and `python -m captioning.export` of its overlays (in this process: the same entry points)."""

from __future__ import annotations

import json

import pytest
import yaml

from captioning import export
from captioning.module import CaptioningModule
from captioning.transformer import TransformerDecoder
from data.shapes_scene import generate_split_scene, render_scene
from tests.helpers import CAPTIONING_CONFIGS, CSV_LOGGER, SMALL_SHAPES, TINY_LOCAL_CNN, metrics_of, run_cli

pytestmark = pytest.mark.slow  # trains a model

TRANSFORMER = [
    "--model.decoder=captioning.transformer.TransformerDecoder", "--model.decoder.model_dim=16",
    "--model.decoder.layers=2", "--model.decoder.heads=2", "--model.decoder.feedforward_dim=16",
]  # fmt: skip


def test_fit_test_and_export_a_transformer_captioner(tmp_path):
    run = tmp_path / "run"
    run_cli(
        "fit", "--config", str(CAPTIONING_CONFIGS / "shapes_soft.yaml"), *SMALL_SHAPES, *TINY_LOCAL_CNN, *TRANSFORMER,
        "--trainer.max_epochs=1", "--trainer.limit_val_batches=0", "--data.num_workers=0", CSV_LOGGER,
        f"--trainer.default_root_dir={run}",
        f"--data.cache_dir={tmp_path / 'cache'}", cwd=tmp_path,
    )  # fmt: skip
    config = yaml.safe_load(next(run.rglob("config.yaml")).read_text())
    assert config["model"]["decoder"]["class_path"] == "captioning.transformer.TransformerDecoder"
    assert config["model"]["decoder"]["init_args"]["layers"] == 2
    checkpoint = next(run.rglob("last.ckpt"))
    model = CaptioningModule.load(checkpoint)
    assert isinstance(model.decoder, TransformerDecoder) and len(model.decoder.blocks) == 2

    tested = tmp_path / "tested"
    run_cli(
        "test", "--config", str(CAPTIONING_CONFIGS / "shapes_soft.yaml"), *SMALL_SHAPES, "--data.num_workers=0",
        CSV_LOGGER, f"--trainer.default_root_dir={tested}", f"--ckpt_path={checkpoint}",
        f"--data.cache_dir={tmp_path / 'cache'}", cwd=tmp_path,
    )  # fmt: skip
    metrics = metrics_of(tested)
    for name in ("test/BLEU-4", "test/CIDEr", "test/METEOR", "test/attention_entropy", "test/attention_correctness"):
        assert name in metrics, name
    assert 0.0 <= metrics["test/attention_correctness"] <= 1.0

    image = tmp_path / "scene.png"
    render_scene(generate_split_scene(0, "test", 0), 112).save(image)
    assert export.main([str(checkpoint), str(image), "--output", str(tmp_path / "overlays")]) == 0
    record = json.loads(next((tmp_path / "overlays").rglob("caption.json")).read_text())
    assert record["grid_size"] == [14, 14] and len(record["weights"]) == len(record["words"])  # one map per word
