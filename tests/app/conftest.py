"""What the app's test files share: a real headless Chromium (Debian's, driven by Playwright), one per test module."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")
# Chromium's flags for a sandbox-less, offline container: no background fetches of its own.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


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
