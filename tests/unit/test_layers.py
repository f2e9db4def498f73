"""The layers: data <- core <- captioning, vqa <- demo.py. A package imports only the layers below it, and the shared
core names no task: what is a task's own (its checkpoint kind with the history of its older checkpoints and its
training settings, its bundle settings) the task declares (pyproject.toml's entry points, `core.training.bundle.Setting`)."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import pytest

from core.training.checkpoint_kinds import KIND_ENTRY_POINTS, installed_kinds

REPO = Path(__file__).resolve().parents[2]
TASKS = ("captioning", "vqa")
# what each package may import of the project
ALLOWED = {"data": {"data"}, "core": {"core", "data"}, "captioning": {"core", "data", "captioning"},
           "vqa": {"core", "data", "vqa"}}  # fmt: skip


def imported(tree: ast.AST) -> set[str]:
    """The top-level packages a module imports (at any depth: function-level imports count)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name.partition(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.partition(".")[0])
    return names


def docstrings(tree: ast.AST) -> set[int]:
    """ids of the docstring nodes of a module, its classes and functions."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_each_package_imports_only_the_layers_below_it(package):
    project = {*ALLOWED, "demo", "benchmarks", "experiments", "tests"}
    wrong = {
        f"{path.relative_to(REPO)} imports {name}"
        for path in sorted((REPO / package).rglob("*.py"))
        for name in imported(ast.parse(path.read_text(encoding="utf-8")))
        if name in project and name not in ALLOWED[package]
    }
    assert not wrong


def test_the_core_names_no_task_outside_its_docstrings():
    named = []
    for path in sorted((REPO / "core").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skip = docstrings(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
                if any(task in node.value.lower() for task in TASKS):
                    named.append(f"{path.relative_to(REPO)}:{node.lineno} {node.value!r}")
    assert not named


def test_each_task_declares_its_checkpoint_kind_to_the_core():
    """pyproject.toml names each task's declaration, a module that loads neither torch nor the task's model; its kind
    is the one the task's model uses (also where the installed entry points were written by an older pyproject)."""
    from importlib.metadata import EntryPoint

    from captioning.module import CaptioningModule
    from vqa.module import VqaModule

    kinds = [CaptioningModule.checkpoint_kind, VqaModule.checkpoint_kind]
    declared = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["entry-points"]
    assert declared[KIND_ENTRY_POINTS] == {task: f"{task}.checkpoint_kind:CHECKPOINT_KIND" for task in TASKS}
    assert [EntryPoint(task, value, KIND_ENTRY_POINTS).load() for task, value in declared[KIND_ENTRY_POINTS].items()] == kinds
    assert list(installed_kinds()) == kinds


def test_the_command_line_tools_parse_with_jsonargparse_as_the_task_clis_do():
    """One parser library for every command of the package (the task CLIs are Lightning's, on jsonargparse): no
    module of the package or the app imports argparse."""
    modules = [REPO / "demo.py", *(path for package in ALLOWED for path in sorted((REPO / package).rglob("*.py")))]
    assert not [str(path.relative_to(REPO)) for path in modules if "argparse" in imported(ast.parse(path.read_text()))]
