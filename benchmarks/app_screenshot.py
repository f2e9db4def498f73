"""The README's screenshot of the app, made from the current app and the bundled models, as a person sees it.

    python benchmarks/app_screenshot.py [--out benchmarks/figures/app.png] [--tab caption|ask|compare]

Serves the app as `python demo.py` does (a child process on a free 127.0.0.1 port, the bundled checkpoints, as in
`app_latency.py`), opens it in a headless Chromium (Debian's, `apt-get install -y chromium`, driven by Playwright,
1280 px wide), and in the chosen tab does what a person does with the first example: the first example photo
(scikit-image's camera, `demo.PHOTO_EXAMPLES`) captioned by the default model at beam 3 (`caption`), the ShapesWorld scene asked its example question (`ask`), or
the six score-function models' captions of a ShapesWorld scene (`compare`). Once every overlay has loaded (and, on
the Caption tab, the export zip is offered) it saves a full-page screenshot and prints one JSON line: the figure's
path, and the caption (or the question) shown, so the docs can quote it word for word.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from app_latency import ROOT, start_server, stop_server  # sets the offline environment

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-background-networking", "--disable-component-update", "--disable-sync"]
VIEWPORT = {"width": 1280, "height": 1000}
TIMEOUT_MS = 120_000
TABS = ("caption", "ask", "compare")


def shoot(browser: Any, url: str, tab: str, out: Path, examples: dict[str, Path]) -> dict:
    """Open the app at `url` in `browser` (Playwright's), do the tab's example, save the screenshot to `out`; what
    the page shows."""
    import demo

    page = browser.new_page(viewport=VIEWPORT)
    try:
        page.goto(url, wait_until="networkidle")
        shown: dict = {}
        if tab == "caption":
            page.locator("#caption-image input[type=file]").set_input_files(str(examples[demo.PHOTO_EXAMPLES[0]]))
            page.get_by_role("button", name="Caption", exact=True).click()
            page.locator("#caption-export a").first.wait_for(timeout=TIMEOUT_MS)  # the zip: the last answer
            shown["caption"] = page.locator("#caption-text textarea").input_value()
            gallery = "#caption-gallery"
        elif tab == "ask":
            picture, _, question = next(row for row in demo.QUESTION_EXAMPLES if row[0].startswith("scene_"))
            page.get_by_role("tab", name="Ask").click()
            page.locator("#ask-image input[type=file]").set_input_files(str(examples[picture]))
            page.locator("#ask-model label", has_text="ShapesWorld").first.click()
            page.locator("#ask-question").get_by_role("textbox").fill(question)
            page.get_by_role("button", name="Ask", exact=True).click()
            page.locator("#ask-export a").first.wait_for(timeout=TIMEOUT_MS)
            shown["question"] = question
            gallery = "#ask-gallery"
        else:
            page.get_by_role("tab", name="Compare").click()
            page.locator("#compare-image input[type=file]").set_input_files(str(examples["scene_3"]))
            page.get_by_role("button", name="Compare", exact=True).click()
            page.locator("#compare-gallery-6 img").first.wait_for(timeout=TIMEOUT_MS)
            gallery = "[id^=compare-gallery-]"
        page.locator(f"{gallery} img").first.wait_for(timeout=TIMEOUT_MS)
        page.wait_for_function(
            f"() => [...document.querySelectorAll('{gallery} img')].every(img => img.complete && img.naturalWidth)",
            timeout=TIMEOUT_MS,
        )
        page.screenshot(path=str(out), full_page=True)
    finally:
        page.close()
    return {"figure": str(out), "tab": tab, **shown}


def parse_arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python benchmarks/app_screenshot.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "figures" / "app.png", help="the PNG to write")
    parser.add_argument("--tab", choices=TABS, default="caption", help="the tab to show (default caption)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_arguments(argv)
    if not CHROMIUM.exists():
        raise SystemExit(f"error: no Chromium at {CHROMIUM}: install Debian's with `apt-get install -y chromium`")
    from playwright.sync_api import sync_playwright

    import demo

    args.out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="app-screenshot-") as folder:
        examples = demo.write_examples(Path(folder))
        child, url, _ = start_server()
        try:
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
                try:
                    print(json.dumps(shoot(browser, url, args.tab, args.out.resolve(), examples)))
                finally:
                    browser.close()
        finally:
            stop_server(child)


if __name__ == "__main__":
    os.chdir(ROOT)
    sys.exit(main())
