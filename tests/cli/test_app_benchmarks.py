"""The demo app's benchmarks of docs/performance.md, end to end at two clients: each serves the app from the bundled
checkpoints in a child process and sends it real requests. Every request must come back answered in the form the
app promises (`demo.CaptionAnswer`), and every figure must be a finite number: a benchmark whose check of the answers
drifts from the app counts every request as lost, and fails here. (`app_screenshot.py` is run in tests/app/test_demo.py,
on that file's served app and browser.)"""

from __future__ import annotations

import math
import operator
import tempfile

import pytest

import demo  # noqa: F401  (imported here, its work folder is made before a test moves the temp folder; gone at exit)
from tests.helpers import assert_printed_result, figures_of, run_benchmark

pytestmark = pytest.mark.slow
TORCH_CACHE = "torchinductor_root"  # torch's compile cache, made (empty) at Lightning's import and kept across runs


def assert_latencies(figures: dict) -> None:
    """p50 <= p95 <= max, all positive, for the requests answered."""
    assert 0 < figures["p50"] <= figures["p95"] <= figures["max"], figures


def test_app_load_answers_every_caption_and_question() -> None:
    answer = run_benchmark("app_load.py", "--clients", "2")
    assert all(math.isfinite(value) for value in figures_of(answer).values())
    assert answer["requests"] == 4 and answer["answered"] == 4 and answer["lost"] == 0, answer["errors"]
    assert answer["refused"] == 0 and answer["errors"] == [] and answer["all_answered"] is answer["all_admitted_answered"] is True
    for kind in ("caption", "ask", "client_total"):
        assert_latencies(answer[kind])
        assert answer[kind]["n"] == 2
    assert {"max_queue", "wall_s", "server", "client", "model", "beam_size"} <= answer.keys()
    assert answer["cpu_s"]["server"] > 0 and answer["cpu_s"]["clients"] > 0  # the server captioned; the clients sent


def test_app_latency_answers_every_request_and_times_each_part(tmp_path, monkeypatch) -> None:
    """... and leaves nothing in the temp folder: its own work folders, and the served app's, which a server stopped
    without running its clean-up would leave (`app-latency-server-*`, `visual-attention-demo-*`)."""
    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(temp))  # the server child's temp folder
    monkeypatch.setattr(tempfile, "tempdir", str(temp))  # this process's (cached by tempfile at its first use)
    answer = run_benchmark("app_latency.py", "--requests", "1", "--warmup", "0", "--clients", "2")
    assert sorted(path.name for path in temp.iterdir() if path.name != TORCH_CACHE) == []
    assert all(math.isfinite(value) for value in figures_of(answer).values())
    sequential, concurrent = answer["sequential"], answer["concurrent"]
    assert sequential["answered"] == 1 and concurrent["answered"] == 2 and "errors" not in concurrent
    for part in ("first", "complete"):
        assert 0 < sequential[part]["median"] and 0 < answer["handler"][part]["median"]
        assert_latencies(concurrent[part])
    # the answer has a preview per word and a zip, and the page's answer comes before the zip
    assert answer["answer"]["gallery_items"] == answer["answer"]["caption_words"] > 0
    assert answer["answer"]["zip_bytes"] > 0
    assert sequential["first"]["median"] <= sequential["complete"]["median"]
    page, handler = (sequential["first"]["median"], 3), (answer["handler"]["first"]["median"], 3)
    assert_printed_result(answer["gradio_overhead_median"], 3, operator.sub, page, handler)
    assert isinstance(answer["goal_met"], bool)

