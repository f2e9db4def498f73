"""The compact checkpoints that ship with the package: how `python -m captioning.bundle` writes them, that the
bundled ShapesWorld models load and work, and that the loader refuses a compact checkpoint it cannot
complete."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from PIL import Image

from captioning.bundle import bundle, main as bundle_main
from captioning.bundled import CAPTION_CHECKPOINTS, SHAPES_HARD, SHAPES_SOFT
from captioning.checkpoints import ENCODER_FROM_PACKAGE, ENCODER_WEIGHTS, read_checkpoint
from captioning.module import CaptioningModule
from vqa.bundled import SHAPES_SAN
from vqa.module import VqaModule

BUNDLED = (SHAPES_SOFT, SHAPES_HARD, SHAPES_SAN)


@pytest.fixture(scope="module")
def coffee() -> Image.Image:
    skimage_data = pytest.importorskip("skimage.data")
    return Image.fromarray(skimage_data.coffee())


@pytest.fixture(scope="module")
def soft_model() -> CaptioningModule:
    return CaptioningModule.load(SHAPES_SOFT)


@pytest.mark.parametrize("path", BUNDLED, ids=lambda p: p.name)
def test_bundled_checkpoints_are_small_float16_and_leave_the_encoder_to_its_package(path: Path):
    assert path.is_file() and path.stat().st_size < 8 * 2**20
    checkpoint = read_checkpoint(path)
    assert checkpoint[ENCODER_WEIGHTS] == ENCODER_FROM_PACKAGE
    state = checkpoint["state_dict"]
    assert state and not any(name.startswith("encoder.") for name in state)
    assert all(t.dtype == torch.float16 for t in state.values() if t.is_floating_point())
    assert "optimizer_states" not in checkpoint


def test_bundled_captioning_model_captions_a_real_photo_in_its_own_words(soft_model, coffee):
    assert set(CAPTION_CHECKPOINTS) == {"soft", "hard"}
    assert not soft_model.training and all(p.dtype == torch.float32 for p in soft_model.parameters())
    inputs = soft_model.encoder.transform()(coffee).unsqueeze(0)
    with torch.inference_mode():
        caption = soft_model.caption(inputs, beam_size=3)[0]
    words = caption.split()
    assert words and set(words) <= set(soft_model.vocabulary.tokens) - {"<pad>", "<start>", "<end>", "<unk>"}


def test_bundled_vqa_model_answers_with_one_map_per_hop(coffee):
    model = VqaModule.load(SHAPES_SAN)
    with torch.inference_mode():
        answered = model.answer(model.encoder.transform()(coffee), "what colour is the circle?")
    assert len(answered.answers) == 5 and sum(p for _, p in answered.answers) <= 1 + 1e-6
    assert answered.weights.shape == (model.hparams.hops, model.encoder.num_locations)


def full_checkpoint(model: CaptioningModule, path: Path) -> Path:
    """A Lightning-style checkpoint of `model`: every weight in float32, encoder included."""
    torch.save({"state_dict": model.state_dict(), "hyper_parameters": dict(model.hparams), "epoch": 3}, path)
    return path


def test_bundle_writes_a_compact_copy_that_captions_like_the_original(soft_model, coffee, tmp_path, capsys):
    source = full_checkpoint(soft_model, tmp_path / "best.ckpt")
    assert bundle_main([str(source), str(tmp_path / "compact.ckpt")]) == 0
    assert "encoder weights from its package" in capsys.readouterr().out
    assert (tmp_path / "compact.ckpt").stat().st_size < source.stat().st_size / 4
    compact = CaptioningModule.load(tmp_path / "compact.ckpt")
    inputs = soft_model.encoder.transform()(coffee).unsqueeze(0)
    with torch.inference_mode():
        assert compact.caption(inputs) == soft_model.caption(inputs)


def test_compact_loader_refuses_a_checkpoint_missing_decoder_weights(tmp_path):
    checkpoint = read_checkpoint(SHAPES_SOFT)
    del checkpoint["state_dict"]["decoder.lstm.weight_hh"]
    torch.save(checkpoint, tmp_path / "broken.ckpt")
    with pytest.raises(ValueError, match=r"broken\.ckpt .*missing decoder\.lstm\.weight_hh"):
        CaptioningModule.load(tmp_path / "broken.ckpt")


def test_loader_refuses_missing_encoder_weights_without_the_mark(tmp_path):
    checkpoint = read_checkpoint(SHAPES_SOFT)
    del checkpoint[ENCODER_WEIGHTS]
    torch.save(checkpoint, tmp_path / "unmarked.ckpt")
    with pytest.raises(ValueError, match=rf"missing encoder\..*{ENCODER_WEIGHTS}"):
        CaptioningModule.load(tmp_path / "unmarked.ckpt")


def test_bundle_refuses_a_file_that_is_not_a_checkpoint(tmp_path, capsys):
    (tmp_path / "notes.ckpt").write_text("not a checkpoint")
    assert bundle_main([str(tmp_path / "notes.ckpt"), str(tmp_path / "out.ckpt")]) == 2
    assert "notes.ckpt" in capsys.readouterr().err and not (tmp_path / "out.ckpt").exists()
    with pytest.raises(FileNotFoundError):
        bundle(tmp_path / "missing.ckpt", tmp_path / "out.ckpt")
