"""A word's attention map against the boxes of the object it names: mass inside and pointing, with baselines.

The one scoring of a map on a photo with boxes that the project reports: `python -m captioning.grounding` scores a
caption word's map with it, `python -m vqa.hop_grounding` each attention hop of a question about a named object. A
`Mention` is the word and the object classes it may name; `score_pair` measures the map (`core.maps.measures`: the
exact share of each cell inside the union of the boxes, the pointing game at the grid and at the photo's pixels)
and the baselines of the same pair (uniform attention, a random cell, the photo's centre point). A few hundred pairs
leave a mean uncertain by several points: `photo_interval` gives its 95% interval, resampling photos.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from scipy import stats
from torch import Tensor

from core.maps.measures import cell_centres, inside_any, map_entropy, pixel_mask, union_cover
from core.maps.overlays import spread
from data.boxes import BoxedPhoto


@dataclass(frozen=True)
class Mention:
    """A caption word (or phrase) that names an object class: where it is, what it says, which classes it may name.

    `position` is the caption index of the phrase's last word ("teddy bear": "bear"), the word whose map is scored.
    """

    position: int
    phrase: str
    classes: frozenset[str]


@dataclass(frozen=True)
class PairScore:
    """How one word's map lands on the boxes of the object it names, and what the baselines score there."""

    photo: str
    word: str
    position: int  # the word's index in the caption
    classes: tuple[str, ...]  # the named classes that have boxes in the photo
    box_share: float  # the union of their boxes' share of the photo
    mass: float  # attention mass inside the union, at the grid's resolution
    pointed: bool  # the most attended cell's centre is inside a box
    mass_pixels: float  # the same two at the photo's pixels, on the map as drawn
    pointed_pixels: bool
    random_cell: float  # the share of cell centres inside a box: a random cell's chance to point right
    random_pixel: float  # the share of pixel centres inside a box (also uniform attention's mass at pixels)
    centre: bool  # the photo's centre point is inside a box
    entropy: float  # the map's entropy in nats (ln L for uniform attention)

    @property
    def uniform(self) -> float:
        """Uniform attention's mass inside the union at the grid's resolution: the union's share of the photo."""
        return self.box_share


def score_pair(weights: Tensor, photo: BoxedPhoto, mention: Mention) -> PairScore:
    """Score the map of one mention against the boxes of its classes in the photo.

    Args:
        weights: (rows, columns) the word's attention over the encoder's grid (sums to 1).
        photo: the photo's size and boxes; at least one box must belong to one of the mention's classes.
        mention: the object word, its position and classes.
    """
    rows, columns = weights.shape
    present = tuple(sorted(mention.classes & photo.classes))
    if not present:
        raise ValueError(f"{photo.file} has no box of {sorted(mention.classes)}: {mention.phrase!r} is hallucinated")
    width, height = photo.size
    pixel_boxes = torch.tensor(photo.boxes_of(set(present)), dtype=torch.float64)  # (N, 4)
    boxes = pixel_boxes / torch.tensor([width, height, width, height], dtype=torch.float64)  # normalised
    cover = union_cover(boxes, rows, columns)  # (L,)
    flat = weights.reshape(-1).float()  # (L,)
    centres = cell_centres(rows, columns)  # (L, 2)
    centre_inside = inside_any(centres, boxes)  # (L,)
    mask = pixel_mask(pixel_boxes, width, height)  # (H, W)
    drawn = spread(flat[None], (rows, columns), photo.size)[0].double()  # (H, W)
    return PairScore(
        photo=photo.file,
        word=mention.phrase,
        position=mention.position,
        classes=present,
        box_share=float(cover.mean()),
        mass=float((flat * cover).sum() / flat.sum()),
        pointed=bool(centre_inside[flat.argmax()]),
        mass_pixels=float(drawn[mask].sum() / drawn.sum()),
        pointed_pixels=bool(mask.flatten()[drawn.argmax()]),
        random_cell=float(centre_inside.float().mean()),
        random_pixel=float(mask.float().mean()),
        centre=bool(inside_any(torch.tensor([[0.5, 0.5]]), boxes)[0]),
        entropy=float(map_entropy(flat)),
    )


def photo_interval(
    pairs: Sequence[PairScore],
    measure: Callable[[PairScore], float],
    *,
    level: float = 0.95,
    draws: int = 5000,
    seed: int = 0,
) -> tuple[float, float]:
    """The percentile bootstrap interval at `level` of the mean of `measure` over the pairs, drawing photos with
    replacement, each with all its pairs (a photo's words or questions share its boxes; `scipy.stats.bootstrap`);
    NaNs with fewer than two photos."""
    by_photo: dict[str, list[float]] = defaultdict(list)
    for pair in pairs:
        by_photo[pair.photo].append(float(measure(pair)))
    if len(by_photo) < 2:
        return math.nan, math.nan
    sums = np.array([sum(values) for values in by_photo.values()])  # (photos,)
    counts = np.array([len(values) for values in by_photo.values()], dtype=float)  # (photos,)
    result = stats.bootstrap(
        (sums, counts),
        lambda s, c, axis=-1: s.sum(axis) / c.sum(axis),  # the mean over the drawn photos' pairs
        paired=True, vectorized=True, n_resamples=draws, confidence_level=level, method="percentile",
        rng=np.random.default_rng(seed),
    )  # fmt: skip
    return float(result.confidence_interval.low), float(result.confidence_interval.high)
