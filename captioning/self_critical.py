"""Self-critical sequence training (Rennie et al. 2017): fine-tune a captioner on the metric it is judged by.

Teacher forcing trains every word given the reference's previous words, never the model's own, and never
sees the CIDEr-D it is scored with. Here the model samples K captions per image from its own distribution,
each is scored with CIDEr-D against the image's references (`CiderD`, document frequencies from the whole
training split), and REINFORCE raises the log-probability of the captions that scored above their baseline:

    loss = - sum_k (r_k - b_k) sum_t log p(w_kt | w_k<t, I) / (number of sampled words)

The baseline b_k is the mean reward of the image's other K - 1 samples (Luo 2020, "A better variant of
self-critical sequence training"), which needs no greedy decode and is unbiased, because it does not depend
on the caption it is subtracted from. Sampling reads the image as the model does at inference (the
expectation for both bundled models), so the fine-tuning optimises the captions users get; a hard model that
samples its locations at inference gets no credit assignment for them here, only for its words.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from captioning.cider_reward import CiderD
from captioning.decoder import ShowAttendTell
from captioning.objectives import LossTerms
from captioning.reading import Read
from captioning.search import next_word_log_probs


@dataclass
class SampledCaptions:
    """K sampled captions per image, rows grouped by image (image 0's K samples first)."""

    tokens: Tensor  # (N, T) word ids; after a caption's <end>, <end> again
    log_probs: Tensor  # (N, T) log p of each sampled word, differentiable; 0 after the caption's <end>
    mask: Tensor  # (N, T) True for the caption's words and its <end>

    def captions(self, end_id: int) -> list[list[int]]:
        """Each caption's words, without <end>."""
        lengths = ((self.tokens != end_id) & self.mask).sum(1).tolist()
        return [row[:n] for row, n in zip(self.tokens.tolist(), lengths)]


def sample_captions(
    decoder: ShowAttendTell,
    features: Tensor,
    *,
    samples: int,
    start_id: int,
    end_id: int,
    max_length: int,
    read: Read,
    banned: Sequence[int] = (),
) -> SampledCaptions:
    """`samples` captions per image of features (B, L, D), each word drawn from p(w | previous words, image),
    with the graph kept so that the log-probabilities can be trained. A caption stops at <end> or after
    `max_length` words; the K rows of an image share its grid and key projection."""
    memory, state = decoder.start(features)
    state = state.repeat(samples)  # (B*K, H)
    rows = len(features) * samples
    words = features.new_full((rows,), start_id, dtype=torch.long)
    running = torch.ones(rows, dtype=torch.bool, device=features.device)
    tokens, log_probs, mask = [], [], []
    for _ in range(max_length):
        out = decoder.step(words, state, memory, read)
        distribution = next_word_log_probs(out.logits, banned)  # (B*K, V)
        words = torch.multinomial(distribution.detach().exp(), 1).squeeze(1)  # (B*K,)
        words = torch.where(running, words, end_id)
        log_probs.append(distribution.gather(1, words.unsqueeze(1)).squeeze(1) * running)  # (B*K,)
        tokens.append(words)
        mask.append(running)
        running = running & (words != end_id)
        state = out.state
        if not bool(running.any()):
            break
    return SampledCaptions(torch.stack(tokens, 1), torch.stack(log_probs, 1), torch.stack(mask, 1))


def leave_one_out_advantages(rewards: Tensor, samples: int) -> Tensor:
    """r_k - mean of the other samples' rewards of the same image, for rewards (B*K,) grouped by image."""
    grouped = rewards.view(-1, samples)  # (B, K)
    baseline = (grouped.sum(1, keepdim=True) - grouped) / (samples - 1)
    return (grouped - baseline).view(-1)


class SelfCritical:
    """The self-critical training objective, set on `CaptioningModule(self_critical=...)`; start it from a
    model trained with cross-entropy (`initial_weights`).

    Args:
        samples: captions sampled per image (K, at least 2: each one's baseline is the others' mean reward).
    """

    def __init__(self, *, samples: int = 5) -> None:
        if samples < 2:
            raise ValueError(f"self-critical training needs at least 2 samples per image, got {samples}")
        self.samples = samples
        self.reward: CiderD | None = None

    def prepare(self, references: Sequence[Sequence[Sequence[int]]]) -> None:
        """Set the training split's references, as token ids per image, to score the samples against."""
        self.reward = CiderD(references)

    def loss(
        self,
        decoder: ShowAttendTell,
        features: Tensor,
        images: Sequence[int],
        *,
        start_id: int,
        end_id: int,
        max_length: int,
        read: Read,
        banned: Sequence[int] = (),
    ) -> LossTerms:
        """The REINFORCE loss for features (B, L, D) of the training images numbered `images` (B,)."""
        if self.reward is None:
            raise RuntimeError("SelfCritical.prepare(references) must be called before training")
        sampled = sample_captions(
            decoder, features, samples=self.samples, start_id=start_id, end_id=end_id, max_length=max_length,
            read=read, banned=banned,
        )  # fmt: skip
        per_row = [image for image in images for _ in range(self.samples)]
        rewards = torch.tensor(self.reward.scores(sampled.captions(end_id), per_row), device=features.device)  # (B*K,)
        advantages = leave_one_out_advantages(rewards, self.samples)  # (B*K,)
        mask = sampled.mask.to(sampled.log_probs.dtype)
        total = -(advantages.unsqueeze(1) * sampled.log_probs * mask).sum() / mask.sum()
        parts = {"CIDEr_sampled": rewards.mean(), "words_sampled": mask.sum(1).mean()}
        return LossTerms(total, parts)
