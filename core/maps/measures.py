"""How an attention map is measured, in one place: how spread it is, how concentrated in words a person reads, and
whether it lands on the object a word names.

**Spread** (`map_entropy`): -sum_i alpha_i log alpha_i in nats; ln L for uniform attention over L cells, 0 for all
of it on one cell. The training objectives can penalise it; it is logged beside the caption scores.

**Concentration** (`top_area_share`): the share of the attention that falls on the most attended 5% of the photo.
Uniform attention puts exactly 5% there; all of it on one cell of a 7x7 grid (a cell is 2% of the photo, so the
top 5% covers it) puts 100% there. Each grid cell covers 1/L of the photo (the encoder squashes the whole photo onto
its grid), and attention is taken as spread evenly over its cell, so the most attended `area` of the photo is the
cells in descending order of weight, the last one counted in part: 5% of 49 cells is 2.45 cells, the top two and 45%
of the third. The app titles every overlay with it ("dog: 62% on top 5%").

**Attention correctness** (`mass_in_box`): how much of a word's attention falls inside the ground-truth box of the
object it names. Attention weights live on the encoder's feature grid. A CNN feature map (B, D, H, W) is flattened
row-major to (B, H*W, D), so location `r * W + c` is grid cell (row r, column c), which covers x in [c/W, (c+1)/W]
and y in [r/H, (r+1)/H] of the image in normalised coordinates. A box rarely aligns with cells, so each cell counts
with the *fraction of its area* the box covers: uniform attention then scores exactly the box's share of the image,
the chance level to compare a model against. The score of one grounded word is `mass_in_box`; a dataset's attention
correctness is the caller's mean over grounded words. The pointing game's geometry (`cell_centres`, `inside_any`)
and the photo-resolution masks (`pixel_mask`) are here too; `captioning.grounding` scores photos with them.

Spread and concentration say nothing of where a map lands: sharper maps were measured to point worse.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor


# -- spread ------------------------------------------------------------------------------------------------------------


def map_entropy(weights: Tensor) -> Tensor:
    """-sum_i alpha_i log alpha_i in nats of each attention map: weights (..., L) -> (...). ln L for uniform
    attention, 0 for all of it on one location. Computed in float32 whatever the weights' type: in bfloat16 (a
    model under autocast) the sum keeps about 3 significant digits, and every map near uniform over 49 cells would
    read 3.890625."""
    weights = weights.float()
    return -(weights * weights.clamp_min(1e-12).log()).sum(-1)


# -- concentration -----------------------------------------------------------------------------------------------------

TOP_AREA = 0.05  # the share of the photo's area whose attention is reported


def top_area_share(weights: Tensor, area: float = TOP_AREA) -> Tensor:
    """The share of each map's attention on its most attended `area` of the photo.

    Args:
        weights: (..., L) attention weights over L grid cells, non-negative (need not sum to 1: the share is of
            the map's total; a map of zeros has share 0).
        area: the fraction of the photo, in (0, 1].

    Returns:
        (...) float64 shares in [0, 1]: `area` for uniform attention, 1 when the top `area` holds it all.
    """
    if not 0.0 < area <= 1.0:
        raise ValueError(f"area must be in (0, 1], got {area}")
    weights = weights.detach().to("cpu", torch.float64)
    cells = area * weights.shape[-1]  # how many cells the area covers, e.g. 2.45
    whole = int(cells)
    ranked = F.pad(weights.sort(dim=-1, descending=True).values, (0, 1))  # (..., L + 1): a 0 after the last cell
    top = ranked[..., :whole].sum(dim=-1) + (cells - whole) * ranked[..., whole]  # (...)
    total = weights.sum(dim=-1)
    return torch.where(total > 0, top / total, 0.0)  # a map of zeros: 0


def describe_share(share: float, area: float = TOP_AREA) -> str:
    """One line for a reader: '62% of the attention on the most attended 5% of the photo (uniform: 5%)'."""
    return f"{share:.0%} of the attention on the most attended {area:.0%} of the photo (uniform: {area:.0%})"


def short_share(share: float, area: float = TOP_AREA) -> str:
    """The same in a few words, for a picture's caption: '62% on top 5%'."""
    return f"{share:.0%} on top {area:.0%}"


# -- attention correctness: the grid and the boxes ---------------------------------------------------------------------


def _check_boxes(boxes: torch.Tensor) -> None:
    if boxes.ndim != 2 or boxes.shape[1] != 4:
        raise ValueError(f"boxes must have shape (N, 4) as (x0, y0, x1, y1), got {tuple(boxes.shape)}")
    x0, y0, x1, y1 = boxes.unbind(dim=1)
    inside = (x0 >= 0) & (y0 >= 0) & (x1 <= 1) & (y1 <= 1) & (x0 <= x1) & (y0 <= y1)
    if not bool(inside.all()):
        bad = int((~inside).nonzero()[0, 0])
        raise ValueError(
            f"box {bad} = {boxes[bad].tolist()} is not (x0, y0, x1, y1) with 0 <= x0 <= x1 <= 1 and 0 <= y0 <= y1 <= 1"
        )


def _cover_1d(low: torch.Tensor, high: torch.Tensor, cells: int) -> torch.Tensor:
    """(N, cells): the fraction of each of `cells` equal intervals of [0, 1] that [low, high] covers."""
    edges = torch.arange(cells + 1, dtype=low.dtype, device=low.device) / cells
    overlap = torch.minimum(high[:, None], edges[None, 1:]) - torch.maximum(low[:, None], edges[None, :-1])
    return (overlap * cells).clamp(0.0, 1.0)


def box_masks(boxes: torch.Tensor, grid_h: int, grid_w: int) -> torch.Tensor:
    """(N, grid_h * grid_w): for each normalised box (x0, y0, x1, y1), the covered fraction of every cell.

    Cells are flattened row-major (index r * grid_w + c), matching a (B, D, H, W) feature map flattened
    to (B, H*W, D).
    """
    if grid_h < 1 or grid_w < 1:
        raise ValueError(f"grid must be at least 1x1, got {grid_h}x{grid_w}")
    boxes = boxes if boxes.is_floating_point() else boxes.float()
    _check_boxes(boxes)
    x0, y0, x1, y1 = boxes.unbind(dim=1)
    rows = _cover_1d(y0, y1, grid_h)  # (N, H)
    cols = _cover_1d(x0, x1, grid_w)  # (N, W)
    return (rows[:, :, None] * cols[:, None, :]).reshape(boxes.shape[0], grid_h * grid_w)


def box_mask(box: Sequence[float], grid_h: int, grid_w: int) -> torch.Tensor:
    """(grid_h * grid_w,): the covered fraction of every grid cell for one normalised box (x0, y0, x1, y1)."""
    return box_masks(torch.as_tensor([list(box)], dtype=torch.float32), grid_h, grid_w)[0]


def mass_in_box(weights: torch.Tensor, boxes: torch.Tensor, grid_h: int, grid_w: int) -> torch.Tensor:
    """(N,): attention mass inside each box, sum over cells of weight * covered fraction of the cell.

    Args:
        weights: (N, grid_h * grid_w) attention over the flattened grid, one row per grounded word
            (normally each row sums to 1, making the result a fraction in [0, 1]).
        boxes: (N, 4) normalised (x0, y0, x1, y1) box of the object each word names.
    """
    if weights.ndim != 2 or weights.shape[1] != grid_h * grid_w:
        raise ValueError(
            f"weights must have shape (N, {grid_h * grid_w}) for a {grid_h}x{grid_w} grid, got {tuple(weights.shape)}"
        )
    if not weights.is_floating_point():
        raise TypeError(f"weights must be a floating-point tensor, got {weights.dtype}")
    if boxes.shape[0] != weights.shape[0]:
        raise ValueError(f"{weights.shape[0]} attention rows but {boxes.shape[0]} boxes")
    masks = box_masks(boxes.to(device=weights.device, dtype=weights.dtype), grid_h, grid_w)
    return (weights * masks).sum(dim=1)


def mass_in_boxes(weights: torch.Tensor, boxes: torch.Tensor, valid: torch.Tensor, grid_h: int, grid_w: int) -> torch.Tensor:
    """(N,): attention mass inside the union of several boxes per row (e.g. every object a question is about).

    Args:
        weights: (N, grid_h * grid_w) attention over the flattened grid.
        boxes: (N, R, 4) normalised boxes; only those marked in `valid` count.
        valid: (N, R) which boxes are real.

    Boxes that overlap count their common cells once only up to full coverage (the per-cell coverage is capped
    at 1), which is exact for boxes that do not overlap, such as the objects of a ShapesWorld scene.
    """
    n, r = boxes.shape[:2]
    masks = box_masks(boxes.reshape(n * r, 4).to(weights.device, weights.dtype), grid_h, grid_w).view(n, r, -1)
    union = (masks * valid.unsqueeze(-1).to(masks.dtype)).sum(dim=1).clamp(max=1.0)  # (N, L)
    return (weights * union).sum(dim=1)


# -- grounding on photos -----------------------------------------------------------------------------------------------
# Grounding on photos with several boxes per object class (`captioning.grounding`): the exact share of each cell
# that the union of a class's boxes covers, and the pointing game (Zhang et al. 2016), at the grid's resolution and
# at a photo's pixels. Boxes here are normalised (x0, y0, x1, y1) of the whole photo, which is what the encoder's
# plain resize (no crop) makes of pixel boxes divided by the photo's width and height.


def union_cover(boxes: torch.Tensor, grid_h: int, grid_w: int) -> torch.Tensor:
    """(grid_h * grid_w,): the exact fraction of every cell's area inside the union of the normalised boxes (N, 4).

    Overlapping boxes count their common area once (unlike `mass_in_boxes`, which caps the sum): the plane is cut
    along every box edge and cell edge, and each piece is inside the union when its centre is inside some box.
    Uniform attention's mass inside the union is then the union's share of the photo, `union_cover(...).mean()`.
    """
    boxes = boxes.to(torch.float64).reshape(-1, 4)
    _check_boxes(boxes)
    xs = torch.cat([boxes[:, [0, 2]].flatten(), torch.arange(grid_w + 1, dtype=torch.float64) / grid_w]).unique()
    ys = torch.cat([boxes[:, [1, 3]].flatten(), torch.arange(grid_h + 1, dtype=torch.float64) / grid_h]).unique()
    cx, cy = (xs[1:] + xs[:-1]) / 2, (ys[1:] + ys[:-1]) / 2  # the pieces' centres (X,), (Y,)
    inside_x = (boxes[:, None, 0] <= cx) & (cx <= boxes[:, None, 2])  # (N, X)
    inside_y = (boxes[:, None, 1] <= cy) & (cy <= boxes[:, None, 3])  # (N, Y)
    covered = (inside_y[:, :, None] & inside_x[:, None, :]).any(dim=0)  # (Y, X)
    area = (ys[1:] - ys[:-1])[:, None] * (xs[1:] - xs[:-1])[None, :]  # (Y, X)
    rows = (cy * grid_h).long().clamp(max=grid_h - 1)  # the cell row of each piece
    columns = (cx * grid_w).long().clamp(max=grid_w - 1)
    cell = (rows[:, None] * grid_w + columns[None, :]).flatten()  # (Y * X,)
    cover = torch.zeros(grid_h * grid_w, dtype=torch.float64)
    cover.index_add_(0, cell, (area * covered).flatten())
    return (cover * (grid_h * grid_w)).float()  # each cell's area is 1 / L


def cell_centres(grid_h: int, grid_w: int) -> torch.Tensor:
    """(grid_h * grid_w, 2): the normalised (x, y) centre of every cell, row-major."""
    ys, xs = torch.meshgrid(
        (torch.arange(grid_h) + 0.5) / grid_h, (torch.arange(grid_w) + 0.5) / grid_w, indexing="ij"
    )
    return torch.stack([xs.flatten(), ys.flatten()], dim=1)


def inside_any(points: torch.Tensor, boxes: torch.Tensor) -> torch.Tensor:
    """(P,) bool: whether each normalised point (P, 2) as (x, y) lies inside (edges included) some box (N, 4)."""
    x, y = points[:, 0:1].double(), points[:, 1:2].double()
    boxes = boxes.double().reshape(-1, 4)
    return ((boxes[:, 0] <= x) & (x <= boxes[:, 2]) & (boxes[:, 1] <= y) & (y <= boxes[:, 3])).any(dim=1)


def pixel_mask(boxes: torch.Tensor, width: int, height: int) -> torch.Tensor:
    """(height, width) bool: the pixels of a width x height photo whose centre lies inside some pixel box (N, 4)."""
    xs = torch.arange(width, dtype=torch.float64) + 0.5
    ys = torch.arange(height, dtype=torch.float64) + 0.5
    boxes = boxes.double().reshape(-1, 4)
    in_x = (boxes[:, None, 0] <= xs) & (xs <= boxes[:, None, 2])  # (N, W)
    in_y = (boxes[:, None, 1] <= ys) & (ys <= boxes[:, None, 3])  # (N, H)
    return (in_y[:, :, None] & in_x[:, None, :]).any(dim=0)
