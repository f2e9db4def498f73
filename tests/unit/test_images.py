"""load_image: every mode becomes upright RGB with the right pixels; every bad file becomes an ImageLoadError."""

from __future__ import annotations

import io
import os
import warnings
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from data.images import ImageLoadError, ImageProblem, load_image


def pixels(image: Image.Image) -> np.ndarray:
    assert image.mode == "RGB"
    return np.asarray(image).astype(int)


def save(image: Image.Image, path: Path, **options) -> Path:
    image.save(path, **options)
    return path


def test_rgb_png_round_trips_exactly(tmp_path):
    values = np.arange(4 * 3 * 3, dtype=np.uint8).reshape(3, 4, 3) * 7
    path = save(Image.fromarray(values, "RGB"), tmp_path / "rgb.png")
    image = load_image(path)
    assert image.size == (4, 3)
    assert np.array_equal(pixels(image), values)


def test_accepts_str_paths_and_bytes(tmp_path):
    path = save(Image.new("RGB", (3, 2), (10, 20, 30)), tmp_path / "rgb.png")
    assert pixels(load_image(str(path)))[1, 2].tolist() == [10, 20, 30]
    assert pixels(load_image(path.read_bytes()))[1, 2].tolist() == [10, 20, 30]


def test_bilevel(tmp_path):
    image = Image.new("1", (2, 2), 0)
    image.putpixel((1, 0), 1)
    loaded = pixels(load_image(save(image, tmp_path / "bilevel.png")))
    assert loaded[0, 1].tolist() == [255, 255, 255]
    assert loaded[0, 0].tolist() == [0, 0, 0]


def test_grayscale(tmp_path):
    image = Image.new("L", (4, 3), 77)
    image.putpixel((3, 2), 200)
    loaded = load_image(save(image, tmp_path / "gray.png"))
    assert loaded.size == (4, 3)
    assert pixels(loaded)[0, 0].tolist() == [77, 77, 77]
    assert pixels(loaded)[2, 3].tolist() == [200, 200, 200]


def test_grayscale_with_alpha_is_composited_on_white(tmp_path):
    image = Image.new("LA", (3, 1))
    image.putpixel((0, 0), (100, 255))  # opaque
    image.putpixel((1, 0), (100, 0))  # transparent
    image.putpixel((2, 0), (0, 128))  # half transparent black over white -> about 127
    loaded = pixels(load_image(save(image, tmp_path / "gray_alpha.png")))
    assert loaded[0, 0].tolist() == [100, 100, 100]
    assert loaded[0, 1].tolist() == [255, 255, 255]
    assert np.all(np.abs(loaded[0, 2] - 127) <= 1)


def test_rgba_is_composited_on_white(tmp_path):
    image = Image.new("RGBA", (3, 1))
    image.putpixel((0, 0), (200, 10, 20, 255))
    image.putpixel((1, 0), (0, 0, 0, 0))
    image.putpixel((2, 0), (0, 0, 255, 128))
    loaded = pixels(load_image(save(image, tmp_path / "rgba.png")))
    assert loaded[0, 0].tolist() == [200, 10, 20]
    assert loaded[0, 1].tolist() == [255, 255, 255]
    assert np.all(np.abs(loaded[0, 2] - [127, 127, 255]) <= 1)


def test_palette_without_transparency(tmp_path):
    image = Image.new("P", (2, 1))
    image.putpalette([255, 0, 0, 0, 0, 255] + [0] * 762)
    image.putpixel((1, 0), 1)
    loaded = pixels(load_image(save(image, tmp_path / "palette.png")))
    assert loaded[0].tolist() == [[255, 0, 0], [0, 0, 255]]


@pytest.mark.parametrize("suffix", [".png", ".gif"])
def test_palette_transparent_colour_becomes_white(tmp_path, suffix):
    image = Image.new("P", (2, 1))
    image.putpalette([0, 0, 0, 0, 200, 0] + [0] * 762)
    image.putpixel((1, 0), 1)
    path = save(image, tmp_path / f"palette{suffix}", transparency=0)
    assert Image.open(path).mode == "P"  # the fixture really is a palette image with a transparent entry
    loaded = pixels(load_image(path))
    assert loaded[0].tolist() == [[255, 255, 255], [0, 200, 0]]


def test_cmyk_jpeg(tmp_path):
    image = Image.new("CMYK", (16, 8), (0, 255, 255, 0))  # red
    image.paste((255, 0, 255, 0), (8, 0, 16, 8))  # green
    path = save(image, tmp_path / "cmyk.jpg", quality=95)
    assert Image.open(path).mode == "CMYK"
    loaded = pixels(load_image(path))
    assert loaded.shape == (8, 16, 3)
    assert np.all(np.abs(loaded[4, 2] - [255, 0, 0]) <= 12)
    assert np.all(np.abs(loaded[4, 13] - [0, 255, 0]) <= 12)


def test_16_bit_png_is_scaled_by_257(tmp_path):
    values = np.array([[0, 65535], [257 * 200, 1000]], dtype=np.uint16)
    path = save(Image.fromarray(values), tmp_path / "deep.png")
    assert Image.open(path).mode == "I;16"
    loaded = pixels(load_image(path))
    assert loaded[..., 0].tolist() == [[0, 255], [200, 4]]
    assert np.array_equal(loaded[..., 0], loaded[..., 2])


def test_big_endian_16_bit(tmp_path):
    values = np.array([[0, 65535, 257 * 200]], dtype=">u2")
    path = save(Image.frombytes("I;16B", (3, 1), values.tobytes()), tmp_path / "deep_be.tif")
    assert Image.open(path).mode == "I;16B"
    assert pixels(load_image(path))[0, :, 1].tolist() == [0, 255, 200]


def test_32_bit_integer_in_16_bit_range_is_scaled_by_257(tmp_path):
    path = save(Image.fromarray(np.array([[0, 514, 65535]], dtype=np.int32)), tmp_path / "int.tif")
    assert Image.open(path).mode == "I"
    assert pixels(load_image(path))[0, :, 0].tolist() == [0, 2, 255]


def test_32_bit_integer_beyond_16_bits_is_stretched_by_its_range(tmp_path):
    path = save(Image.fromarray(np.array([[-100, 0, 100]], dtype=np.int32) * 1000), tmp_path / "int.tif")
    assert pixels(load_image(path))[0, :, 0].tolist() == [0, 128, 255]


def test_float_in_unit_range_is_scaled_by_255(tmp_path):
    path = save(Image.fromarray(np.array([[0.0, 0.2, 1.0]], dtype=np.float32)), tmp_path / "float.tif")
    assert Image.open(path).mode == "F"
    assert pixels(load_image(path))[0, :, 0].tolist() == [0, 51, 255]


def test_float_outside_unit_range_is_stretched_by_its_range(tmp_path):
    path = save(Image.fromarray(np.array([[-2.0, 0.0, 3.0]], dtype=np.float32)), tmp_path / "float.tif")
    assert pixels(load_image(path))[0, :, 0].tolist() == [0, 102, 255]


def test_exif_orientation_is_applied(tmp_path):
    # Stored 40 wide, 20 high: left half red, right half blue. Orientation 6 says "rotate 90 degrees
    # clockwise to display", so the upright image is 20 wide, 40 high, with red on top.
    image = Image.new("RGB", (40, 20), (255, 0, 0))
    image.paste((0, 0, 255), (20, 0, 40, 20))
    exif = Image.Exif()
    exif[0x0112] = 6
    path = save(image, tmp_path / "rotated.jpg", exif=exif, quality=95)
    loaded = load_image(path)
    assert loaded.size == (20, 40)
    values = pixels(loaded)
    assert np.all(np.abs(values[5, 10] - [255, 0, 0]) <= 12)
    assert np.all(np.abs(values[34, 10] - [0, 0, 255]) <= 12)


def test_missing_file(tmp_path):
    path = tmp_path / "nowhere.jpg"
    with pytest.raises(ImageLoadError, match="image file not found: .*nowhere.jpg"):
        load_image(path)


def test_directory_is_not_an_image(tmp_path):
    with pytest.raises(ImageLoadError, match="not a regular file"):
        load_image(tmp_path)


def test_text_file_named_jpg(tmp_path):
    path = tmp_path / "notes.jpg"
    path.write_text("these are not pixels\n")
    with pytest.raises(ImageLoadError, match=r"notes\.jpg.*not an image"):
        load_image(path)


def test_truncated_jpeg(tmp_path):
    noise = np.random.default_rng(0).integers(0, 256, size=(64, 64, 3), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(noise).save(buffer, format="JPEG")
    path = tmp_path / "half.jpg"
    path.write_bytes(buffer.getvalue()[: len(buffer.getvalue()) // 2])
    Image.open(path).close()  # the header alone is readable, so only a full decode can catch this
    with pytest.raises(ImageLoadError, match=r"half\.jpg.*truncated"):
        load_image(path)


def test_bytes_are_named_in_errors():
    with pytest.raises(ImageLoadError, match="<bytes>.*not an image"):
        load_image(b"GIF89 but not really")


def test_too_many_pixels_is_refused_before_decoding(tmp_path):
    path = save(Image.new("RGB", (100, 100)), tmp_path / "big.png")
    assert load_image(path, max_pixels=10_000).size == (100, 100)
    with pytest.raises(ImageLoadError, match=r"too large: .*big\.png is 100x100 = 10000 pixels.*max_pixels=9999"):
        load_image(path, max_pixels=9_999)


def test_pil_decompression_bomb_is_reported_as_too_large(tmp_path, monkeypatch):
    path = save(Image.new("RGB", (100, 100)), tmp_path / "bomb.png")
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 1_000)
    with pytest.raises(ImageLoadError, match=r"too large: .*bomb\.png"):
        load_image(path, max_pixels=10**9)


def test_each_error_says_which_kind_of_problem_it_is(tmp_path):
    """`problem` lets an app word the failure for its users instead of showing the message, written for Python users."""
    notes = tmp_path / "notes.png"
    notes.write_text("a shopping list\n")
    encoded = io.BytesIO()
    Image.fromarray(np.random.default_rng(0).integers(0, 256, (64, 64, 3), dtype=np.uint8)).save(encoded, format="PNG")
    truncated = tmp_path / "cut.png"
    truncated.write_bytes(encoded.getvalue()[: len(encoded.getvalue()) // 2])
    big = save(Image.new("RGB", (100, 100)), tmp_path / "big.png")
    cases = [
        (lambda: load_image(tmp_path / "nowhere.png"), ImageProblem.MISSING),
        (lambda: load_image(tmp_path), ImageProblem.NOT_A_FILE),
        (lambda: load_image(notes), ImageProblem.NOT_AN_IMAGE),
        (lambda: load_image(truncated), ImageProblem.CORRUPT),
        (lambda: load_image(big, max_pixels=9_999), ImageProblem.TOO_LARGE),
    ]
    for load, problem in cases:
        with pytest.raises(ImageLoadError) as raised:
            load()
        assert raised.value.problem is problem, str(raised.value)


def test_a_large_image_is_refused_without_pils_warning(tmp_path):
    """PIL warns of a possible decompression bomb for anything over 89 megapixels; load_image's own max_pixels
    check refuses the 144-megapixel picture with a message of its own, so the warning must not be printed too."""
    path = tmp_path / "large.png"
    Image.new("1", (12_000, 12_000)).save(path)  # 1-bit black: a small file
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any warning fails the test
        with pytest.raises(ImageLoadError, match="too large") as raised:
            load_image(path)
    assert raised.value.problem is ImageProblem.TOO_LARGE


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc to count open files")
def test_no_files_left_open(tmp_path):
    good = save(Image.new("RGBA", (8, 8)), tmp_path / "good.png")
    bad = tmp_path / "bad.jpg"
    bad.write_text("nope")
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(20):
        load_image(good)
        with pytest.raises(ImageLoadError):
            load_image(bad)
        with pytest.raises(ImageLoadError):
            load_image(good, max_pixels=1)
    assert len(os.listdir("/proc/self/fd")) == before
