"""How concentrated an attention map is, in words a person understands: the share of the attention that falls
on the most attended 5% of the photo. Uniform attention puts exactly 5% there; all of it on one cell of a 7x7
grid (a cell is 2% of the photo, so the top 5% covers it) puts 100% there.

Each grid cell covers 1/L of the photo (the encoder squashes the whole photo onto its grid), and attention is
taken as spread evenly over its cell, so the most attended `area` of the photo is the cells in descending order
of weight, the last one counted in part: 5% of 49 cells is 2.45 cells, the top two and 45% of the third.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

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
