"""Where the encoder's ImageNet head sees an object: its class activation map of each boxed class's word, scored
against that class's boxes as `python -m vqa.hop_grounding` scores a SAN's hops.

`experiments/hop_teacher.py` trains a SAN's hops toward these maps; this script says how good a teacher they are on
photos with boxes, beside the photo's centre point, before any training. For every photo and every boxed class whose
word (`vqa.hop_grounding.class_word`) has ImageNet classes (`ImageNetWords`: a person's word takes persons' and
clothes' classes), the map of `hop_teacher.activation_maps` on the frozen EfficientNet-Lite0 grid at 224 px (or
`--image-size`, scored on its own grid or, with `--pool 2`, on the grid of half as many rows and columns) is scored
by `core.maps.grounding.score_pair`. Persons are reported apart: they are most of the boxes and have no class of
their own.

    python -m experiments.head_maps --images PATH/TO/coco-boxes/images --boxes PATH/TO/coco-boxes/boxes.json

Figures in docs/experiments.md (Flickr8k-QA).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

import torch
from jsonargparse import ArgumentParser

from core.maps.grounding import Mention, PairScore, score_pair
from core.model.encoder import EfficientNetLite
from data.boxes import BoxedPhoto, read_boxes
from data.errors import DatasetFormatError
from data.images import ImageLoadError, load_image
from experiments.hop_teacher import ImageNetWords, activation_maps, summed_cells
from vqa.hop_grounding import class_word


def score_photo(
    encoder: EfficientNetLite, words: ImageNetWords, photo: BoxedPhoto, image, *, pool: int = 1
) -> list[PairScore]:
    """The head's map of every boxed class of the photo whose word has ImageNet classes, scored; with `pool` > 1
    on a grid `pool` times coarser (each cell the sum of pool x pool cells: a 448-px map on the 224-px grid)."""
    with torch.inference_mode():
        features = encoder(encoder.transform()(image)[None])  # (1, L, 1280)
    scores = []
    for name in sorted(photo.classes):
        word = class_word(name)
        classes = words.classes_of(word) if word is not None else ()
        if not classes:
            continue
        chosen = torch.zeros(1, 1000, dtype=torch.bool)
        chosen[0, list(classes)] = True
        heat = activation_maps(features, encoder.net._fc, chosen, temperature=1.0)[0].reshape(encoder.grid_shape)
        heat = summed_cells(heat, pool)  # (rows / pool, columns / pool)
        scores.append(score_pair(heat, photo, Mention(position=0, phrase=word, classes=frozenset({name}))))
    return scores


def table(scores: Sequence[PairScore]) -> str:
    """Pointing, mass inside and their baselines for persons, the other classes and all, x100."""
    lines = ["| objects | maps | pointing | centre point | mass inside | uniform mass |", "|---|" + "---:|" * 5]
    groups = {
        "persons": [s for s in scores if s.word == "person"],
        "other classes": [s for s in scores if s.word != "person"],
        "all": list(scores),
    }
    for group, rows in groups.items():
        if rows:
            fields = ("pointed", "centre", "mass", "box_share")
            figures = [sum(getattr(s, field) for s in rows) / len(rows) for field in fields]
            lines.append(f"| {group} | {len(rows)} | " + " | ".join(f"{100 * f:.1f}" for f in figures) + " |")
    return "\n".join(lines)


def parser() -> ArgumentParser:
    parser = ArgumentParser(prog="python -m experiments.head_maps", description=__doc__.split("\n\n")[0])
    parser.add_argument("--images", type=Path, required=True, help="the folder of the photos")
    parser.add_argument("--boxes", type=Path, required=True, help="their boxes (data.boxes layouts)")
    parser.add_argument("--image-size", type=int, default=224, help="the encoder's input side (a multiple of 32)")
    parser.add_argument("--pool", type=int, default=1, help="score on a grid this many times coarser")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        photos = read_boxes(args.boxes)
    except (FileNotFoundError, DatasetFormatError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    try:
        encoder = EfficientNetLite(image_size=args.image_size).eval()
        rows, columns = encoder.grid_shape
        if args.pool < 1 or rows % args.pool or columns % args.pool:
            raise ValueError(f"--pool must divide the {rows} x {columns} grid, got {args.pool}")
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    words = ImageNetWords()
    scores, read = [], 0
    for photo in photos:
        try:
            image = load_image(args.images / photo.file)
        except ImageLoadError as error:
            print(f"skipped: {error}", file=sys.stderr)
            continue
        if image.size != photo.size:
            print(f"skipped: {photo.file} is {image.size}, the boxes file says {photo.size}", file=sys.stderr)
            continue
        read += 1
        scores += score_photo(encoder, words, photo, image, pool=args.pool)
    if not scores:
        unread = f"no photo of {args.images} could be read"
        print(f"error: {unread if not read else 'no boxed class has a word with ImageNet classes'}", file=sys.stderr)
        return 2
    print(table(scores))
    return 0


if __name__ == "__main__":
    sys.exit(main())
