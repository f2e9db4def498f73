"""`python -m captioning.export MODEL IMAGE_OR_FOLDER... --output DIR [--beam-size 3] [--stretch] [--name-objects false]`:
caption photos and write where the model looked at every word. MODEL is a bundled model's name (flickr8k-soft) or a
checkpoint's path; a model with an ImageNet head names the objects it sees (`captioning.naming`) unless told not to.

For each image, `DIR/<image stem>/` receives:

* `word_01_<word>.png`, ... one overlay per generated word, numbered from 1 in caption order;
* `grid.png`: the photo, then every word's overlay with the word as its title, and the colour bar;
* `attention.gif`: one frame per word;
* `caption.json`: {"image", "caption", "words", "grid_size": [rows, columns], "image_size": [width, height],
  "weights": one row of rows x columns raw attention weights per word (row-major grid locations),
  "scale": the scale the pictures are drawn on (`DisplayScale.describe`), "concentration": per word, the share
  of its attention on the most attended 5% of the photo (`core.maps.measures`)}; for a Transformer decoder also
  "heads": every layer's and head's cross-attention per word, [word][layer][head][location] (`every_head`), of
  which "weights" is the layer and head its `map_layer` and `map_head` choose; when objects were named, "tags": the
  words the encoder's ImageNet head found, [{"word", "probability", "classes"}], most probable first.

The pictures use one fixed scale for every word (`core.maps.overlays.FixedScale`: 1 = uniform attention); `--stretch`
draws each word's map up to its own maximum instead (`PerMapStretch`).

An image that cannot be read is reported on stderr and skipped; the exit status is non-zero only when no
image could be exported. `write_caption_overlays` is shared with the `predict` callback
(`captioning.export.OverlayWriter`); the demo app uses `generate_caption` and `CaptionOverlays`.
"""

from __future__ import annotations

import os
import re
import sys
import threading
from concurrent import futures
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Optional, Sequence

import lightning as L
import numpy as np
import torch
from jsonargparse import ArgumentParser, Namespace
from jsonargparse.typing import PositiveInt
from lightning.pytorch.callbacks import BasePredictionWriter
from PIL import Image
from torch import Tensor

from captioning.datamodule import IMAGE_SUFFIXES
from captioning.module import CaptioningModule
from captioning.transformer import TransformerDecoder
from core.maps.measures import top_area_share
from core.model.imagenet import Tag
from core.maps.overlays import (
    DisplayScale,
    FixedScale,
    PerMapStretch,
    gif_frame,
    heat_maps,
    overlay,
    save_gif,
    save_png,
    titled,
    word_grid,
)
from core.training.results import write_json_atomically
from data.images import ImageLoadError, load_image
from data.vocabulary import tokenize

GIF_SIZE = 448  # longest side of the GIF's frames, in pixels: a GIF of full-size photos would be huge
PREVIEW_QUALITY = 90  # JPEG quality of `CaptionOverlays.write_previews`
_DRAWING_POOL: futures.ThreadPoolExecutor | None = None
_DRAWING_POOL_LOCK = threading.Lock()


def model_input(model: CaptioningModule, image: Image.Image) -> Tensor:
    """One photo as the model's encoder reads it: (1, 3, S, S) on the model's device."""
    return model.encoder.transform()(image).unsqueeze(0).to(model.device)


def generate_caption(model: CaptioningModule, image: Image.Image, beam_size: int = 3) -> tuple[list[str], Tensor]:
    """Caption one photo with beam search: its words and the attention row (n_words, L) of each."""
    with torch.inference_mode():
        generated = model.generate(model_input(model, image), beam_size=beam_size)
    return model.caption_words(generated.tokens[0], generated.weights[0])


def every_head(
    model: CaptioningModule, image: Image.Image, words: Sequence[str], *, encoded: Tensor | None = None
) -> Tensor | None:
    """A Transformer decoder's cross-attention at every layer and head for the words of a caption (teacher-forced on
    them: for a caption the model generated, the weights its search saw) -> (n_words, layers, heads, L), float32 on the
    CPU; None for a decoder without heads (Show-Attend-Tell has one map per word). `encoded`: the photo's trunk output
    (1, h*w, C) when the caller has it (`encoder.trunk`), so that the photo is not encoded again."""
    if not isinstance(model.decoder, TransformerDecoder):
        return None
    vocabulary = model.vocabulary_in_use  # a named object's new word included
    ids = [vocabulary.start_id, *(vocabulary.index(word) for word in words[:-1])]  # <start> and all but the last word
    inputs = torch.tensor([ids], device=model.device)  # (1, n)
    with torch.inference_mode():
        features = model.features(model_input(model, image) if encoded is None else encoded)  # (1, L, D)
        return model.decoder_in_use.all_maps(features, inputs)[0, : len(words)].float().cpu()  # (n, layers, heads, L)


@dataclass(frozen=True)
class HeadChoice:
    """One of a Transformer's cross-attention maps: a layer's heads averaged (`head` None) or one head, both counted
    from 0, as `TransformerDecoder.map_layer` and `map_head` choose the one its search records."""

    layer: int
    head: int | None = None

    @property
    def label(self) -> str:
        """How a person reads it, counting from 1: "layer 2, heads averaged", "layer 2, head 7"."""
        which = "heads averaged" if self.head is None else f"head {self.head + 1}"
        return f"layer {self.layer + 1}, {which}"

    def of(self, heads: Tensor) -> Tensor:
        """This map from every layer's and head's maps (..., layers, heads, L) -> (..., L)."""
        layer = heads[..., self.layer, :, :]  # (..., heads, L)
        return layer.mean(dim=-2) if self.head is None else layer[..., self.head, :]


def head_choices(model: CaptioningModule) -> list[HeadChoice]:
    """Every map a caption's overlays may show for this model: each layer's heads averaged, then each of its heads,
    layer by layer; none for a decoder with one map per word (Show-Attend-Tell)."""
    decoder = model.decoder
    if not isinstance(decoder, TransformerDecoder):
        return []
    return [HeadChoice(layer, head) for layer in range(len(decoder.blocks)) for head in (None, *range(decoder.heads))]


def caption_details(heads: Tensor | None, tags: Sequence[Tag] | None = None) -> dict:
    """What caption.json holds beyond the words and their maps: for a Transformer, `every_head`'s maps as "heads"
    ([word][layer][head][location]; nothing for Show-Attend-Tell, None); with object naming, the ImageNet head's
    "tags" ([{"word", "probability", "classes"}], most probable first)."""
    details = {} if heads is None else {"heads": heads.tolist()}
    if tags is not None:
        details["tags"] = [
            {"word": tag.word, "probability": round(tag.probability, 4), "classes": list(tag.classes)} for tag in tags
        ]
    return details


class UnknownWordsError(ValueError):
    """A caption to follow has words the model's vocabulary lacks; `words` lists them, in caption order."""

    def __init__(self, words: Sequence[str], vocabulary: Sequence[str]) -> None:
        self.words = list(words)
        self.vocabulary = list(vocabulary)  # the words it does know, in vocabulary order
        self.known = ", ".join(self.vocabulary)
        super().__init__(
            f"the model does not know {', '.join(map(repr, self.words))}: write the caption with its words ({self.known})"
        )


def follow_caption(
    model: CaptioningModule, image: Image.Image, caption: str, *, max_words: int = 40
) -> tuple[list[str], Tensor]:
    """Where the model looks at each word of a caption it is given (teacher forcing, as attention correctness is
    measured): the caption's words and the attention row (n_words, L) with which the model would say each one.

    The row of word t is computed from the words before it, as when the model speaks, so two models followed
    on the same caption have maps that line up word by word whatever they would have said themselves.

    Raises:
        ValueError: the caption has no word (letters or digits), or more than `max_words`.
        UnknownWordsError: some words are not in the model's vocabulary (it has no embedding for them).
    """
    words = tokenize(caption)
    if not words:
        raise ValueError("the caption to follow is empty: type the words the models should follow")
    if len(words) > max_words:
        raise ValueError(f"the caption to follow has {len(words)} words; shorten it to at most {max_words}")
    vocabulary = model.vocabulary
    unknown = list(dict.fromkeys(word for word in words if word not in vocabulary))
    if unknown:
        raise UnknownWordsError(unknown, [t for t in vocabulary.tokens if t not in vocabulary.SPECIALS])
    ids = torch.tensor([[vocabulary.start_id, *(vocabulary.index(word) for word in words)]], device=model.device)
    with torch.inference_mode():
        features = model.features(model_input(model, image))  # (1, L, D)
        forced = model.decoder(features, ids, model.attention.inference_read())  # inputs <start> w1 .. wn
    return words, forced.weights[0, : len(words)]  # (n_words, L); the last input's row, for <end>, is left out


def write_caption_overlays(
    image: Image.Image,
    *,
    words: Sequence[str],
    weights: Tensor,
    grid: tuple[int, int],
    out_dir: Path,
    source: str = "",
    scale: DisplayScale = FixedScale(),
) -> dict:
    """Write one caption's word overlays, grid, GIF and caption.json into out_dir; returns the JSON record.

    Args:
        image: the original photo (its own size and aspect ratio; the maps are stretched onto it).
        words: the caption's words.
        weights: (n_words, L) attention weights, L = rows * columns.
        grid: (rows, columns), the encoder's `grid_shape`.
        out_dir: the folder to write into (created when missing).
        source: what the photo is called in caption.json.
        scale: how the pictures show the weights (default: the same fixed scale for every word).
    """
    drawn = CaptionOverlays.draw(image, words=words, weights=weights, grid=grid, scale=scale)
    return drawn.write(out_dir, source=source)


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
        """Each word's heat map, overlay and concentration (arguments as `write_caption_overlays`)."""
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
        """Write the export files into out_dir (see the module docstring); returns the caption.json record, which
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


def output_folder(root: Path, image_path: Path, taken: set[str]) -> Path:
    """`root/<image stem>`, with `_2`, `_3`, ... added when an earlier image of this run had the same stem
    (a.jpg and a.png, or two folders with an a.jpg), so no export overwrites another."""
    name, count = image_path.stem, 1
    while name in taken:
        count += 1
        name = f"{image_path.stem}_{count}"
    taken.add(name)
    return Path(root) / name


def image_paths(inputs: Sequence[Path]) -> list[Path]:
    """The image files named or inside the named folders (sorted), in order; a folder without images is
    reported on stderr. Named files are kept whatever their suffix (a missing one is reported when loaded)."""
    paths: list[Path] = []
    for given in inputs:
        if given.is_dir():
            found = sorted(p for p in given.iterdir() if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES)
            if not found:
                print(f"skipped {given}: no image files ({', '.join(sorted(IMAGE_SUFFIXES))}) in it", file=sys.stderr)
            paths.extend(found)
        else:
            paths.append(given)
    return paths


def parse_arguments(argv: Sequence[str] | None) -> Namespace:
    parser = ArgumentParser(
        prog="python -m captioning.export",
        description="Caption images and write per-word attention overlays, a grid, a GIF and the weights as JSON.",
    )
    parser.add_argument("model", help="a bundled captioning model's name (flickr8k-soft, ...) or a checkpoint's path")
    parser.add_argument("images", type=Path, nargs="+", metavar="IMAGE_OR_FOLDER", help="image files or folders of images")
    parser.add_argument("--output", type=Path, required=True, help="folder that receives one subfolder per image")
    parser.add_argument("--beam-size", type=PositiveInt, default=3, help="beam width")
    parser.add_argument(
        "--stretch",
        action="store_true",
        help="draw each word's map up to its own maximum (even a flat map looks peaked) instead of the default "
        "fixed scale, the same for every word (1 = uniform attention)",
    )
    parser.add_argument(
        "--name-objects",
        type=Optional[bool],
        default=None,
        help="true or false: name what the encoder's ImageNet head sees, words the captions never had included "
        "(captioning.naming); default: on for models with an EfficientNet-Lite encoder",
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    from captioning.pretrained import Captioner  # it draws with this module's classes: imported once both exist

    args = parse_arguments(argv)
    try:
        captioner = Captioner.load(args.model)
        if args.name_objects and not captioner.can_name_objects:
            raise ValueError(
                f"{args.model} has no ImageNet head to name objects with ({type(captioner.model.encoder).__name__} "
                "encoder): leave out --name-objects"
            )
    except (FileNotFoundError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    scale = PerMapStretch() if args.stretch else FixedScale()
    taken: set[str] = set()
    exported = 0
    for path in image_paths(args.images):
        try:
            image = load_image(path)
        except ImageLoadError as error:
            print(f"skipped: {error}", file=sys.stderr)
            continue
        folder = output_folder(args.output, path, taken)
        result = captioner.caption(image, beam_size=args.beam_size, name_objects=args.name_objects)
        record = replace(result, source=str(path)).save(folder, scale=scale)
        tags = f" (tags: {', '.join(map(str, result.tags))})" if result.tags else ""
        print(f"{path}: {record['caption']!r}{tags} -> {folder}")
        exported += 1
    if not exported:
        print("error: no image could be exported", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())


# ----------------------------------------------------------------------------------------------------
# Attention overlays from `python -m captioning predict`, as a prediction callback:
#
#     python -m captioning predict --ckpt_path best.ckpt --data.predict_path photos/ \
#         --trainer.callbacks+=captioning.export.OverlayWriter --trainer.callbacks.init_args.output_dir overlays/
#
# writes for every photo the same folder as `python -m captioning.export` (see `captioning.export`), batch by
# batch, next to the captions JSON of `CaptionResultsWriter`.
#



class OverlayWriter(BasePredictionWriter):
    """Writes each predicted caption's overlays, grid, GIF and caption.json into `output_dir/<image stem>/`.

    The data module hands the model tensors resized to the encoder's input, so the original photo is read again
    from the item's path to draw on it at its own size.

    Args:
        output_dir: the folder that receives one subfolder per image.
    """

    def __init__(self, *, output_dir: Path) -> None:
        super().__init__(write_interval="batch")
        self.output_dir = Path(output_dir)
        self._taken: set[str] = set()

    def on_predict_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._taken = set()

    def write_on_batch_end(
        self,
        trainer: L.Trainer,
        pl_module: L.LightningModule,
        prediction: Any,
        batch_indices: Sequence[int] | None,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int,
    ) -> None:
        for item in prediction:
            try:
                image = load_image(item["path"])
            except ImageLoadError as error:  # changed or removed since the data module read it
                pl_module.print(f"no overlays for {item['path']}: {error}")
                continue
            folder = output_folder(self.output_dir, Path(item["path"]), self._taken)
            write_caption_overlays(
                image,
                words=item["words"],
                weights=item["weights"],
                grid=pl_module.encoder.grid_shape,
                out_dir=folder,
                source=item["path"],
            )
