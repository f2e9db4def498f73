"""Atomic checkpoint writes: a save that fails or is killed half-way leaves the previous checkpoint whole and
loadable under its name, and whatever it leaves behind is never taken for a checkpoint."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from lightning.pytorch.callbacks import ModelCheckpoint

from core.training.checkpoints import PARTIAL_SUFFIX, SafeCheckpointIO, read_checkpoint
from tests.helpers import REPO


def checkpoint(value: float, size: int = 1000, step: int = 1) -> dict:
    return {"state_dict": {"weight": torch.full((size,), value)}, "global_step": step}


class FailsToPickle:
    """Raises while the checkpoint is being serialised (after its temporary file was opened)."""

    def __reduce__(self):
        raise RuntimeError("disk full (simulated)")


@pytest.fixture
def saved(tmp_path) -> tuple[Path, bytes]:
    """A folder with one good last.ckpt, and its bytes."""
    path = tmp_path / "checkpoints" / "last.ckpt"
    SafeCheckpointIO().save_checkpoint(checkpoint(1.0), path)
    return path, path.read_bytes()


def assert_intact(path: Path, content: bytes) -> None:
    """The previous checkpoint is there byte for byte, loads, and is the only file in its folder."""
    assert path.read_bytes() == content
    assert read_checkpoint(path)["state_dict"]["weight"].eq(1.0).all()
    assert [p.name for p in path.parent.iterdir()] == [path.name]


def test_a_save_replaces_the_previous_checkpoint_whole(saved):
    path, _ = saved
    SafeCheckpointIO().save_checkpoint(checkpoint(2.0, step=2), path)
    assert read_checkpoint(path)["global_step"] == 2 and [p.name for p in path.parent.iterdir()] == ["last.ckpt"]


def test_a_save_that_fails_while_serialising_keeps_the_previous_checkpoint(saved):
    path, content = saved
    broken = {**checkpoint(2.0, size=1_000_000), "callbacks": {"Broken": FailsToPickle()}}
    with pytest.raises(RuntimeError, match="simulated"):
        SafeCheckpointIO().save_checkpoint(broken, path)
    assert_intact(path, content)


def test_a_save_that_fails_at_the_rename_keeps_the_previous_checkpoint(saved, monkeypatch):
    path, content = saved

    def no_rename(source, target):
        raise OSError("rename failed (simulated)")

    monkeypatch.setattr(os, "replace", no_rename)
    with pytest.raises(OSError, match="simulated"):
        SafeCheckpointIO().save_checkpoint(checkpoint(2.0), path)
    assert_intact(path, content)


def test_non_finite_weights_are_never_written(saved):
    path, content = saved
    with pytest.raises(FloatingPointError, match=r"weight weight holds NaN.*last\.ckpt was not written"):
        SafeCheckpointIO().save_checkpoint(checkpoint(float("nan")), path)
    assert_intact(path, content)


KILLED_WHILE_SAVING = """
import os, signal, sys
import torch
from core.training.checkpoints import SafeCheckpointIO

def killed(descriptor):  # every byte is written; the process dies before the rename
    os.kill(os.getpid(), signal.SIGKILL)

os.fsync = killed
SafeCheckpointIO().save_checkpoint({"state_dict": {"weight": torch.full((1000,), 2.0)}}, sys.argv[1])
"""


@pytest.mark.slow
def test_a_process_killed_while_saving_leaves_the_previous_checkpoint_and_no_false_last(saved):
    path, content = saved
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(KILLED_WHILE_SAVING), str(path)],
        capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert result.returncode == -signal.SIGKILL, result.stderr
    assert path.read_bytes() == content and read_checkpoint(path)["state_dict"]["weight"].eq(1.0).all()
    leftovers = [p for p in path.parent.iterdir() if p != path]
    assert len(leftovers) == 1 and leftovers[0].name.startswith(".last.ckpt.") and leftovers[0].suffix == PARTIAL_SUFFIX
    # Lightning's `ckpt_path="last"` looks for last*.ckpt in the checkpoint folder: it finds only the real one
    assert ModelCheckpoint(dirpath=path.parent)._find_last_checkpoints(trainer=None) == {os.path.realpath(path)}
