"""`python -m captioning.export CHECKPOINT IMAGE_OR_FOLDER... --output DIR [--beam-size 3]`: caption photos
and write where the model looked at every word.

For each image, `DIR/<image stem>/` receives:

* `word_01_<word>.png`, ... one overlay per generated word, numbered from 1 in caption order;
* `grid.png`: the photo, then every word's overlay with the word as its title;
* `attention.gif`: one frame per word;
* `caption.json`: {"image", "caption", "words", "grid_size": [h, w], "image_size": [width, height],
  "weights": one row of grid_size**2 raw attention weights per word (row-major grid locations)}.

An image that cannot be read is reported on stderr and skipped; the exit status is non-zero only when no
image could be exported. `write_caption_overlays` is shared with the `predict` callback
(`captioning.overlay_writer.OverlayWriter`) and `export_caption` with the demo app.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Sequence

import torch
from PIL import Image
from torch import Tensor

from captioning.datamodule import IMAGE_SUFFIXES
from captioning.module import CaptioningModule
from captioning.overlays import heat_maps, overlay, save_gif, save_png, titled, word_grid
from captioning.prediction_writer import write_json_atomically
from data.images import ImageLoadError, load_image

GIF_SIZE = 448  # longest side of the GIF's frames, in pixels: a GIF of full-size photos would be huge


def export_caption(model: CaptioningModule, image: Image.Image, out_dir: Path, beam_size: int = 3, *, source: str = "") -> dict:
    """Caption one photo with beam search and write its overlays into out_dir (see the module docstring).

    Args:
        model: a trained captioning model (e.g. `CaptioningModule.load(path)`).
        image: the photo, as `data.images.load_image` gives it.
        out_dir: the folder to write into (created when missing).
        beam_size: beam width of the search.
        source: what the photo is called in caption.json (its path, usually).

    Returns:
        The caption.json record.
    """
    with torch.inference_mode():
        inputs = model.encoder.transform()(image).unsqueeze(0).to(model.device)  # (1, 3, S, S)
        generated = model.generate(inputs, beam_size=beam_size)
    words, weights = model.caption_words(generated.tokens[0], generated.weights[0])  # n words, (n, L)
    return write_caption_overlays(
        image,
        words=words,
        weights=weights,
        grid=model.encoder.grid_size,
        out_dir=Path(out_dir),
        source=source,
    )


def write_caption_overlays(
    image: Image.Image, *, words: Sequence[str], weights: Tensor, grid: int, out_dir: Path, source: str = ""
) -> dict:
    """Write one caption's word overlays, grid, GIF and caption.json into out_dir; returns the JSON record.

    Args:
        image: the original photo (its own size and aspect ratio; the maps are stretched onto it).
        words: the caption's words.
        weights: (n_words, L) attention weights, L = grid**2.
        grid: the side of the encoder's square grid.
        out_dir: the folder to write into (created when missing).
        source: what the photo is called in caption.json.
    """
    if len(words) != len(weights):
        raise ValueError(f"{len(words)} words but {len(weights)} rows of attention weights")
    out_dir.mkdir(parents=True, exist_ok=True)
    maps = heat_maps(weights, grid, image.size)
    frames = []
    for number, (word, heat) in enumerate(zip(words, maps), start=1):
        picture = overlay(image, heat)
        save_png(picture, out_dir / word_file_name(number, word))
        picture.thumbnail((GIF_SIZE, GIF_SIZE))
        frames.append(titled(picture, f"{number}. {word}"))  # numbered: identical frames would be merged
    save_png(word_grid(image, list(words), maps), out_dir / "grid.png")
    if not frames:  # the model ended the caption at once: show the photo alone
        photo = image.convert("RGB")
        photo.thumbnail((GIF_SIZE, GIF_SIZE))
        frames.append(titled(photo, "(no words)"))
    save_gif(frames, out_dir / "attention.gif")
    record = {
        "image": source,
        "caption": " ".join(words),
        "words": list(words),
        "grid_size": [grid, grid],
        "image_size": list(image.size),
        "weights": weights.detach().float().cpu().tolist(),
    }
    write_json_atomically(out_dir / "caption.json", record)
    return record


def word_file_name(number: int, word: str) -> str:
    """`word_03_circle.png`: the word's position (from 1) and the word, made safe as a file name."""
    safe = re.sub(r"[^\w-]+", "_", word).strip("_")[:40] or "word"
    return f"word_{number:02d}_{safe}.png"


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


def parse_arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m captioning.export",
        description="Caption images and write per-word attention overlays, a grid, a GIF and the weights as JSON.",
    )
    parser.add_argument("checkpoint", type=Path, help="a captioning checkpoint (best.ckpt)")
    parser.add_argument("images", type=Path, nargs="+", metavar="IMAGE_OR_FOLDER", help="image files or folders of images")
    parser.add_argument("--output", type=Path, required=True, help="folder that receives one subfolder per image")
    parser.add_argument("--beam-size", type=int, default=3, help="beam width (default 3)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_arguments(argv)
    try:
        model = CaptioningModule.load(args.checkpoint)
    except (FileNotFoundError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    taken: set[str] = set()
    exported = 0
    for path in image_paths(args.images):
        try:
            image = load_image(path)
        except ImageLoadError as error:
            print(f"skipped: {error}", file=sys.stderr)
            continue
        folder = output_folder(args.output, path, taken)
        record = export_caption(model, image, folder, args.beam_size, source=str(path))
        print(f"{path}: {record['caption']!r} -> {folder}")
        exported += 1
    if not exported:
        print("error: no image could be exported", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
