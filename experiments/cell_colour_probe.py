"""How much of a grid cell's colour do the encoder's ImageNet features keep? A linear probe.

A "what color is the shirt?" question needs the colour of the cells a hop lands on. This labels each 32-px cell of
a set's photos with the colour most of its pixels are nearest to (`PALETTE`, eleven basic colour terms; cells no
colour covers half of are left out), then trains a logistic regression from the cell's 1280 EfficientNet-Lite0
features to that label on 80% of the cells and scores it on the rest. High accuracy would mean the features keep
colour. They keep some (docs/experiments.md: 59% on Flickr8k-QA's validation photos), yet a SAN given each cell's
colour histogram beside them answered colour questions no better (the same page).

    python -m experiments.cell_colour_probe PATH/TO/flickr8k_qa --split val
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from core.model.encoder import EfficientNetLite
from data.images import ImageLoadError
from data.vqa2 import Flickr8kQa

#: sRGB of each colour term, the labels' prototypes
PALETTE: dict[str, tuple[int, int, int]] = {
    "black": (20, 20, 20), "white": (235, 235, 235), "gray": (128, 128, 128), "red": (200, 30, 30),
    "blue": (30, 60, 200), "green": (40, 150, 40), "yellow": (230, 210, 40), "brown": (120, 80, 40),
    "orange": (240, 140, 20), "pink": (240, 150, 180), "purple": (120, 50, 150),
}  # fmt: skip


def dominant_colours(pixels: Tensor, grid: tuple[int, int], *, least: float = 0.5) -> Tensor:
    """Each cell's colour term: the `PALETTE` entry most of its pixels are nearest to, -1 where it covers no more
    than `least` of the cell.

    Args:
        pixels: (H, W, 3) sRGB values 0..255; H and W multiples of the grid's rows and columns.
        grid: (rows, columns).

    Returns:
        (rows * columns,) indices into `PALETTE`, row-major, or -1.
    """
    rows, columns = grid
    height, width, _ = pixels.shape
    cells = pixels.float().reshape(rows, height // rows, columns, width // columns, 3).permute(0, 2, 1, 3, 4)
    cells = cells.reshape(rows * columns, -1, 3)  # (L, pixels per cell, 3)
    prototypes = torch.tensor(list(PALETTE.values()), dtype=torch.float32)  # (K, 3)
    nearest = torch.cdist(cells, prototypes.expand(len(cells), -1, -1)).argmin(-1)  # (L, pixels per cell)
    counts = torch.nn.functional.one_hot(nearest, len(PALETTE)).sum(1)  # (L, K)
    share, colour = counts.max(1)
    return torch.where(share > least * cells.shape[1], colour, torch.full_like(colour, -1))


def probe(features: Tensor, labels: Tensor, *, seed: int = 0, steps: int = 300) -> tuple[float, float]:
    """Accuracy of a logistic regression from features (N, D) to labels (N,) on a held-out fifth, and that of
    always answering the commonest training label."""
    order = torch.randperm(len(features), generator=torch.Generator().manual_seed(seed))
    train, test = order[: int(0.8 * len(order))], order[int(0.8 * len(order)) :]
    mean, std = features[train].mean(0), features[train].std(0) + 1e-3
    inputs = (features - mean) / std
    torch.manual_seed(seed)
    linear = torch.nn.Linear(features.shape[1], int(labels.max()) + 1)
    optimiser = torch.optim.Adam(linear.parameters(), lr=1e-3, weight_decay=1e-4)
    for _ in range(steps):
        optimiser.zero_grad()
        torch.nn.functional.cross_entropy(linear(inputs[train]), labels[train]).backward()
        optimiser.step()
    with torch.no_grad():
        accuracy = (linear(inputs[test]).argmax(1) == labels[test]).float().mean().item()
    commonest = torch.bincount(labels[train]).argmax()
    return accuracy, (labels[test] == commonest).float().mean().item()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("root", type=Path, help="a Flickr8k-QA set (python -m vqa.caption_questions)")
    parser.add_argument("--split", default="val", choices=("train", "val", "test"))
    parser.add_argument("--photos", type=int, default=1000, help="at most this many of the split's photos")
    args = parser.parse_args(argv)
    try:
        dataset = Flickr8kQa(root=args.root)
        photos = dataset.image_ids(args.split)[: args.photos]
    except (OSError, ValueError) as err:
        print(f"cell_colour_probe: {err}", file=sys.stderr)
        return 2
    encoder = EfficientNetLite()
    transform, size = encoder.transform(), encoder.input_shape
    features, labels = [], []
    with torch.inference_mode():
        for photo in photos:
            try:
                image = dataset.load(photo).convert("RGB")
            except ImageLoadError as err:
                print(f"skipped: {err}", file=sys.stderr)
                continue
            cells = encoder(transform(image)[None])[0]  # (L, 1280)
            pixels = torch.from_numpy(np.array(image.resize(size[::-1])))  # (H, W, 3)
            colour = dominant_colours(pixels, encoder.grid_shape)
            features.append(cells[colour >= 0])
            labels.append(colour[colour >= 0])
    if not labels:
        print(f"cell_colour_probe: no photo of {args.root} ({args.split}) could be read", file=sys.stderr)
        return 2
    read = len(labels)
    features, labels = torch.cat(features), torch.cat(labels)
    accuracy, commonest = probe(features, labels)
    counts = torch.bincount(labels, minlength=len(PALETTE)).tolist()
    print(f"{len(labels)} cells of {read} photos: " + ", ".join(f"{n} {c}" for n, c in zip(PALETTE, counts)))
    print(f"linear probe, features -> the cell's colour: {100 * accuracy:.1f}% right on a held-out fifth "
          f"(the commonest colour: {100 * commonest:.1f}%)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
