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

import math
import shutil
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from pycocoevalcap.meteor.meteor import Meteor
from torch import Tensor

from captioning.decoder import Read, ShowAttendTell
from captioning.metrics import close_meteor
from captioning.objectives import LossTerms, attention_entropy
from captioning.search import next_word_log_probs


@dataclass
class SampledCaptions:
    """K sampled captions per image, rows grouped by image (image 0's K samples first)."""

    tokens: Tensor  # (N, T) word ids; after a caption's <end>, <end> again
    log_probs: Tensor  # (N, T) log p of each sampled word, differentiable; 0 after the caption's <end>
    mask: Tensor  # (N, T) True for the caption's words and its <end>
    weights: Tensor  # (N, T, L) the attention each word was read with, differentiable

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
    tokens, log_probs, mask, weights = [], [], [], []
    for _ in range(max_length):
        out = decoder.step(words, state, memory, read)
        weights.append(out.weights)
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
    return SampledCaptions(
        torch.stack(tokens, 1), torch.stack(log_probs, 1), torch.stack(mask, 1), torch.stack(weights, 1)
    )


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
        entropy_weight: weight of the sampled words' mean attention entropy added to the loss (0 for none), as
            `SoftAttention(entropy_weight=...)` adds it under cross-entropy: each word then reads fewer places.
    """

    def __init__(
        self, *, samples: int = 5, score_end: bool = True, meteor_weight: float = 0.0, entropy_weight: float = 0.0
    ) -> None:
        if samples < 2:
            raise ValueError(f"self-critical training needs at least 2 samples per image, got {samples}")
        if meteor_weight < 0:
            raise ValueError(f"meteor_weight must be at least 0, got {meteor_weight}")
        if entropy_weight < 0:
            raise ValueError(f"entropy_weight must be at least 0, got {entropy_weight}")
        self.samples = samples
        self.score_end = score_end
        self.meteor_weight = meteor_weight
        self.entropy_weight = entropy_weight
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
        entropy = attention_entropy(sampled.weights, sampled.mask)
        parts["attention_entropy"] = entropy
        if self.entropy_weight > 0:
            total = total + self.entropy_weight * entropy
        return LossTerms(total, parts)

    def _text(self, caption: Sequence[int]) -> str:
        return " ".join(self.words[i] for i in caption)


# ----------------------------------------------------------------------------------------------------
# CIDEr-D of sampled captions against a fixed corpus of references, fast enough to be a training reward.
#
# The formula is coco-caption's `Cider` (pycocoevalcap's `CiderScorer`, which is CIDEr-D: clipped n-gram
# counts and a Gaussian length penalty, sigma 6): for n = 1..4 each caption becomes a tf-idf vector over its
# n-grams, idf = log(#images) - log(max(1, df)); the score is 10 x the mean over n and over the image's
# references of the clipped cosine similarity times exp(-(length difference)^2 / (2 sigma^2)). As in
# coco-caption, the "length" is the caption's count of bigrams.
#
# coco-caption recomputes document frequencies and every reference vector at each call, from the references it
# is given. For self-critical training the references are the training split's, fixed for the whole run, so
# here the document frequencies come from all of them, as the self-critical paper (Rennie et al. 2017) does,
# and each image's reference vectors are made once, when first needed. Captions are token-id sequences (the
# model's vocabulary) rather than strings, so scoring a sampled caption needs no decoding.
#


NGRAMS = 4
SIGMA = 6.0

Ngram = tuple[int, ...]


def ngram_counts(tokens: Sequence[int], n: int = NGRAMS) -> Counter[Ngram]:
    """How often each 1..n-gram of a token sequence occurs."""
    return Counter(tuple(tokens[i : i + k]) for k in range(1, n + 1) for i in range(len(tokens) - k + 1))


class _Vector:
    """A caption's tf-idf weights per n-gram order, their norms, and its coco-caption length."""

    __slots__ = ("weights", "norms", "length")

    def __init__(self, counts: Counter[Ngram], idf: "CiderD") -> None:
        self.weights: list[dict[Ngram, float]] = [{} for _ in range(NGRAMS)]
        squares = [0.0] * NGRAMS
        self.length = 0
        for ngram, frequency in counts.items():
            order = len(ngram) - 1
            weight = frequency * idf.idf(ngram)
            self.weights[order][ngram] = weight
            squares[order] += weight * weight
            if order == 1:  # coco-caption counts bigrams as the length
                self.length += frequency
        self.norms = [math.sqrt(s) for s in squares]

    def similarity(self, reference: "_Vector") -> float:
        """The mean over n-gram orders of the clipped cosine similarity, with the length penalty."""
        penalty = math.exp(-((self.length - reference.length) ** 2) / (2 * SIGMA**2))
        total = 0.0
        for order in range(NGRAMS):
            mine, theirs = self.weights[order], reference.weights[order]
            dot = sum(min(weight, theirs.get(ngram, 0.0)) * theirs.get(ngram, 0.0) for ngram, weight in mine.items())
            if self.norms[order] != 0 and reference.norms[order] != 0:
                dot /= self.norms[order] * reference.norms[order]
            total += dot * penalty
        return total / NGRAMS


class CiderD:
    """CIDEr-D against a fixed corpus of references.

    Args:
        references: for every image, its reference captions as token-id sequences (no start or end token).
            The document frequencies (in how many images' references an n-gram occurs) come from all of them.
    """

    def __init__(self, references: Sequence[Sequence[Sequence[int]]]) -> None:
        if not references:
            raise ValueError("CIDEr-D needs reference captions for at least one image")
        self.references = references
        self.document_frequency: Counter[Ngram] = Counter()
        for captions in references:
            self.document_frequency.update({ngram for caption in captions for ngram in ngram_counts(caption)})
        self.log_images = math.log(len(references))
        self._reference_vectors: dict[int, list[_Vector]] = {}

    def idf(self, ngram: Ngram) -> float:
        return self.log_images - math.log(max(1.0, self.document_frequency[ngram]))

    def score(self, caption: Sequence[int], image: int) -> float:
        """CIDEr-D of one caption (token ids) against the references of image number `image`."""
        references = self._references_of(image)
        candidate = _Vector(ngram_counts(caption), self)
        return 10.0 * sum(candidate.similarity(reference) for reference in references) / len(references)

    def scores(self, captions: Sequence[Sequence[int]], images: Sequence[int]) -> list[float]:
        """CIDEr-D of each caption against the references of its image."""
        return [self.score(caption, image) for caption, image in zip(captions, images, strict=True)]

    def _references_of(self, image: int) -> list[_Vector]:
        if image not in self._reference_vectors:
            captions = self.references[image]
            if not captions:
                raise ValueError(f"image {image} has no reference captions")
            self._reference_vectors[image] = [_Vector(ngram_counts(caption), self) for caption in captions]
        return self._reference_vectors[image]


# ----------------------------------------------------------------------------------------------------
# METEOR 1.5 of sampled captions against a fixed corpus of references, as a self-critical training reward.
#
# The scores are coco-caption's: pycocoevalcap's METEOR jar (exact, stem, synonym and paraphrase matches),
# kept running in one Java process per training process for the whole run, and asked for each caption's
# sentence-level METEOR, as coco-caption computes it before pooling over a corpus. It costs about 0.5 s of one
# core per 160 captions (a batch of 32 images with 5 samples each), against about 0.9 s for the rest of a
# bfloat16 training step on 2 cores.
#
# The references are the training split's as the model's vocabulary spells them: words seen fewer than
# `min_word_count` times read `<unk>`, which no sampled caption holds (generation bans it), so such a word
# counts in a reference's length but is never matched.
#



class MeteorReward:
    """Sentence-level METEOR of captions (strings of space-separated words) against each image's references.

    Args:
        references: for every image, its reference captions as strings of words.

    Raises:
        RuntimeError: Java is not on PATH (the jar needs it).
    """

    def __init__(self, references: Sequence[Sequence[str]]) -> None:
        if shutil.which("java") is None:
            raise RuntimeError(
                "a METEOR reward runs coco-caption's METEOR jar, which needs Java: install a Java runtime "
                "(e.g. OpenJDK 17) or train with --model.self_critical.init_args.meteor_weight 0"
            )
        self.references = [list(captions) for captions in references]
        self._meteor = Meteor()

    def scores(self, captions: Sequence[str], images: Sequence[int]) -> list[float]:
        """METEOR (0..1) of each caption against the references of its image; an empty caption scores 0."""
        rows = [row for row, caption in enumerate(captions) if caption.strip()]
        if not rows:
            return [0.0] * len(captions)
        references = {row: self.references[images[row]] for row in rows}
        _, scores = self._meteor.compute_score(references, {row: [captions[row]] for row in rows})
        by_row = dict(zip(rows, scores, strict=True))
        return [float(by_row.get(row, 0.0)) for row in range(len(captions))]

    def close(self) -> None:
        """Stop the Java process."""
        close_meteor(self._meteor)
