"""What the app's test files share: a real headless Chromium (Debian's, driven by Playwright), one per test module;
and a temp folder of their own for what gradio_client leaves behind."""

from __future__ import annotations

import shutil
import tempfile
import types
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
    (one per file: hundreds per test run). While the app tests run, gradio_client alone (not the app, which only
    serves files from the system's temp folder) sees `GRADIO_DOWNLOADS` as that folder, made here and deleted when the
    session ends."""
    import gradio_client.client

    for_the_client = types.SimpleNamespace(**vars(tempfile))
    for_the_client.gettempdir = lambda: str(GRADIO_DOWNLOADS)
    GRADIO_DOWNLOADS.mkdir(exist_ok=True)
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(gradio_client.client, "tempfile", for_the_client)
            yield
    finally:
        shutil.rmtree(GRADIO_DOWNLOADS, ignore_errors=True)


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
