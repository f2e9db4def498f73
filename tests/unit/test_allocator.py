"""`keep_freed_memory`: freed blocks are reused without page faults, the user's own malloc settings win, and
the command-line entry points make the setting."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

from core import allocator

glibc_only = pytest.mark.skipif(
    platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's"
)

# A training step's pattern: blocks of 1 to 40 MB made one after another, all freed at the end, again and
# again. glibc raises its mmap threshold as blocks are freed, but never above 32 MiB, so by default the 40 MB
# blocks come from fresh pages in every round whatever happened before. Prints whether the setting was made
# and the minor page faults per round once three rounds have grown the heap (the first rounds fault anyway).
ROUNDS = """
import resource, sys, torch
from core.allocator import keep_freed_memory
applied = keep_freed_memory() if sys.argv[1] == "keep" else False
def one_round():
    blocks = [torch.ones(size << 20, dtype=torch.uint8) for size in (1, 2, 5, 13, 40) * 4]
    del blocks
for _ in range(3):
    one_round()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(5):
    one_round()
print(applied, (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 5)
"""


def page_faults_per_round(mode: str, **env: str) -> tuple[bool, float]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_") and k != "GLIBC_TUNABLES"}
    result = subprocess.run(
        [sys.executable, "-c", ROUNDS, mode], capture_output=True, text=True, env={**environment, **env}, check=True
    )
    applied, faults = result.stdout.split()
    return applied == "True", float(faults)


@glibc_only
def test_freed_blocks_are_reused_without_page_faults():
    _, faults_by_default = page_faults_per_round("default")
    applied, faults_kept = page_faults_per_round("keep")
    assert applied
    # 4 x 40 MiB per round at least: glibc's default hands it back and faults it in again (4 KiB pages)
    assert faults_by_default > 10000
    assert faults_kept < faults_by_default / 10


@glibc_only
def test_the_users_malloc_settings_win():
    applied, _ = page_faults_per_round("keep", MALLOC_TOP_PAD_="0")
    assert not applied


def test_nothing_is_set_off_glibc(monkeypatch):
    monkeypatch.setattr(allocator.platform, "system", lambda: "Darwin")
    assert allocator.keep_freed_memory() is False


def test_the_command_line_entry_points_make_the_setting(monkeypatch):
    import captioning.cli
    import vqa.cli

    calls = []
    for module in (captioning.cli, vqa.cli):
        monkeypatch.setattr(module, "keep_freed_memory", lambda: calls.append(module.__name__) or True)
        with pytest.raises(SystemExit):
            module.main(["--help"])
    assert calls == ["captioning.cli", "vqa.cli"]

