"""Shared fixtures, and the markers of every test.

Markers (registered in pyproject.toml, so a misspelt one is an error):

- `unit`, `cli`, `app`: the folder a test is in, tests/unit, tests/cli or tests/app, set here, not by hand;
- `browser`: the tests that drive a real Chromium (they use the `browser` fixture);
- `slow`: marked at the test (`@pytest.mark.slow`, or `pytestmark` for a whole file), the costly ones: each
  takes several seconds to a minute (pretrained networks on photos, a training run in a subprocess, a DDP pair, a
  browser); `python -m pytest -m "not slow"` runs the rest in a couple of minutes, `python -m pytest` runs all.

The suite runs in parallel, one test file per pytest-xdist worker (`-n auto --dist loadfile` in pyproject.toml;
`-n 0` runs it in one process). Each worker then gets its share of the cores for torch's threads, and so do the
training runs its tests start in subprocesses: two workers that each ran as many threads as the machine has
cores would spend their time contending.

Plain functions and constants shared by test modules are in tests/helpers.py (see its docstring for why).
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

# Gradio's temp folder, one per test process, deleted when the process ends. Gradio fixes it when it is imported (and
# makes a folder there at each launch): demo.py points it into the app's own work folder first, but a test module
# that imports gradio before demo.py would leave Gradio's folder in the system's temp folder.
GRADIO_TEMP = Path(tempfile.mkdtemp(prefix="gradio-tests-"))
atexit.register(shutil.rmtree, GRADIO_TEMP, ignore_errors=True)
os.environ.setdefault("GRADIO_TEMP_DIR", str(GRADIO_TEMP))

import pytest  # noqa: E402  (after GRADIO_TEMP_DIR: nothing below may import gradio before it is set)
import torch  # noqa: E402

from captioning.metrics import BACKEND_VARIABLE  # noqa: E402
from tests.helpers import DAQUAR_FILES, make_vqa_layout  # noqa: E402

TESTS = Path(__file__).resolve().parent
GROUPS = ("unit", "cli", "app")

# The training runs of the tests score their captions without starting Java (METEOR's start costs about 10
# CPU-seconds at every validation); the subprocesses they start inherit this. The tests of the Java tools name
# their backend; the README's commands, and the runs whose printed output is checked, run without this setting, as a
# user runs them (`tests.helpers.user_environment`).
os.environ.setdefault(BACKEND_VARIABLE, "python")


def pytest_configure(config: pytest.Config) -> None:
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))  # set by pytest-xdist in its workers
    if workers > 1 and "OMP_NUM_THREADS" not in os.environ:
        threads = max(1, len(os.sched_getaffinity(0)) // workers)
        torch.set_num_threads(threads)
        os.environ["OMP_NUM_THREADS"] = str(threads)  # for the subprocesses (CLI runs, DDP workers)


@pytest.hookimpl(tryfirst=True)  # before pytest's own hook, whose `-m` deselection must see the markers
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        relative = item.path.resolve().relative_to(TESTS)
        group = relative.parts[0]
        if group in GROUPS:
            item.add_marker(getattr(pytest.mark, group))
        if "browser" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.browser)


# -- fixtures ------------------------------------------------------------------------------------------------


@pytest.fixture
def daquar(tmp_path: Path) -> Path:
    """A tiny dataset in DAQUAR's layout (4 training and 4 test images, 3 questions each) under tmp_path/daquar."""
    root = tmp_path / "daquar"
    make_vqa_layout(root, DAQUAR_FILES)
    return root
