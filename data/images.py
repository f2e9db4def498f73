"""Loading an image file (or its bytes) as an 8-bit RGB PIL image, whatever it was saved as.

Captioning and VQA models want RGB. Real datasets contain grayscale, palette, transparent, CMYK, 16-bit and
camera-rotated images, plus the odd truncated or mislabelled file. `load_image` turns every readable image
into upright RGB and every unreadable one into an `ImageLoadError` that names the file, instead of a
PIL error deep inside a data-loader worker. The error's message is for a Python or command-line user (it names
paths, options and PIL's own reason); its `problem` says what kind of failure it was, so an app can word it
for a person in a browser instead.
"""

from __future__ import annotations

import enum
import io
import struct
import warnings
from pathlib import Path

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

# Modes whose alpha channel is composited on white rather than dropped (dropping it turns transparent
# pixels into whatever colour happens to be stored under them, often black).
_ALPHA_MODES = frozenset({"LA", "La", "PA", "RGBA", "RGBa"})
# Integer modes holding 16-bit samples.
_SIXTEEN_BIT_MODES = frozenset({"I;16", "I;16L", "I;16B", "I;16N"})
# What PIL raises, besides UnidentifiedImageError, when a file's data is broken.
_DECODE_ERRORS = (OSError, SyntaxError, ValueError, EOFError, struct.error, IndexError)


class ImageProblem(enum.Enum):
    """Why an image could not be loaded."""

    MISSING = "missing"  # no such file
    NOT_A_FILE = "not a file"  # a folder, a device, a name with a null byte
    NOT_AN_IMAGE = "not an image"  # not an image, or a format PIL cannot read
    UNREADABLE = "unreadable"  # permission denied
    CORRUPT = "corrupt"  # truncated or garbled data
    TOO_LARGE = "too large"  # more pixels than max_pixels
    UNSUPPORTED_MODE = "unsupported mode"  # a pixel format PIL cannot convert to RGB


class ImageLoadError(ValueError):
    """An image could not be loaded; the message names the file (or "<bytes>") and says why, and `problem`
    says which kind of failure it was."""

    def __init__(self, message: str, *, problem: ImageProblem) -> None:
        super().__init__(message)
        self.problem = problem


def load_image(source: str | Path | bytes, *, max_pixels: int = 50_000_000) -> Image.Image:
    """Read an image and return it as an upright 8-bit RGB image.

    EXIF orientation is applied, so a photo taken with the camera on its side comes back upright.
    Transparency is composited on white. 16-bit images are scaled to 8 bits (see `_to_rgb`).
    The image is fully decoded here, so truncated files fail now rather than later.

    Args:
        source: a file path, or the encoded file's bytes (named "<bytes>" in error messages).
        max_pixels: refuse images with more pixels than this (checked from the header, before decoding),
            which guards against decompression bombs and accidental giant scans.

    Raises:
        ImageLoadError: the file is missing, is not an image, is corrupt or truncated, or is too large.
    """
    if isinstance(source, (bytes, bytearray, memoryview)):
        name = "<bytes>"
        opener = io.BytesIO(bytes(source))
    else:
        path = Path(source)
        name = str(path)
        if "\x00" in name:  # os.stat would raise ValueError("embedded null byte")
            raise ImageLoadError(
                f"cannot read image {name!r}: a file name cannot hold a null byte", problem=ImageProblem.NOT_A_FILE
            )
        if not path.exists():
            raise ImageLoadError(f"image file not found: {name}", problem=ImageProblem.MISSING)
        if not path.is_file():
            raise ImageLoadError(f"cannot read image {name}: it is not a regular file", problem=ImageProblem.NOT_A_FILE)
        opener = path

    try:
        with _opened(opener) as image:
            _check_size(image, name, max_pixels)
            image.load()
            upright = ImageOps.exif_transpose(image)
            rgb = _to_rgb(upright, name)
            # Make sure the result owns its pixels and not the file we are about to close.
            return rgb.copy() if rgb is image else rgb
    except ImageLoadError:
        raise
    except Image.DecompressionBombError as error:
        raise ImageLoadError(
            f"image too large: {name} ({error}); pass a larger max_pixels if you trust it", problem=ImageProblem.TOO_LARGE
        ) from error
    except UnidentifiedImageError as error:
        raise ImageLoadError(
            f"cannot read image {name}: not an image file, or an unsupported format", problem=ImageProblem.NOT_AN_IMAGE
        ) from error
    except PermissionError as error:
        raise ImageLoadError(f"cannot read image {name}: permission denied", problem=ImageProblem.UNREADABLE) from error
    except _DECODE_ERRORS as error:
        raise ImageLoadError(
            f"cannot read image {name}: the file is corrupt or truncated ({error})", problem=ImageProblem.CORRUPT
        ) from error
    finally:
        if isinstance(opener, io.BytesIO):
            opener.close()


def _opened(source: io.BytesIO | Path) -> Image.Image:
    """`Image.open(source)` without PIL's DecompressionBombWarning: `_check_size` refuses large images itself,
    with a message of its own, so PIL's warning (printed for every image over 89 megapixels) would only repeat
    it. PIL's DecompressionBombError, for twice that, still comes through. (Before Python 3.14 the warning filter
    is process-wide while it lasts: a DecompressionBombWarning of another thread at that moment is dropped too.)"""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", Image.DecompressionBombWarning)
        return Image.open(source)


def _check_size(image: Image.Image, name: str, max_pixels: int) -> None:
    """Reject an image by its header dimensions, before any pixel data is decoded."""
    width, height = image.size
    if width * height > max_pixels:
        raise ImageLoadError(
            f"image too large: {name} is {width}x{height} = {width * height} pixels, more than "
            f"max_pixels={max_pixels}; pass a larger max_pixels if you trust it",
            problem=ImageProblem.TOO_LARGE,
        )


def _to_rgb(image: Image.Image, name: str) -> Image.Image:
    """Convert any PIL mode to 8-bit RGB.

    - alpha modes (LA, PA, RGBA, ...) and palette images with a transparent colour: composited on white;
    - 16-bit modes (I;16, I;16B, ...): value / 257, which maps 0..65535 exactly onto 0..255;
    - 32-bit integer mode I: value / 257 when all values fit in 0..65535 (PIL's mode for some 16-bit files),
      else stretched from the image's own min..max;
    - float mode F: value * 255 when all values lie in 0..1, else stretched from the image's own min..max;
    - everything else (1, L, P, CMYK, YCbCr, ...): PIL's own conversion.
    """
    mode = image.mode
    if mode == "RGB":
        return image
    if mode == "P" and "transparency" in image.info:
        image, mode = image.convert("RGBA"), "RGBA"
    if mode in _ALPHA_MODES:
        rgba = image.convert("RGBA")
        background = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(background, rgba).convert("RGB")
    if mode in _SIXTEEN_BIT_MODES or mode in ("I", "F"):
        return _gray_to_8bit(np.asarray(image), mode).convert("RGB")
    try:
        return image.convert("RGB")
    except ValueError as error:
        raise ImageLoadError(
            f"cannot read image {name}: PIL cannot convert mode {mode!r} to RGB", problem=ImageProblem.UNSUPPORTED_MODE
        ) from error


def _gray_to_8bit(values: np.ndarray, mode: str) -> Image.Image:
    """Scale a single-channel 16-bit, 32-bit or float image to an 8-bit L image (rules in `_to_rgb`)."""
    values = values.astype(np.float64)
    low, high = (float(values.min()), float(values.max())) if values.size else (0.0, 0.0)
    if mode in _SIXTEEN_BIT_MODES or (mode == "I" and low >= 0 and high <= 65535):
        scaled = values / 257.0
    elif mode == "F" and low >= 0 and high <= 1:
        scaled = values * 255.0
    elif high > low:
        scaled = (values - low) * (255.0 / (high - low))
    else:
        scaled = values  # constant image: keep its value, clipped below
    return Image.fromarray(np.clip(np.rint(scaled), 0, 255).astype(np.uint8), mode="L")
