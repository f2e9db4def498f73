"""Stochastic hard attention trained by REINFORCE with a moving-average baseline (Xu et al. section 4.1).

At every word the decoder samples one location s_t ~ Multinoulli(alpha_t) and reads only a_{s_t}. The model
maximises the lower bound L_s = sum_s p(s|a) log p(y|s,a), whose gradient is estimated from one sampled path
s~ per caption:

    d log p(y|s~,a)/dW + lambda_r (log p(y|s~,a) - b) d log p(s~|a)/dW + lambda_e dH/dW

with b_k = decay * b_{k-1} + (1 - decay) * log p(y|s~_k,a) over minibatches k (the mean over the minibatch),
and H the entropy of the attention distributions. As in the original code, log p(y|s,a) is taken per token
(the mean over the caption's real words), so lambda_r = 0.1 and lambda_e = 0.002 keep their meaning, and
log p(s|a) = sum_t log alpha_t[s_t] over the real words. With lambda_r = 1 and lambda_e = 0 the estimate is
unbiased for the gradient of L_s; the paper's smaller lambda_r trades that for a lower variance.

With probability `expectation_probability` (one draw per minibatch, the paper's 0.5) a minibatch reads the
expectation instead of a sample; it then has no REINFORCE term and does not move the baseline, which is an
average of sampled paths' log-likelihoods only.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

from captioning.decoder import TeacherForced
from captioning.losses import attention_entropy
from captioning.objectives import AttentionObjective, LossTerms
from captioning.reading import Expectation, Read, Sample


def caption_log_likelihood(logits: Tensor, targets: Tensor, mask: Tensor) -> Tensor:
    """log p(y|s,a) per token: the mean over real words of log p(y_t), logits (B, T, V), targets/mask (B, T) -> (B,)."""
    token = torch.log_softmax(logits.float(), dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)  # (B, T)
    return (token * mask).sum(1) / mask.sum(1).clamp_min(1)


def path_log_probability(weights: Tensor, locations: Tensor, mask: Tensor) -> Tensor:
    """log p(s|a) = sum_t log alpha_t[s_t] over real words: weights (B, T, L), locations/mask (B, T) -> (B,)."""
    chosen = weights.gather(-1, locations.unsqueeze(-1)).squeeze(-1)  # (B, T)
    return (chosen.float().clamp_min(1e-30).log() * mask).sum(1)


class HardAttention(AttentionObjective):
    """Hard attention: sampled locations in training, REINFORCE with a moving-average baseline.

    The baseline is a buffer, so it is saved in checkpoints and restored on resume.

    Args:
        reinforce_weight: lambda_r, the weight of the REINFORCE term (the original code's 0.1).
        entropy_weight: lambda_e, the weight of the attention entropy bonus (the original code's 0.002).
        baseline_decay: the moving average's decay (the paper's 0.9).
        expectation_probability: chance that a minibatch reads the expectation instead of a sample (the
            paper's 0.5; 0 always samples).
        inference: how the trained model reads at evaluation and prediction: `Expectation` (default),
            `ArgMax` or `Sample` from `captioning.reading`.
    """

    def __init__(
        self,
        *,
        reinforce_weight: float = 0.1,
        entropy_weight: float = 0.002,
        baseline_decay: float = 0.9,
        expectation_probability: float = 0.5,
        inference: type[Read] = Expectation,
    ) -> None:
        super().__init__(inference=inference)
        if not 0.0 <= baseline_decay < 1.0:
            raise ValueError(f"baseline_decay must be in [0, 1), got {baseline_decay}")
        if not 0.0 <= expectation_probability <= 1.0:
            raise ValueError(f"expectation_probability must be in [0, 1], got {expectation_probability}")
        self.reinforce_weight = reinforce_weight
        self.entropy_weight = entropy_weight
        self.baseline_decay = baseline_decay
        self.expectation_probability = expectation_probability
        self.register_buffer("baseline", torch.zeros(()))

    def training_read(self) -> Read:
        if float(torch.rand(())) < self.expectation_probability:
            return Expectation()
        return Sample()

    def loss(self, out: TeacherForced, targets: Tensor, *, pad_id: int, label_smoothing: float) -> LossTerms:
        mask = targets != pad_id  # (B, T)
        reward = caption_log_likelihood(out.logits, targets, mask)  # (B,)
        if label_smoothing > 0.0:
            smoothed = F.cross_entropy(
                out.logits.flatten(0, 1).float(),
                targets.flatten(),
                ignore_index=pad_id,
                label_smoothing=label_smoothing,
                reduction="none",
            ).view_as(targets)  # (B, T)
            likelihood_loss = ((smoothed * mask).sum(1) / mask.sum(1).clamp_min(1)).mean()
        else:
            likelihood_loss = -reward.mean()
        entropy = attention_entropy(out.weights, mask)
        total = likelihood_loss - self.entropy_weight * entropy
        parts = {"cross_entropy": likelihood_loss.detach(), "attention_entropy": entropy.detach()}
        if out.locations is None:  # an expectation minibatch
            return LossTerms(total, parts)
        advantage = reward.detach() - self.baseline.clone()  # (B,)
        reinforce = -(advantage * path_log_probability(out.weights, out.locations, mask)).mean()
        total = total + self.reinforce_weight * reinforce
        parts.update(reward=reward.mean().detach(), reinforce=reinforce.detach())
        return LossTerms(total, parts, reward.detach())

    def observe(self, terms: LossTerms, mean_over_processes: Callable[[Tensor], Tensor]) -> dict[str, Tensor]:
        """b <- decay * b + (1 - decay) * the minibatch's mean log p(y|s~,a), after a sampled minibatch.

        Logs the baseline after the update and whether the minibatch was sampled (1) or read the expectation (0).
        """
        sampled = terms.reward is not None
        if sampled:
            mean = mean_over_processes(terms.reward.mean()).to(self.baseline)
            self.baseline.mul_(self.baseline_decay).add_((1.0 - self.baseline_decay) * mean)
        return {"baseline": self.baseline.clone(), "sampled": torch.tensor(float(sampled))}
