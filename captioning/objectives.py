"""The attention mode of a captioning model: how it reads the image in training and at inference, and the
loss it is trained with. Soft and hard attention are two classes, chosen in YAML like any other class:

    model:
      attention:
        class_path: captioning.objectives.HardAttention
        init_args: {reinforce_weight: 0.1}

Both share the decoder, the encoder, the search and everything else; only these differ.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from captioning.decoder import Expectation, Read, Sample, TeacherForced
from core.maps.measures import map_entropy
from core.model.options import OptionError


def this_process(value: Tensor) -> Tensor:
    """A tensor's value in a run of one process: the value itself (see `AttentionObjective.training_read`)."""
    return value


@dataclass
class LossTerms:
    """A training objective's value and its parts."""

    total: Tensor  # the scalar to minimise
    parts: dict[str, Tensor] = field(default_factory=dict)  # scalars to log, by name
    reward: Tensor | None = None  # (B,) log p(y|s,a) per caption for sampled paths, when there were any


class AttentionObjective(nn.Module):
    """Base class of the attention modes.

    Args:
        inference: how the trained model reads at evaluation and prediction: `Expectation` (default),
            `ArgMax` or `Sample` from `captioning.decoder`.
    """

    def __init__(self, *, inference: type[Read] = Expectation) -> None:
        super().__init__()
        self.inference = inference

    def training_read(self, first_process: Callable[[Tensor], Tensor] = this_process) -> Read:
        """How the decoder reads the image for the next training minibatch.

        `first_process` gives the first process's value of a tensor in a distributed run (the value itself in
        one process): a random choice made through it is the same on every process, which must then take the
        same steps (a sampled minibatch's baseline update averages over all of them).
        """
        raise NotImplementedError

    def inference_read(self) -> Read:
        """How the decoder reads the image at evaluation and prediction."""
        return self.inference()

    def loss(self, out: TeacherForced, targets: Tensor, *, pad_id: int, label_smoothing: float) -> LossTerms:
        """The objective for a teacher-forced unroll `out` of the next words `targets` (B, T)."""
        raise NotImplementedError

    def observe(self, terms: LossTerms, mean_over_processes: Callable[[Tensor], Tensor]) -> dict[str, Tensor]:
        """Called after every training minibatch with its terms, to update state such as a baseline;
        returns that state's values to log, by name. `mean_over_processes` averages a scalar over the
        processes of a distributed run, so every process keeps the same state."""
        return {}


class SoftAttention(AttentionObjective):
    """Deterministic soft attention (Xu et al. section 4.2): the expectation of the context, trained by
    backpropagation on the word cross-entropy plus the doubly stochastic penalty.

    Args:
        penalty_weight: lambda of the doubly stochastic penalty (the paper's 1.0 by default), weighed against
            the caption's whole log-likelihood as in eq. 14 (`caption_loss`).
        entropy_weight: weight of the mean attention entropy added to the loss, a sharpness regulariser
            (0, the paper's loss, by default; positive values make each word look at fewer places).
        inference: how the model reads at evaluation and prediction (the expectation, as trained, by default).
    """

    def __init__(
        self, *, penalty_weight: float = 1.0, entropy_weight: float = 0.0, inference: type[Read] = Expectation
    ) -> None:
        super().__init__(inference=inference)
        self.penalty_weight = penalty_weight
        self.entropy_weight = entropy_weight

    def training_read(self, first_process: Callable[[Tensor], Tensor] = this_process) -> Read:
        return Expectation()

    def loss(self, out: TeacherForced, targets: Tensor, *, pad_id: int, label_smoothing: float) -> LossTerms:
        loss = caption_loss(
            out.logits,
            targets,
            out.weights,
            pad_id=pad_id,
            penalty_weight=self.penalty_weight,
            label_smoothing=label_smoothing,
            entropy_weight=self.entropy_weight,
        )
        parts = {"cross_entropy": loss.cross_entropy, "attention_entropy": loss.entropy}
        if self.penalty_weight:  # a term that is off is not logged
            parts["penalty"] = loss.penalty
        return LossTerms(loss.total, parts)


# ----------------------------------------------------------------------------------------------------
# The soft-attention training objective: word cross-entropy plus the doubly stochastic penalty.
#
# The penalty (Xu et al. eq. 14) pushes the model to look at every location over the course of a caption:
# lambda * sum_i (1 - sum_t alpha_ti)^2, with t running over the caption's real words only and the sum over
# locations i kept as a sum (some public copies take a mean over i, which silently divides lambda by L).
#
# Eq. 14 adds it to the caption's whole negative log-likelihood, a sum over its words, as the original code
# does. The loss here is taken per word (the mean cross-entropy over the batch's real words), so the penalty
# is divided by the same count: the total is (sum of the captions' -log p(y) + lambda * their penalties) / words.
# Dividing the cross-entropy alone would weigh the penalty by the caption length, about 12 times the paper's
# lambda on Flickr8k (docs/experiments.md, "the penalty flattened the maps").
#



def doubly_stochastic_penalty(weights: Tensor, mask: Tensor) -> Tensor:
    """sum_i (1 - sum_t alpha_ti)^2 per caption: weights (B, T, L), mask (B, T) of real words -> (B,)."""
    attended = (weights * mask.unsqueeze(-1).to(weights.dtype)).sum(dim=1)  # (B, L)
    return ((1.0 - attended) ** 2).sum(dim=1)


def attention_entropy(weights: Tensor, mask: Tensor) -> Tensor:
    """Mean entropy -sum_i alpha_ti log alpha_ti (nats) over the real words: weights (B, T, L), mask (B, T)."""
    return map_entropy(weights)[mask].mean()  # the mean of (B, T) over the real words


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
    """Xu et al.'s eq. 14 per word: (sum over captions of -log p(y) + penalty_weight * the doubly stochastic
    penalty) / the number of real words, i.e. the mean cross-entropy plus penalty_weight * the penalties' sum
    divided by the words (the comment above says why not by the captions).

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
    penalties = doubly_stochastic_penalty(weights, mask)  # (B,)
    entropy = attention_entropy(weights, mask)
    total = cross_entropy + penalty_weight * penalties.sum() / mask.sum() + entropy_weight * entropy
    penalty = penalties.mean()
    return CaptionLoss(total, cross_entropy, penalty, entropy)


# ----------------------------------------------------------------------------------------------------
# Stochastic hard attention trained by REINFORCE with a moving-average baseline (Xu et al. section 4.1).
#
# At every word the decoder samples one location s_t ~ Multinoulli(alpha_t) and reads only a_{s_t}. The model
# maximises the lower bound L_s = sum_s p(s|a) log p(y|s,a), whose gradient is estimated from one sampled path
# s~ per caption:
#
#     d log p(y|s~,a)/dW + lambda_r (log p(y|s~,a) - b) d log p(s~|a)/dW + lambda_e dH/dW
#
# with b_k = decay * b_{k-1} + (1 - decay) * log p(y|s~_k,a) over minibatches k (the mean over the minibatch),
# and H the entropy of the attention distributions. As in the original code, log p(y|s,a) is taken per token
# (the mean over the caption's real words), so lambda_r = 0.1 and lambda_e = 0.002 keep their meaning, and
# log p(s|a) = sum_t log alpha_t[s_t] over the real words. With lambda_r = 1 and lambda_e = 0 the estimate is
# unbiased for the gradient of L_s; the paper's smaller lambda_r trades that for a lower variance.
#
# With probability `expectation_probability` (one draw per minibatch, the paper's 0.5) a minibatch reads the
# expectation instead of a sample; it then has no REINFORCE term and does not move the baseline, which is an
# average of sampled paths' log-likelihoods only.
#



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
        entropy_bonus: lambda_e, the weight of the attention entropy bonus (the original code's 0.002): subtracted
            from the loss, it spreads the maps, where `SoftAttention(entropy_weight=...)` sharpens them.
        baseline_decay: the moving average's decay (the paper's 0.9).
        expectation_probability: chance that a minibatch reads the expectation instead of a sample (the
            paper's 0.5; 0 always samples).
        inference: how the trained model reads at evaluation and prediction: `Expectation` (default),
            `ArgMax` or `Sample` from `captioning.decoder`.
    """

    def __init__(
        self,
        *,
        reinforce_weight: float = 0.1,
        entropy_bonus: float = 0.002,
        baseline_decay: float = 0.9,
        expectation_probability: float = 0.5,
        inference: type[Read] = Expectation,
    ) -> None:
        super().__init__(inference=inference)
        if not 0.0 <= baseline_decay < 1.0:
            raise OptionError(f"baseline_decay must be in [0, 1), got {baseline_decay}")
        if not 0.0 <= expectation_probability <= 1.0:
            raise OptionError(f"expectation_probability must be in [0, 1], got {expectation_probability}")
        self.reinforce_weight = reinforce_weight
        self.entropy_bonus = entropy_bonus
        self.baseline_decay = baseline_decay
        self.expectation_probability = expectation_probability
        self.register_buffer("baseline", torch.zeros(()))

    def training_read(self, first_process: Callable[[Tensor], Tensor] = this_process) -> Read:
        # one Bernoulli draw per minibatch, the first process's on every process: their own global generators
        # drift apart as soon as their minibatches differ in length (dropout and sampling draw per word)
        if float(first_process(torch.rand(()))) < self.expectation_probability:
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
        total = likelihood_loss - self.entropy_bonus * entropy
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
