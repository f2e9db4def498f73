"""One caption's attention drawn over its photo: an overlay per word, the grid of them with the colour bar, the GIF,
and caption.json, as `python -m captioning.export`, `captioning.Caption.save` and the app write them.

`CaptionOverlays.draw` draws once in memory; `write_previews` (JPEGs for a page) and `write` (the export files) use
those pictures. The drawing itself is `core.maps.overlays`'; this module knows a caption's words and files.
"""

from __future__ import annotations

import os
import re
import threading
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
from PIL import Image
from torch import Tensor

from core.maps.measures import top_area_share
from core.maps.overlays import (
    DisplayScale,
    FixedScale,
    gif_frame,
    heat_maps,
    overlay,
    save_gif,
    save_png,
    titled,
    word_grid,
)
from core.training.results import write_json_atomically

GIF_SIZE = 448  # longest side of the GIF's frames, in pixels: a GIF of full-size photos would be huge
PREVIEW_QUALITY = 90  # JPEG quality of `CaptionOverlays.write_previews`
_DRAWING_POOL: futures.ThreadPoolExecutor | None = None
_DRAWING_POOL_LOCK = threading.Lock()


@dataclass(frozen=True)
class CaptionOverlays:
    """One caption's attention drawn over its photo, held in memory: `draw` it, then `write` the export files
    (and, for a page, `write_previews` first: the demo app shows those while the export is written).

    Drawing and writing run on `drawing_pool()` (numpy, zlib and PIL's encoders let other threads run)."""

    photo: Image.Image  # the photo as RGB, at its own size
    words: list[str]
    weights: Tensor  # (n_words, L) raw attention weights
    grid: tuple[int, int]  # (rows, columns) of the encoder's grid, L = rows * columns
    scale: DisplayScale  # how the maps show the weights
    maps: list[np.ndarray]  # one (height, width) heat map in [0, 1] per word (`heat_maps`)
    pictures: list[Image.Image]  # one overlay per word at the photo's size
    concentration: list[float]  # per word, the share of its attention on the most attended 5% of the photo

    @classmethod
    def draw(
        cls,
        image: Image.Image,
        *,
        words: Sequence[str],
        weights: Tensor,
        grid: tuple[int, int],
        scale: DisplayScale = FixedScale(),
    ) -> CaptionOverlays:
        """Each word's heat map, overlay and concentration.

        Args:
            image: the original photo (its own size and aspect ratio; the maps are stretched onto it).
            words: the caption's words.
            weights: (n_words, L) attention weights, L = rows * columns.
            grid: (rows, columns), the encoder's `grid_shape`.
            scale: how the pictures show the weights (default: the same fixed scale for every word).
        """
        if len(words) != len(weights):
            raise ValueError(f"{len(words)} words but {len(weights)} rows of attention weights")
        photo = image if image.mode == "RGB" else image.convert("RGB")
        maps = heat_maps(weights, grid, photo.size, scale)
        pictures = list(drawing_pool().map(lambda heat: overlay(photo, heat), maps))
        concentration = top_area_share(weights).tolist()  # (n_words,)
        return cls(
            photo=photo,
            words=list(words),
            weights=weights,
            grid=grid,
            scale=scale,
            maps=maps,
            pictures=pictures,
            concentration=concentration,
        )

    def write_previews(self, folder: Path) -> list[Path]:
        """Each word's overlay as a JPEG (`preview_file_name`, quality PREVIEW_QUALITY) in folder (created when
        missing): about a tenth of the PNG's size and quick to encode, for showing in a page. Returns the
        paths in caption order. Keep the folder apart from the export's."""
        folder.mkdir(parents=True, exist_ok=True)
        paths = [folder / preview_file_name(number, word) for number, word in enumerate(self.words, start=1)]

        def save(picture: Image.Image, path: Path) -> None:
            picture.save(path, format="JPEG", quality=PREVIEW_QUALITY)

        list(drawing_pool().map(save, self.pictures, paths))
        return paths

    def write(self, out_dir: Path, *, source: str = "", parallel: bool = True, details: dict | None = None) -> dict:
        """Write the export files into out_dir (`captioning.export` lists them); returns the caption.json record, which
        also holds `details` (a Transformer's "heads").

        `parallel=False` writes them in the calling thread alone, leaving the other cores free: the demo app
        does so once it has answered with the caption and the gallery, so the page's requests for the
        gallery's pictures are served at once while the export is written."""
        out_dir = Path(out_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        pool = drawing_pool() if parallel else _InlineExecutor()

        def write_word(number: int, word: str, picture: Image.Image) -> Image.Image:
            """Write one word's overlay; returns its GIF frame."""
            save_png(picture, out_dir / word_file_name(number, word))
            small = picture.copy()
            small.thumbnail((GIF_SIZE, GIF_SIZE), Image.Resampling.BILINEAR)
            return gif_frame(titled(small, f"{number}. {word}"))  # numbered: identical frames would be merged

        numbered = enumerate(zip(self.words, self.pictures), start=1)
        words = [pool.submit(write_word, number, word, picture) for number, (word, picture) in numbered]
        grid = pool.submit(
            lambda: save_png(word_grid(self.photo, self.words, self.maps, scale=self.scale), out_dir / "grid.png")
        )
        try:
            frames = [job.result() for job in words]
            if not frames:  # the model ended the caption at once: show the photo alone
                small = self.photo.copy()
                small.thumbnail((GIF_SIZE, GIF_SIZE), Image.Resampling.BILINEAR)
                frames.append(titled(small, "(no words)"))
            save_gif(frames, out_dir / "attention.gif")
        finally:
            futures.wait([*words, grid])  # none is left writing into out_dir once this returns or raises
        grid.result()
        record = {
            "image": source,
            "caption": " ".join(self.words),
            "words": list(self.words),
            "grid_size": list(self.grid),
            "image_size": list(self.photo.size),
            "weights": self.weights.detach().float().cpu().tolist(),
            "scale": self.scale.describe(),
            "concentration": list(self.concentration),
            **(details or {}),
        }
        write_json_atomically(out_dir / "caption.json", record)
        return record


class _InlineExecutor(futures.Executor):
    """An executor that runs each task at once in the calling thread."""

    def submit(self, fn, /, *args, **kwargs) -> futures.Future:
        future: futures.Future = futures.Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as error:  # kept in the future, raised by result() as a pool's would be
            future.set_exception(error)
        return future


def drawing_pool() -> futures.ThreadPoolExecutor:
    """The threads that draw and encode overlays: one per CPU this process may use (at most 8), started on
    first use and shared by every caller in the process (no pool is started per request). Tasks run on it
    must not wait for other tasks of it."""
    global _DRAWING_POOL
    with _DRAWING_POOL_LOCK:
        if _DRAWING_POOL is None:
            cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
            _DRAWING_POOL = futures.ThreadPoolExecutor(max(1, min(8, cpus)), thread_name_prefix="overlays")
        return _DRAWING_POOL


def word_file_name(number: int, word: str) -> str:
    """`word_03_circle.png`: the word's position (from 1) and the word, made safe as a file name."""
    safe = re.sub(r"[^\w-]+", "_", word).strip("_")[:40] or "word"
    return f"word_{number:02d}_{safe}.png"


def preview_file_name(number: int, word: str) -> str:
    """`word_03_circle.jpg`: `word_file_name` for the JPEG preview of the same overlay."""
    return word_file_name(number, word).removesuffix(".png") + ".jpg"
