"""The app's Compare tab as an API client and a person use it: one photo, the six bundled ShapesWorld models (one per
attention score function) side by side, each with its caption and its word maps; with a caption to follow, every
model teacher-forced on it. Served on a free 127.0.0.1 port in this process, driven through gradio_client and
through a real headless Chromium, as the other tabs are (tests/app/test_demo.py).
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # gradio_client must never look for a Hugging Face Space

from collections.abc import Iterator
from pathlib import Path

import gradio as gr
import pytest
from gradio_client import Client, handle_file
from gradio_client.exceptions import AppError
from PIL import Image

import demo
from captioning.bundled import COMPARE_CHECKPOINTS, SHAPES_SOFT
from captioning.export import follow_caption, generate_caption
from captioning.module import CaptioningModule
from core.overlays import heat_maps, overlay
from data.images import load_image
from data.shapes_scene import generate_split_scene, render_scene
from tests.app.test_demo import (
    concentration_title,
    free_port,
    jpeg_round_trip,
    mean_difference,
)
from vqa.bundled import SHAPES_SAN

FOLLOWED = "a small red cross to the right of a small purple circle"  # the words of ShapesWorld test scene 3

from tests.helpers import GRADIO_DOWNLOADS


@pytest.fixture(scope="module")
def pictures(tmp_path_factory) -> dict[str, Path]:
    """A ShapesWorld test scene (non-square, as an upload would be), another scene, a real photo, a damaged file."""
    folder = tmp_path_factory.mktemp("pictures")
    paths = {name: folder / name for name in ("scene.png", "other.png", "coffee.jpg", "notes.png")}
    render_scene(generate_split_scene(0, "test", 3), 224).resize((300, 200), Image.Resampling.BILINEAR).save(
        paths["scene.png"]
    )
    render_scene(generate_split_scene(0, "test", 6), 224).save(paths["other.png"])
    Image.fromarray(pytest.importorskip("skimage.data").coffee()).save(paths["coffee.jpg"], quality=90)
    paths["notes.png"].write_text("a shopping list, not a picture\n")
    return paths


@pytest.fixture(scope="module")
def models() -> dict[str, CaptioningModule]:
    return {name: CaptioningModule.load(path, map_location="cpu") for name, path in COMPARE_CHECKPOINTS.items()}


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Iterator[str]:
    """The app with the bundled Compare models (and one small model in each other tab), served here; its URL."""
    app = demo.build_app(
        caption_checkpoints={"ShapesWorld soft": SHAPES_SOFT},
        vqa_checkpoints={"ShapesWorld": SHAPES_SAN},
        work_dir=tmp_path_factory.mktemp("work"),
    )
    port = free_port()
    demo.launch_app(app, port=port, prevent_thread_lock=True, quiet=True)
    try:
        yield f"http://127.0.0.1:{port}/"
    finally:
        app.close()


@pytest.fixture(scope="module")
def client(served) -> Client:
    return Client(served, verbose=False, download_files=GRADIO_DOWNLOADS)


def compare(client: Client, path: Path | None, follow: str = "") -> list[tuple[str, list[dict]]]:
    """The Compare tab's answer as (caption, gallery) per model, in the tab's order."""
    flat = client.predict(
        handle_file(str(path)) if path is not None else None,
        follow,
        api_name="/compare",
    )
    return list(zip(flat[0::2], flat[1::2]))


def as_the_app_works_on(path: Path) -> Image.Image:
    image = load_image(path)
    image.thumbnail((demo.WORK_SIZE, demo.WORK_SIZE))
    return image


def test_the_app_has_a_compare_tab_with_the_six_score_functions_by_default(tmp_path):
    app = demo.build_app(
        caption_checkpoints={"ShapesWorld soft": SHAPES_SOFT},
        vqa_checkpoints={"ShapesWorld": SHAPES_SAN},
        work_dir=tmp_path,
    )
    assert "compare" in {fn.api_name for fn in app.fns.values()}
    tabs = [block.label for block in app.blocks.values() if isinstance(block, gr.Tab)]
    assert tabs == ["Caption", "Ask", "Compare"]
    assert list(COMPARE_CHECKPOINTS) == [
        "additive",
        "dot product",
        "scaled dot product",
        "general",
        "cosine (content-based)",
        "location-based",
    ]
    without = demo.build_app(
        caption_checkpoints={"ShapesWorld soft": SHAPES_SOFT},
        vqa_checkpoints={"ShapesWorld": SHAPES_SAN},
        compare_checkpoints={},
        work_dir=tmp_path / "without",
    )
    assert "compare" not in {fn.api_name for fn in without.fns.values()}


def test_every_model_gives_its_own_caption_and_one_map_per_word(client, pictures, models):
    """Each model's row is what `generate_caption` gives for the same photo: the same words, each gallery picture
    that word's overlay on the fixed scale, titled with how concentrated it is."""
    answered = compare(client, pictures["scene.png"])
    assert len(answered) == len(models) == 6
    image = as_the_app_works_on(pictures["scene.png"])
    for (text, gallery), (name, model) in zip(answered, models.items()):
        words, weights = generate_caption(model, image)
        assert text == " ".join(words) and words, name
        assert [item["caption"] for item in gallery] == [concentration_title(w, row) for w, row in zip(words, weights)]
        first = overlay(image, heat_maps(weights[:1], model.encoder.grid_shape, image.size)[0])
        with Image.open(gallery[0]["image"]) as shown:
            assert mean_difference(shown, jpeg_round_trip(first)) <= 0.5, name


def test_a_caption_to_follow_lines_the_six_rows_of_maps_up_word_by_word(client, pictures, models):
    answered = compare(
        client,
        pictures["scene.png"],
        follow="  A small red cross, to the right of a small purple circle. ",
    )
    image = as_the_app_works_on(pictures["scene.png"])
    for (text, gallery), (name, model) in zip(answered, models.items()):
        assert text == FOLLOWED, name
        _, weights = follow_caption(model, image, FOLLOWED)
        titles = [concentration_title(word, row) for word, row in zip(FOLLOWED.split(), weights)]
        assert [item["caption"] for item in gallery] == titles, name


@pytest.mark.parametrize(
    ("follow", "problem"),
    [
        (
            "a small dog",
            "The caption to follow has words the models do not know: 'dog'. Write it with theirs: a, small",
        ),
        ("?!", "The caption to follow is empty"),
        (
            " ".join(["a"] * 41),
            "The caption to follow has 41 words; shorten it to at most 40",
        ),
    ],
)
def test_a_caption_the_models_cannot_follow_is_refused_in_plain_words(client, pictures, follow, problem):
    with pytest.raises(AppError, match=problem):
        compare(client, pictures["scene.png"], follow=follow)
    assert compare(client, pictures["scene.png"])[0][0]  # and the app goes on


def test_no_picture_or_a_bad_one_is_refused_and_the_app_goes_on(client, pictures):
    with pytest.raises(AppError, match="No image"):
        compare(client, None)
    with pytest.raises(AppError, match="notes.png is not a picture this app can read"):
        compare(client, pictures["notes.png"])
    assert compare(client, pictures["scene.png"])[0][0]


# -- a real browser -------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_person_compares_the_six_score_functions_in_a_real_browser(browser, served, pictures):
    outside: list[str] = []
    page = browser.new_page(viewport={"width": 1280, "height": 1400})
    page.on(
        "request",
        lambda r: outside.append(r.url) if not r.url.startswith((served, "data:", "blob:")) else None,
    )
    try:
        page.goto(served, wait_until="networkidle")
        page.get_by_role("tab", name="Compare").click()
        page.locator("#compare-image input[type=file]").set_input_files(str(pictures["scene.png"]))
        page.locator("#compare-follow textarea, #compare-follow input").first.fill(FOLLOWED)
        page.get_by_role("button", name="Compare", exact=True).click()
        for number in range(1, len(COMPARE_CHECKPOINTS) + 1):
            box = page.locator(f"#compare-caption-{number} textarea")
            page.wait_for_function(
                "el => el.value.trim().length > 0",
                arg=box.element_handle(),
                timeout=60_000,
            )
            assert box.input_value() == FOLLOWED
            gallery = f"#compare-gallery-{number} img"
            page.locator(gallery).first.wait_for(timeout=30_000)
            page.wait_for_function(f"() => [...document.querySelectorAll('{gallery}')].every(img => img.complete)")
            widths = page.locator(gallery).evaluate_all("images => images.map(img => img.naturalWidth)")
            assert widths and all(width > 0 for width in widths)  # every overlay of the row loaded
        assert (
            "1 = uniform attention" in page.locator("#compare-legend").inner_text()
        )  # the scale is explained here too
    finally:
        page.close()
    assert outside == []
