"""Attention weights as pictures: heat maps over the photo, a per-word grid with its colour bar and an animated GIF.

The encoder resizes the whole photo to its input size (no crop), so grid cell (r, c) of a rows x columns
map covers x in [c, c+1] / columns * width and y in [r, r+1] / rows * height of the original photo, with
different x and y scales where the photo's aspect ratio is not the grid's. `upsample` maps the weights back
onto the photo's own pixels that way; the other functions only draw. Pure functions of their inputs: nothing
here reads a model.

How bright a weight is drawn is a `DisplayScale`'s choice: `FixedScale` (the default) draws every map on the
same absolute scale, weight x L (L cells; 1 is what uniform attention gives a cell), so a flat map looks flat;
`PerMapStretch` divides each map by its own maximum, so even a flat map reaches the brightest colour.

The colour map is matplotlib's 'inferno' (perceptually uniform, readable in grey), taken from matplotlib's
colormap registry (no plotting: pyplot is never imported). PNG files are written by `encode_png`, a small PNG
writer of its own that makes the app's export answer 30% faster than PIL's PNG writer (its docstring has the
measurement).
"""

from __future__ import annotations

import io
import struct
import zlib
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import matplotlib
import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image, ImageDraw, ImageFont
from torch import Tensor

# matplotlib's inferno: 256 colours, each value in [0, 1] taking the colour of its 1/256 bin. Looked up once
# here (the registry hands out a copy at every lookup) and shared by every caller, threads included; matplotlib
# builds a colormap's table on its first use, so that use is made here, before any thread can race to it.
_INFERNO = matplotlib.colormaps["inferno"]
_INFERNO(0.0)
_TITLE_HEIGHT = 18  # pixels of the strip that holds a tile's title
_TILE_GAP = 4  # pixels between tiles
_BAR_HEIGHT = 12  # pixels of the colour bar's colours
_BAR_MARGIN = 6  # pixels of white around the colour bar
_BAR_MIN_WIDTH = 320  # a colour bar is at least this wide, so its labels fit (a grid of one portrait tile is narrower)
# The top of `FixedScale`, in multiples of uniform attention. Measured on the bundled models (their captions of
# scikit-image's coffee, astronaut and chelsea photos and a ShapesWorld scene, beam 3), the most attended cell of
# a word's map holds 1.2-6.7x uniform for the Flickr8k soft model, 5-17x for the hard one, and 5-72x for the
# ShapesWorld and DAQUAR models. At 8 the Flickr8k soft maps keep their whole range of colours (none reaches the
# top), while the sharp maps saturate only at their peaks; 4 would saturate most soft maps, 16 would leave them
# dark. On a 7x7 grid 8x uniform is a cell holding 16% of the attention, on 14x14 a cell holding 4%.
DEFAULT_TOP = 8.0
# zlib level of the PNG files: 1, the fastest that compresses. An export writes one full-size PNG per word, and
# higher levels take several times longer for files a few percent smaller (level 6, PIL's default: over 4x the
# time for 11% less, on a 640x480 photo overlay); level 0 is faster still but writes twice the bytes.
PNG_COMPRESS_LEVEL = 1


class DisplayScale(ABC):
    """How attention weights become display values in [0, 1] (the colour map's input), and what the colour
    bar says about them. Applied to the weights of the grid cells, before the maps are stretched over the photo
    (bilinear interpolation keeps the values' scale: a flat map stays exactly flat)."""

    @abstractmethod
    def values(self, weights: Tensor) -> Tensor:
        """(N, L) attention weights, one map a row -> (N, L) display values in [0, 1]."""

    @abstractmethod
    def ticks(self) -> list[tuple[float, str]]:
        """The colour bar's labels: (position in [0, 1], what a value there means), left to right."""

    @abstractmethod
    def describe(self) -> dict:
        """The scale as the export's JSON records it (which scale the PNG files were drawn on)."""


@dataclass(frozen=True)
class FixedScale(DisplayScale):
    """One absolute scale for every map: a cell's weight x L (L = cells of the grid), so 1 is exactly what
    uniform attention gives each cell, drawn from 0 (darkest) to `top` (brightest; more is clipped to it).
    The same colour means the same amount of attention in every word's map and every photo.

    Args:
        top: the multiple of uniform attention drawn in the brightest colour (`DEFAULT_TOP` says why 8).
    """

    top: float = DEFAULT_TOP

    def __post_init__(self) -> None:
        if not self.top > 1.0:  # also refuses NaN
            raise ValueError(f"top must be above 1 (uniform attention), got {self.top}")

    def values(self, weights: Tensor) -> Tensor:
        cells = weights.shape[-1]
        return (weights * (cells / self.top)).clamp(0.0, 1.0)  # (N, L)

    def ticks(self) -> list[tuple[float, str]]:
        return [(0.0, "0"), (1.0 / self.top, "1 = uniform"), (1.0, f"{self.top:g}x uniform or more")]

    def describe(self) -> dict:
        return {"kind": "fixed", "top": self.top, "unit": "weight x grid cells (1 = uniform attention)"}


@dataclass(frozen=True)
class PerMapStretch(DisplayScale):
    """Each map divided by its own maximum: the most attended cell of every map is the brightest colour, however
    flat the map (a map of zeros stays dark). Shows the shape of a flat map, not how flat it is."""

    def values(self, weights: Tensor) -> Tensor:
        weights = weights.clamp(min=0.0)
        peaks = weights.amax(dim=-1, keepdim=True)  # (N, 1)
        return torch.where(peaks > 0, weights / peaks, 0.0)  # (N, L); a map of zeros stays 0

    def ticks(self) -> list[tuple[float, str]]:
        return [(0.0, "0"), (1.0, "each map's maximum")]

    def describe(self) -> dict:
        return {"kind": "stretch", "unit": "fraction of each map's maximum"}


def add_scale_flag(parser: Any, *, unit: str) -> None:
    """Give an export command's parser `--stretch`, which draws each `unit`'s map ("word", "hop") on
    `PerMapStretch` instead of the default `FixedScale`; `chosen_scale(args)` reads it."""
    parser.add_argument(
        "--stretch",
        action="store_true",
        help=f"draw each {unit}'s map up to its own maximum (even a flat map looks peaked) instead of the default "
        f"fixed scale, the same for every {unit} (1 = uniform attention)",
    )


def chosen_scale(args: Any) -> DisplayScale:
    """The scale `add_scale_flag`'s `--stretch` chose."""
    return PerMapStretch() if args.stretch else FixedScale()


def upsample(
    weights: Tensor, grid: tuple[int, int], size: tuple[int, int], scale: DisplayScale = FixedScale()
) -> np.ndarray:
    """A rows x columns attention map on the display `scale`, stretched smoothly over a photo of `size` (width, height).

    Bilinear interpolation with align_corners=False treats each cell's value as the value at its cell's centre,
    so cell (r, c) lands on x in [c, c+1] / columns * width, y in [r, r+1] / rows * height (the input the encoder
    saw, stretched back to the photo). The raw weights are kept elsewhere (the export's JSON).

    Args:
        weights: (L,) with L = rows * columns, row-major (location r * columns + c is row r, column c).
        grid: (rows, columns), the encoder's `grid_shape`.
        size: (width, height) of the photo, as PIL gives it.
        scale: how weights become display values (default: the fixed absolute scale).

    Returns:
        (height, width) float32 array in [0, 1].
    """
    return heat_maps(weights.reshape(1, -1), grid, size, scale)[0]


def heat_maps(
    weights: Tensor, grid: tuple[int, int], size: tuple[int, int], scale: DisplayScale = FixedScale()
) -> list[np.ndarray]:
    """`upsample` for every row of weights (N, L): one (height, width) map per word or hop."""
    rows, columns = grid
    if weights.shape[-1] != rows * columns:
        raise ValueError(f"expected {rows}x{columns} = {rows * columns} attention weights, got {weights.shape[-1]}")
    values = scale.values(weights.detach().to("cpu", torch.float32).reshape(-1, rows * columns))  # (N, L) in [0, 1]
    return list(spread(values, grid, size).numpy())


def spread(values: Tensor, grid: tuple[int, int], size: tuple[int, int]) -> Tensor:
    """(N, L) values of a rows x columns grid -> (N, height, width) at a photo of `size` (width, height): the bilinear
    stretch every overlay is drawn with (`upsample`'s docstring says where each cell lands). Attention weights
    spread so keep their proportions, which is how `captioning.grounding` scores a map at the photo's pixels."""
    width, height = size
    rows, columns = grid
    cells = values.detach().to("cpu", torch.float32).reshape(-1, 1, rows, columns)  # (N, 1, rows, columns)
    return F.interpolate(cells, size=(height, width), mode="bilinear", align_corners=False)[:, 0]  # (N, H, W)


def colorize(heat: np.ndarray) -> np.ndarray:
    """(H, W) values in [0, 1] -> (H, W, 3) uint8 colours of the inferno map (dark = little, yellow = much).

    The colours are matplotlib's own bytes for the map. Values outside [0, 1] are clipped (inferno's end
    colours); NaN is black."""
    rgba = _INFERNO(np.asarray(heat, dtype=np.float32), bytes=True)  # float input: integers would be indices
    return np.ascontiguousarray(rgba[..., :3])


def overlay(image: Image.Image, heat: np.ndarray, alpha: float = 0.6) -> Image.Image:
    """The photo with the coloured heat map blended over it: (1 - alpha) * photo + alpha * colour.

    Args:
        image: the photo (any mode; drawn as RGB).
        heat: (height, width) in [0, 1], the photo's own size (see `upsample`).
        alpha: opacity of the colour map, 0 (photo only) .. 1 (map only).
    """
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be in [0, 1], got {alpha}")
    if heat.shape != (image.height, image.width):
        raise ValueError(f"heat map is {heat.shape[::-1]} (width, height) but the image is {image.size}")
    photo = np.asarray(image if image.mode == "RGB" else image.convert("RGB"), dtype=np.float32)  # (H, W, 3)
    blended = photo * np.float32(1.0 - alpha)
    blended += colorize(heat).astype(np.float32) * np.float32(alpha)
    return Image.fromarray(np.rint(blended, out=blended).astype(np.uint8))


def titled(image: Image.Image, title: str) -> Image.Image:
    """The image under a strip with `title` in it, cut with an ellipsis when it is wider than the image."""
    tile = Image.new("RGB", (image.width, image.height + _TITLE_HEIGHT), "white")
    tile.paste(image.convert("RGB"), (0, _TITLE_HEIGHT))
    draw = ImageDraw.Draw(tile)
    font = ImageFont.load_default()
    if not isinstance(font, ImageFont.FreeTypeFont):  # Pillow without FreeType: a Latin-1 bitmap font
        title = title.encode("latin-1", "replace").decode("latin-1")
    draw.text((2, 2), _fitted(draw, font, title, image.width - 4), fill="black", font=font)
    return tile


def _fitted(draw: ImageDraw.ImageDraw, font: ImageFont.ImageFont | ImageFont.FreeTypeFont, text: str, width: int) -> str:
    """The longest prefix of text (with '...' when cut) that fits in `width` pixels."""
    if draw.textlength(text, font=font) <= width:
        return text
    text = text[: max(1, width)]  # no glyph is narrower than a pixel: the rest cannot fit
    while text and draw.textlength(text + "...", font=font) > width:
        text = text[:-1]
    return text + "..." if text else ""


def word_grid(
    image: Image.Image,
    words: Sequence[str],
    maps: Sequence[np.ndarray],
    columns: int = 5,
    *,
    tile_size: int = 224,
    image_title: str = "",
    scale: DisplayScale | None = None,
    heading: str = "",
) -> Image.Image:
    """One picture of a whole caption (or every hop of an answer): the photo first, then one titled overlay
    tile per word, `columns` tiles a row, and, when `scale` is given, the colour bar of that scale under them.
    Tiles keep the photo's aspect ratio, longest side `tile_size`. A `heading` (an answer's question) goes above it
    all.

    Args:
        image: the photo.
        words: the tile titles, one per map.
        maps: (height, width) heat maps in [0, 1] at the photo's size (see `heat_maps`).
        columns: tiles per row.
        tile_size: longest side of a tile in pixels.
        image_title: the title over the photo's own tile.
        scale: the scale the maps were drawn on (`heat_maps`), for the colour bar; None draws no bar.
        heading: a line over the whole picture; none when empty.
    """
    if len(words) != len(maps):
        raise ValueError(f"{len(words)} titles for {len(maps)} maps")
    if columns < 1:
        raise ValueError(f"columns must be at least 1, got {columns}")
    shrink = tile_size / max(image.size)
    size = (max(1, round(image.width * shrink)), max(1, round(image.height * shrink)))
    small = image.convert("RGB").resize(size, Image.Resampling.BILINEAR)
    tiles = [titled(small, image_title)]
    for word, heat in zip(words, maps):
        shrunk = np.asarray(Image.fromarray(np.asarray(heat, dtype=np.float32)).resize(size, Image.Resampling.BILINEAR))
        tiles.append(titled(overlay(small, shrunk), word))
    sheet = _tiled(tiles, columns)
    if scale is not None:
        bar = colour_bar(scale, max(sheet.width, _BAR_MIN_WIDTH))
        with_bar = Image.new("RGB", (bar.width, sheet.height + bar.height), "white")
        with_bar.paste(sheet, (0, 0))
        with_bar.paste(bar, (0, sheet.height))
        sheet = with_bar
    return titled(sheet, heading) if heading else sheet


def colour_bar(scale: DisplayScale, width: int) -> Image.Image:
    """A horizontal colour bar `width` pixels wide: the colours of values 0 .. 1 left to right (`colorize`), a
    tick at each of the scale's labels and the label under it, in words ("1 = uniform")."""
    font = ImageFont.load_default()
    inner = width - 2 * _BAR_MARGIN  # pixels of colours
    label_height = _TITLE_HEIGHT - 4
    bar = Image.new("RGB", (width, _BAR_MARGIN + _BAR_HEIGHT + 3 + label_height + _BAR_MARGIN), "white")
    colours = colorize(np.linspace(0.0, 1.0, inner, dtype=np.float32)[None, :])  # (1, inner, 3)
    bar.paste(Image.fromarray(np.repeat(colours, _BAR_HEIGHT, axis=0)), (_BAR_MARGIN, _BAR_MARGIN))
    draw = ImageDraw.Draw(bar)
    tick_top, label_top = _BAR_MARGIN + _BAR_HEIGHT, _BAR_MARGIN + _BAR_HEIGHT + 3
    free_from = 0.0  # labels never overlap: each starts after the one before it
    for position, label in scale.ticks():
        x = _BAR_MARGIN + round(position * (inner - 1))
        draw.line([(x, tick_top), (x, tick_top + 2)], fill="black")
        text_width = draw.textlength(label, font=font)
        left = min(max(x - text_width / 2, free_from, 2.0), width - 2 - text_width)  # centred, kept inside the bar
        draw.text((left, label_top), label, fill="black", font=font)
        free_from = left + text_width + 8
    return bar


def _tiled(tiles: list[Image.Image], columns: int) -> Image.Image:
    """Equal-sized tiles laid out left to right, top to bottom, on white."""
    width, height = tiles[0].size
    columns = min(columns, len(tiles))
    rows = -(-len(tiles) // columns)
    sheet = Image.new("RGB", (columns * width + (columns - 1) * _TILE_GAP, rows * height + (rows - 1) * _TILE_GAP), "white")
    for index, tile in enumerate(tiles):
        row, column = divmod(index, columns)
        sheet.paste(tile, (column * (width + _TILE_GAP), row * (height + _TILE_GAP)))
    return sheet


# PNG colour types of the modes `encode_png` writes itself (8 bits per channel)
_PNG_COLOUR_TYPES = {"L": 0, "RGB": 2, "RGBA": 6}


def encode_png(image: Image.Image) -> bytes:
    """The image as PNG file bytes: every row through the Up filter (each byte minus the one above it), then
    zlib's Huffman-only coding; PIL's own PNG writer (zlib level `PNG_COMPRESS_LEVEL`) for modes other than L,
    RGB and RGBA.

    Kept instead of PIL's writer because it makes what an app user waits for shorter: the app writes an
    11-word caption's overlays as PNG files for the export zip before the /caption answer is complete, and
    `python benchmarks/app_latency.py --requests 10 --clients 4` (2 cores, AMD EPYC) measured that answer at a
    median 0.355 and 0.358 s with this writer against 0.504 s with PIL's at level 1 (4 clients at once: 1.33-1.46 s
    against 2.07 s), the caption and its gallery alone at 0.22 s either way. One 640x480 overlay (scikit-image's
    coffee photo under a random heat map, best of 5 x 10 writes): 5.5 ms here, 27.8 ms by PIL at level 1, 13.8 ms
    at level 0.
    """
    colour_type = _PNG_COLOUR_TYPES.get(image.mode)
    if colour_type is None:
        buffer = io.BytesIO()
        image.save(buffer, format="PNG", compress_level=PNG_COMPRESS_LEVEL)
        return buffer.getvalue()
    pixels = np.asarray(image).reshape(image.height, -1)  # (H, W * channels) bytes
    rows = np.empty((image.height, pixels.shape[1] + 1), dtype=np.uint8)
    rows[:, 0] = 2  # filter type Up: each byte minus the one above it (modulo 256; the row above the first is 0)
    rows[:1, 1:] = pixels[:1]
    np.subtract(pixels[1:], pixels[:-1], out=rows[1:, 1:])
    compressor = zlib.compressobj(1, zlib.DEFLATED, 15, 9, zlib.Z_HUFFMAN_ONLY)
    data = compressor.compress(rows) + compressor.flush()
    header = struct.pack(">IIBBBBB", image.width, image.height, 8, colour_type, 0, 0, 0)
    chunks = [_png_chunk(b"IHDR", header), _png_chunk(b"IDAT", data), _png_chunk(b"IEND", b"")]
    return b"\x89PNG\r\n\x1a\n" + b"".join(chunks)


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    """A PNG chunk: length, type, data and the CRC of type and data."""
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(data, zlib.crc32(kind)))


def save_png(image: Image.Image, path: str | Path) -> None:
    """Write the image as a PNG file (`encode_png`)."""
    Path(path).write_bytes(encode_png(image))


def gif_frame(image: Image.Image) -> Image.Image:
    """The picture as a GIF frame: mode P with its own 256-colour palette, by fast octree quantisation (PIL's
    default median cut takes about 100x longer per frame, for no visible gain on smooth heat maps)."""
    return image.convert("RGB").quantize(256, method=Image.Quantize.FASTOCTREE)


def save_gif(frames: Sequence[Image.Image], path: str | Path, duration_ms: int = 800) -> None:
    """An endlessly looping GIF showing each frame for `duration_ms`.

    Frames in mode P are written as they are, others go through `gif_frame` first. PIL's palette
    optimisation is off: it took a third of the writing time to save 3% of the size. GIF writers merge
    consecutive identical frames, so give frames that differ (e.g. titled with the word's position) when the
    file must have one frame per word.
    """
    if not frames:
        raise ValueError("a GIF needs at least one frame")
    first, *rest = [frame if frame.mode == "P" else gif_frame(frame) for frame in frames]
    first.save(
        Path(path), format="GIF", save_all=True, append_images=rest, duration=duration_ms, loop=0, optimize=False
    )
