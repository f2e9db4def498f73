"""The soft-attention training objective: word cross-entropy plus the doubly stochastic penalty.

The penalty (Xu et al. eq. 14) pushes the model to look at every location over the course of a caption:
lambda * sum_i (1 - sum_t alpha_ti)^2, with t running over the caption's real words only and the sum over
locations i kept as a sum (some public copies take a mean over i, which silently divides lambda by L).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch.nn.functional as F
from torch import Tensor


def doubly_stochastic_penalty(weights: Tensor, mask: Tensor) -> Tensor:
    """sum_i (1 - sum_t alpha_ti)^2 per caption: weights (B, T, L), mask (B, T) of real words -> (B,)."""
    attended = (weights * mask.unsqueeze(-1).to(weights.dtype)).sum(dim=1)  # (B, L)
    return ((1.0 - attended) ** 2).sum(dim=1)


@dataclass
class CaptionLoss:
    """The loss and its parts, each a scalar."""

    total: Tensor
    cross_entropy: Tensor  # mean over real words
    penalty: Tensor  # mean over captions, before lambda


def caption_loss(
    logits: Tensor,
    targets: Tensor,
    weights: Tensor,
    *,
    pad_id: int,
    penalty_weight: float,
    label_smoothing: float = 0.0,
) -> CaptionLoss:
    """Cross-entropy over real target words plus penalty_weight * the mean doubly stochastic penalty.

    Args:
        logits: (B, T, V) next-word logits.
        targets: (B, T) next words, pad_id where the caption has ended.
        weights: (B, T, L) attention weights at each step.
        pad_id: the padding id, excluded from both terms.
        penalty_weight: lambda.
        label_smoothing: passed to cross-entropy.
    """
    mask = targets != pad_id  # (B, T)
    cross_entropy = F.cross_entropy(
        logits.flatten(0, 1), targets.flatten(), ignore_index=pad_id, label_smoothing=label_smoothing
    )
    penalty = doubly_stochastic_penalty(weights, mask).mean()
    return CaptionLoss(cross_entropy + penalty_weight * penalty, cross_entropy, penalty)
