"""Stacked Attention Networks (Yang et al. 2016): the question attends over the image regions, refines its
query with what it saw, and attends again.

    v_I = tanh(W_I f_I + b_I)                              image regions (L, d) from the CNN grid (L, D)
    for k = 1..K:
        h_A = tanh(W_IA v_I (+) (W_QA u^{k-1} + b_A))       (+): the question term added to every region
        p^k = softmax(W_P h_A + b_P)                        attention over the L regions
        u^k = sum_i p^k_i v_i + u^{k-1}                     the refined query
    answer = softmax(W_u u^K + b_u)                         u^0 = v_Q, the question vector

The paper's classifier is that single layer. `classifier_hidden` > 0 puts one ReLU layer before it, as the
SAN baseline of the CLEVR benchmark does (Johnson et al. 2017): a linear read-out of u^K = u^0 + sum_k z_k
cannot compare what the question names with what the image shows (yes/no existence questions: the answer
is an equality of two attributes, not a sum of them).

Each hop's score is the additive attention score of `core.model.attention` (the one Show-Attend-Tell uses too;
b_P cancels in the softmax), so the two models share their attention code; another score class can be
given. Every hop's attention map is returned, for overlays and attention correctness. With `fast_path` (the
default) the additive score takes its CPU speed-up (`core.model.fast_path`), the same function computed faster.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from core.model.attention import AdditiveScore, Attention, Score, grid_positions, with_positions
from core.model.options import OptionError


@dataclass
class SanOutput:
    logits: Tensor  # (B, A) answer scores
    weights: Tensor  # (B, K, L) the attention map of every hop


class StackedAttention(nn.Module):
    """K attention hops over the image grid, then the answer classifier.

    The first four arguments come from the encoder, the question model and the answer classes (`VqaModule` gives
    them once the data is known); the keyword-only ones are the network's own options, set in a config under
    `model.san` (`--model.san.hops 1`).

    Args:
        feature_dim: D, size of the CNN's annotation vectors.
        question_dim: d, size of the question vector; the image regions are projected to it.
        grid_shape: (rows, columns) of the encoder's grid: L = rows * columns regions per image (the grid
            positions and location-based scores need them).
        num_answers: number of answer classes.
        attention_dim: hidden size of each hop's score (the paper's 512).
        hops: K, the number of attention layers (the paper's best is 2; 1 is the ablation).
        dropout: dropout before the classifier (the paper's 0.5).
        score: the attention score class of every hop.
        classifier_hidden: size of a ReLU hidden layer before the answer layer; 0 (the paper) for none.
        feature_dropout: dropout on the CNN's region vectors before their projection (0, the paper's, for none):
            with few training photos (DAQUAR: 794) the network otherwise learns them by heart.
        coordinates: append each region's grid position (x, y), from -1 (left/top) to 1 (right/bottom), to its
            CNN vector before the projection (not in the paper; as `ShowAttendTell(coordinates=True)`). What a hop
            reads then says where it looked, so the next hop can look beside it ("the object to the left of the
            square") and a relation question can compare two positions: deep features look alike anywhere.
        fast_path: compute the score with its CPU speed-up from `core.model.fast_path` where it has one (the same
            values, faster); False runs the plain score of `core.model.attention`. The parameters are the same either way.
    """

    def __init__(
        self,
        feature_dim: int,
        question_dim: int,
        grid_shape: tuple[int, int],
        num_answers: int,
        *,
        attention_dim: int = 512,
        hops: int = 2,
        dropout: float = 0.5,
        score: type[Score] = AdditiveScore,
        classifier_hidden: int = 0,
        feature_dropout: float = 0.0,
        coordinates: bool = False,
        fast_path: bool = True,
    ) -> None:
        super().__init__()
        if hops < 1:
            raise OptionError(f"a stacked attention network needs at least one hop, got hops={hops}")
        self.coordinates = coordinates
        if coordinates:
            self.register_buffer("positions", grid_positions(*grid_shape), persistent=False)  # (L, 2)
            feature_dim += 2
        self.feature_dropout = nn.Dropout(feature_dropout)
        self.image_projection = nn.Linear(feature_dim, question_dim)
        self.hops = nn.ModuleList(
            Attention(
                score=score(
                    query_dim=question_dim,
                    key_dim=question_dim,
                    attention_dim=attention_dim,
                    num_locations=grid_shape[0] * grid_shape[1],
                    fast_path=fast_path,
                )
            )
            for _ in range(hops)
        )
        self.classifier = answer_classifier(question_dim, num_answers, hidden=classifier_hidden, dropout=dropout)

    def forward(self, features: Tensor, question: Tensor) -> SanOutput:
        """Grids (B, L, D) and question vectors (B, d) -> answer logits (B, A) and attention (B, K, L)."""
        regions = self.regions(features)  # (B, L, d) v_I
        query = question  # (B, d) u^0
        maps = []
        for attention in self.hops:
            context, weights = attention(query, regions, attention.prepare(regions))  # (B, d), (B, L)
            query = context + query  # u^k
            maps.append(weights)
        return SanOutput(self.classifier(query), torch.stack(maps, dim=1))

    def regions(self, features: Tensor) -> Tensor:
        """The image regions v_I = tanh(W_I f_I + b_I) of grids (B, L, D) -> (B, L, d)."""
        features = self.feature_dropout(features)  # (B, L, D)
        if self.coordinates:
            features = with_positions(features, self.positions)  # (B, L, D + 2)
        return torch.tanh(self.image_projection(features))


def answer_classifier(read_dim: int, num_answers: int, *, hidden: int, dropout: float) -> nn.Sequential:
    """The answer layer softmax(W_u u + b_u) over a read u of size `read_dim` (its logits; dropout before it), with one
    ReLU layer of size `hidden` before it where `hidden` > 0 (0, the paper's, for none)."""
    if hidden > 0:
        layers = [nn.Dropout(dropout), nn.Linear(read_dim, hidden), nn.ReLU()]
        return nn.Sequential(*layers, nn.Dropout(dropout), nn.Linear(hidden, num_answers))
    return nn.Sequential(nn.Dropout(dropout), nn.Linear(read_dim, num_answers))


SanFactory = Callable[[int, int, tuple[int, int], int], StackedAttention]
"""`StackedAttention`, or a `functools.partial` of it with its options set, called as (feature_dim, question_dim,
grid_shape, num_answers) once the vocabularies are known. In YAML: `san: {class_path: ..., init_args: {...}}`."""
