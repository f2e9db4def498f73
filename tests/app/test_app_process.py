"""`python demo.py` as a person runs it, in a subprocess whose TMPDIR is a test folder: a refused request is one
line in the terminal (no traceback, no PIL warning), uploads beyond the disk bound are deleted while the app goes on
serving, and stopping it with `kill` (SIGTERM) leaves nothing behind.

The tests share one served app, with the small ShapesWorld models only (it starts in a few seconds): the first make
requests, the last stops it, so they run in this order.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # gradio_client must never look for a Hugging Face Space

import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from gradio_client import Client, handle_file
from gradio_client.exceptions import AppError
from PIL import Image

from captioning.bundled import SHAPES_SOFT
from tests.app.test_demo import free_port
from tests.helpers import GRADIO_DOWNLOADS
from vqa.bundled import SHAPES_SAN

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow
MAX_CACHE_MB = 3  # the served app's disk bound (--max-cache-mb): small, so a test can send more than it


@dataclass
class Served:
    """The app's process, its URL, its TMPDIR and the lines it has written to stderr so far."""

    process: subprocess.Popen
    url: str
    tmp: Path
    errors: list[str] = field(default_factory=list)


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Iterator[Served]:
    tmp = tmp_path_factory.mktemp("tmpdir")
    port = free_port()
    env = {**os.environ, "TMPDIR": str(tmp)}
    env.pop("GRADIO_TEMP_DIR", None)
    process = subprocess.Popen(
        [
            sys.executable, "demo.py", "--port", str(port), "--max-cache-mb", str(MAX_CACHE_MB),
            "--caption-model", f"ShapesWorld soft={SHAPES_SOFT}", "--vqa-model", f"ShapesWorld={SHAPES_SAN}",
        ],
        cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    app = Served(process, f"http://127.0.0.1:{port}/", tmp)
    reader = threading.Thread(target=lambda: app.errors.extend(process.stderr), daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 120
        while True:
            assert process.poll() is None, "".join(app.errors)
            try:
                httpx.get(app.url, timeout=2)
                break
            except httpx.HTTPError:
                assert time.monotonic() < deadline, "the app did not start serving in 2 minutes"
                time.sleep(0.2)
        yield app
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(30)


def test_a_refused_request_is_one_line_in_the_terminal(served, tmp_path):
    notes = tmp_path / "notes.png"
    notes.write_text("a shopping list, not a picture\n")
    large = tmp_path / "large.png"
    Image.new("1", (12_000, 12_000)).save(large)  # 144 megapixels: PIL warns, the app refuses it
    scene = tmp_path / "scene.png"
    Image.new("RGB", (64, 64), "purple").save(scene)
    client = Client(served.url, verbose=False, download_files=GRADIO_DOWNLOADS)
    before = len(served.errors)
    refused = [
        ("/ask", (handle_file(str(notes)), "ShapesWorld", "what colour is the circle?")),
        ("/ask", (handle_file(str(large)), "ShapesWorld", "what colour is the circle?")),
        ("/ask", (handle_file(str(scene)), "ShapesWorld", "침대는 무슨 색입니까?")),
        ("/ask", (handle_file(str(scene)), "medium", "what colour is the circle?")),
        ("/caption", (handle_file(str(scene)), "ShapesWorld soft", 0)),
        ("/caption", (None, "ShapesWorld soft", 3)),
    ]
    for api_name, inputs in refused:
        with pytest.raises(AppError):
            client.predict(*inputs, api_name=api_name)
    answers, *_ = client.predict(handle_file(str(scene)), "ShapesWorld", "what colour is the circle?", api_name="/ask")
    assert answers["confidences"]  # the app goes on answering
    time.sleep(0.5)  # stderr is read by another thread
    lines = [line for line in served.errors[before:] if line.strip()]
    assert len(lines) == len(refused), "".join(lines)
    assert all(line.startswith("request refused: ") for line in lines), "".join(lines)
    assert "large.png is too large" in lines[1] and "Unknown model 'medium'" in lines[3]


def disk_use(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


def test_uploads_beyond_the_disk_bound_are_deleted_and_the_app_goes_on(served, tmp_path):
    """Uploads reach Gradio's cache without any request (POST /gradio_api/upload, as a client sends a file before
    its request): 12 MB of them against a 3 MB bound. Within a few sweeps the cache is back under the bound, the
    oldest uploads gone, and the app answers as before."""
    uploads = []
    with httpx.Client(timeout=60) as http:
        for number in range(12):
            data = os.urandom(1 << 20)  # 1 MB that does not compress
            answer = http.post(f"{served.url}gradio_api/upload", files=[("files", (f"upload_{number}.bin", data))])
            assert answer.status_code == 200, answer.text
            uploads += answer.json()
    cache = next(served.tmp.glob("visual-attention-demo-*")) / "gradio"
    deadline = time.monotonic() + 30
    while disk_use(cache) > MAX_CACHE_MB << 20 and time.monotonic() < deadline:
        time.sleep(0.5)
    assert disk_use(cache) <= MAX_CACHE_MB << 20
    assert not Path(uploads[0]).exists() and Path(uploads[-1]).exists()  # the oldest went first
    scene = tmp_path / "scene.png"
    Image.new("RGB", (64, 64), "purple").save(scene)
    client = Client(served.url, verbose=False, download_files=GRADIO_DOWNLOADS)
    text, gallery, _, _ = client.predict(handle_file(str(scene)), "ShapesWorld soft", 3, api_name="/caption")
    assert text.split() and len(gallery) == len(text.split())


def test_sigterm_stops_the_app_and_leaves_nothing_in_tmp(served):
    client = Client(served.url, verbose=False, download_files=GRADIO_DOWNLOADS)
    scene = served.tmp.parent / "scene.png"
    Image.new("RGB", (64, 64), "purple").save(scene)
    client.predict(handle_file(str(scene)), "ShapesWorld", "what colour is the circle?", api_name="/ask")
    assert any(served.tmp.iterdir())  # the app and Gradio have written their files there
    served.process.send_signal(signal.SIGTERM)
    assert served.process.wait(60) == 0
    left = sorted(p.name for p in served.tmp.iterdir() if not p.name.startswith("torchinductor_"))
    assert left == []  # torch's compile cache, made when torch is imported, is torch's to keep
