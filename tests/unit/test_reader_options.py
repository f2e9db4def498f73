"""The classes the README's reading order names take no option that nothing sets: every constructor option is set by
a config under configs/, recorded in a bundled checkpoint's hyper-parameters (as the loaders read them), or set by a
documented command (README.md, docs/*.md). An option that only an experiment sets belongs to a subclass in
`experiments/`, whose commands choose it by class (`--model.san experiments.san_variants.StackedAttentionVariants`);
the options such a command sets are its class's, not the paper class's. Left out: the arguments the model fills in
(the sizes the data and the encoder fix, a score's sizes, an `Attention`'s score) and the fast-path flags."""

from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path

import pytest
import yaml

from captioning.decoder import ShowAttendTell
from captioning.objectives import HardAttention, SoftAttention
from captioning.self_critical import SelfCritical
from captioning.transformer import TransformerDecoder
from core.model.attention import AdditiveScore, Attention
from core.training.checkpoints import read_checkpoint
from core.training.hparams import import_path
from vqa.san import StackedAttention

REPO = Path(__file__).resolve().parents[2]
# the model's components a config or a command sets (`model.<key>`), with the class each defaults to
DEFAULTS = {
    "decoder": "captioning.decoder.ShowAttendTell",
    "attention": "captioning.objectives.SoftAttention",
    "self_critical": "captioning.self_critical.SelfCritical",
    "san": "vqa.san.StackedAttention",
}
FAST_PATH_FLAGS = {"fast_path", "fused"}  # the readable path beside the fast one (`TransformerDecoder.fused`)
# what the model that builds a class gives it, rather than a config
GIVEN_BY_THE_MODEL = {
    AdditiveScore: {"query_dim", "key_dim", "attention_dim", "num_locations"},
    Attention: {"score"},
}
READ_BY_STUDENTS = [AdditiveScore, Attention, ShowAttendTell, SoftAttention, HardAttention, SelfCritical,
                    StackedAttention, TransformerDecoder]  # fmt: skip


def options(cls: type) -> set[str]:
    """The keyword-only parameters of `cls`'s constructor, through the `**shared` of a subclass to its base's."""
    found = set()
    for parameter in inspect.signature(cls.__init__).parameters.values():
        if parameter.kind is parameter.KEYWORD_ONLY:
            found.add(parameter.name)
        elif parameter.kind is parameter.VAR_KEYWORD:
            found |= options(cls.__mro__[1])
    return found


def config_classes(config: Path) -> dict[str, str]:
    """{component key: class path} that a config sets under `model`."""
    model = (yaml.safe_load(config.read_text()) or {}).get("model") or {}
    return {key: value["class_path"] for key, value in model.items() if isinstance(value, dict) and "class_path" in value}


def from_configs() -> dict[str, set[str]]:
    """{class path: the options configs set on it}."""
    found: dict[str, set[str]] = {}
    for config in sorted((REPO / "configs").rglob("*.yaml")):
        model = (yaml.safe_load(config.read_text()) or {}).get("model") or {}
        for key, value in model.items():
            if key in DEFAULTS and isinstance(value, dict):
                cls = value.get("class_path", DEFAULTS[key])
                found.setdefault(cls, set()).update(value.get("init_args") or {})
    return found


def from_bundled_checkpoints() -> dict[str, set[str]]:
    """{class path: the options the bundled checkpoints record for it}, read as the loaders read them."""
    found: dict[str, set[str]] = {}
    for folder in ("captioning", "vqa"):
        for path in sorted((REPO / folder / "bundled").glob("*.ckpt")):
            hparams = read_checkpoint(path)["hyper_parameters"]
            for key in DEFAULTS:
                if isinstance(hparams.get(key), dict) and "class_path" in hparams[key]:
                    found.setdefault(hparams[key]["class_path"], set()).update(hparams[key].get("init_args") or {})
    return found


def documented_units() -> list[str]:
    """The docs' commands, read in units that share their classes: each fenced block, and each paragraph outside
    them (a table is one paragraph), so an option set inline beside `--model.san experiments...` goes with it."""
    units = []
    for path in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        text = path.read_text(encoding="utf-8")
        blocks = re.split(r"^```.*$", text, flags=re.MULTILINE)
        for index, part in enumerate(blocks):
            units += [part] if index % 2 else re.split(r"\n\s*\n", part)
    return units


def from_documented_commands() -> dict[str, set[str]]:
    """{class path: the options documented commands set on it}: `--model.<key>.<option>` or
    `--model.<key>.init_args.<option>`, for the class the same unit chooses (`--model.<key> CLASS`, or a `--config`'s),
    else the key's default."""
    found: dict[str, set[str]] = {}
    for unit in documented_units():
        chosen = {}
        for config in re.findall(r"--config[ =](configs/\S+\.yaml)", unit):
            if (REPO / config).is_file():
                chosen.update(config_classes(REPO / config))
        chosen.update(dict(re.findall(r"--model\.(\w+)[ =]([a-z_]+(?:\.\w+)+)\b", unit)))
        for key, option in re.findall(r"--model\.(\w+)\.(?:init_args\.)?(\w+)", unit):
            if key in DEFAULTS:
                found.setdefault(chosen.get(key, DEFAULTS[key]), set()).add(option)
    return found


def set_somewhere() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for source in (from_configs(), from_bundled_checkpoints(), from_documented_commands()):
        for cls, names in source.items():
            found.setdefault(cls, set()).update(names)
    return found


SET = set_somewhere()


@pytest.mark.parametrize("cls", READ_BY_STUDENTS, ids=lambda cls: cls.__name__)
def test_every_option_of_a_class_students_read_is_set_somewhere(cls: type) -> None:
    unset = options(cls) - FAST_PATH_FLAGS - GIVEN_BY_THE_MODEL.get(cls, set()) - SET.get(import_path(cls), set())
    assert not unset, (
        f"{cls.__name__} takes {sorted(unset)}, which no config, bundled checkpoint or documented command sets: "
        "an experiment's option belongs to a subclass in experiments/"
    )


def test_the_search_counts_what_an_experiments_class_sets_as_its_own() -> None:
    """The test above is honest: the options the experiments' commands set with their classes are not counted for
    the paper's classes, and an option nothing sets would be found."""
    moved = {"separate_hops", "read_positions", "question_dropout"}
    assert moved <= SET["experiments.san_variants.StackedAttentionVariants"]
    assert not moved & SET["vqa.san.StackedAttention"]
    assert "experiments.decoder_variants.WhereNotWhatDecoder" in SET
    assert "remember_content" not in SET["captioning.decoder.ShowAttendTell"]
    module = importlib.import_module("experiments.san_variants")
    assert options(module.StackedAttentionVariants) - SET["vqa.san.StackedAttention"] - FAST_PATH_FLAGS == moved
