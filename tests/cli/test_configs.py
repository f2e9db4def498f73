"""The configs: one base per task family (flickr8k_soft.yaml, shapes_soft.yaml, shapes_san.yaml, ...) and small
overlays given after it with a repeated --config, as each task's `command.HELP.overlays` says and each config's
header shows in the command that gives it; what a whole task shares is in configs/TASK.yaml, which the CLI reads
first. No block of settings is written twice, and every command of the docs gives an overlay after the configs it
builds on."""

from __future__ import annotations

import importlib
import itertools
import re
from pathlib import Path

import pytest
import yaml

from captioning.bundled import MODELS
from tests.helpers import REPO, config_chain, printed_config

CONFIGS = sorted((REPO / "configs").glob("*/*.yaml"))
LONGEST_SHARED_RUN = 5  # setting lines two configs may have in the same order, comments and blank lines aside


def settings(path: Path) -> list[str]:
    """A config's lines without comments and blank lines."""
    lines = (line.split(" #")[0].rstrip() for line in path.read_text(encoding="utf-8").splitlines())
    return [line for line in lines if line.strip() and not line.lstrip().startswith("#")]


def longest_shared_run(a: list[str], b: list[str]) -> int:
    best = 0
    for i, j in itertools.product(range(len(a)), range(len(b))):
        k = 0
        while i + k < len(a) and j + k < len(b) and a[i + k] == b[j + k]:
            k += 1
        best = max(best, k)
    return best


def header_chain(path: Path) -> list[Path]:
    """The configs that the command in a config's header comment gives, in order (`python -m captioning fit --config
    configs/captioning/A.yaml --config configs/captioning/B.yaml`, continued over comment lines with a backslash)."""
    header = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            break
        header.append(line.lstrip("# ").rstrip("\\ "))
    command = " ".join(header).partition(" fit ")[2]
    return [REPO / name for name in re.findall(r"--config (configs/\S+\.yaml)", command)]


@pytest.mark.parametrize("config", CONFIGS, ids=[f"{path.parent.name}/{path.stem}" for path in CONFIGS])
def test_each_config_header_gives_it_after_the_configs_its_command_line_requires(config: Path):
    """The header is documentation: the command line reads the chain from its task's `command.HELP.overlays`."""
    assert header_chain(config) == config_chain(config), (
        f"{config.name}'s header command and {config.parent.name}/command.py's overlays give other configs before it"
    )
    overlays = importlib.import_module(f"{config.parent.name}.command").HELP.overlays
    assert overlays.keys() <= {path.name for path in config.parent.glob("*.yaml")}


@pytest.mark.parametrize("config", CONFIGS, ids=[f"{path.parent.name}/{path.stem}" for path in CONFIGS])
def test_each_config_parses_given_after_the_configs_it_is_an_overlay_of(config: Path):
    printed = printed_config(config)
    own = yaml.safe_load(config.read_text(encoding="utf-8"))
    assert printed["trainer"]["default_root_dir"] == own["trainer"]["default_root_dir"]  # this config's run


def test_no_two_configs_repeat_a_block_of_settings():
    repeated = [
        f"{a.relative_to(REPO)} and {b.relative_to(REPO)}: {run} lines"
        for a, b in itertools.combinations([*CONFIGS, *(REPO / "configs").glob("*.yaml")], 2)
        if (run := longest_shared_run(settings(a), settings(b))) > LONGEST_SHARED_RUN
    ]
    assert not repeated


def test_every_documented_command_gives_an_overlay_after_the_configs_it_builds_on():
    texts = {path: path.read_text(encoding="utf-8") for path in [REPO / "README.md", *(REPO / "docs").glob("*.md")]}
    texts[Path("captioning/bundled")] = "\n".join(command for model in MODELS.values() for command in model.commands)
    runs = re.compile(r"--config (configs/\w+/\w+\.yaml)(?:[\s\\]+--config (configs/\w+/\w+\.yaml))*")
    wrong = []
    for path, text in texts.items():
        for run in runs.finditer(text):
            given = [REPO / name for name in re.findall(r"configs/\w+/\w+\.yaml", run.group(0))]
            for config in given:
                needed = config_chain(config)
                if [c for c in given if c in needed] != needed:
                    wrong.append(f"{path.name}: {run.group(0)!r} needs {[c.name for c in needed]}")
    assert not wrong


def test_an_overlay_given_without_its_base_is_refused_with_the_command_it_needs():
    """`flickr8k_hard.yaml` alone holds only what differs from `flickr8k_soft.yaml`: run as it is, it would fail
    later for want of a dataset. The CLI says at once what to give before it."""
    from captioning.cli import main

    hard = REPO / "configs" / "captioning" / "flickr8k_hard.yaml"
    needed = "--config configs/captioning/flickr8k_soft.yaml --config configs/captioning/flickr8k_hard.yaml"
    refused = rf"flickr8k_hard\.yaml is an overlay: give it after flickr8k_soft\.yaml.*{needed}"
    with pytest.raises(SystemExit, match=refused):
        main(["fit", "--config", str(hard), "--print_config"])
    with pytest.raises(SystemExit, match=r"give it after flickr8k_soft\.yaml"):  # in the wrong order
        main(["fit", f"--config={hard}", "--config", str(hard.with_name("flickr8k_soft.yaml")), "--print_config"])
