"""What the app's test files share: a real headless Chromium (Debian's, driven by Playwright), one per test module;
and a temp folder of their own for what gradio_client leaves behind."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import GRADIO_DOWNLOADS

CHROMIUM = Path("/usr/bin/chromium")
# Chromium's flags for a sandbox-less, offline container: no background fetches of its own.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.fixture(scope="session", autouse=True)
def client_temp_folder() -> Iterator[None]:
    """gradio_client downloads each file through a new folder in the system's temp folder and leaves it there, empty
    (one per file: hundreds per test run). While the app tests run, the temp folder is `GRADIO_DOWNLOADS`, which is
    deleted when the test process ends. (Their apps' own files are in `demo.WORK_DIR`, made when demo is imported.)"""
    saved = tempfile.tempdir
    tempfile.tempdir = str(GRADIO_DOWNLOADS)
    try:
        yield
    finally:
        tempfile.tempdir = saved


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists():
        pytest.skip(f"no Chromium at {CHROMIUM}: install Debian's with `apt-get install -y chromium`")
    sync_api = pytest.importorskip(
        "playwright.sync_api",
        reason="playwright is not installed: pip install -e '.[dev]'",
    )
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        try:
            yield browser
        finally:
            browser.close()
