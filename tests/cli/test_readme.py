"""Every command in the README's ```bash blocks works on a fresh clone, as written.

The quick ones (exports and a `test` with the bundled models, the line that writes the photo they use) run as
written, in the order the README gives them, from a folder that looks like the clone's root (its top-level entries
linked in) so that what they write lands in tmp_path. Those that need a dataset (PATH/TO/...), minutes of training or
start something (`pip install`, the app, the test suite) are parsed by the program's own parser, in this process (a
task CLI with `--print_config`, which checks every option and config file and runs nothing; the app's and the exports'
argument parsers), and pip's packages and extras are checked against pyproject.toml. A command of any other kind fails `test_every_command_is_recognised`, so a new
README command cannot go unchecked.
"""

from __future__ import annotations

import importlib
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

from tests.helpers import REPO, user_environment

README = REPO / "README.md"
TASKS = ("captioning", "vqa")
BUNDLED = ("captioning/bundled/", "vqa/bundled/")
# the bundled models' names, which the export commands take as well as their files
BUNDLED_NAMES = {*importlib.import_module("captioning.bundled").MODELS, *importlib.import_module("vqa.bundled").MODELS}
CPU_TORCH = ["torch", "torchvision", "--index-url", "https://download.pytorch.org/whl/cpu"]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())


def readme_commands() -> list[list[str]]:
    """The commands of the README's bash blocks, in order, split into words; `a && b` is two commands."""
    commands = []
    for block in re.findall(r"^```bash\n(.*?)^```", README.read_text(), flags=re.DOTALL | re.MULTILINE):
        for line in block.replace("\\\n", " ").splitlines():
            if line.strip() and not line.lstrip().startswith("#"):
                commands += [shlex.split(part) for part in line.split("&&")]
    return commands


def kind_of(words: list[str]) -> str:
    """How a README command is checked: "run", "parse" (a task CLI, an export, the grounding command or the app), "pip", "pytest";
    "unknown" fails the test."""
    match words:
        case ["python", "-c", _]:
            return "run"
        case ["python", "-m", module, *rest] if module in {f"{task}.export" for task in TASKS}:
            return "run" if rest and (rest[0].startswith(BUNDLED) or rest[0] in BUNDLED_NAMES) else "parse"
        case ["python", "-m", module, ("fit" | "validate" | "test" | "predict") as subcommand, *rest] if module in TASKS:
            ckpt = rest[rest.index("--ckpt_path") + 1] if "--ckpt_path" in rest else ""
            return "run" if subcommand != "fit" and ckpt.startswith(BUNDLED) else "parse"
        case ["python", "demo.py", *_] | ["python", "-m", "captioning.grounding" | "vqa.caption_questions", *_]:
            return "parse"
        case ["pip", "install", *_]:
            return "pip"
        case ["python", "-m", "pytest", *_]:
            return "pytest"
    return "unknown"


COMMANDS = readme_commands()


def commands_of(kind: str) -> list[list[str]]:
    return [words for words in COMMANDS if kind_of(words) == kind]


def run(words: list[str], *, cwd: Path, timeout: int = 300) -> subprocess.CompletedProcess:
    """A README command with this interpreter as `python`, the repository on the path, and the caption scorer a user
    gets (the suite's quicker one unset); fails with its output."""
    argv = [sys.executable, *words[1:]] if words[0] == "python" else words
    result = subprocess.run(
        argv, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False,
        env={**user_environment(), "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert result.returncode == 0, f"{shlex.join(words)}\nstdout:\n{result.stdout[-3000:]}\nstderr:\n{result.stderr[-3000:]}"
    return result


def test_every_command_is_recognised() -> None:
    assert len(COMMANDS) >= 10, COMMANDS
    unknown = [shlex.join(words) for words in COMMANDS if kind_of(words) == "unknown"]
    assert not unknown, f"README commands this test does not know how to check (teach kind_of): {unknown}"
    # what a new user has on a fresh clone is run, not only parsed
    assert any(words[2] == "captioning.export" for words in commands_of("run"))
    assert any(words[2:4] == ["captioning", "test"] for words in commands_of("run"))


def test_pip_and_pytest_commands_name_what_the_project_has() -> None:
    extras = set(PYPROJECT["project"]["optional-dependencies"])
    required = {re.split(r"[<>=\[ ]", dependency)[0] for dependency in PYPROJECT["project"]["dependencies"]}
    for words in commands_of("pip"):
        if words[2:] == CPU_TORCH:  # PyTorch's CPU-only wheels, of the packages the project needs
            assert {"torch", "torchvision"} <= required
            continue
        assert words[2] == "-e" and len(words) == 4, shlex.join(words)
        target = re.fullmatch(r"\.(?:\[(\w+)\])?", words[3])
        assert target, shlex.join(words)
        assert target.group(1) is None or target.group(1) in extras, shlex.join(words)
    markers = {line.split(":")[0] for line in PYPROJECT["tool"]["pytest"]["ini_options"]["markers"]}
    for words in commands_of("pytest"):
        if "-m" in words[3:]:  # a marker expression, after `python -m pytest`
            expression = words[words.index("-m", 3) + 1]
            assert set(re.findall(r"\w+", expression)) - {"not", "and", "or"} <= markers, expression


@pytest.mark.slow
@pytest.mark.parametrize("words", commands_of("parse"), ids=shlex.join)
def test_other_commands_parse(words: list[str], capsys: pytest.CaptureFixture[str], monkeypatch) -> None:
    """A command that needs data, a training run or a server first: its program's parser accepts it as written."""
    monkeypatch.chdir(REPO)  # as from the clone's root
    monkeypatch.setattr(sys, "argv", [words[1]])  # the program's own arguments are `words`, not pytest's
    if words[1] == "demo.py":
        import demo

        demo.parse_arguments(words[2:])
    elif words[2].endswith(".export"):
        importlib.import_module(words[2]).parse_arguments(words[3:])
    elif words[2] in ("captioning.grounding", "vqa.caption_questions"):
        importlib.import_module(words[2]).parser().parse_args(words[3:])
    else:  # a task CLI: every option and config file checked, nothing run
        configs = [words[i + 1] for i, word in enumerate(words) if word == "--config"]
        assert configs and all(Path(config).is_file() for config in configs), configs
        with pytest.raises(SystemExit) as stop:
            importlib.import_module(f"{words[2]}.cli").main([*words[3:], "--print_config"])
        printed = capsys.readouterr().out
        assert stop.value.code in (None, 0), printed
        assert "trainer:" in printed and "model:" in printed, printed


@pytest.mark.slow
def test_quick_commands_run_as_written(tmp_path: Path) -> None:
    """In README order, from a folder standing in for the clone's root: the photo, the exports, the bundled test."""
    for entry in REPO.iterdir():
        if entry.name not in {".git", "runs", ".cache", "outputs"}:
            (tmp_path / entry.name).symlink_to(entry)
    printed = ""
    for words in commands_of("run"):
        result = run(words, cwd=tmp_path)
        printed += result.stdout
        if words[2:4] == ["captioning", "test"]:  # it says what it does
            assert "test: scoring CaptioningModule on shapesworld" in result.stderr, result.stderr
        if "--output" in words:
            written = tmp_path / words[words.index("--output") + 1]
            assert any(written.rglob("*.png")), shlex.join(words)
    assert list((tmp_path / "runs").rglob("events.out.tfevents.*"))  # the bundled test logged its scores
    # what the README says a command prints ("it prints each caption, here\n# LINE") is what it printed
    quoted = re.findall(r"it prints [^\n]*, here\n# (.+)", README.read_text())
    assert quoted and all(line in printed for line in quoted), (quoted, printed)
    # everything the commands wrote is ignored by git: `git status` stays clean in a clone
    written = sorted(entry.name for entry in tmp_path.iterdir() if not entry.is_symlink())
    assert "outputs" in written
    ignored = subprocess.run(
        ["git", "check-ignore", "--no-index", *(f"{name}/" if (tmp_path / name).is_dir() else name for name in written)],
        cwd=REPO, capture_output=True, text=True,
    ).stdout.split()
    assert [name for name in written if f"{name}/" not in ignored and name not in ignored] == []


def test_the_reading_order_names_functions_that_exist() -> None:
    """Each "`file.py`, `Class.function`" of the README's reading order is a function of that file, so that a rename
    cannot leave a learner looking for a name that is gone."""
    section = README.read_text(encoding="utf-8").split("## Read the code", 1)[1].split("Where each piece", 1)[0]
    places = re.findall(r"`([\w/]+)\.py`, `([\w.]+)`", section)
    assert len(places) >= 6, section
    for path, name in places:
        found = importlib.import_module(path.replace("/", "."))
        for part in name.split("."):
            assert hasattr(found, part), f"README's reading order: {path}.py has no {name}"
            found = getattr(found, part)
        assert callable(found), f"README's reading order: {path}.py's {name} is not a function"
