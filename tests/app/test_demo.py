"""The Gradio app (demo.py) as a person and an API client use it: served on a free 127.0.0.1 port in this
process, driven through gradio_client and through a real headless Chromium (Debian's, via Playwright), with
the bundled ShapesWorld models and photos from scikit-image.

Every bad upload must come back as an error that names the problem, with the app still answering after it;
every readable image mode must work.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # gradio_client must never look for a Hugging Face Space

import importlib
import io
import json
import re
import socket
import string
import struct
import threading
import time
import warnings
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gradio as gr
import numpy as np
import torch
import pytest
from gradio_client import Client, handle_file
from gradio_client.exceptions import AppError
from gradio_client.utils import QueueError
from PIL import Image

import demo
from captioning.bundled import CAPTION_CHECKPOINTS, SHAPES_SOFT
from captioning.overlays import PREVIEW_QUALITY, word_file_name
from captioning.module import CaptioningModule
from captioning.pretrained import Captioner
from core.training.checkpoints import read_checkpoint
from core.maps.overlays import FixedScale, heat_maps, overlay, word_grid
from data.images import ImageLoadError, load_image
from data.shapes_scene import generate_split_scene, render_scene
from vqa.answers import answer_words
from vqa.bundled import DAQUAR_SAN, FLICKR8K_QA_SAN, QUESTION_SCOPES, SHAPES_SAN, VQA_CHECKPOINTS
from vqa.pretrained import Answer, Answerer

SPECIALS = {"<pad>", "<start>", "<end>", "<unk>"}
SHAPES_VQA = next(name for name, path in VQA_CHECKPOINTS.items() if path == SHAPES_SAN)  # the questions below are
# about shapes and colours, in its words
DAQUAR_VQA = next(name for name, path in VQA_CHECKPOINTS.items() if path == DAQUAR_SAN)
FLICKR8K_QA_VQA = next(name for name, path in VQA_CHECKPOINTS.items() if path == FLICKR8K_QA_SAN)
HOPS = read_checkpoint(SHAPES_SAN)["hyper_parameters"]["san"]["init_args"]["hops"]
ANSWERS = min(demo.TOP_ANSWERS, len(read_checkpoint(SHAPES_SAN)["hyper_parameters"]["answers"]))

from tests.helpers import GRADIO_DOWNLOADS


# -- fixtures: pictures, the served app, a client ------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def write_bomb_png(path: Path, side: int = 30_000) -> Path:
    """A valid side x side 1-bit black PNG written row by row: ~110 kB on disk, 900 megapixels when decoded,
    made without ever holding the image in memory."""
    row = b"\x00" * (1 + (side + 7) // 8)  # filter byte "none", then the packed bits
    compressor = zlib.compressobj(9)
    data = b"".join(compressor.compress(row) for _ in range(side)) + compressor.flush()
    header = struct.pack(">IIBBBBB", side, side, 1, 0, 0, 0, 0)  # bit depth 1, greyscale
    chunks = png_chunk(b"IHDR", header) + png_chunk(b"IDAT", data) + png_chunk(b"IEND", b"")
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunks)
    return path


@pytest.fixture(scope="module")
def pictures(tmp_path_factory) -> dict[str, Path]:
    """The photo as JPEG, small copies of it in every awkward mode, a ShapesWorld scene, and the bad files."""
    skimage_data = pytest.importorskip("skimage.data")
    folder = tmp_path_factory.mktemp("pictures")
    photo = Image.fromarray(skimage_data.coffee())  # 600 x 400
    small = photo.resize((120, 80))
    paths = {"coffee": folder / "coffee.jpg"}
    photo.save(paths["coffee"], quality=90)

    def save(name: str, image: Image.Image, **options: Any) -> None:
        paths[name] = folder / name
        image.save(paths[name], **options)

    save("gray.jpg", small.convert("L"))
    save("cmyk.jpg", small.convert("CMYK"))
    save("palette.png", small.convert("P", palette=Image.Palette.ADAPTIVE))
    rgba = small.convert("RGBA")
    rgba.putalpha(Image.linear_gradient("L").resize(small.size))
    save("rgba.png", rgba)
    sixteen = (np.asarray(small.convert("L"), dtype=np.uint16) * 257).astype(np.uint16)
    save("sixteen.png", Image.fromarray(sixteen))  # mode I;16
    exif = Image.Exif()
    exif[0x0112] = 6  # orientation: the camera was turned; the stored 120 x 80 picture shows upright as 80 x 120
    save("rotated.jpg", small, exif=exif)

    (folder / "notes.png").write_text("a shopping list, not a picture\n")
    paths["notes.png"] = folder / "notes.png"
    encoded = io.BytesIO()
    photo.save(encoded, format="JPEG", quality=90)
    paths["truncated.jpg"] = folder / "truncated.jpg"
    paths["truncated.jpg"].write_bytes(encoded.getvalue()[: len(encoded.getvalue()) // 2])
    paths["bomb.png"] = write_bomb_png(folder / "bomb.png")
    paths["scene"] = folder / "scene.png"  # a ShapesWorld test scene, non-square, for the ShapesWorld models
    render_scene(generate_split_scene(0, "test", 3), 224).resize((300, 200), Image.Resampling.BILINEAR).save(paths["scene"])
    assert Image.open(paths["sixteen.png"]).mode.startswith("I;16") and Image.open(paths["cmyk.jpg"]).mode == "CMYK"
    return paths


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Iterator[tuple[gr.Blocks, str]]:
    """The app with the bundled models, served in this process; yields (app, its URL)."""
    app = demo.build_app(
        caption_checkpoints=CAPTION_CHECKPOINTS, vqa_checkpoints=VQA_CHECKPOINTS, work_dir=tmp_path_factory.mktemp("work")
    )
    port = free_port()
    demo.launch_app(app, port=port, prevent_thread_lock=True, quiet=True)
    try:
        yield app, f"http://127.0.0.1:{port}/"
    finally:
        app.close()


@pytest.fixture(scope="module")
def client(served) -> Client:
    return Client(served[1], verbose=False, download_files=GRADIO_DOWNLOADS)


@pytest.fixture(scope="module")
def vocabulary() -> dict[str, set[str]]:
    """Each bundled captioning model's words by the model's name in the app: those of its vocabulary, and for a
    model that names objects (`captioning.naming`) the new words it may add."""
    words = {}
    for name, path in CAPTION_CHECKPOINTS.items():
        captioner = Captioner.from_checkpoint(path)
        captioner.model.set_naming(captioner.naming)
        words[name] = set(captioner.model.vocabulary_in_use.tokens) - SPECIALS
    return words


DEFAULT_MODEL = next(iter(CAPTION_CHECKPOINTS))  # the one the app chooses at first
SHAPES_CAPTIONS = next(name for name, path in CAPTION_CHECKPOINTS.items() if path == SHAPES_SOFT)


def caption(
    client: Client, path: Path | None, model: str = DEFAULT_MODEL, beam_size: int = 1
) -> tuple[str, list[dict], str]:
    """The caption, the gallery and the export zip of a /caption call (its fourth output, the tags line, is
    checked on its own); the map and "Name objects" left as the page starts."""
    upload = handle_file(str(path)) if path is not None else None
    text, gallery, archive, _ = client.predict(upload, model, beam_size, api_name="/caption")
    return text, gallery, archive


def ask(client: Client, path: Path | None, question: str, model: str = SHAPES_VQA) -> tuple[dict, list[dict]]:
    """The answers and the hop gallery of an /ask call (its third output, the export zip, is checked on its own)."""
    answers, hops, _ = client.predict(
        handle_file(str(path)) if path is not None else None, model, question, api_name="/ask"
    )
    return answers, hops


def concentration_title(title: str, row: Any) -> str:
    """'dog: 62% on top 5%': the share of a map's attention on its most attended 5% of the photo, worked
    out here by hand: the cells in descending order of weight, 5% of them (2.45 of 49), the last in part."""
    ranked = np.sort(np.asarray(row, dtype=np.float64))[::-1]
    cells = 0.05 * len(ranked)
    whole = int(cells)
    top = ranked[:whole].sum() + (cells - whole) * ranked[whole]
    return f"{title}: {top / ranked.sum():.0%} on top 5%"


def assert_still_answers(client: Client, pictures: dict[str, Path]) -> None:
    answers, hops = ask(client, pictures["gray.jpg"], "how many objects are there?")
    assert len(answers["confidences"]) == ANSWERS and len(hops) == HOPS


# -- building and launching ------------------------------------------------------------------------------------


@pytest.mark.slow
def test_build_app_builds_without_serving(tmp_path):
    """(The app with every bundled model is the served one below; here one model a tab, for a quick run.)"""
    app = demo.build_app(
        caption_checkpoints={SHAPES_CAPTIONS: SHAPES_SOFT}, vqa_checkpoints={SHAPES_VQA: SHAPES_SAN}, compare_groups=(),
        work_dir=tmp_path,
    )  # fmt: skip
    assert isinstance(app, gr.Blocks) and not app.is_running
    assert {fn.api_name for fn in app.fns.values()} >= {"caption", "ask"}
    assert app.analytics_enabled is False and os.environ["GRADIO_ANALYTICS_ENABLED"] == "False"
    assert {p.name for p in (tmp_path / "examples").iterdir()} >= {"coffee.jpg", "astronaut.jpg", "chelsea.jpg"}


def test_command_line_defaults_bind_this_computer_only_and_use_the_bundled_models():
    args = demo.parse_arguments([])
    assert (args.host, args.port) == ("127.0.0.1", 7860)
    assert (args.caption_model, args.vqa_model) == (CAPTION_CHECKPOINTS, VQA_CHECKPOINTS)
    assert all(p.is_file() for p in (*CAPTION_CHECKPOINTS.values(), *VQA_CHECKPOINTS.values()))
    assert "Flickr8k" in DEFAULT_MODEL and next(iter(VQA_CHECKPOINTS)) == "Flickr8k-QA"  # everyday photos come first
    chosen = demo.parse_arguments(["--caption-model", "mine=a.ckpt", "--caption-model", "b=b.ckpt", "--vqa-model", "q=q.ckpt"])
    assert chosen.caption_model == {"mine": Path("a.ckpt"), "b": Path("b.ckpt")} and chosen.vqa_model == {"q": Path("q.ckpt")}
    assert demo.parse_arguments(["--host", "0.0.0.0", "--port", "8080"]).port == 8080


def test_models_are_named_as_every_command_names_them_a_bundled_name_a_path_or_name_equals_path(tmp_path):
    mine = tmp_path / "mine.ckpt"
    mine.write_bytes(b"")  # a file: read only when the app loads it
    chosen = demo.parse_arguments(
        ["--caption-model", "flickr8k-hard", "--caption-model", str(mine), "--vqa-model", "shapes-san"]
    )
    assert chosen.caption_model == {"Flickr8k hard": CAPTION_CHECKPOINTS["Flickr8k hard"], str(mine): mine}
    assert chosen.vqa_model == {"ShapesWorld": VQA_CHECKPOINTS["ShapesWorld"]}
    with pytest.raises(SystemExit):  # neither a bundled name, nor a file, nor NAME=PATH
        demo.parse_arguments(["--vqa-model", str(tmp_path / "missing.ckpt")])


def test_the_queue_is_bounded_by_default_and_from_the_command_line():
    assert demo.parse_arguments([]).max_queue == demo.DEFAULT_MAX_QUEUE == 64
    assert demo.parse_arguments(["--max-queue", "2"]).max_queue == 2
    with pytest.raises(SystemExit):
        demo.parse_arguments(["--max-queue", "0"])


@pytest.mark.slow
def test_main_reports_a_missing_checkpoint_without_a_traceback(tmp_path, monkeypatch):
    loaded = []
    monkeypatch.setattr(CaptioningModule, "load", lambda path, **kwargs: loaded.append(path))
    with pytest.raises(SystemExit, match=r"error: checkpoint not found: .*nowhere\.ckpt"):
        demo.main(["--vqa-model", f"mine={tmp_path / 'nowhere.ckpt'}"])
    assert loaded == []  # named before the captioning models (which come first) are loaded
    with pytest.raises(SystemExit):  # argparse's own error and usage
        demo.parse_arguments(["--caption-model", "no-name-given.ckpt"])


def test_load_image_refuses_the_bomb_from_its_header(pictures):
    assert pictures["bomb.png"].stat().st_size < 1_000_000
    start = time.perf_counter()
    with pytest.raises(ImageLoadError, match="too large"):
        load_image(pictures["bomb.png"])
    assert time.perf_counter() - start < 1.0  # refused before decoding (decoding 900 megapixels takes seconds)


# -- the Caption tab through the API ------------------------------------------------------------------------


@pytest.mark.slow
def test_caption_of_a_real_photo_gives_words_their_overlays_and_the_export(client, pictures, vocabulary, tmp_path):
    text, gallery, archive = caption(client, pictures["coffee"], DEFAULT_MODEL, 3)
    words = text.split()
    assert words and set(words) <= vocabulary[DEFAULT_MODEL]
    assert [item["caption"].split(":")[0] for item in gallery] == words  # one overlay per word, titled with it
    with Image.open(gallery[0]["image"]) as first:
        assert first.size == (600, 400)  # drawn over the photo at its own size
    with zipfile.ZipFile(archive) as exported:
        names = exported.namelist()
        record = json.loads(exported.read(next(n for n in names if n.endswith("caption.json"))))
    assert record["caption"] == text and record["image"] == "coffee.jpg"
    assert any(n.endswith("grid.png") for n in names) and any(n.endswith("attention.gif") for n in names)


@pytest.mark.slow
def test_the_caption_and_its_overlays_come_before_the_export(pictures, tmp_path):
    handlers = demo.Handlers(*demo.load_models({DEFAULT_MODEL: CAPTION_CHECKPOINTS[DEFAULT_MODEL]}, {}), tmp_path)
    answers = handlers.caption({"path": str(pictures["coffee"]), "orig_name": "coffee.jpg"}, DEFAULT_MODEL, 2)
    text, gallery, archive, tags = next(answers)
    assert text.split() and archive is None and tags.startswith("The encoder's ImageNet head sees: coffee") and [title.split(":")[0] for _, title in gallery] == text.split()
    for path, _ in gallery:  # JPEG copies of the overlays, at the photo's size, outside the export folder
        with Image.open(path) as preview:
            assert preview.format == "JPEG" and preview.size == (600, 400)
    final = next(answers)
    assert final[:2] == (text, gallery) and final[3] == tags and next(answers, None) is None
    with zipfile.ZipFile(final[2]) as exported:
        names = exported.namelist()
    assert sum(n.endswith(".png") and "/word_" in n for n in names) == len(gallery)
    assert not any(n.endswith(".jpg") for n in names)


def test_the_app_serves_a_transformer_captioner_with_every_heads_maps_in_its_export(pictures, tmp_path):
    """`python demo.py --caption-model NAME=PATH` with a Transformer checkpoint: its Caption tab answers as it does for
    Show-Attend-Tell (an overlay per word, titled with the word), and the export's caption.json holds every layer's
    and head's map."""
    from functools import partial

    from captioning.transformer import TransformerDecoder
    from tests.helpers import always_speaking

    torch.manual_seed(0)
    words = ["<pad>", "<start>", "<end>", "<unk>", "a", "cup", "of", "coffee"]
    decoder = partial(TransformerDecoder, model_dim=8, layers=2, heads=2, feedforward_dim=8)
    model = always_speaking(CaptioningModule(decoder=decoder, vocabulary=words, max_length=3))
    path = tmp_path / "transformer.ckpt"
    torch.save({"state_dict": model.state_dict(), "hyper_parameters": dict(model.hparams)}, path)
    handlers = demo.Handlers(*demo.load_models({"transformer": path}, {}), tmp_path)
    upload = {"path": str(pictures["coffee"]), "orig_name": "coffee.jpg"}
    *_, (text, gallery, archive, _) = handlers.caption(upload, "transformer", 2, name_objects=False)
    answer = demo.CaptionAnswer(text, tuple(p for p, _ in gallery), tuple(t for _, t in gallery), archive)
    assert answer.problem(set(words)) is None and len(text.split()) == 3
    with zipfile.ZipFile(archive) as exported:
        record = json.loads(exported.read(next(n for n in exported.namelist() if n.endswith("caption.json"))))
    assert record["words"] == text.split()
    heads = torch.tensor(record.get("heads", []))
    assert heads.shape == (3, 2, 2, 49)  # word, layer, head, cell of the 7x7 grid
    torch.testing.assert_close(torch.tensor(record["weights"]), heads[:, -1].mean(1))  # its own: the last layer's mean

    # the "Map" choice: every layer's mean and every head, the model's own first; the overlays then show that map
    labels = [label for label, _ in demo.map_choices(Captioner(model=model))]
    assert labels == ["layer 2, heads averaged (the model's own)", "layer 1, heads averaged", "layer 1, head 1",
                      "layer 1, head 2", "layer 2, heads averaged", "layer 2, head 1", "layer 2, head 2"]  # fmt: skip
    *_, (same, _, second, _) = handlers.caption(upload, "transformer", 2, 2, False)  # layer 1, head 2
    assert same == text
    with zipfile.ZipFile(second) as exported:
        record = json.loads(exported.read(next(n for n in exported.namelist() if n.endswith("caption.json"))))
    torch.testing.assert_close(torch.tensor(record["weights"]), heads[:, 0, 1])
    assert demo.map_choices(Captioner.from_checkpoint(CAPTION_CHECKPOINTS[DEFAULT_MODEL])) == []  # one map per word
    for wrong in (7, -2, "1", 1.5):
        with pytest.raises(gr.Error, match="The map must be -1 .* or a number from 0 to 5"):
            next(handlers.caption(upload, "transformer", 2, wrong))


def jpeg_round_trip(picture: Image.Image) -> Image.Image:
    """The picture as the app's gallery holds it: encoded as a JPEG preview and decoded again."""
    encoded = io.BytesIO()
    picture.save(encoded, format="JPEG", quality=PREVIEW_QUALITY)
    return Image.open(io.BytesIO(encoded.getvalue())).convert("RGB")


def mean_difference(a: Image.Image, b: Image.Image) -> float:
    """Mean absolute difference per channel of two pictures of the same size, in levels of 0..255."""
    assert a.size == b.size, f"{a.size} != {b.size}"
    return float(np.abs(np.asarray(a.convert("RGB"), dtype=np.int16) - np.asarray(b.convert("RGB"), dtype=np.int16)).mean())


@pytest.mark.parametrize(
    ("model", "photo"), [pytest.param(DEFAULT_MODEL, "coffee", marks=pytest.mark.slow), (SHAPES_CAPTIONS, "scene")]
)
def test_the_apps_caption_gallery_and_export_are_generate_captions_for_the_same_photo(client, pictures, model, photo):
    """What the app answers is what `Captioner.caption` gives for the same photo, model and
    beam width: the same words, each gallery picture that word's own overlay (a JPEG of it: within JPEG's
    tolerance), and in the export zip each word's PNG exactly that overlay and caption.json the same weights."""
    beam_size = 2
    text, gallery, archive = caption(client, pictures[photo], model, beam_size)

    image = load_image(pictures[photo])
    image.thumbnail((demo.WORK_SIZE, demo.WORK_SIZE))  # as the app works on it
    captioner = Captioner.from_checkpoint(CAPTION_CHECKPOINTS[model])  # naming objects where the app does
    result = captioner.caption(image, beam_size=beam_size)
    words, weights, captioner = result.words, result.attention.flatten(1), captioner.model
    expected = [overlay(image, heat) for heat in heat_maps(weights, captioner.encoder.grid_shape, image.size)]
    assert len(words) >= 3 and mean_difference(expected[0], expected[-1]) > 1.0  # words looked at different places

    assert text == " ".join(words)
    # each titled with its word and how concentrated its attention is ("circle: 62% on top 5%")
    assert [item["caption"] for item in gallery] == [concentration_title(w, row) for w, row in zip(words, weights)]
    for number, (item, picture) in enumerate(zip(gallery, expected), start=1):
        with Image.open(item["image"]) as shown:
            difference = mean_difference(shown, jpeg_round_trip(picture))
        assert difference <= 0.5, f"gallery picture {number} ({words[number - 1]!r}) is off by {difference:.2f} levels"

    with zipfile.ZipFile(archive) as exported:
        names = exported.namelist()
        record = json.loads(exported.read(next(n for n in names if n.endswith("/caption.json"))))
        assert record["words"] == words
        np.testing.assert_allclose(np.array(record["weights"]), weights.numpy(), rtol=0, atol=1e-7)
        assert record["scale"]["kind"] == "fixed" and len(record["concentration"]) == len(words)
        for number, (word, picture) in enumerate(zip(words, expected), start=1):
            name = next(n for n in names if n.endswith("/" + word_file_name(number, word)))
            with Image.open(io.BytesIO(exported.read(name))) as written:
                difference = np.abs(np.asarray(written.convert("RGB"), dtype=np.int16) - np.asarray(picture, dtype=np.int16)).max()
            assert difference <= 1, f"{name} differs from its overlay by up to {difference} levels"


@pytest.mark.parametrize("model", list(CAPTION_CHECKPOINTS))
@pytest.mark.slow
def test_every_model_and_every_beam_width_answer(client, pictures, vocabulary, model):
    for beam_size in (1, demo.MAX_BEAM_SIZE):
        text, gallery, archive = caption(client, pictures["gray.jpg"], model, beam_size)
        assert text.split() and set(text.split()) <= vocabulary[model] and len(gallery) == len(text.split())
        assert demo.CaptionAnswer.from_api((text, gallery, archive, "")).problem(vocabulary[model]) is None


def test_a_caption_answer_is_held_to_what_the_app_promises():
    """`demo.CaptionAnswer`, the one description of a Caption answer that the benchmarks check answers against."""
    picture = {"path": "/tmp/a.jpg", "url": "http://127.0.0.1/file=a.jpg"}  # an undownloaded file, as gradio_client gives it
    gallery = [{"image": picture, "caption": "a: 8% on top 5%"}, {"image": "/tmp/b.jpg", "caption": "dog: 62% on top 5%"}]
    answer = demo.CaptionAnswer.from_api(("a dog", gallery, {"url": "http://127.0.0.1/file=a.zip"}, "tags"))
    assert answer.pictures == ("http://127.0.0.1/file=a.jpg", "/tmp/b.jpg")
    assert answer.problem({"a", "dog"}) is None and answer.problem() is None
    assert answer.problem(with_zip=False) == "an export zip in the first answer"
    assert "not in the model's words" in answer.problem({"a", "cat"})
    assert demo.CaptionAnswer.from_api(("a dog", gallery, None, "")).problem() == "no export zip"
    assert demo.CaptionAnswer.from_api(("a dog", gallery, None, "")).problem(with_zip=False) is None
    for broken in (
        gallery[:1],  # an overlay missing
        [gallery[0], {"image": "/tmp/b.jpg", "caption": "cat: 62% on top 5%"}],  # titled with another word
        [gallery[0], {"image": "/tmp/b.jpg", "caption": "dog"}],  # without its concentration
        [gallery[0], {"image": None, "caption": "dog: 62% on top 5%"}],  # without its picture
    ):
        assert "overlays titled" in demo.CaptionAnswer.from_api(("a dog", broken, "a.zip", "")).problem()
    with pytest.raises(ValueError, match="not a .caption, gallery, zip, tags. answer"):
        demo.CaptionAnswer.from_api(("a dog", gallery))
    # the titles the app writes are the ones it describes
    assert demo.OVERLAY_TITLE.fullmatch(demo.overlay_title("hop 2", 0.4))["label"] == "hop 2"


@pytest.mark.parametrize("name", ["gray.jpg", "cmyk.jpg", "palette.png", "rgba.png", "sixteen.png", "rotated.jpg"])
def test_every_readable_image_mode_is_captioned(client, pictures, vocabulary, name):
    text, gallery, _ = caption(client, pictures[name])
    assert text.split() and set(text.split()) <= vocabulary[DEFAULT_MODEL]
    with Image.open(gallery[0]["image"]) as first:
        assert first.size == ((80, 120) if name == "rotated.jpg" else (120, 80))  # EXIF orientation applied


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("notes.png", "notes.png is not a picture this app can read: upload a photo saved as JPEG, PNG, GIF, WebP, BMP or TIFF."),
        ("truncated.jpg", "truncated.jpg is damaged or incomplete (it may have been cut short while it was saved or uploaded): upload it again, or another copy of it."),
        ("bomb.png", "bomb.png is too large: this app takes pictures of up to 50 megapixels. Upload a smaller copy."),
        (None, "No image: upload a photo (or pick an example) first."),
    ],
)
def test_a_bad_upload_is_an_error_in_plain_words_and_the_app_goes_on(client, pictures, name, problem):
    """The message speaks to a person in a browser: the file's own name and what to do, never the server's paths,
    the loader's options (max_pixels) or PIL's internals ("10 bytes not processed")."""
    start = time.perf_counter()
    with pytest.raises(AppError) as raised:
        caption(client, pictures[name] if name else None)
    message = raised.value.args[0]
    assert message == problem
    assert not any(internal in message for internal in ("/tmp", "max_pixels", "PIL", "bytes not processed", "cannot read image"))
    assert time.perf_counter() - start < 20
    assert_still_answers(client, pictures)


@pytest.mark.parametrize(
    ("model", "beam_size", "problem"),
    [(DEFAULT_MODEL, 0, "beam size"), (DEFAULT_MODEL, 2.5, "beam size"), ("medium", 3, "Unknown model"), (None, 3, "Unknown model")],
)
def test_bad_settings_from_an_api_caller_are_refused(client, pictures, model, beam_size, problem):
    with pytest.raises(AppError, match=problem):
        caption(client, pictures["gray.jpg"], model, beam_size)


# -- the Ask tab through the API ------------------------------------------------------------------------------


def test_ask_gives_the_top_answers_and_one_overlay_per_hop(client, pictures, served):
    answers, hops = ask(client, pictures["coffee"], "what colour is the circle?")
    confidences = answers["confidences"]
    assert len(confidences) == ANSWERS and answers["label"] == confidences[0]["label"]
    probabilities = [c["confidence"] for c in confidences]
    assert all(0 <= p <= 1 for p in probabilities) and sum(probabilities) <= 1 + 1e-6
    assert probabilities == sorted(probabilities, reverse=True)
    titles = [item["caption"] for item in hops]
    assert len(titles) == HOPS
    assert all(re.fullmatch(rf"hop {k}: \d+% on top 5%", title) for k, title in enumerate(titles, start=1))
    with Image.open(hops[1]["image"]) as overlay:
        assert overlay.size == (600, 400)


def test_ask_offers_the_export_zip_with_the_question_over_its_grid(client, pictures):
    question = "what colour is the circle?"
    answers, hops, archive = client.predict(handle_file(str(pictures["coffee"])), SHAPES_VQA, question, api_name="/ask")
    with zipfile.ZipFile(archive) as exported:
        names = exported.namelist()
        assert sorted(name.split("/", 1)[1] for name in names) == ["answer.json", "grid.png", "hop_1.png", "hop_2.png"]
        record = json.loads(exported.read(next(n for n in names if n.endswith("/answer.json"))))
        grid = Image.open(io.BytesIO(exported.read(next(n for n in names if n.endswith("/grid.png")))))
    assert record["question"] == question and answer_words(record["answers"][0][0]) == answers["label"]
    # the question is a strip of text over the sheet: the grid is the same sheet drawn without it, one strip taller
    image = load_image(pictures["coffee"])
    image.thumbnail((demo.WORK_SIZE, demo.WORK_SIZE))
    maps = heat_maps(torch.tensor(record["weights"]), tuple(record["grid_size"]), image.size, FixedScale())
    titles = [f"hop {k}" for k in range(1, HOPS + 1)]
    first = f"{answers['label']} ({record['answers'][0][1]:.0%})"
    plain = word_grid(image, titles, maps, image_title=first, scale=FixedScale())
    assert grid.size == (plain.width, plain.height + 18)
    assert np.asarray(grid.convert("L"))[:18].min() < 100  # the question's text


@pytest.mark.parametrize(
    ("question", "problem"),
    [
        ("", "the question is empty"),
        ("   ", "the question is empty"),
        ("zebra quokka", r"none of the words of the question \(zebra quokka\) are known to this model; this model understands English questions"),
        ("침대는 무슨 색입니까?", r"none of the words of the question \(침대는 무슨 색입니까\?\) are known to this model; this model understands English questions using the \d+ words of its training questions, such as 'the', "),
    ],
)
def test_a_question_the_model_cannot_read_is_an_error_and_the_app_goes_on(client, pictures, question, problem):
    with pytest.raises(AppError, match=problem):
        ask(client, pictures["coffee"], question)
    assert_still_answers(client, pictures)


@pytest.mark.parametrize(("model", "example"), [
    (FLICKR8K_QA_VQA, "what is the man holding?"), (DAQUAR_VQA, "what is on the table?"),
    (SHAPES_VQA, "what colour is the circle?"),
])
def test_the_empty_question_hint_is_an_example_question_of_the_chosen_model(client, pictures, model, example):
    with pytest.raises(AppError) as raised:
        ask(client, pictures["coffee"], "", model)
    assert raised.value.args[0] == f"the question is empty: type a question about the image, such as '{example}'"
    assert example in [text for _, path, text in demo.QUESTION_EXAMPLES if path == VQA_CHECKPOINTS[model]]


def test_a_question_of_a_kind_the_model_was_not_trained_on_gets_a_hint_not_an_answer(client, pictures):
    """DAQUAR has no yes/no question: "is there a dog?" is refused with what the model answers, and examples, instead
    of an object's name ("jacket 18%"); the ShapesWorld model, trained on yes/no questions, answers it."""
    with pytest.raises(AppError) as raised:
        ask(client, pictures["coffee"], "is there a dog?", DAQUAR_VQA)
    assert raised.value.args[0] == (
        "'is there a dog?' is a yes/no question, a kind this model was not trained on: it answers object, number and "
        "colour questions, such as 'what is on the table?', 'how many chairs are there?', 'what color is the sofa?'."
    )
    answers, hops = ask(client, pictures["scene"], "is there a red circle?", SHAPES_VQA)
    assert answers["label"] in {"yes", "no"} and len(hops) == HOPS


def test_only_the_bundled_models_have_question_scopes(pictures, tmp_path):
    """A checkpoint of the user's own (here a copy of the DAQUAR model) has no declared kinds: it is asked anything,
    as before; the bundled one keeps its scope under whatever name the app gives it."""
    assert demo.question_scopes({"mine": DAQUAR_SAN}) == {"mine": QUESTION_SCOPES["daquar-san"]}
    own = tmp_path / "own.ckpt"
    own.write_bytes(DAQUAR_SAN.read_bytes())
    assert demo.question_scopes({"own": own}) == {}
    handlers = demo.Handlers({}, demo.load_models({}, {"own": own})[1], tmp_path)
    upload = {"path": str(pictures["coffee"]), "orig_name": "coffee.jpg"}
    answers, hops, _ = handlers.ask(upload, "own", "is there a dog?")
    assert answers and len(hops) == 2


def test_picking_a_question_example_also_picks_its_model(served):
    """Each example row of the Ask tab holds (picture, model, question), so a ShapesWorld question is never asked of
    the DAQUAR model; the rows are the bundled examples, each under the name its checkpoint has in the app."""
    app = served[0]
    (dataset,) = [
        block for block in app.blocks.values()
        if isinstance(block, gr.Dataset) and any(isinstance(c, gr.Radio) and c.choices == [(n, n) for n in VQA_CHECKPOINTS] for c in block._components)
    ]
    assert [type(c) for c in dataset._components] == [gr.Image, gr.Radio, gr.Textbox]
    models = [row[1] for row in dataset.samples]
    assert models == [FLICKR8K_QA_VQA, FLICKR8K_QA_VQA, DAQUAR_VQA, SHAPES_VQA, SHAPES_VQA, SHAPES_VQA]
    assert [row[2] for row in dataset.samples] == [question for _, _, question in demo.QUESTION_EXAMPLES]


def test_the_ask_tab_opens_on_the_flickr8k_qa_model_and_its_examples_are_answered(served, client, tmp_path):
    """The everyday-photo model is the Ask tab's first choice, and the questions its examples ask about scikit-image's
    photos get the answer the photo shows (the cameraman holds a camera, the flag behind the astronaut is red)."""
    import skimage.data

    (radio,) = [block for block in served[0].blocks.values() if getattr(block, "elem_id", None) == "ask-model"]
    assert radio.value == FLICKR8K_QA_VQA == "Flickr8k-QA"
    expected = {"what is the man holding?": "camera", "what is the color of the flag?": "red"}
    rows = [(picture, question) for picture, path, question in demo.QUESTION_EXAMPLES if path == FLICKR8K_QA_SAN]
    assert [question for _, question in rows] == list(expected) and demo.QUESTION_EXAMPLES[0][1] == FLICKR8K_QA_SAN
    for picture, question in rows:
        photo = tmp_path / f"{picture}.jpg"
        Image.fromarray(getattr(skimage.data, picture)()).save(photo, quality=92)
        answers, hops = ask(client, photo, question, FLICKR8K_QA_VQA)
        assert answers["label"] == expected[question] and len(hops) == 2


def test_the_galleries_explain_the_colour_scale(served):
    """Under each gallery, a legend says what the colours and the titles' percentages mean."""
    blocks = served[0].blocks.values()
    legends = [block.value for block in blocks if isinstance(block, gr.Markdown) and "uniform" in block.value]
    assert len(legends) == 3  # the Caption tab's, the Ask tab's and the Compare tab's
    for legend in legends:
        assert "1 = uniform attention" in legend and "brighter = more attention than uniform" in legend
        assert "the same for every word" in legend and "8x uniform" in legend and "on top 5%" in legend


def test_question_examples_follow_the_loaded_checkpoints(tmp_path):
    """Launched with other models (--vqa-model NAME=PATH), the app shows the examples of the bundled checkpoints it
    still has, under their new names, and none made for a model it does not have."""
    assert demo.question_examples({"mine": SHAPES_SAN}) == [
        (picture, "mine", question) for picture, path, question in demo.QUESTION_EXAMPLES if path == SHAPES_SAN
    ]
    assert demo.question_examples({"other": tmp_path / "other.ckpt"}) == []


def test_a_checkpoint_without_examples_still_gets_a_question_to_try(pictures, tmp_path):
    """A model the app has no example for is suggested a question in its own words when asked nothing."""
    handlers = demo.Handlers({}, demo.load_models({}, {"mine": SHAPES_SAN})[1], tmp_path)
    upload = {"path": str(pictures["scene"]), "orig_name": "scene.png"}
    with pytest.raises(gr.Error, match=r"the question is empty: .* such as 'what colour is the circle\?'"):
        handlers.ask(upload, "mine", "")


def test_a_question_cut_to_the_models_length_is_answered_with_a_warning(pictures, tmp_path):
    handlers = demo.Handlers({}, demo.load_models({}, {SHAPES_VQA: SHAPES_SAN})[1], tmp_path)
    upload = {"path": str(pictures["scene"]), "orig_name": "scene.png"}
    long_question = " ".join(["what colour is the circle"] * 8)  # 40 words
    with pytest.warns(UserWarning, match=r"Only the first 30 words of the question were read \(it has 40\)"):
        answers, hops, _ = handlers.ask(upload, SHAPES_VQA, long_question)  # gr.Warning: a warning outside a request
    assert answers and len(hops) == HOPS
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a question of 30 words or fewer gets no warning
        handlers.ask(upload, SHAPES_VQA, "what colour is the circle?")


def test_the_docs_quote_what_the_bundled_model_says_of_the_example_photos(tmp_path):
    """The README's screenshot caption (made by benchmarks/app_screenshot.py), the app page's and the model card's
    quotes are what the app's default model says of those example photos, as the Caption tab runs it (beam 3)."""
    repo = Path(demo.__file__).resolve().parent
    readme, app_page, card = ((repo / name).read_text() for name in ("README.md", "docs/app.md", "docs/model-card.md"))
    screenshot = re.compile(r'camera photo with the bundled Flickr8k soft-attention model: "([^"]+)"')
    quoted = {"camera": {*screenshot.findall(readme), *screenshot.findall(app_page)}}
    for name, what in (("coffee", "an espresso\s+cup"), ("chelsea", "a cat"), ("astronaut", "an astronaut")):
        quoted.setdefault(name, set()).update(re.findall(rf'"([^"]+)" \({what}\)', card))
    assert all(len(quotes) == 1 for quotes in quoted.values()), quoted  # each photo quoted, and alike everywhere
    captioner = Captioner.from_checkpoint(CAPTION_CHECKPOINTS[DEFAULT_MODEL])  # naming objects, as the app does
    examples = demo.write_examples(tmp_path)
    for name, (quote,) in quoted.items():
        image = load_image(examples[name])
        image.thumbnail((demo.WORK_SIZE, demo.WORK_SIZE))
        assert captioner.caption(image, beam_size=demo.DEFAULT_BEAM_SIZE).text == quote, name


def test_the_header_describes_the_models_the_app_serves(tmp_path):
    """With the bundled models, what they were trained on; with a checkpoint of the user's own, each tab's models by
    name (the user's with its file), never the bundled training data of a model it does not serve."""
    bundled = demo.app_header(CAPTION_CHECKPOINTS, VQA_CHECKPOINTS, compare=True)
    assert "**Flickr8k** photos (captions)" in bundled and "mine" not in bundled
    own = demo.app_header({"mine": tmp_path / "best.ckpt"}, {"ShapesWorld": SHAPES_SAN}, compare=True)
    assert "Flickr8k" not in own and "trained on" not in own
    assert f"Captions by **mine** (`{tmp_path / 'best.ckpt'}`); answers by **ShapesWorld** (bundled)." in own
    assert own.endswith("The Compare tab sets bundled models side by side.")


def test_the_pages_font_has_every_letter_in_each_weight_it_serves():
    """The theme's text font files hold every ASCII letter in each weight: the SemiBold file Gradio ships holds 90
    glyphs, and bold words were drawn in another, larger font wherever a letter was missing."""
    ttlib = pytest.importorskip("fontTools.ttLib")
    from gradio.themes.utils.fonts import LocalFont, font_file_path

    (font,) = [font for font in demo.page_theme()._font if isinstance(font, LocalFont)]
    for weight in font.weights:
        cmap = ttlib.TTFont(font_file_path(font.name, weight)).getBestCmap()
        assert all(ord(letter) in cmap for letter in string.ascii_letters + string.digits), weight


def test_the_disk_bound_deletes_the_oldest_files_until_the_cache_fits(tmp_path):
    sizes = [400, 300, 200, 100]  # bytes, oldest first
    for age, size in enumerate(sizes):
        path = tmp_path / f"upload{age}" / "file.bin"
        path.parent.mkdir()
        path.write_bytes(b"x" * size)
        os.utime(path, (1000 + age, 1000 + age))
    bound = demo.DiskBound(tmp_path, max_bytes=350)
    assert bound.sweep() == 700  # 1000 bytes: the 400 and the 300 go, 300 are left
    assert sorted(p.parent.name for p in tmp_path.rglob("*.bin")) == ["upload2", "upload3"]
    assert bound.sweep() == 0  # within the bound: nothing more
    with pytest.raises(ValueError):
        demo.DiskBound(tmp_path, max_bytes=0)


def test_a_picture_too_small_to_say_anything_about_gets_a_note(tmp_path):
    """A 1x1 picture is captioned (and asked about) like any other, with a note that the answer tells little."""
    handlers = demo.Handlers(*demo.load_models({DEFAULT_MODEL: CAPTION_CHECKPOINTS[DEFAULT_MODEL]}, {SHAPES_VQA: SHAPES_SAN}), tmp_path)
    for size, noted in (((1, 1), True), ((31, 400), True), ((32, 32), False)):
        path = tmp_path / f"{size[0]}x{size[1]}.png"
        Image.new("RGB", size, (120, 80, 40)).save(path)
        upload = {"path": str(path), "orig_name": path.name}
        with warnings.catch_warnings(record=True) as caught:  # gr.Warning outside a request: a UserWarning
            warnings.simplefilter("always")
            *_, (text, gallery, archive, _) = handlers.caption(upload, DEFAULT_MODEL, 1)
            handlers.ask(upload, SHAPES_VQA, "what colour is the circle?")
        notes = [str(w.message) for w in caught if "pixels: the model sees it enlarged" in str(w.message)]
        assert text.split() and archive  # answered all the same
        if noted:
            sizes = [handlers.captioners[DEFAULT_MODEL].model.encoder.input_shape, handlers.answerers[SHAPES_VQA].model.encoder.input_shape]
            assert notes == [
                f"{path.name} is only {size[0]}x{size[1]} pixels: the model sees it enlarged to {width}x{height}, so what "
                "it says tells little about the picture. Try a larger photo."
                for height, width in sizes
            ]
        else:
            assert notes == []


def test_the_ask_tab_shows_answers_as_words(pictures, tmp_path, monkeypatch):
    """DAQUAR's labels (tissue_roll) are shown as words; the model's export keeps the labels."""
    handlers = demo.Handlers({}, demo.load_models({}, {SHAPES_VQA: SHAPES_SAN})[1], tmp_path)

    def labelled(*args: Any, **kwargs: Any) -> dict:
        answers = [["tissue_roll", 0.6], ["bottle_of_liquid", 0.3], ["red", 0.1]]
        return {"answers": answers, "weights": [[0.5], [0.5]], "concentration": [0.5, 0.05]}

    monkeypatch.setattr(Answer, "save", labelled)
    answers, hops, _ = handlers.ask({"path": str(pictures["scene"]), "orig_name": "scene.png"}, SHAPES_VQA, "what is it?")
    assert answers == {"tissue roll": 0.6, "bottle of liquid": 0.3, "red": 0.1}
    assert [title for _, title in hops] == ["hop 1: 50% on top 5%", "hop 2: 5% on top 5%"]


def test_every_vqa_model_answers_in_its_own_answers(client, pictures):
    for name, path in VQA_CHECKPOINTS.items():
        known = {answer_words(label) for label in read_checkpoint(path)["hyper_parameters"]["answers"]}
        answers, hops = ask(client, pictures["coffee"], "what is on the table?" if name != SHAPES_VQA else "what shape is it?", name)
        assert {c["label"] for c in answers["confidences"]} <= known and hops
    with pytest.raises(AppError, match="Unknown model"):
        ask(client, pictures["coffee"], "what is on the table?", "medium")


def test_ask_without_an_image_and_with_a_bad_one(client, pictures):
    with pytest.raises(AppError, match="No image"):
        ask(client, None, "what colour is the circle?")
    with pytest.raises(AppError, match="truncated.jpg is damaged or incomplete"):
        ask(client, pictures["truncated.jpg"], "what colour is the circle?")
    assert_still_answers(client, pictures)


# -- under load -------------------------------------------------------------------------------------------------


def queue_size(url: str) -> int:
    """How many requests wait in the app's queue (Gradio's own status route)."""
    import httpx

    return httpx.get(f"{url}gradio_api/queue/status", timeout=10).json()["queue_size"]


@dataclass
class FullQueue:
    """A served app whose queue (max_queue=1) is full: one question held in its handler, one waiting."""

    url: str
    running: Any  # gradio_client Job of the held question
    waiting: Any  # gradio_client Job of the question queued behind it
    release: threading.Event  # set it to let the held question go on


@pytest.fixture
def full_queue(tmp_path, pictures, monkeypatch) -> Iterator[FullQueue]:
    entered, release = threading.Event(), threading.Event()
    ask = Answerer.ask

    def held_answer(*args: Any, **kwargs: Any) -> Answer:
        entered.set()
        release.wait(120)
        return ask(*args, **kwargs)

    monkeypatch.setattr(Answerer, "ask", held_answer)
    app = demo.build_app(  # the two models the tests ask, for a quicker start
        caption_checkpoints={DEFAULT_MODEL: CAPTION_CHECKPOINTS[DEFAULT_MODEL]}, vqa_checkpoints={SHAPES_VQA: SHAPES_SAN},
        compare_groups=(), work_dir=tmp_path, max_queue=1,
    )  # fmt: skip
    port = free_port()
    demo.launch_app(app, port=port, prevent_thread_lock=True, quiet=True)
    url = f"http://127.0.0.1:{port}/"
    try:
        question = (handle_file(str(pictures["coffee"])), SHAPES_VQA, "what colour is the circle?")
        running = Client(url, verbose=False, download_files=GRADIO_DOWNLOADS).submit(*question, api_name="/ask")
        assert entered.wait(60)  # the first question is in its handler, held there
        waiting = Client(url, verbose=False, download_files=GRADIO_DOWNLOADS).submit(*question, api_name="/ask")
        deadline = time.monotonic() + 60
        while queue_size(url) < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert queue_size(url) == 1  # the second waits behind it: the queue is full
        yield FullQueue(url, running, waiting, release)
    finally:
        release.set()
        app.close()


@pytest.mark.slow
def test_a_full_queue_refuses_a_request_with_a_busy_error_and_answers_the_others(full_queue, pictures, vocabulary):
    """Any further request (of either tab: the bound is for the whole app) is refused at once; the held and the
    waiting questions are answered, and once the queue has drained the app takes requests again."""
    client = Client(full_queue.url, verbose=False, download_files=GRADIO_DOWNLOADS)
    start = time.perf_counter()
    with pytest.raises(QueueError, match="Queue is full! Please try again"):
        caption(client, pictures["gray.jpg"])
    assert time.perf_counter() - start < 10  # refused at once, not after a wait
    assert not full_queue.waiting.done()

    full_queue.release.set()
    for job in (full_queue.running, full_queue.waiting):
        answers, hops, _ = job.result(timeout=120)
        assert len(answers["confidences"]) == ANSWERS and len(hops) == HOPS
    text, gallery, _ = caption(client, pictures["gray.jpg"])
    assert text.split() and set(text.split()) <= vocabulary[DEFAULT_MODEL] and len(gallery) == len(text.split())


# -- a real browser -------------------------------------------------------------------------------------------


def open_and_upload(browser: Any, url: str, photo: Path, outside: list[str]) -> Any:
    """A new page of the app with `photo` uploaded in the Caption tab and the button pressed, as a person
    would; every URL the page requests outside the app is added to `outside`."""
    page = browser.new_page(viewport={"width": 1280, "height": 1000})
    page.on("request", lambda r: outside.append(r.url) if not r.url.startswith((url, "data:", "blob:")) else None)
    page.goto(url, wait_until="networkidle")
    page.locator("#caption-image input[type=file]").set_input_files(str(photo))
    page.get_by_role("button", name="Caption", exact=True).click()
    return page


#: Per gallery tile, in the page: the picture's shown and natural sizes, the title's box and whether its text fits.
TILE_LAYOUT = """tiles => tiles.map(tile => {
    const img = tile.querySelector('img'), label = tile.querySelector('.caption-label');
    const i = img.getBoundingClientRect(), l = label.getBoundingClientRect();
    return {shown: [i.width, i.height], natural: [img.naturalWidth, img.naturalHeight], image_bottom: i.bottom,
            label_top: l.top, text: label.textContent.trim(), fits: label.scrollWidth <= label.clientWidth + 1};
})"""


def caption_in_browser(
    browser: Any, url: str, photo: Path, screenshot: Path | None = None
) -> tuple[str, list[int], list[str], list[dict]]:
    """Caption `photo` in the browser; returns the caption shown, the naturalWidth of every image in the word
    gallery, every URL the page requested outside the app, and the gallery's tiles as laid out (`TILE_LAYOUT`)."""
    outside: list[str] = []
    page = open_and_upload(browser, url, photo, outside)
    try:
        text = page.locator("#caption-text textarea")
        page.wait_for_function("el => el.value.trim().length > 0", arg=text.element_handle(), timeout=60_000)
        gallery = page.locator("#caption-gallery img")
        gallery.first.wait_for(timeout=30_000)
        page.wait_for_function(
            "() => [...document.querySelectorAll('#caption-gallery img')].every(img => img.complete)", timeout=30_000
        )
        widths = gallery.evaluate_all("images => images.map(img => img.naturalWidth)")
        tiles = page.locator("#caption-gallery .thumbnail-item").evaluate_all(TILE_LAYOUT)
        if screenshot is not None:
            page.screenshot(path=str(screenshot), full_page=True)
        return text.input_value(), widths, outside, tiles
    finally:
        page.close()




@pytest.mark.slow
def test_a_person_captions_a_photo_in_a_real_browser(browser, served, pictures, vocabulary):
    """...and sees each whole map under its whole title: each overlay keeps the photo's aspect (the coffee photo is
    3:2: nothing cropped square), and its title is whole ("playing: 20% on top 5%", no ellipsis) and under the
    picture, not over its corner."""
    text, widths, outside, tiles = caption_in_browser(browser, served[1], pictures["coffee"])
    assert text.split() and set(text.split()) <= vocabulary[DEFAULT_MODEL]
    assert widths and all(width > 0 for width in widths)  # every overlay in the gallery loaded
    assert outside == []  # nothing fetched from outside the app: fonts, scripts and images are all local
    assert [tile["text"].split(":")[0] for tile in tiles] == text.split()
    for tile in tiles:
        (width, height), (natural_width, natural_height) = tile["shown"], tile["natural"]
        assert width / height == pytest.approx(natural_width / natural_height, rel=0.03), tile
        assert natural_width / natural_height == pytest.approx(600 / 400, rel=0.01)
        assert tile["fits"] and tile["label_top"] >= tile["image_bottom"] - 1, tile


@pytest.mark.slow
def test_the_readme_screenshot_script_shows_the_caption_the_readme_quotes(browser, served, tmp_path, monkeypatch):
    """benchmarks/app_screenshot.py's page work, on this file's app and browser (its own server start is
    app_latency.py's, run by tests/cli/test_app_benchmarks.py)."""
    monkeypatch.syspath_prepend(str(Path(demo.__file__).resolve().parent / "benchmarks"))
    screenshot = importlib.import_module("app_screenshot")
    examples = demo.write_examples(tmp_path / "examples")
    shown = screenshot.shoot(browser, served[1], "caption", tmp_path / "app.png", examples)
    with Image.open(shown["figure"]) as figure:
        assert figure.width == 1280 and figure.height > 800  # the whole page, 1280 px wide
    readme = (Path(demo.__file__).resolve().parent / "README.md").read_text()
    assert f'soft-attention model: "{shown["caption"]}"' in readme


@pytest.mark.slow
def test_a_bad_upload_shows_its_problem_in_the_page(browser, served, pictures):
    outside: list[str] = []
    page = open_and_upload(browser, served[1], pictures["notes.png"], outside)
    try:
        page.get_by_text("notes.png is not a picture this app can read").wait_for(timeout=30_000)
    finally:
        page.close()
    assert outside == []


@pytest.mark.slow
def test_a_full_queue_shows_a_busy_message_in_the_page(browser, full_queue, pictures):
    outside: list[str] = []
    page = open_and_upload(browser, full_queue.url, pictures["coffee"], outside)
    try:
        page.get_by_text("This application is currently busy. Please try again.").first.wait_for(timeout=30_000)
    finally:
        page.close()
    assert not full_queue.waiting.done() and outside == []


@pytest.mark.slow
def test_a_portrait_photos_every_word_map_shows_without_a_scroll_in_a_real_browser(browser, served, tmp_path):
    """A portrait photo's overlays are tall: the gallery grows to hold every row (Gradio's own box of 55% of the
    window scrolled inside itself and cut the last row off), so each word's map is on the page whole."""
    portrait = tmp_path / "portrait.jpg"
    Image.fromarray(pytest.importorskip("skimage.data").chelsea()).rotate(90, expand=True).save(portrait)  # 300x451
    text, _, _, tiles = caption_in_browser(browser, served[1], portrait)
    assert len(tiles) == len(text.split()) > 4  # two rows or more of four
    page = browser.new_page(viewport={"width": 1280, "height": 1000})
    try:
        page.goto(served[1], wait_until="networkidle")
        page.locator("#caption-image input[type=file]").set_input_files(str(portrait))
        page.get_by_role("button", name="Caption", exact=True).click()
        page.locator("#caption-export a").first.wait_for(timeout=60_000)
        page.wait_for_function("() => [...document.querySelectorAll('#caption-gallery img')].every(i => i.complete)")
        inner = page.locator("#caption-gallery .grid-wrap").evaluate("el => [el.scrollHeight, el.clientHeight]")
        gallery = page.locator("#caption-gallery").bounding_box()
        last = page.locator("#caption-gallery .thumbnail-item").last.bounding_box()
    finally:
        page.close()
    assert inner[0] <= inner[1] + 1, inner  # nothing hidden below a scroll
    assert last["y"] + last["height"] <= gallery["y"] + gallery["height"] + 1, (last, gallery)


@pytest.mark.slow
def test_a_refused_question_clears_the_last_answer_and_the_next_one_is_answered_in_a_real_browser(
    browser, served, pictures
):
    """Ask the DAQUAR model what it knows, then a yes/no question it was never trained on, then a number: the refusal
    is the hint alone (no answer of the question before left beside it, no "Error" badge on the outputs), and the
    next question is answered as usual."""
    page = browser.new_page(viewport={"width": 1280, "height": 1000})
    question = page.locator("#ask-question").get_by_role("textbox")

    def ask_in_page(text: str) -> None:
        question.fill(text)
        page.get_by_role("button", name="Ask", exact=True).click()

    try:
        page.goto(served[1], wait_until="networkidle")
        page.get_by_role("tab", name="Ask").click()
        page.locator("#ask-image input[type=file]").set_input_files(str(pictures["coffee"]))
        page.locator("#ask-model label", has_text=DAQUAR_VQA).first.click()
        ask_in_page("what is on the table?")
        page.locator("#ask-gallery img").first.wait_for(timeout=60_000)
        ask_in_page("is there a dog?")
        page.get_by_text("'is there a dog?' is a yes/no question, a kind this model was not trained on").wait_for(
            timeout=30_000
        )
        assert page.locator("#ask-gallery img").count() == 0 and "%" not in page.locator("#ask-answers").inner_text()
        badges = page.locator("[id^=ask-]").get_by_text("Error", exact=True)
        assert [badge.is_visible() for badge in badges.all()] == [False] * badges.count()
        ask_in_page("how many chairs are there?")
        page.locator("#ask-gallery img").first.wait_for(timeout=60_000)
        assert "%" in page.locator("#ask-answers").inner_text()
    finally:
        page.close()


@pytest.mark.slow
def test_a_one_pixel_upload_keeps_a_visible_preview_in_a_real_browser(browser, served, tmp_path):
    dot = tmp_path / "dot.png"
    Image.new("RGB", (1, 1), (200, 30, 30)).save(dot)
    page = browser.new_page(viewport={"width": 1280, "height": 1000})
    try:
        page.goto(served[1], wait_until="networkidle")
        page.locator("#caption-image input[type=file]").set_input_files(str(dot))
        preview = page.locator("#caption-image img").first
        preview.wait_for(timeout=30_000)
        box = preview.bounding_box()
    finally:
        page.close()
    assert box["width"] >= demo.PREVIEW_MIN and box["height"] >= demo.PREVIEW_MIN, box
