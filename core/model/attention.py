"""Attention over a grid of annotation vectors: score functions and the softmax that turns scores into weights.

A score function compares a query s (the decoder state, or a VQA question vector) with every annotation
vector h_i of an image. Everything that depends only on the image (the key side) is computed once per image
by `project_keys`; `forward` then costs only the query side at every word. Which score function a model uses
is chosen in YAML by class (`score: core.model.attention.DotScore`), never by a string switch.

All score classes share one keyword-only constructor so that a model can build whichever class it is given:
`query_dim` (size of s), `key_dim` (size of h), `attention_dim` (hidden size where the score has one),
`num_locations` (L, used by the location score) and `fast_path` (compute the same function faster where the class
has a way to: `AdditiveScore`, through `core.model.fast_path`). Subclasses take them as `**shared` and read them back
from the attributes the base sets.

Shapes: B images, L locations of a grid, D the annotation size, Q the query size, A the attention size, P the width
of the projected keys (D, Q or A, by score function), K queries per image (the beams of a search, the samples of
self-critical training; 1 otherwise), N = B * K queries in all.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from core.model import fast_path


class Score(nn.Module):
    """Base class: e_i = f(s, h_i) for every location i of an image."""

    def __init__(
        self, *, query_dim: int, key_dim: int, attention_dim: int, num_locations: int, fast_path: bool = False
    ) -> None:
        super().__init__()
        self.query_dim = query_dim
        self.key_dim = key_dim
        self.attention_dim = attention_dim
        self.num_locations = num_locations
        self.fast_path = fast_path

    def project_keys(self, keys: Tensor) -> Tensor:
        """Image-side precomputation, once per image: keys (B, L, D) -> (B, L, P)."""
        return keys

    def forward(self, query: Tensor, projected_keys: Tensor) -> Tensor:
        """Scores (N, L) of queries (N, Q) against projected keys (B, L, P): N is B, or B * K when each image
        has K queries in a row (the beams of a search), which all meet their image's keys without copies."""
        raise NotImplementedError


def per_image(query: Tensor, projected_keys: Tensor) -> Tensor:
    """Queries (N, Q) grouped by image, (B, K, Q), for keys (B, L, P)."""
    return query.view(len(projected_keys), -1, query.shape[-1])


class _KeysInQuerySpace(Score):
    """Shared by the scores that compare s and h directly (dot, scaled dot, cosine).

    They need h in the same space as s. When the sizes already match the keys are used as they are (the
    textbook form); otherwise a learned linear map W_k h brings them there, computed once per image.
    """

    def __init__(self, **shared: Any) -> None:
        super().__init__(**shared)
        same_size = self.key_dim == self.query_dim
        self.key_map = nn.Identity() if same_size else nn.Linear(self.key_dim, self.query_dim, bias=False)

    def project_keys(self, keys: Tensor) -> Tensor:
        return self.key_map(keys)  # (B, L, Q)


class AdditiveScore(Score):
    """Bahdanau's score, the one Show-Attend-Tell uses: e_i = v^T tanh(W_h h_i + b + W_s s).

    W [s; h] split into its key and query halves, so W_h h_i + b is computed once per image (`project_keys`).
    With `fast_path` the same function runs as `core.model.fast_path.additive_scores`, faster on a CPU.
    """

    def __init__(self, **shared: Any) -> None:
        super().__init__(**shared)
        self.key_proj = nn.Linear(self.key_dim, self.attention_dim)  # W_h, b
        self.query_proj = nn.Linear(self.query_dim, self.attention_dim, bias=False)  # W_s
        self.v = nn.Linear(self.attention_dim, 1, bias=False)  # v

    def project_keys(self, keys: Tensor) -> Tensor:
        projected = self.key_proj(keys)  # (B, L, A) W_h h_i + b
        if self.fast_path:
            return fast_path.double_keys(projected)
        return projected

    def forward(self, query: Tensor, projected_keys: Tensor) -> Tensor:
        if self.fast_path:  # the same scores through a sigmoid, in cache-sized blocks
            return fast_path.additive_scores(per_image(self.query_proj(query), projected_keys), projected_keys, self.v)
        queries = per_image(self.query_proj(query), projected_keys).unsqueeze(2)  # (B, K, 1, A) W_s s
        hidden = torch.tanh(projected_keys.unsqueeze(1) + queries)  # (B, K, L, A)
        return self.v(hidden).view(len(query), -1)  # (N, L) v^T tanh(.)


class DotScore(_KeysInQuerySpace):
    """Luong's dot score: e_i = s^T h_i."""

    def forward(self, query: Tensor, projected_keys: Tensor) -> Tensor:
        return torch.einsum("bkq,blq->bkl", per_image(query, projected_keys), projected_keys).reshape(len(query), -1)


class ScaledDotScore(_KeysInQuerySpace):
    """The Transformer's score: e_i = s^T h_i / sqrt(n), n the vector size, keeping scores O(1) as n grows."""

    def forward(self, query: Tensor, projected_keys: Tensor) -> Tensor:
        scores = torch.einsum("bkq,blq->bkl", per_image(query, projected_keys), projected_keys)  # (B, K, L)
        return scores.reshape(len(query), -1) / math.sqrt(query.shape[-1])


class CosineScore(_KeysInQuerySpace):
    """Content-based score (Graves' NTM): e_i = cos(s, h_i), insensitive to the vectors' lengths."""

    def project_keys(self, keys: Tensor) -> Tensor:
        return F.normalize(super().project_keys(keys), dim=-1)  # (B, L, Q), unit length

    def forward(self, query: Tensor, projected_keys: Tensor) -> Tensor:
        queries = per_image(F.normalize(query, dim=-1), projected_keys)  # (B, K, Q)
        return torch.einsum("bkq,blq->bkl", queries, projected_keys).reshape(len(query), -1)


class KeyStrengthCosineScore(CosineScore):
    """Graves' content-based addressing in full (NTM, eq. 5): e_i = beta(s) cos(s, h_i).

    A bare cosine lies in [-1, 1], so its softmax over L cells can give one cell at most e / (e + (L - 1) / e) of
    the weight (3.65% of 196 cells): the maps stay nearly flat whatever is learned. The NTM's controller emits a key
    strength beta > 0 with each key to stretch that range; here beta = 1 + softplus(w^T s + b) (the DNC's "oneplus",
    so that beta >= 1 and a map is never flatter than the bare cosine's).
    """

    def __init__(self, **shared: Any) -> None:
        super().__init__(**shared)
        self.strength = nn.Linear(self.query_dim, 1)

    def forward(self, query: Tensor, projected_keys: Tensor) -> Tensor:
        beta = 1 + F.softplus(self.strength(query))  # (N, 1)
        return beta * super().forward(query, projected_keys)  # (N, L)


class GeneralScore(Score):
    """Luong's general score: e_i = s^T W h_i, with W h_i computed once per image."""

    def __init__(self, **shared: Any) -> None:
        super().__init__(**shared)
        self.weight = nn.Linear(self.key_dim, self.query_dim, bias=False)

    def project_keys(self, keys: Tensor) -> Tensor:
        return self.weight(keys)  # (B, L, Q)

    def forward(self, query: Tensor, projected_keys: Tensor) -> Tensor:
        return torch.einsum("bkq,blq->bkl", per_image(query, projected_keys), projected_keys).reshape(len(query), -1)


class LocationScore(Score):
    """Luong's location score: e = W s, one score per location from the query alone; the image is not read."""

    def __init__(self, **shared: Any) -> None:
        super().__init__(**shared)
        self.weight = nn.Linear(self.query_dim, self.num_locations)

    def project_keys(self, keys: Tensor) -> Tensor:
        if keys.shape[1] != self.num_locations:
            raise ValueError(
                f"LocationScore was built for {self.num_locations} locations but the image grid has {keys.shape[1]}; "
                "the location score needs the encoder's grid size fixed"
            )
        return keys[..., :0]  # (B, L, 0): nothing to precompute, only the shape is kept

    def forward(self, query: Tensor, projected_keys: Tensor) -> Tensor:
        return self.weight(query)  # (N, L)


class Attention(nn.Module):
    """Scores -> masked softmax -> weights, and the weighted mean of the annotation vectors.

    Args:
        score: the score function.
    """

    def __init__(self, *, score: Score) -> None:
        super().__init__()
        self.score = score

    def prepare(self, keys: Tensor) -> Tensor:
        """The per-image part of the score, keys (B, L, D) -> (B, L, P); call once, reuse at every step."""
        return self.score.project_keys(keys)

    def weights(self, query: Tensor, projected_keys: Tensor, mask: Tensor | None = None) -> Tensor:
        """Attention weights (N, L) that sum to 1 for queries (N, Q) over keys (B, L, P), N = B or B * K (K queries
        of each image in a row, as a beam search's beams); places where mask (N, L) is False get exactly 0."""
        scores = self.score(query, projected_keys)  # (N, L)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        return torch.softmax(scores, dim=-1)

    def forward(
        self, query: Tensor, keys: Tensor, projected_keys: Tensor, mask: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        """Returns (context (B, D), weights (B, L)) for query (B, Q) over keys (B, L, D)."""
        alpha = self.weights(query, projected_keys, mask)  # (B, L)
        context = torch.bmm(alpha.unsqueeze(1), keys).squeeze(1)  # (B, D)
        return context, alpha


def grid_positions(rows: int, columns: int) -> Tensor:
    """(L, 2) the (x, y) centre of every cell of a rows x columns grid (L = rows * columns), flattened row-major
    like the encoder's grid (location r * columns + c is row r, column c); x and y each run from -1 (left, top)
    to 1 (right, bottom), whatever the grid's aspect ratio."""

    def axis(n: int) -> Tensor:
        return torch.linspace(-1.0, 1.0, n) if n > 1 else torch.zeros(1)

    ys, xs = torch.meshgrid(axis(rows), axis(columns), indexing="ij")  # (rows, columns) each
    return torch.stack([xs, ys], dim=-1).reshape(rows * columns, 2)


def with_positions(features: Tensor, positions: Tensor) -> Tensor:
    """Every location's (x, y) grid position appended to its annotation vector: (B, L, D), (L, 2) -> (B, L, D + 2)."""
    return torch.cat([features, positions.to(features.dtype).expand(features.shape[0], -1, -1)], dim=-1)
