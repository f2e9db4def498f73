"""Older checkpoints read as today's classes take them, through the history each task declares with its checkpoint
kind (`captioning.checkpoint_kind`, `vqa.checkpoint_kind`) and the core's own: classes that moved when the shared
core was split out of `captioning` and when `core` was split into sub-packages, options held at the top level before
the decoder and the SAN became components, renamed options. A config or option that names an old path is told where
the class went."""

from __future__ import annotations

import importlib
import inspect

import pytest
import torch

from captioning.bundled import SHAPES_HARD, SHAPES_SOFT
from captioning.checkpoint_kind import CHECKPOINT_KIND as CAPTIONING
from captioning.cli import main
from captioning.module import CaptioningModule
from core.training.checkpoint_kinds import CORE_HISTORY, installed_kinds, moved_modules
from core.training.checkpoints import read_checkpoint
from tests.helpers import CAPTIONING_CONFIGS
from vqa.bundled import SHAPES_SAN
from vqa.checkpoint_kind import CHECKPOINT_KIND as VQA
from vqa.san import StackedAttention


def imported(class_path: str) -> type:
    module, _, name = class_path.rpartition(".")
    return getattr(importlib.import_module(module), name)


def test_every_entry_of_a_history_names_what_exists_today():
    histories = [CORE_HISTORY, *(kind.history for kind in installed_kinds())]
    for history in histories:
        for new in history.moved_modules.values():  # every new home exists
            importlib.import_module(new)
        for class_path, _ in history.flat_components.values():
            imported(class_path)
        for class_path, renamed in history.renamed_options.items():
            parameters = inspect.signature(imported(class_path)).parameters
            assert set(renamed.values()) <= parameters.keys() and not set(renamed) & parameters.keys()
        for class_path, removed in history.removed_options.items():  # gone from the class, as the table says
            assert not set(removed) & inspect.signature(imported(class_path)).parameters.keys()
    # the core's, and each task's, declared with its checkpoint kind (the entry point in pyproject.toml)
    assert moved_modules() == {key: value for history in histories for key, value in history.moved_modules.items()}


def test_old_class_paths_and_option_names_become_current_ones_wherever_they_stand():
    hparams = {
        "encoder": {"class_path": "captioning.encoder.EfficientNetLite", "init_args": {"variant": 0}},
        "decoder": {"class_path": "captioning.decoder.ShowAttendTell",
                    "init_args": {"score": "captioning.attention.DotScore"}},
        "attention": {"class_path": "captioning.hard_attention.HardAttention",
                      "init_args": {"entropy_weight": 0.1, "inference": "captioning.reading.ArgMax"}},
        "kept": ["captioning.objectives.SoftAttention", "a.b", 3, None],
    }
    current = CAPTIONING.history.current(hparams)
    assert current["encoder"] == {"class_path": "core.model.encoder.EfficientNetLite", "init_args": {"variant": 0}}
    assert current["decoder"]["init_args"] == {"score": "core.model.attention.DotScore"}
    assert current["attention"] == {"class_path": "captioning.objectives.HardAttention",
                                    "init_args": {"entropy_bonus": 0.1, "inference": "captioning.decoder.ArgMax"}}
    assert current["kept"] == hparams["kept"]  # fmt: skip


def test_options_a_class_no_longer_takes_are_dropped_at_the_value_it_now_uses_and_kept_at_another():
    def san(**options):
        return {"san": {"class_path": "vqa.san.StackedAttention", "init_args": {"hops": 1, **options}}}

    assert VQA.history.current(san(separate_hops=False, question_dropout=0.0)) == san()
    assert VQA.history.current(san(separate_hops=True)) == san(separate_hops=True)  # refused by name when built
    assert CAPTIONING.history.current({"decoder": {"class_path": "captioning.decoder.ShowAttendTell",
                                                   "init_args": {"remember_content": True}}})["decoder"]["init_args"] == {}
    with pytest.raises(TypeError, match="separate_hops"):
        StackedAttention(8, 8, (2, 2), 3, **VQA.history.current(san(separate_hops=True))["san"]["init_args"])


def test_a_checkpoint_that_records_old_paths_is_read_with_the_current_ones(tmp_path):
    # the bundled ShapesWorld hard model with the paths a checkpoint written before the first move recorded
    checkpoint = torch.load(SHAPES_HARD, weights_only=True)
    checkpoint["hyper_parameters"]["encoder"]["class_path"] = "captioning.encoder.LocalCNN"
    checkpoint["hyper_parameters"]["score"] = "captioning.attention.AdditiveScore"
    torch.save(checkpoint, tmp_path / "old.ckpt")
    hparams = read_checkpoint(tmp_path / "old.ckpt")["hyper_parameters"]
    assert hparams["encoder"]["class_path"] == "core.model.encoder.LocalCNN"
    assert hparams["decoder"]["init_args"]["score"] == "core.model.attention.AdditiveScore"
    assert hparams["attention"]["class_path"] == "captioning.objectives.HardAttention"
    assert hparams["attention"]["init_args"]["inference"] == "captioning.decoder.Expectation"
    raw = torch.load(SHAPES_SOFT, weights_only=True)["hyper_parameters"]  # written before core's sub-packages
    assert raw["encoder"]["class_path"] == "core.encoder.LocalCNN"
    hparams = read_checkpoint(SHAPES_SOFT)["hyper_parameters"]
    assert hparams["encoder"]["class_path"] == "core.model.encoder.LocalCNN"
    assert hparams["decoder"]["init_args"]["score"] == "core.model.attention.AdditiveScore"


@pytest.mark.parametrize(("path", "key", "option"), [(SHAPES_SOFT, "decoder", "embed_dim"), (SHAPES_SAN, "san", "hops")])
def test_options_saved_before_a_part_became_a_component_are_read_as_its_config(path, key, option):
    """The bundled ShapesWorld models were saved with the decoder's and the SAN's options at the top level."""
    raw = torch.load(path, weights_only=True)["hyper_parameters"]
    assert key not in raw and option in raw
    hparams = read_checkpoint(path)["hyper_parameters"]
    assert option not in hparams and hparams[key]["init_args"][option] == raw[option]


def test_a_checkpoint_that_names_the_bonus_entropy_weight_loads_with_it_as_entropy_bonus():
    """Hard attention's lambda_e, an entropy bonus that spreads the maps, was called `entropy_weight`, the name of
    soft attention's sharpening term: the bundled ShapesWorld hard model records it under that name (0, where the
    class's default is 0.002)."""
    raw = torch.load(SHAPES_HARD, weights_only=True)["hyper_parameters"]["attention"]["init_args"]
    assert raw["entropy_weight"] == 0.0 and "entropy_bonus" not in raw
    model = CaptioningModule.load(SHAPES_HARD)
    assert model.attention.entropy_bonus == 0.0
    assert "entropy_weight" not in model.hparams["attention"]["init_args"]


def test_an_option_naming_an_old_path_is_told_where_the_class_went(tmp_path):
    args = ["fit", "--config", str(CAPTIONING_CONFIGS / "shapes_soft.yaml"), f"--trainer.default_root_dir={tmp_path}",
            "--model.decoder.score", "captioning.attention.DotScore", "--print_config"]
    with pytest.raises(SystemExit, match=r"moved: captioning\.attention\.\* is now core\.model\.attention\.\*"):
        main(args)
    args[-2] = "core.attention.DotScore"  # before core's sub-packages
    with pytest.raises(SystemExit, match=r"moved: core\.attention\.\* is now core\.model\.attention\.\*"):
        main(args)
