"""Show-Attend-Tell and the Transformer on one photo, word by word: the figure of docs/attention.md.

    python benchmarks/decoder_maps.py [--out benchmarks/figures/decoders.png]
    python benchmarks/decoder_maps.py --image photo.jpg --caption "a dog runs on the grass" --models a.ckpt b.ckpt

The two bundled Flickr8k decoders (`captioning.bundled.DECODER_CHECKPOINTS`, or the checkpoints given), each over its
EfficientNet-Lite0 grid (Show-Attend-Tell's 12x12 at 384 px, the Transformer's 7x7 at 224 px), each teacher-forced on the same caption (`captioning.inference.follow_caption`), so the
columns are the same words: one row per model, the photo titled with its name, then its map at every word, every
map on the same fixed scale (`core.maps.overlays.FixedScale`, 1 = uniform), the colour bar under them. The Transformer's
map is the one it draws by default (its `map_layer` and `map_head`). By default the photo is scikit-image's
"astronaut" (public domain, offline), with a caption in the models' Flickr8k words.

Prints one JSON line: the figure's path, and each model's own beam-3 caption of the photo and the entropy of its
maps on the followed caption (nats; ln L is uniform over the L `cells` of the model's grid: 3.89 for 7x7, 4.97
for 12x12).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

import torch
from harness import ROOT, match_threads_to_cpus
from PIL import Image
from score_functions import panel, save_sheet

from captioning.bundled import DECODER_CHECKPOINTS
from captioning.inference import UnknownWordsError, follow_caption, generate_caption
from captioning.module import CaptioningModule
from core.maps.measures import map_entropy
from core.maps.overlays import FixedScale
from data.images import ImageLoadError, load_image

CAPTION = "a woman in an orange jacket in front of a flag"  # the astronaut photo, in Flickr8k's words


def photo(path: Path | None) -> Image.Image:
    """The photo of the figure: the file given, or scikit-image's astronaut."""
    if path is not None:
        return load_image(path)
    import skimage.data

    return Image.fromarray(skimage.data.astronaut())


def figure(image: Image.Image, caption: str, models: dict[str, CaptioningModule], out: Path) -> dict:
    """Draw the figure into `out`; what each model says itself and how spread its maps are on `caption`."""
    scale = FixedScale()
    path = save_sheet(panel(image, caption, models, scale), scale, out)
    said = {}
    with torch.inference_mode():
        for name, model in models.items():
            words, _ = generate_caption(model, image, 3)
            _, weights = follow_caption(model, image, caption)  # (n_words, L)
            said[name] = {
                "own_caption": " ".join(words),
                "map_entropy": round(map_entropy(weights).mean().item(), 3),
                "cells": weights.shape[-1],  # L: uniform attention's entropy is ln L
            }
    return {"figure": str(path), "caption": caption, "models": said}


def parse_arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python benchmarks/decoder_maps.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--image", type=Path, default=None, help="the photo (default: scikit-image's astronaut)")
    parser.add_argument("--caption", default=CAPTION, help=f"the caption both follow (default {CAPTION!r})")
    parser.add_argument(
        "--models", type=Path, nargs="+", default=list(DECODER_CHECKPOINTS.values()),
        help="captioning checkpoints, one row each (default: the bundled Show-Attend-Tell and Transformer)",
    )  # fmt: skip
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "figures" / "decoders.png")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_arguments(argv)
    match_threads_to_cpus()
    names = {path: name.split(" (")[0] for name, path in DECODER_CHECKPOINTS.items()}  # "Transformer"
    try:
        image = photo(args.image)
        models = {names.get(path, path.stem): CaptioningModule.load(path, map_location="cpu") for path in args.models}
        print(json.dumps(figure(image, args.caption, models, args.out)))
    except (FileNotFoundError, ImageLoadError, UnknownWordsError, ValueError) as error:
        raise SystemExit(f"error: {error}") from None


if __name__ == "__main__":
    main()
