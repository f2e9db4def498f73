"""Attention over a grid of annotation vectors: score functions and the softmax that turns scores into weights.

A score function compares a query s (the decoder state, or a VQA question vector) with every annotation
vector h_i of an image. Everything that depends only on the image (the key side) is computed once per image
by `project_keys`; `forward` then costs only the query side at every word. Which score function a model uses
is chosen in YAML by class (`score: core.attention.DotScore`), never by a string switch.

All score classes share one keyword-only constructor so that a model can build whichever class it is given:
`query_dim` (size of s), `key_dim` (size of h), `attention_dim` (hidden size where the score has one) and
`num_locations` (L, used by the location score).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn


class Score(nn.Module):
    """Base class: e_i = f(s, h_i) for every location i of an image."""

    def __init__(self, *, query_dim: int, key_dim: int, attention_dim: int, num_locations: int) -> None:
        super().__init__()
        self.query_dim = query_dim
        self.key_dim = key_dim
        self.attention_dim = attention_dim
        self.num_locations = num_locations

    def project_keys(self, keys: Tensor) -> Tensor:
        """Image-side precomputation, once per image: keys (B, L, D) -> (B, L, K)."""
        return keys

    def forward(self, query: Tensor, projected_keys: Tensor) -> Tensor:
        """Scores (N, L) of queries (N, Q) against projected keys (B, L, K): N is B, or B * K' when each image
        has K' queries in a row (the beams of a search), which all meet their image's keys without copies."""
        raise NotImplementedError


def per_image(query: Tensor, projected_keys: Tensor) -> Tensor:
    """Queries (N, Q) grouped by image, (B, N / B, Q), for keys (B, L, K)."""
    return query.view(len(projected_keys), -1, query.shape[-1])


class _KeysInQuerySpace(Score):
    """Shared by the scores that compare s and h directly (dot, scaled dot, cosine).

    They need h in the same space as s. When the sizes already match the keys are used as they are (the
    textbook form); otherwise a learned linear map W_k h brings them there, computed once per image.
    """

    def __init__(self, *, query_dim: int, key_dim: int, attention_dim: int, num_locations: int) -> None:
        super().__init__(query_dim=query_dim, key_dim=key_dim, attention_dim=attention_dim, num_locations=num_locations)
        self.key_map = nn.Identity() if key_dim == query_dim else nn.Linear(key_dim, query_dim, bias=False)

    def project_keys(self, keys: Tensor) -> Tensor:
        return self.key_map(keys)  # (B, L, Q)


class AdditiveScore(Score):
    """Bahdanau's score, the one Show-Attend-Tell uses: e_i = v^T tanh(W_s s + W_h h_i + b).

    W [s; h] split into its query and key halves, so W_h h_i is computed once per image.

    The (B, L, A) intermediate is the costly part of a step (its elementwise work grows with L): the squashing
    runs in place on it, and when no gradient is recorded (search) it is made `BLOCK_ELEMENTS` at a time, a few
    images in turn, so that it stays in cache instead of being a fresh allocation of hundreds of MB
    (page faults included) at every word of a wide beam. Blocks change only the float rounding of v^T (the
    product's summation order); training keeps one block, whose backward is much cheaper than many.
    """

    BLOCK_ELEMENTS = 1 << 21  # 8 MiB of float32: within the L3 cache; larger blocks mean fewer op calls

    def __init__(self, *, query_dim: int, key_dim: int, attention_dim: int, num_locations: int) -> None:
        super().__init__(query_dim=query_dim, key_dim=key_dim, attention_dim=attention_dim, num_locations=num_locations)
        self.key_proj = nn.Linear(key_dim, attention_dim)
        self.query_proj = nn.Linear(query_dim, attention_dim, bias=False)
        self.v = nn.Linear(attention_dim, 1, bias=False)

    def project_keys(self, keys: Tensor) -> Tensor:
        return self.key_proj(keys).mul(2.0)  # (B, L, A) 2 (W_h h_i + b): the doubling `_scores` needs, done once

    def forward(self, query: Tensor, projected_keys: Tensor) -> Tensor:
        queries = per_image(self.query_proj(query).mul(2.0), projected_keys).unsqueeze(2)  # (B, K, 1, A) 2 W_s s
        keys = projected_keys.unsqueeze(1)  # (B, 1, L, A)
        rows = max(1, self.BLOCK_ELEMENTS // max(1, queries.shape[1] * keys.shape[2] * keys.shape[3]))
        recording = torch.is_grad_enabled() and (queries.requires_grad or keys.requires_grad)
        if recording or rows >= len(keys):
            return self._scores(queries, keys).view(len(query), -1)
        blocks = [self._scores(queries[i : i + rows], keys[i : i + rows]) for i in range(0, len(keys), rows)]
        return torch.cat(blocks).view(len(query), -1)  # (N, L)

    def _scores(self, query: Tensor, projected_keys: Tensor) -> Tensor:
        """v^T tanh(q + k_i) for projected queries (b, K, 1, A) and keys (b, 1, L, A), both doubled -> (b, K, L).

        Made as 2 v^T sigmoid(2 (q + k_i)) - sum(v), the same function (tanh u = 2 sigmoid(2u) - 1) at a fraction
        of the cost: torch's CPU tanh costs about 6 times its sigmoid, and was the dearest op of a 14x14 step. Both
        sides come doubled, the keys once per image and the queries at their (N, A) size, so that nothing scales
        the (b, K, L, A) sum or, in training, its gradient.
        """
        hidden = torch.sigmoid_(projected_keys + query)  # (b, K, L, A) 2 (k_i + q), squashed in place
        return self.v(hidden).squeeze(-1).mul(2.0) - self.v.weight.sum()


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


class GeneralScore(Score):
    """Luong's general score: e_i = s^T W h_i, with W h_i computed once per image."""

    def __init__(self, *, query_dim: int, key_dim: int, attention_dim: int, num_locations: int) -> None:
        super().__init__(query_dim=query_dim, key_dim=key_dim, attention_dim=attention_dim, num_locations=num_locations)
        self.weight = nn.Linear(key_dim, query_dim, bias=False)

    def project_keys(self, keys: Tensor) -> Tensor:
        return self.weight(keys)  # (B, L, Q)

    def forward(self, query: Tensor, projected_keys: Tensor) -> Tensor:
        return torch.einsum("bkq,blq->bkl", per_image(query, projected_keys), projected_keys).reshape(len(query), -1)


class LocationScore(Score):
    """Luong's location score: e = W s, one score per location from the query alone; the image is not read."""

    def __init__(self, *, query_dim: int, key_dim: int, attention_dim: int, num_locations: int) -> None:
        super().__init__(query_dim=query_dim, key_dim=key_dim, attention_dim=attention_dim, num_locations=num_locations)
        self.weight = nn.Linear(query_dim, num_locations)

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
        """The per-image part of the score, keys (B, L, D) -> (B, L, K); call once, reuse at every step."""
        return self.score.project_keys(keys)

    def weights(self, query: Tensor, projected_keys: Tensor, mask: Tensor | None = None) -> Tensor:
        """Attention weights (B, L) that sum to 1; places where mask (B, L) is False get exactly 0."""
        scores = self.score(query, projected_keys)  # (B, L)
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
