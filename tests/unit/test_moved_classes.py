"""Classes that moved when the shared core was split out of `captioning`: checkpoints that record their old
import paths still load, and a config or option that names an old path is told where the class went."""

from __future__ import annotations

import pytest
import torch

from captioning.bundled import FLICKR8K_HARD
from captioning.cli import main
from core.checkpoints import read_checkpoint
from captioning import MOVED_MODULES
from core.hparams import current_class_paths, moved_modules
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
        "encoder": {"class_path": "core.encoder.EfficientNetLite", "init_args": {"variant": 0}},
        "score": "core.attention.DotScore",
        "attention": {"class_path": "captioning.objectives.HardAttention",
                      "init_args": {"inference": "captioning.decoder.ArgMax"}},
        "kept": ["captioning.objectives.SoftAttention", "a.b", 3, None],
    }
    for old, new in MOVED_MODULES.items():  # every new home exists
        __import__(new)
    assert moved_modules() == MOVED_MODULES  # declared to core through the entry point (pyproject.toml)


def test_a_checkpoint_that_records_old_paths_is_read_with_the_current_ones():
    raw = torch.load(FLICKR8K_HARD, weights_only=True)["hyper_parameters"]  # written before the move
    assert raw["encoder"]["class_path"] == "captioning.encoder.EfficientNetLite"
    hparams = read_checkpoint(FLICKR8K_HARD)["hyper_parameters"]
    assert hparams["encoder"]["class_path"] == "core.encoder.EfficientNetLite"
    assert hparams["score"] == "core.attention.AdditiveScore"
    assert hparams["attention"]["class_path"] == "captioning.objectives.HardAttention"
    assert hparams["attention"]["init_args"]["inference"] == "captioning.decoder.Expectation"


def test_an_option_naming_an_old_path_is_told_where_the_class_went(tmp_path):
    args = ["fit", "--config", str(CAPTIONING_CONFIGS / "shapes_soft.yaml"), f"--trainer.default_root_dir={tmp_path}",
            "--model.decoder.score", "captioning.attention.DotScore", "--print_config"]
    with pytest.raises(SystemExit, match=r"moved: captioning\.attention\.\* is now core\.attention\.\*"):
        main(args)
