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

CIDEr-D on words alone cannot tell a caption that stops mid-phrase ("a man is riding a bike in the") from a
finished one: the missing words cost little, and the sampler learns to stop early. Scoring the <end> as a
word of the sampled caption and of every reference (as Luo's self-critical.pytorch does) makes "the <end>" an
n-gram no reference holds, so such endings lose reward; a caption cut off by `max_length` gets no <end>.

CIDEr-D rewards the n-grams that distinguish an image's references; METEOR, which weighs recall nine times
precision and matches stems and synonyms, rewards saying all that the references say. With `meteor_weight`
w the reward is CIDEr-D + w x METEOR (`MeteorReward`, coco-caption's jar), to raise METEOR along with CIDEr-D.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from captioning.cider_reward import CiderD
from captioning.decoder import ShowAttendTell
from captioning.meteor_reward import MeteorReward
from captioning.objectives import LossTerms
from captioning.reading import Read
from captioning.search import next_word_log_probs


@dataclass
class SampledCaptions:
    """K sampled captions per image, rows grouped by image (image 0's K samples first)."""

    tokens: Tensor  # (N, T) word ids; after a caption's <end>, <end> again
    log_probs: Tensor  # (N, T) log p of each sampled word, differentiable; 0 after the caption's <end>
    mask: Tensor  # (N, T) True for the caption's words and its <end>

    def captions(self, end_id: int, *, with_end: bool = False) -> list[list[int]]:
        """Each caption's words, followed by its <end> if `with_end` and the caption ended before the length
        limit."""
        words = ((self.tokens != end_id) & self.mask).sum(1).tolist()
        ended = (self.mask.sum(1) > torch.tensor(words)).tolist() if with_end else [False] * len(words)
        return [row[:n] + [end_id] * e for row, n, e in zip(self.tokens.tolist(), words, ended)]


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
        score_end: count each caption's <end> as a word in CIDEr-D, so that captions stopping mid-phrase
            earn less (see the module's docstring).
        meteor_weight: w in the reward CIDEr-D + w x METEOR; 0 rewards CIDEr-D alone. METEOR needs Java.
    """

    def __init__(self, *, samples: int = 5, score_end: bool = True, meteor_weight: float = 0.0) -> None:
        if samples < 2:
            raise ValueError(f"self-critical training needs at least 2 samples per image, got {samples}")
        if meteor_weight < 0:
            raise ValueError(f"meteor_weight must be at least 0, got {meteor_weight}")
        self.samples = samples
        self.score_end = score_end
        self.meteor_weight = meteor_weight
        self.reward: CiderD | None = None
        self.meteor: MeteorReward | None = None
        self.words: Sequence[str] = ()

    def prepare(self, references: Sequence[Sequence[Sequence[int]]], *, end_id: int, words: Sequence[str] = ()) -> None:
        """Set the training split's references, as token ids per image without <start> and <end>, to score
        the samples against; `words` (the vocabulary, by id) spells captions for METEOR."""
        ending = [end_id] if self.score_end else []
        self.reward = CiderD([[[*caption, *ending] for caption in captions] for captions in references])
        if self.meteor_weight > 0:
            if not words:
                raise ValueError("a METEOR reward needs the vocabulary's words: prepare(..., words=...)")
            self.words = words
            if self.meteor is not None:
                self.meteor.close()
            self.meteor = MeteorReward([[self._text(c) for c in captions] for captions in references])

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
            raise RuntimeError("SelfCritical.prepare(references, end_id=...) must be called before training")
        sampled = sample_captions(
            decoder, features, samples=self.samples, start_id=start_id, end_id=end_id, max_length=max_length,
            read=read, banned=banned,
        )  # fmt: skip
        per_row = [image for image in images for _ in range(self.samples)]
        captions = sampled.captions(end_id, with_end=self.score_end)
        cider = torch.tensor(self.reward.scores(captions, per_row), device=features.device)  # (B*K,)
        parts = {"CIDEr_sampled": cider.mean()}
        rewards = cider
        if self.meteor is not None:
            texts = [self._text(caption) for caption in sampled.captions(end_id)]
            meteor = torch.tensor(self.meteor.scores(texts, per_row), device=features.device)  # (B*K,)
            rewards = cider + self.meteor_weight * meteor
            parts["METEOR_sampled"] = meteor.mean()
        advantages = leave_one_out_advantages(rewards, self.samples)  # (B*K,)
        mask = sampled.mask.to(sampled.log_probs.dtype)
        total = -(advantages.unsqueeze(1) * sampled.log_probs * mask).sum() / mask.sum()
        parts["words_sampled"] = mask.sum(1).mean()
        return LossTerms(total, parts)

    def _text(self, caption: Sequence[int]) -> str:
        return " ".join(self.words[i] for i in caption)
