"""The exported pictures show what the model attended to: every file of `captioning.export` and `vqa.export`,
for a fixed ShapesWorld scene and the bundled ShapesWorld models, is compared with the picture drawn by
`core.maps.overlays` from the attention weights the model itself returns for that word or hop.

The other export tests (tests/unit/test_overlays.py) check that the files are there, named and sized right;
these check what is in them: each word's overlay is drawn from that word's own attention row, in caption
order, in the PNG files, in caption.json and in the GIF's frames.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from captioning.inference import generate_caption
from captioning.overlays import GIF_SIZE, word_file_name
from captioning.pretrained import Captioner
from core.maps.overlays import gif_frame, heat_maps, overlay, titled
from data.shapes_scene import generate_split_scene, render_scene

BEAM_SIZE = 3
TITLE_HEIGHT = 18  # pixels of the title strip over each GIF frame (core.maps.overlays._TITLE_HEIGHT)


def pixels(picture: Image.Image) -> np.ndarray:
    """The picture as an (H, W, 3) int array, for differences without uint8 wrap-around."""
    return np.asarray(picture.convert("RGB"), dtype=np.int16)


def mean_difference(a: Image.Image, b: Image.Image) -> float:
    """Mean absolute difference per channel, in levels of 0..255."""
    assert a.size == b.size, f"{a.size} != {b.size}"
    return float(np.abs(pixels(a) - pixels(b)).mean())


def expected_overlays(scene: Image.Image, weights: torch.Tensor, grid: int) -> list[Image.Image]:
    """Each attention row drawn over the scene, by the same functions the export uses."""
    return [overlay(scene, heat) for heat in heat_maps(weights, grid, scene.size)]


@pytest.fixture(scope="module")
def scene() -> Image.Image:
    """A ShapesWorld test scene squashed to a non-square 200 x 150 photo (the maps are stretched onto it)."""
    return render_scene(generate_split_scene(0, "test", 3), 224).resize((200, 150), Image.Resampling.BILINEAR)


@pytest.fixture(scope="module")
def captioner():
    from captioning.bundled import SHAPES_SOFT
    from captioning.module import CaptioningModule

    return CaptioningModule.load(SHAPES_SOFT)


@pytest.fixture(scope="module")
def caption_export(tmp_path_factory, captioner, scene) -> tuple[Path, list[str], torch.Tensor]:
    """The scene exported as `python -m captioning.export` does (`Captioner.caption`, then `Caption.save`) into a
    folder, with the words and weights (n_words, L) that the beam search itself returns for it."""
    words, weights = generate_caption(captioner, scene, BEAM_SIZE)
    folder = tmp_path_factory.mktemp("caption") / "scene"
    replace(Captioner(model=captioner).caption(scene, beam_size=BEAM_SIZE), source="scene.png").save(folder)
    # the checks below can only tell word pictures apart if the words looked at different places
    assert len(words) >= 3 and weights.shape == (len(words), captioner.encoder.num_locations)
    first, last = expected_overlays(scene, weights[[0, -1]], captioner.encoder.grid_shape)
    assert mean_difference(first, last) > 1.0
    return folder, words, weights


def test_caption_json_holds_the_searchs_words_and_weights(caption_export, captioner, scene):
    folder, words, weights = caption_export
    record = json.loads((folder / "caption.json").read_text())
    assert record["words"] == words and record["caption"] == " ".join(words)
    grid = captioner.encoder.grid_shape
    assert record["grid_size"] == list(grid) and record["image_size"] == list(scene.size)
    np.testing.assert_allclose(np.array(record["weights"]), weights.numpy(), rtol=0, atol=1e-7)


def test_each_word_png_is_the_overlay_of_that_words_own_attention_row(caption_export, captioner, scene):
    folder, words, weights = caption_export
    expected = expected_overlays(scene, weights, captioner.encoder.grid_shape)
    assert sorted(p.name for p in folder.glob("word_*.png")) == [word_file_name(n, w) for n, w in enumerate(words, 1)]
    for number, (word, picture) in enumerate(zip(words, expected), start=1):
        with Image.open(folder / word_file_name(number, word)) as exported:
            assert exported.mode == "RGB" and exported.size == scene.size
            difference = np.abs(pixels(exported) - pixels(picture)).max()
        assert difference <= 1, f"word {number} ({word!r}) differs from its overlay by up to {difference} levels"


def test_the_gif_frames_show_the_words_overlays_in_caption_order(caption_export, captioner, scene):
    """Each frame is the word's overlay, titled "n. word", after the GIF's palette quantisation."""
    folder, words, weights = caption_export
    expected = expected_overlays(scene, weights, captioner.encoder.grid_shape)
    with Image.open(folder / "attention.gif") as gif:
        assert gif.n_frames == len(words)
        frames = []
        for index in range(gif.n_frames):
            gif.seek(index)
            frames.append(gif.convert("RGB"))
    for number, (word, picture, frame) in enumerate(zip(words, expected, frames), start=1):
        small = picture.copy()
        small.thumbnail((GIF_SIZE, GIF_SIZE), Image.Resampling.BILINEAR)
        quantised = gif_frame(titled(small, f"{number}. {word}"))
        assert frame.size == quantised.size
        # the picture below the title strip: the word's own overlay, not another word's nor the bare photo
        below = (0, TITLE_HEIGHT, frame.width, frame.height)
        difference = mean_difference(frame.crop(below), quantised.crop(below))
        assert difference <= 0.5, f"frame {number} ({word!r}) differs from its overlay by {difference:.2f} levels on average"


@pytest.fixture(scope="module")
def answerer():
    from vqa.bundled import SHAPES_SAN
    from vqa.module import VqaModule

    return VqaModule.load(SHAPES_SAN)


def test_each_hop_png_is_the_overlay_of_that_hops_weights(tmp_path, answerer, scene):
    from vqa.pretrained import Answerer

    question = "what colour is the circle?"
    with torch.inference_mode():
        answered = answerer.answer(answerer.encoder.transform()(scene), question, top=3)
    answer = Answerer(model=answerer).ask(scene, question, top_k=3)
    record = replace(answer, source="scene.png").save(tmp_path)
    hops = answered.weights.float()
    assert record["answers"] == [[a, pytest.approx(p, abs=1e-6)] for a, p in answered.answers]
    np.testing.assert_allclose(np.array(record["weights"]), hops.numpy(), rtol=0, atol=1e-7)
    assert json.loads((tmp_path / "answer.json").read_text())["weights"] == record["weights"]

    expected = expected_overlays(scene, hops, answerer.encoder.grid_shape)
    assert len(expected) >= 2 and mean_difference(expected[0], expected[-1]) > 1.0  # the hops look apart
    assert sorted(p.name for p in tmp_path.glob("hop_*.png")) == [f"hop_{k}.png" for k in range(1, len(expected) + 1)]
    for hop, picture in enumerate(expected, start=1):
        with Image.open(tmp_path / f"hop_{hop}.png") as exported:
            assert exported.size == scene.size
            difference = np.abs(pixels(exported) - pixels(picture)).max()
        assert difference <= 1, f"hop {hop} differs from its overlay by up to {difference} levels"
