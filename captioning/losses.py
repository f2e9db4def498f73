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


def attention_entropy(weights: Tensor, mask: Tensor) -> Tensor:
    """Mean entropy -sum_i alpha_ti log alpha_ti (nats) over the real words: weights (B, T, L), mask (B, T)."""
    entropy = -(weights * weights.clamp_min(1e-12).log()).sum(-1)  # (B, T)
    return entropy[mask].mean()


@dataclass
class CaptionLoss:
    """The loss and its parts, each a scalar."""

    total: Tensor
    cross_entropy: Tensor  # mean over real words
    penalty: Tensor  # mean over captions, before lambda
    entropy: Tensor  # mean attention entropy over real words, before its weight


def caption_loss(
    logits: Tensor,
    targets: Tensor,
    weights: Tensor,
    *,
    pad_id: int,
    penalty_weight: float,
    label_smoothing: float = 0.0,
    entropy_weight: float = 0.0,
) -> CaptionLoss:
    """Cross-entropy over real target words plus penalty_weight * the mean doubly stochastic penalty.

    Args:
        logits: (B, T, V) next-word logits.
        targets: (B, T) next words, pad_id where the caption has ended.
        weights: (B, T, L) attention weights at each step.
        pad_id: the padding id, excluded from both terms.
        penalty_weight: lambda.
        label_smoothing: passed to cross-entropy.
        entropy_weight: weight of the mean attention entropy, a sharpness regulariser (0 = the paper's loss;
            positive values make each word look at fewer places).
    """
    mask = targets != pad_id  # (B, T)
    cross_entropy = F.cross_entropy(
        logits.flatten(0, 1), targets.flatten(), ignore_index=pad_id, label_smoothing=label_smoothing
    )
    penalty = doubly_stochastic_penalty(weights, mask).mean()
    entropy = attention_entropy(weights, mask)
    total = cross_entropy + penalty_weight * penalty + entropy_weight * entropy
    return CaptionLoss(total, cross_entropy, penalty, entropy)
