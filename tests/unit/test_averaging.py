"""Checkpoint averaging (`python -m captioning.averaging`): the weights against a hand computation, a model that
loads and captions, and refusals, by file name, of checkpoints that are not of one model, as each task's kind says
which settings checkpoints of one model may differ in."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch

from captioning.bundled import FLICKR8K_SOFT, SHAPES_HARD, SHAPES_SOFT
from captioning.module import CaptioningModule
from core.training import averaging
from core.training.checkpoints import CheckpointError, read_checkpoint, write_checkpoint
from data.shapes_scene import generate_split_scene, render_scene
from vqa.bundled import SHAPES_SAN
from vqa.module import VqaModule


def average(sources: list[Path], target: Path, **options) -> dict:
    return averaging.average(sources, target, model_class=CaptioningModule, **options)


def main(argv: list[str]) -> int:
    """`python -m captioning.averaging ARGV` as a call."""
    return averaging.main(argv, model_class=CaptioningModule, prog="python -m captioning.averaging")


@pytest.fixture
def pair(tmp_path) -> tuple[Path, Path]:
    """The bundled ShapesWorld soft model and a copy whose decoder weights moved, as a fine-tuning would move them."""
    checkpoint = read_checkpoint(SHAPES_SOFT)
    generator = torch.Generator().manual_seed(0)
    for name, tensor in checkpoint["state_dict"].items():
        if tensor.is_floating_point() and name.startswith("decoder."):
            noise = 0.01 * torch.randn(tensor.shape, generator=generator)
            checkpoint["state_dict"][name] = (tensor.float() + noise).to(tensor.dtype)
    hyper_parameters = checkpoint["hyper_parameters"]
    attention = hyper_parameters["attention"]
    checkpoint["hyper_parameters"] = {  # training settings, at the top and inside the objective: they may differ
        **hyper_parameters,
        "learning_rate": 1e-5,
        "attention": {**attention, "init_args": {**attention["init_args"], "penalty_weight": 1.0}},
    }
    moved = tmp_path / "moved.ckpt"
    write_checkpoint(checkpoint, moved)
    return SHAPES_SOFT, moved


@pytest.mark.slow
def test_each_weight_is_the_weighted_mean(pair, tmp_path):
    first, second = (read_checkpoint(path)["state_dict"] for path in pair)
    averaged = average(pair, tmp_path / "average.ckpt", weights=[1.0, 3.0])["state_dict"]
    assert averaged.keys() == first.keys()
    moved = [name for name in first if not torch.equal(first[name], second[name])]
    assert moved and all(name.startswith("decoder.") for name in moved)
    for name in moved:
        expected = 0.25 * first[name].double() + 0.75 * second[name].double()  # weights divided by their sum
        assert averaged[name].dtype == first[name].dtype
        torch.testing.assert_close(averaged[name].double(), expected, atol=1e-3, rtol=0)  # float16 rounding
    for name in first.keys() - set(moved):
        assert torch.equal(averaged[name], first[name])  # what did not move is kept bit for bit


@pytest.mark.slow
def test_the_average_loads_and_a_full_weight_on_one_model_is_that_model(pair, tmp_path):
    out = tmp_path / "average.ckpt"
    assert main([str(out), *map(str, pair), "--weights", "1", "0"]) == 0
    scene = render_scene(generate_split_scene(0, "test", 0), 224)
    original, averaged = CaptioningModule.load(pair[0]), CaptioningModule.load(out)
    image = original.encoder.transform()(scene).unsqueeze(0)
    assert averaged.caption(image) == original.caption(image)
    sources = read_checkpoint(out)["averaged_from"]
    assert [(entry["path"], entry["weight"]) for entry in sources] == [(str(pair[0]), 1.0), (str(pair[1]), 0.0)]
    assert "optimizer_states" not in read_checkpoint(out)  # a model to test and serve, not a run to resume


def test_checkpoints_of_different_models_are_refused_by_name(pair, tmp_path, capsys):
    out = tmp_path / "average.ckpt"
    with pytest.raises(CheckpointError, match=r"shapes_hard\.ckpt differs from .*shapes_soft\.ckpt in 'attention'"):
        average([SHAPES_SOFT, SHAPES_HARD], out)
    with pytest.raises(CheckpointError, match=r"shapes_san\.ckpt is not a captioning checkpoint"):
        average([SHAPES_SOFT, SHAPES_SAN], out)
    renamed = read_checkpoint(pair[1])
    words = list(renamed["hyper_parameters"]["vocabulary"])
    words[-2:] = words[-1], words[-2]  # two words swap ids: their embedding rows would be averaged crosswise
    renamed["hyper_parameters"]["vocabulary"] = words
    write_checkpoint(renamed, tmp_path / "renamed.ckpt")
    with pytest.raises(CheckpointError, match=r"renamed\.ckpt differs from .* in 'vocabulary'"):
        average([SHAPES_SOFT, tmp_path / "renamed.ckpt"], out)
    full = read_checkpoint(FLICKR8K_SOFT)  # a training checkpoint holds the frozen encoder's weights, a compact copy not
    encoder = CaptioningModule.load(FLICKR8K_SOFT).encoder
    full["state_dict"].update({f"encoder.{name}": value for name, value in encoder.state_dict().items()})
    del full["encoder_weights"]
    write_checkpoint(full, tmp_path / "full.ckpt")
    with pytest.raises(CheckpointError, match=r"full\.ckpt has other weights than .*flickr8k_soft\.ckpt \(encoder\."):
        average([FLICKR8K_SOFT, tmp_path / "full.ckpt"], out)
    assert main([str(out), *map(str, pair), "--weights", "1"]) == 2
    assert "give one weight per checkpoint: 2 checkpoints, 1 weights" in capsys.readouterr().err
    assert main([str(out), *map(str, pair), "--weights", "1", "-1"]) == 2
    assert "weights must be non-negative" in capsys.readouterr().err
    assert main([str(out), str(SHAPES_SOFT)]) == 2
    assert "give at least two checkpoints" in capsys.readouterr().err
    assert not out.exists()


def test_vqa_checkpoints_may_differ_in_the_training_settings_its_kind_declares(tmp_path):
    """The SAN's dropout is one of VQA's training settings (`vqa.checkpoint_kind`); its number of hops is not."""
    reference = read_checkpoint(SHAPES_SAN)

    def with_san(**init_args) -> dict:
        checkpoint = copy.deepcopy(reference)
        checkpoint["hyper_parameters"]["san"]["init_args"].update(init_args)
        return checkpoint

    paths, kind = [SHAPES_SAN, tmp_path / "other.ckpt"], VqaModule.checkpoint_kind
    averaging.check_same_model([reference, with_san(dropout=0.1)], paths, kind)
    with pytest.raises(CheckpointError, match=r"other\.ckpt differs from .*shapes_san\.ckpt in 'san'"):
        averaging.check_same_model([reference, with_san(hops=3)], paths, kind)
