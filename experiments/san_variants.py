"""The Stacked Attention Network with the options the ShapesWorld-VQA experiments tried, none of them in the paper.

`vqa.san.StackedAttention` is the paper's network; `StackedAttentionVariants` adds three ways of handing the classifier
and the next hop more of what each hop found, chosen in YAML or on the command line as the SAN's class:

    python -m vqa fit --config configs/vqa/shapes_san.yaml --model.san experiments.san_variants.StackedAttentionVariants \
        --model.san.coordinates true --model.san.separate_hops true

Its checkpoints record this class path, so they load as the runs of docs/experiments.md trained them ("ShapesWorld-VQA:
training longer mattered, grid coordinates did not" and "where each hop looks"). None of the three lifted two-step or
relation questions there; the bundled models and the configs use the paper's network.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from core.model.attention import grid_positions, with_positions
from vqa.san import SanOutput, StackedAttention


class StackedAttentionVariants(StackedAttention):
    """`StackedAttention` (its arguments mean the same) with three more options, each off by default.

    Args:
        separate_hops: give the classifier what each hop read side by side, [u^0; z^1; ...; z^K] ((K + 1) d), instead
            of their sum u^K = u^0 + z^1 + ... + z^K (the paper; the hops' queries are refined as in the paper
            either way). A sum forgets which hop read what: "is the square left of the circle?" read as square
            then circle, and as circle then square, give the same u^K, so relation questions stay at chance.
        read_positions: append each region's grid position (x, y) after the projection, v_i = [tanh(W_I f_i); x_i;
            y_i], with two zeros after the question vector. A hop's read then ends in the exact place it looked,
            sum_i p_i (x_i, y_i), and the next hop's query and the classifier receive it unmixed, where `coordinates`
            mixes it into the tanh projection with the D content inputs. "The object to the left of the square" asks
            hop 2 to compare every cell's x with the square's: here that comparison is one linear term of its score's
            hidden layer. On ShapesWorld-VQA it did not lift two-step questions (docs/experiments.md, "where each hop
            looks").
        question_dropout: dropout on the question vector u^0 where the classifier reads it (0 for none); the hops
            still start from the whole question. A classifier that can answer from the question alone learns less
            from what the hops read, so this makes the answer lean on the image (and so on where the hops look).
    """

    def __init__(
        self,
        feature_dim: int,
        question_dim: int,
        grid_shape: tuple[int, int],
        num_answers: int,
        *,
        separate_hops: bool = False,
        read_positions: bool = False,
        question_dropout: float = 0.0,
        **options: Any,
    ) -> None:
        """`options`: `StackedAttention`'s own (hops, dropout, score...), with the same defaults."""
        region_dim = question_dim + 2 if read_positions else question_dim  # v_i, u^k and z^k all have this size
        # the paper's network with hops (and a classifier) of region_dim; its projection is then made d wide again
        super().__init__(feature_dim, region_dim, grid_shape, num_answers, **options)
        self.separate_hops = separate_hops
        self.read_positions = read_positions
        self.question_dropout = nn.Dropout(question_dropout)
        if read_positions:
            self.register_buffer("read_grid", grid_positions(*grid_shape), persistent=False)  # (L, 2)
            self.image_projection = nn.Linear(self.image_projection.in_features, question_dim)
        if separate_hops:  # the classifier's first layer reads [u^0; z^1; ...; z^K]
            first = self.classifier[1]  # after its dropout: the answer layer, or the hidden layer before it
            self.classifier[1] = nn.Linear(region_dim * (len(self.hops) + 1), first.out_features)

    def forward(self, features: Tensor, question: Tensor) -> SanOutput:
        """Grids (B, L, D) and question vectors (B, d) -> answer logits (B, A) and attention (B, K, L)."""
        regions = self.regions(features)  # (B, L, d) v_I
        if self.read_positions:
            regions = with_positions(regions, self.read_grid)  # (B, L, d + 2) [v_i; x_i; y_i]
            question = torch.cat([question, question.new_zeros(question.shape[0], 2)], dim=-1)  # (B, d + 2) [v_Q; 0; 0]
        query = question  # (B, d) u^0 (d + 2 with read_positions, as below)
        maps, reads = [], [self.question_dropout(question)]  # u^0 as the classifier reads it
        for attention in self.hops:
            context, weights = attention(query, regions, attention.prepare(regions))  # (B, d), (B, L)
            query = context + query  # u^k
            maps.append(weights)
            reads.append(context)
        # (B, (K + 1) d) side by side, or (B, d) their sum: u^K, with u^0 as the classifier reads it
        read_out = torch.cat(reads, dim=-1) if self.separate_hops else sum(reads)
        return SanOutput(self.classifier(read_out), torch.stack(maps, dim=1))
