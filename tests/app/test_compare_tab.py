"""The app's Compare tab as an API client and a person use it: one photo, a group of models side by side (the six
bundled ShapesWorld models, one per attention score function; or the two Flickr8k decoders, Show-Attend-Tell and the
Transformer), each with its caption and its word maps; with a caption to follow, every model teacher-forced on it.
Served on a free 127.0.0.1 port in this process, driven through gradio_client and through a real headless Chromium,
as the other tabs are (tests/app/test_demo.py).
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
from captioning.bundled import COMPARE_CHECKPOINTS, DECODER_CHECKPOINTS, SHAPES_SOFT
from captioning.inference import follow_caption, generate_caption
from captioning.module import CaptioningModule
from core.maps.overlays import heat_maps, overlay
from core.training.checkpoints import read_checkpoint
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


SCORES, DECODERS = (group.title for group in demo.COMPARE_GROUPS)


def compare(client: Client, path: Path | None, follow: str = "", *group: str) -> list[tuple[str, list[dict]]]:
    """The Compare tab's answer as (caption, gallery) per row, in the tab's order; `group` names the group (none: the
    call an older client makes, with two values)."""
    flat = client.predict(
        handle_file(str(path)) if path is not None else None,
        follow,
        *group,
        api_name="/compare",
    )
    return list(zip(flat[0::2], flat[1::2]))


def as_the_app_works_on(path: Path) -> Image.Image:
    image = load_image(path)
    image.thumbnail((demo.WORK_SIZE, demo.WORK_SIZE))
    return image


def test_the_app_has_a_compare_tab_with_the_six_score_functions_first_then_the_two_decoders(tmp_path):
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
    assert [group.checkpoints for group in demo.COMPARE_GROUPS] == [COMPARE_CHECKPOINTS, DECODER_CHECKPOINTS]
    decoders = [
        read_checkpoint(path)["hyper_parameters"]["decoder"]
        for path in DECODER_CHECKPOINTS.values()
    ]
    assert [decoder["class_path"] for decoder in decoders] == [
        "captioning.decoder.ShowAttendTell",
        "captioning.transformer.TransformerDecoder",
    ]
    without = demo.build_app(
        caption_checkpoints={"ShapesWorld soft": SHAPES_SOFT},
        vqa_checkpoints={"ShapesWorld": SHAPES_SAN},
        compare_groups=(),
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


def test_the_two_decoders_caption_a_photo_side_by_side_and_the_other_rows_stay_empty(client, pictures):
    """The decoders group: Show-Attend-Tell's and the Transformer's captions and maps of one photo, each what
    `generate_caption` gives (the Transformer's map: its own, the last layer's mean); the four rows the group leaves
    are empty. An older client's call, with two values, still gets the first group."""
    decoders = {name: CaptioningModule.load(path, map_location="cpu") for name, path in DECODER_CHECKPOINTS.items()}
    answered = compare(client, pictures["coffee.jpg"], "", DECODERS)
    assert len(answered) == 6 and answered[2:] == [("", [])] * 4
    image = as_the_app_works_on(pictures["coffee.jpg"])
    for (text, gallery), (name, model) in zip(answered, decoders.items()):
        words, weights = generate_caption(model, image)
        assert text == " ".join(words) and words, name
        assert [item["caption"] for item in gallery] == [concentration_title(w, row) for w, row in zip(words, weights)]
    assert answered[0][0] != answered[1][0]  # two models, not one shown twice
    assert all(text for text, _ in compare(client, pictures["scene.png"]))  # two values: the six score functions


def test_the_decoders_follow_one_caption_and_an_unknown_word_or_group_is_refused(client, pictures):
    followed = compare(client, pictures["coffee.jpg"], "A dog runs on the grass.", DECODERS)
    assert [text for text, _ in followed[:2]] == ["a dog runs on the grass"] * 2
    assert [len(gallery) for _, gallery in followed[:2]] == [6, 6]
    # a vocabulary of thousands of words is not listed in the message, only counted
    with pytest.raises(AppError, match=r"do not know: 'zqxj'\. They know the \d+ words frequent in their training"):
        compare(client, pictures["coffee.jpg"], "a zqxj on the grass", DECODERS)
    with pytest.raises(AppError, match="Unknown group 'transformers': choose one of"):
        compare(client, pictures["coffee.jpg"], "", "transformers")
    assert compare(client, pictures["coffee.jpg"], "", DECODERS)[0][0]  # and the app goes on


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
        # the two decoders: the rows are renamed and emptied, the four they leave hidden; then one photo, two captions
        page.get_by_label(DECODERS).check()
        page.locator("#compare-caption-3").wait_for(state="hidden", timeout=30_000)
        assert all(not page.locator(f"#compare-caption-{n}").is_visible() for n in range(3, 7))
        assert page.locator("#compare-caption-1 textarea").input_value() == ""
        assert "Show-Attend-Tell" in page.locator("#compare-caption-1").inner_text()
        assert "Transformer" in page.locator("#compare-caption-2").inner_text()
        page.locator("#compare-image input[type=file]").set_input_files(str(pictures["coffee.jpg"]))
        page.locator("#compare-follow textarea, #compare-follow input").first.fill("")
        page.get_by_role("button", name="Compare", exact=True).click()
        for number in (1, 2):
            box = page.locator(f"#compare-caption-{number} textarea")
            page.wait_for_function("el => el.value.trim().length > 0", arg=box.element_handle(), timeout=60_000)
            page.locator(f"#compare-gallery-{number} img").first.wait_for(timeout=30_000)
    finally:
        page.close()
    assert outside == []


@pytest.mark.slow
def test_a_refused_caption_to_follow_is_one_message_not_a_crash_in_a_real_browser(browser, served, pictures):
    """A word the models lack is said once, in the page's message: the rows of the last comparison are emptied and
    none carries a red "Error" badge (six of them read as a crash); the tab says the ShapesWorld models know only
    shapes (on a photo they repeat words)."""
    page = browser.new_page(viewport={"width": 1280, "height": 1400})
    try:
        page.goto(served, wait_until="networkidle")
        page.get_by_role("tab", name="Compare").click()
        assert "know only ShapesWorld's scenes" in page.locator("#compare-about").inner_text()
        page.locator("#compare-image input[type=file]").set_input_files(str(pictures["scene.png"]))
        page.get_by_role("button", name="Compare", exact=True).click()
        page.locator("#compare-gallery-1 img").first.wait_for(timeout=60_000)
        page.locator("#compare-follow textarea, #compare-follow input").first.fill("a zebra on the moon")
        page.get_by_role("button", name="Compare", exact=True).click()
        page.get_by_text("The caption to follow has words the models do not know: 'zebra'").wait_for(timeout=30_000)
        assert page.locator("#compare-gallery-1 img").count() == 0
        assert page.locator("#compare-caption-1 textarea").input_value() == ""
        badges = page.locator("[id^=compare-]").get_by_text("Error", exact=True)
        assert [badge.is_visible() for badge in badges.all()] == [False] * badges.count()
    finally:
        page.close()
