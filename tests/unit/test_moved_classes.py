"""Classes that moved when the shared core was split out of `captioning`, and when `core` was split into
sub-packages: checkpoints that record their old import paths still load, and a config or option that names an old
path is told where the class went."""

from __future__ import annotations

import pytest
import torch

from captioning import MOVED_MODULES
from captioning.bundled import SHAPES_HARD, SHAPES_SOFT
from captioning.cli import main
from core.training.checkpoints import read_checkpoint
from core.training.hparams import CORE_MOVES, current_class_paths, moved_modules
from tests.helpers import CAPTIONING_CONFIGS


def test_old_class_paths_become_current_ones_wherever_they_stand():
    hparams = {
        "encoder": {"class_path": "captioning.encoder.EfficientNetLite", "init_args": {"variant": 0}},
        "score": "captioning.attention.DotScore",
        "attention": {"class_path": "captioning.hard_attention.HardAttention",
                      "init_args": {"inference": "captioning.reading.ArgMax"}},
        "kept": ["captioning.objectives.SoftAttention", "a.b", 3, None],
    }
    assert current_class_paths(hparams) == {
        "encoder": {"class_path": "core.model.encoder.EfficientNetLite", "init_args": {"variant": 0}},
        "score": "core.model.attention.DotScore",
        "attention": {"class_path": "captioning.objectives.HardAttention",
                      "init_args": {"inference": "captioning.decoder.ArgMax"}},
        "kept": ["captioning.objectives.SoftAttention", "a.b", 3, None],
    }
    for old, new in moved_modules().items():  # every new home exists
        __import__(new)
    # captioning's, declared to core through the entry point (pyproject.toml), and core's own
    assert moved_modules() == CORE_MOVES | MOVED_MODULES


def test_a_checkpoint_that_records_old_paths_is_read_with_the_current_ones(tmp_path):
    # the bundled ShapesWorld hard model with the paths a checkpoint written before the first move recorded
    checkpoint = torch.load(SHAPES_HARD, weights_only=True)
    checkpoint["hyper_parameters"]["encoder"]["class_path"] = "captioning.encoder.LocalCNN"
    checkpoint["hyper_parameters"]["score"] = "captioning.attention.AdditiveScore"
    torch.save(checkpoint, tmp_path / "old.ckpt")
    hparams = read_checkpoint(tmp_path / "old.ckpt")["hyper_parameters"]
    assert hparams["encoder"]["class_path"] == "core.model.encoder.LocalCNN"
    assert hparams["score"] == "core.model.attention.AdditiveScore"
    assert hparams["attention"]["class_path"] == "captioning.objectives.HardAttention"
    assert hparams["attention"]["init_args"]["inference"] == "captioning.decoder.Expectation"
    raw = torch.load(SHAPES_SOFT, weights_only=True)["hyper_parameters"]  # written before core's sub-packages
    assert raw["encoder"]["class_path"] == "core.encoder.LocalCNN"
    hparams = read_checkpoint(SHAPES_SOFT)["hyper_parameters"]
    assert hparams["encoder"]["class_path"] == "core.model.encoder.LocalCNN"
    assert hparams["score"] == "core.model.attention.AdditiveScore"


def test_an_option_naming_an_old_path_is_told_where_the_class_went(tmp_path):
    args = ["fit", "--config", str(CAPTIONING_CONFIGS / "shapes_soft.yaml"), f"--trainer.default_root_dir={tmp_path}",
            "--model.decoder.score", "captioning.attention.DotScore", "--print_config"]
    with pytest.raises(SystemExit, match=r"moved: captioning\.attention\.\* is now core\.model\.attention\.\*"):
        main(args)
    args[-2] = "core.attention.DotScore"  # before core's sub-packages
    with pytest.raises(SystemExit, match=r"moved: core\.attention\.\* is now core\.model\.attention\.\*"):
        main(args)
