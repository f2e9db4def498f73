"""Attention overlays: where a grid cell lands on the photo, the pictures drawn from it, and the export
commands (`python -m captioning.export`, `python -m vqa.export`, the `predict` callback) end to end on tiny
untrained checkpoints."""

import json
from functools import partial
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from core.maps import overlays
from core.maps.overlays import colorize, overlay, save_gif, save_png, upsample, word_grid
from tests.helpers import run_module

GRID = 7
SPECIALS = ["<pad>", "<start>", "<end>", "<unk>"]


# -- geometry ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("grid", "cell"),
    [
        ((GRID, GRID), (0, 6)),  # top-right corner
        ((GRID, GRID), (2, 4)),  # interior, r != c
        ((GRID, GRID), (6, 0)),  # bottom-left corner
        ((3, 5), (0, 4)),  # a rectangular grid of 3 rows and 5 columns: top-right corner
        ((3, 5), (1, 2)),  # its middle cell
    ],
)
@pytest.mark.parametrize("size", [(224, 224), (640, 480)])  # (width, height): square and squashed
def test_a_peaked_cell_lands_on_its_region_of_the_photo(grid, cell, size):
    (rows, columns), (r, c) = grid, cell
    width, height = size
    cells = rows * columns
    weights = torch.full((cells,), 0.1 / (cells - 1))
    weights[r * columns + c] = 0.9
    heat = upsample(weights, grid, size)
    assert heat.shape == (height, width) and heat.dtype == np.float32
    # on the fixed scale (x L cells / 8): the peak cell (at least 13x uniform) saturates, bilinear interpolation
    # brings the nearest pixel centre within 1/64 cell of it (0.97 or more); the flat background keeps its own value
    assert 0.96 < heat.max() <= 1.0
    assert heat.min() == pytest.approx(0.1 / (cells - 1) * cells / 8)

    left, right = c / columns * width, (c + 1) / columns * width
    top, bottom = r / rows * height, (r + 1) / rows * height
    y, x = np.unravel_index(np.argmax(heat), heat.shape)
    assert left <= x + 0.5 <= right and top <= y + 0.5 <= bottom

    # mass centre (pixel centres at i + 0.5): inside the region; on an axis where the cell is not on the
    # photo's border (where the map is clamped, pushing the centre outwards), within a tenth of a cell of its middle
    mass = heat - heat.min()  # the flat background of the other cells removed
    ys, xs = np.mgrid[0:height, 0:width] + 0.5
    centre_x, centre_y = (mass * xs).sum() / mass.sum(), (mass * ys).sum() / mass.sum()
    slack_x = 0.1 if 0 < c < columns - 1 else 0.5
    slack_y = 0.1 if 0 < r < rows - 1 else 0.5
    assert abs(centre_x - (left + right) / 2) < slack_x * width / columns
    assert abs(centre_y - (top + bottom) / 2) < slack_y * height / rows

    inside = mass[int(np.ceil(top - 0.5)) : int(np.ceil(bottom - 0.5)), int(np.ceil(left - 0.5)) : int(np.ceil(right - 0.5))]
    assert inside.sum() / mass.sum() > 0.5


def test_upsample_refuses_weights_of_another_grid():
    with pytest.raises(ValueError, match="7x7"):
        upsample(torch.ones(48), (GRID, GRID), (10, 10))


# -- pictures ------------------------------------------------------------------------------------------------


def inferno_bytes(values) -> np.ndarray:
    """matplotlib's own inferno colours of `values` (floats in [0, 1]) as RGB bytes."""
    import matplotlib

    return matplotlib.colormaps["inferno"](np.asarray(values, dtype=np.float64), bytes=True)[..., :3]


def test_overlay_blends_the_colour_map_over_the_photo():
    photo = Image.new("RGB", (64, 48), (10, 200, 30))
    heat = np.zeros((48, 64), dtype=np.float32)
    heat[:, 32:] = 1.0
    assert overlay(photo, heat, alpha=0.0).tobytes() == photo.tobytes()
    full = np.asarray(overlay(photo, heat, alpha=1.0))
    assert full.shape == (48, 64, 3)
    darkest, brightest = inferno_bytes([0.0, 1.0]).tolist()
    assert full[0, 0].tolist() == darkest and full[0, -1].tolist() == brightest  # inferno's ends
    assert sum(darkest) < 10 and min(brightest[:2]) > 240  # black and pale yellow
    half = np.asarray(overlay(photo, heat, alpha=0.5)).astype(int)
    assert np.abs(half[0, 0] - (np.array([10, 200, 30]) + darkest) / 2).max() <= 1
    with pytest.raises(ValueError, match="heat map"):
        overlay(photo, np.zeros((64, 48)))
    ramp = colorize(np.linspace(0, 1, 50)[None, :])[0].astype(int)
    assert (np.diff(ramp.sum(-1)) >= 0).all()  # brighter with more attention


def test_colorize_gives_matplotlibs_inferno_colours():
    import matplotlib

    heat = np.random.default_rng(0).random((300, 300))
    colours = colorize(heat)
    assert colours.shape == (300, 300, 3) and colours.dtype == np.uint8
    assert np.array_equal(colours, inferno_bytes(heat))
    # each of the map's 256 colours for the middle of its 1/256 bin, from the colour list itself
    table = (np.asarray(matplotlib.colormaps["inferno"].colors) * 255).astype(np.uint8)
    assert table.shape == (256, 3)
    assert np.array_equal(colorize(((np.arange(256) + 0.5) / 256)[None, :])[0], table)
    ends = inferno_bytes([[0.0, 1.0]]).tolist()
    assert colorize(np.array([[-0.5, 2.0]])).tolist() == ends  # clipped to the ends
    assert colorize(np.array([[0, 1]])).tolist() == ends  # integers are values too, not indices into the map


@pytest.mark.parametrize("shape", [(37, 53, 3), (20, 31), (5, 7, 4), (1, 1, 3)])  # RGB, L, RGBA, one pixel
def test_png_files_hold_exactly_the_picture(tmp_path, shape):
    picture = Image.fromarray(np.random.default_rng(0).integers(0, 256, shape, dtype=np.uint8))
    save_png(picture, tmp_path / "a.png")
    with Image.open(tmp_path / "a.png") as back:
        assert back.format == "PNG" and back.mode == picture.mode and back.tobytes() == picture.tobytes()
    save_png(picture.convert("P"), tmp_path / "p.png")  # a mode the fast encoder leaves to PIL
    with Image.open(tmp_path / "p.png") as back:
        assert back.mode == "P" and back.size == picture.size


def test_png_files_are_compressed(tmp_path):
    assert 1 <= overlays.PNG_COMPRESS_LEVEL <= 9  # PIL's level for other modes; 0 would store the pixels as they are
    smooth = np.broadcast_to(np.linspace(0, 255, 300).astype(np.uint8)[None, :, None], (200, 300, 3))
    picture = Image.fromarray(np.ascontiguousarray(smooth))
    save_png(picture, tmp_path / "smooth.png")
    assert (tmp_path / "smooth.png").stat().st_size < len(picture.tobytes()) / 6  # Huffman codes: >= 1 bit a byte
    with Image.open(tmp_path / "smooth.png") as back:
        assert back.tobytes() == picture.tobytes()


def test_word_grid_lays_out_titled_tiles_and_survives_long_words():
    photo = Image.new("RGB", (100, 50), "gray")
    words = ["a", "x" * 500, "naïve", "北京", "dog", "<unk>", "ends"]
    maps = [np.random.default_rng(i).random((50, 100)).astype(np.float32) for i in range(len(words))]
    sheet = word_grid(photo, words, maps, columns=3)
    tile_w, tile_h = 224, 112 + 18  # longest side 224, plus the title strip
    assert sheet.size == (3 * tile_w + 2 * 4, 3 * tile_h + 2 * 4)  # 8 tiles in 3 rows, 4 px gaps
    assert word_grid(photo, [], []).size == (tile_w, tile_h)  # the photo alone
    with pytest.raises(ValueError):
        word_grid(photo, words[:2], maps)
    # a heading (an answer's question) is one more title strip over the whole sheet, with its text in it
    headed = word_grid(photo, words, maps, columns=3, heading="what colour is the circle?")
    assert headed.size == (sheet.width, sheet.height + 18)
    assert np.asarray(headed)[18:].tobytes() == np.asarray(sheet).tobytes()
    assert np.asarray(headed.convert("L"))[:18].min() < 100  # dark text on the white strip


def test_gif_has_one_frame_per_image(tmp_path):
    frames = [Image.new("RGB", (40, 30), (40 * i, 0, 0)) for i in range(5)]
    save_gif(frames, tmp_path / "a.gif", duration_ms=300)
    with Image.open(tmp_path / "a.gif") as gif:
        assert gif.n_frames == 5 and gif.size == (40, 30) and gif.info["duration"] == 300
    with pytest.raises(ValueError):
        save_gif([], tmp_path / "b.gif")


# -- export end to end ---------------------------------------------------------------------------------------

CAPTION_WORDS = ["a", "red", "blue", "circle", "square", "above", "below"]


@pytest.fixture(scope="module")
def caption_checkpoint(tmp_path_factory) -> Path:
    """An untrained tiny captioning model (EfficientNet-Lite0, 7x7 grid) that always says 6 real words."""
    from captioning.decoder import ShowAttendTell
    from captioning.module import CaptioningModule

    torch.manual_seed(0)
    tiny = partial(ShowAttendTell, embed_dim=8, decoder_dim=8, attention_dim=8)
    model = CaptioningModule(vocabulary=SPECIALS + CAPTION_WORDS, decoder=tiny, max_length=6)
    with torch.no_grad():
        # never ends early nor says a special token: a caption of max_length real words
        model.decoder.out.bias[: len(SPECIALS)] = -30.0
    path = tmp_path_factory.mktemp("ckpt") / "tiny.ckpt"
    torch.save({"state_dict": model.state_dict(), "hyper_parameters": dict(model.hparams)}, path)
    loaded = CaptioningModule.load(path)
    assert loaded.vocabulary.tokens == SPECIALS + CAPTION_WORDS and loaded.encoder.grid_shape == (GRID, GRID)
    return path


@pytest.fixture(scope="module")
def photos(tmp_path_factory) -> Path:
    """A non-square RGB photo, a grayscale one and a broken file."""
    folder = tmp_path_factory.mktemp("photos")
    rng = np.random.default_rng(0)
    Image.fromarray(rng.integers(0, 255, (60, 90, 3), dtype=np.uint8)).save(folder / "wide.png")
    Image.fromarray(rng.integers(0, 255, (80, 40), dtype=np.uint8)).save(folder / "tall.jpg")
    (folder / "broken.jpg").write_bytes(b"not an image")
    return folder


def check_caption_export(folder: Path, image_size: tuple[int, int]) -> dict:
    """Every file of one image's export is there and the JSON is consistent with them."""
    record = json.loads((folder / "caption.json").read_text())
    words = record["words"]
    assert len(words) == 6 and record["caption"] == " ".join(words) and set(words) <= set(CAPTION_WORDS)
    assert record["grid_size"] == [GRID, GRID] and record["image_size"] == list(image_size)
    assert len(record["weights"]) == len(words)
    for row in record["weights"]:
        assert len(row) == GRID * GRID and sum(row) == pytest.approx(1.0, abs=1e-4) and min(row) >= 0
    overlays = sorted(folder.glob("word_*.png"))
    assert [p.name for p in overlays] == [f"word_{i:02d}_{w}.png" for i, w in enumerate(words, 1)]
    for path in overlays:
        with Image.open(path) as picture:
            assert picture.size == image_size
    with Image.open(folder / "attention.gif") as gif:
        assert gif.n_frames == len(words)
    with Image.open(folder / "grid.png") as grid:
        assert grid.width > grid.height  # 7 tiles, 5 a row: two rows of wide tiles
    return record


@pytest.mark.slow
def test_caption_export_command_writes_every_file_and_skips_a_broken_image(tmp_path, caption_checkpoint, photos):
    out = tmp_path / "out"
    result = run_module("captioning.export", str(caption_checkpoint), str(photos), "--output", str(out), "--beam-size", "2", cwd=tmp_path)
    assert "broken.jpg" in result.stderr
    assert sorted(p.name for p in out.iterdir()) == ["tall", "wide"]
    check_caption_export(out / "wide", (90, 60))
    check_caption_export(out / "tall", (40, 80))


def test_caption_export_fails_only_when_nothing_was_exported(tmp_path, caption_checkpoint, photos, capsys):
    from captioning.export import main

    assert main([str(caption_checkpoint), str(photos / "broken.jpg"), str(tmp_path / "missing.png"), "--output", str(tmp_path)]) == 1
    errors = capsys.readouterr().err
    assert "broken.jpg" in errors and "missing.png" in errors and "no image could be exported" in errors
    assert main([str(tmp_path / "none.ckpt"), str(photos), "--output", str(tmp_path)]) == 2
    assert "checkpoint not found" in capsys.readouterr().err


def test_caption_words_keep_words_and_attention_rows_aligned(caption_checkpoint):
    from captioning.module import CaptioningModule

    model = CaptioningModule.load(caption_checkpoint)
    v = model.vocabulary
    tokens = [v.index("a"), v.pad_id, v.index("red"), v.start_id, v.index("circle")]
    weights = torch.arange(5.0)[:, None].expand(5, GRID * GRID)
    words, rows = model.caption_words(tokens, weights)
    assert words == ["a", "red", "circle"] and rows[:, 0].tolist() == [0.0, 2.0, 4.0]


@pytest.mark.slow
def test_overlay_writer_in_predict(tmp_path, caption_checkpoint, photos):
    import lightning

    # the Trainer's ckpt_path also wants the Lightning version that wrote the file
    checkpoint = {**torch.load(caption_checkpoint, weights_only=True), "pytorch-lightning_version": lightning.__version__}
    torch.save(checkpoint, tmp_path / "tiny.ckpt")
    out, captions = tmp_path / "overlays", tmp_path / "captions.json"
    result = run_module(
        "captioning", "predict", f"--ckpt_path={tmp_path / 'tiny.ckpt'}", f"--data.predict_path={photos}",
        "--trainer.callbacks+=captioning.export.OverlayWriter", f"--trainer.callbacks.init_args.output_dir={out}",
        f"--writer.output={captions}", "--trainer.logger=false", f"--trainer.default_root_dir={tmp_path / 'run'}",
        cwd=tmp_path,
    )
    assert "broken.jpg" in result.stdout + result.stderr
    assert sorted(p.name for p in out.iterdir()) == ["tall", "wide"]
    by_image = {Path(r["image"]).stem: r for r in (check_caption_export(out / n, s) for n, s in [("wide", (90, 60)), ("tall", (40, 80))])}
    results = json.loads(captions.read_text())  # the captions writer is unchanged and agrees with the overlays
    assert {r["image_id"]: r["caption"] for r in results} == {stem: r["caption"] for stem, r in by_image.items()}


@pytest.fixture(scope="module")
def vqa_checkpoint(tmp_path_factory) -> Path:
    from vqa.module import VqaModule
    from vqa.san import StackedAttention

    torch.manual_seed(0)
    model = VqaModule(
        question_vocabulary=SPECIALS + ["what", "colour", "is", "the", "circle"], answers=["red", "blue", "yes", "no"],
        embed_dim=8, question_dim=8, san=partial(StackedAttention, attention_dim=8),
    )
    path = tmp_path_factory.mktemp("vqa") / "tiny.ckpt"
    torch.save({"state_dict": model.state_dict(), "hyper_parameters": dict(model.hparams)}, path)
    assert VqaModule.load(path).answer_vocabulary.answers == ["red", "blue", "yes", "no"]
    return path


@pytest.mark.slow
def test_vqa_export_command_writes_every_hop(tmp_path, vqa_checkpoint, photos):
    out = tmp_path / "answer"
    question = "What colour is the circle?"
    run_module("vqa.export", str(vqa_checkpoint), str(photos / "wide.png"), "--question", question, "--output", str(out), cwd=tmp_path)
    record = json.loads((out / "answer.json").read_text())
    assert record["question"] == question and record["grid_size"] == [GRID, GRID] and record["image_size"] == [90, 60]
    assert sorted(a for a, _ in record["answers"]) == ["blue", "no", "red", "yes"]
    assert sum(p for _, p in record["answers"]) == pytest.approx(1.0, abs=1e-4)
    assert len(record["weights"]) == 2  # hops
    for row in record["weights"]:
        assert len(row) == GRID * GRID and sum(row) == pytest.approx(1.0, abs=1e-4)
    assert sorted(p.name for p in out.iterdir()) == ["answer.json", "grid.png", "hop_1.png", "hop_2.png"]
    with Image.open(out / "hop_2.png") as hop:
        assert hop.size == (90, 60)


def test_vqa_export_refuses_an_empty_question(tmp_path, vqa_checkpoint, photos, capsys):
    from vqa.export import main

    out = tmp_path / "answer"
    assert main([str(vqa_checkpoint), str(photos / "wide.png"), "--question", "  ?", "--output", str(out)]) == 2
    assert "the question is empty" in capsys.readouterr().err
    assert not out.exists()
    assert main([str(vqa_checkpoint), str(photos / "broken.jpg"), "--question", "is it red", "--output", str(out)]) == 2
    assert "broken.jpg" in capsys.readouterr().err


# -- the display scale in the exports ------------------------------------------------------------------------


def flat_and_peaked(rows: int = 2) -> torch.Tensor:
    """(rows, 49) float32 weights: uniform attention first, then peaked maps with unround values."""
    weights = torch.full((rows, GRID * GRID), 1 / (GRID * GRID))
    weights[1:] = torch.softmax(torch.randn(rows - 1, GRID * GRID, generator=torch.Generator().manual_seed(0)) * 3, -1)
    return weights


def assert_has_a_colour_bar(grid_png: Path, tiles: Image.Image) -> None:
    """grid.png is the tiles alone with a colour bar in inferno's end colours under them."""
    with Image.open(grid_png) as picture:
        grid = np.asarray(picture.convert("RGB"))
    assert grid.shape[1] >= tiles.width and grid.shape[0] > tiles.height
    bar = {tuple(c) for c in grid[tiles.height :].reshape(-1, 3).tolist()}
    assert {tuple(c) for c in inferno_bytes([0.0, 1.0]).tolist()} <= bar


def test_the_caption_export_keeps_the_raw_weights_and_records_scale_and_concentration(tmp_path):
    from captioning.pretrained import Caption

    photo = Image.new("RGB", (90, 60), "gray")
    weights = flat_and_peaked()
    caption = Caption(words=["a", "circle"], attention=weights.reshape(2, GRID, GRID), source="", given=photo)
    record = caption.save(tmp_path)
    saved = json.loads((tmp_path / "caption.json").read_text())
    assert saved == record and saved["weights"] == weights.tolist()  # the raw float32 weights, not the drawn values
    assert saved["scale"] == {"kind": "fixed", "top": 8.0, "unit": "weight x grid cells (1 = uniform attention)"}
    top = weights[1].double().sort(descending=True).values  # 5% of 49 cells = 2.45 cells
    assert saved["concentration"] == pytest.approx([0.05, float(top[0] + top[1] + 0.45 * top[2])])
    maps = overlays.heat_maps(weights, (GRID, GRID), photo.size)
    assert_has_a_colour_bar(tmp_path / "grid.png", word_grid(photo, ["a", "circle"], maps))
    stretched = caption.save(tmp_path / "s", scale=overlays.PerMapStretch())
    assert stretched["scale"]["kind"] == "stretch" and stretched["weights"] == record["weights"]


def test_the_vqa_export_keeps_the_raw_weights_and_records_scale_and_concentration(tmp_path):
    from vqa.overlays import write_answer_overlays

    photo = Image.new("RGB", (90, 60), "gray")
    weights = flat_and_peaked()
    record = write_answer_overlays(
        photo, question="what is it?", answers=[("red", 0.75)], weights=weights, grid=(GRID, GRID), out_dir=tmp_path
    )
    saved = json.loads((tmp_path / "answer.json").read_text())
    assert saved == record and saved["weights"] == weights.tolist()
    assert saved["scale"]["kind"] == "fixed" and saved["scale"]["top"] == 8.0
    assert saved["concentration"][0] == pytest.approx(0.05) and saved["concentration"][1] > 0.05
    maps = overlays.heat_maps(weights, (GRID, GRID), photo.size)
    assert_has_a_colour_bar(tmp_path / "grid.png", word_grid(photo, ["hop 1", "hop 2"], maps, image_title="red (75%)"))


def flat_overlays(photo_path: Path) -> tuple[np.ndarray, np.ndarray]:
    """The photo under a flat map as each scale draws it: 1/8 (dark purple) fixed, 1 (pale yellow) stretched."""
    with Image.open(photo_path) as photo:
        photo = photo.convert("RGB")
        flat = [np.full((photo.height, photo.width), value, np.float32) for value in (1 / 8, 1.0)]
        return tuple(np.asarray(overlay(photo, heat)) for heat in flat)


def test_the_caption_export_flag_stretches_each_map(tmp_path, caption_checkpoint, photos, monkeypatch):
    import captioning.export
    from captioning.pretrained import Caption, Captioner

    def flat_caption(self, image, *, beam_size=None, name_objects=None):
        flat = torch.full((2, GRID, GRID), 1 / (GRID * GRID))
        return Caption(words=["a", "circle"], attention=flat, source="", given=image)

    monkeypatch.setattr(Captioner, "caption", flat_caption)
    photo = photos / "wide.png"
    fixed, stretched = flat_overlays(photo)
    for flags, expected, kind in (([], fixed, "fixed"), (["--stretch"], stretched, "stretch")):
        out = tmp_path / kind
        assert captioning.export.main([str(caption_checkpoint), str(photo), "--output", str(out), *flags]) == 0
        with Image.open(out / "wide" / "word_01_a.png") as drawn:
            assert np.array_equal(np.asarray(drawn), expected)
        assert json.loads((out / "wide" / "caption.json").read_text())["scale"]["kind"] == kind
    assert fixed.mean() < stretched.mean() - 50  # a flat map is dark on the fixed scale, bright stretched


def test_the_vqa_export_flag_stretches_each_hop(tmp_path, vqa_checkpoint, photos, monkeypatch):
    import vqa.export
    from vqa.module import Answered, VqaModule

    def flat_answer(self, image, question, *, top=5):
        return Answered([("red", 1.0)], torch.full((2, GRID * GRID), 1 / (GRID * GRID)))

    monkeypatch.setattr(VqaModule, "answer", flat_answer)
    photo = photos / "wide.png"
    fixed, stretched = flat_overlays(photo)
    for flags, expected, kind in (([], fixed, "fixed"), (["--stretch"], stretched, "stretch")):
        out = tmp_path / kind
        argv = [str(vqa_checkpoint), str(photo), "--question", "what colour is the circle", "--output", str(out)]
        assert vqa.export.main([*argv, *flags]) == 0
        with Image.open(out / "hop_2.png") as drawn:
            assert np.array_equal(np.asarray(drawn), expected)
        assert json.loads((out / "answer.json").read_text())["scale"]["kind"] == kind
