"""What several unit test files share."""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture(scope="module")
def score_functions() -> ModuleType:
    """`benchmarks/score_functions.py`, imported as `python benchmarks/score_functions.py` runs it (its `harness`
    beside it on the path): the measurements of docs/attention.md that the tests hold to their formulas."""
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(BENCHMARKS))
        return importlib.import_module("score_functions")
