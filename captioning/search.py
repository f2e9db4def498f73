"""Caption search over the decoder's step function: greedy and beam search, batched across images.

Both keep the attention weights of every emitted word, so a caption can be shown word by word over the
image (for a hard read, the one-hot map of the location it read). Beam search runs all images and all beams as one (B * K) batch; its bookkeeping (which beam came
from which, which are finished) lives in tensors, not Python lists.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import math

import torch
from torch import Tensor

from captioning.decoder import EXPECTATION, CaptionDecoder, Read
from core.model.imagenet import Tag


@dataclass
class Generated:
    """Search results for a batch of B images.

    tokens[b] holds the word ids of caption b without <start> and <end>; weights[b] (len(tokens[b]), L) the
    attention weights at each of those words; log_probs (B,) the caption's total log-probability (including
    the <end> step when it was emitted); tags[b] the words the encoder's ImageNet head found, when the caller
    named objects.
    """

    tokens: list[list[int]]
    weights: list[Tensor]
    log_probs: Tensor
    tags: list[list[Tag]] | None = None  # with object naming (`captioning.naming`), what the ImageNet head saw


def next_word_log_probs(logits: Tensor, banned: Sequence[int], never: Tensor | None = None) -> Tensor:
    """log_softmax over the vocabulary (last dimension) after removing the `banned` word ids (e.g. <unk>,
    <pad>, <start>: ids that make no caption) and, for each row, those `never` (same shape as logits) marks, so the
    other words' probabilities sum to one."""
    logits = logits.to(torch.float32, copy=True)  # one copy, ours to change in place
    if banned:
        logits.index_fill_(-1, torch.as_tensor(list(banned), device=logits.device), float("-inf"))
    if never is not None:
        logits.masked_fill_(never, float("-inf"))
    return torch.log_softmax(logits, dim=-1)


@torch.no_grad()
def greedy_search(
    decoder: CaptionDecoder,
    features: Tensor,
    *,
    start_id: int,
    end_id: int,
    max_length: int,
    read: Read = EXPECTATION,
    banned: Sequence[int] = (),
) -> Generated:
    """The most probable word at every step, for features (B, L, D); stops at <end> or after max_length words.
    Word ids in `banned` are never emitted."""
    batch = features.shape[0]
    memory, state = decoder.start(features)
    words = features.new_full((batch,), start_id, dtype=torch.long)
    chosen, attended = [], []
    total = features.new_zeros(batch)
    running = torch.ones(batch, dtype=torch.bool, device=features.device)
    for _ in range(max_length):
        out = decoder.step(words, state, memory, read)
        log_probs = next_word_log_probs(out.logits, banned)  # (B, V)
        best, words = log_probs.max(dim=-1)
        total = total + torch.where(running, best, 0.0)
        chosen.append(torch.where(running, words, end_id))
        attended.append(out.weights)
        running = running & (words != end_id)
        state = out.state
        if not bool(running.any()):
            break
    steps = torch.stack(chosen, 1)  # (B, T)
    weights = torch.stack(attended, 1)  # (B, T, L)
    tokens, kept = [], []
    for b in range(batch):
        ended = (steps[b] == end_id).nonzero()
        n = int(ended[0]) if len(ended) else steps.shape[1]
        tokens.append(steps[b, :n].tolist())
        kept.append(weights[b, :n])
    return Generated(tokens, kept, total)


def repeated_ngram_words(tokens: Tensor, n: int) -> Tensor:
    """The next words that would write an n-gram of `tokens` (..., T) a second time (n >= 2, T >= n).

    Returns (words, banned), both (..., T - n + 1): words[..., j] = tokens[..., j + n - 1] is the word that ended
    the j-th n-gram; banned[..., j] says whether that n-gram began with the last n - 1 words of `tokens`, so
    that emitting words[..., j] next would repeat it.
    """
    windows = tokens.unfold(-1, n, 1)  # (..., T - n + 1, n): every n-gram written so far
    last = tokens[..., tokens.shape[-1] - (n - 1) :]  # (..., n - 1): what the next n-gram starts with
    banned = (windows[..., : n - 1] == last.unsqueeze(-2)).all(dim=-1)  # (..., T - n + 1)
    return windows[..., n - 1], banned


def ban_repeated_ngrams(log_probs: Tensor, tokens: Tensor, n: int) -> None:
    """Set to -inf, in place, the log-probabilities (..., V) of every next word that would repeat an n-gram of
    `tokens` (..., T), the words written so far ("a dog on a dog on a" cannot go on with "dog")."""
    if n < 1 or tokens.shape[-1] < n - 1:
        return
    if n == 1:  # no word twice
        log_probs.scatter_(-1, tokens, float("-inf"))
        return
    if tokens.shape[-1] < n:  # not one whole n-gram written yet
        return
    words, banned = repeated_ngram_words(tokens, n)
    # a word may follow several windows, banned after some and not others: count the bans, then mask
    counts = torch.zeros(log_probs.shape, dtype=torch.int32, device=log_probs.device)
    counts.scatter_add_(-1, words, banned.to(torch.int32))
    log_probs.masked_fill_(counts > 0, float("-inf"))


def _length_normalised(scores: Tensor, lengths: Tensor, length_penalty: float) -> Tensor:
    """score / length^penalty; penalty 0 ranks by total log-probability (the default)."""
    if length_penalty == 0.0:
        return scores
    return scores / lengths.clamp(min=1).to(scores.dtype).pow(length_penalty)


@dataclass(frozen=True)
class Constraints:
    """Words a caption must hold, per image: constrained beam search's input (Anderson et al. 2017).

    `words[b]` lists image b's constraints, each a tuple of word ids of which the caption must hold one ("zebra"
    or "zebras"); at most `MAX` constraints per image, as the search keeps a beam for every subset of them met.
    `values[b]`, when given, says what meeting each is worth in the caption's (length-normalised) log-probability:
    `math.inf` (the default) for a word the caption must hold where any caption can, a number v for a word the caption
    holds only where holding it costs less than v, so that a word the model can place nowhere naturally is left out.
    """

    words: Sequence[Sequence[tuple[int, ...]]]
    values: Sequence[Sequence[float]] | None = None

    MAX = 3
    MUST = 1e6  # what an infinitely valued constraint adds to a score: more than any caption's log-probability

    def __post_init__(self) -> None:
        for b, image in enumerate(self.words):
            if len(image) > self.MAX:
                raise ValueError(f"image {b} has {len(image)} constraints; the search keeps at most {self.MAX}")
            if self.values is not None and len(self.values[b]) != len(image):
                raise ValueError(f"image {b} has {len(image)} constraints and {len(self.values[b])} values")

    @property
    def count(self) -> int:
        """C, the most constraints any image has: the search keeps 2^C groups of beams, one per subset met."""
        return max((len(image) for image in self.words), default=0)

    def met_by(self, vocab_size: int, device: torch.device) -> Tensor:
        """(B, V) for each word the bit mask of the constraints it meets (bit c for constraint c)."""
        met = torch.zeros(len(self.words), vocab_size, dtype=torch.long, device=device)
        for b, image in enumerate(self.words):
            for c, ids in enumerate(image):
                met[b, list(ids)] |= 1 << c
        return met

    def worth(self, device: torch.device) -> Tensor:
        """(B, 2^C) what each subset of constraints met adds to a caption's score (`MUST` for each that must be)."""
        count = self.count
        worth = torch.zeros(len(self.words), 1 << count, dtype=torch.float64, device=device)
        for b, image in enumerate(self.words):
            values = self.values[b] if self.values is not None else [math.inf] * len(image)
            for subset in range(1 << count):
                worth[b, subset] = sum(min(v, self.MUST) for c, v in enumerate(values) if subset >> c & 1)
        return worth

    def start(self, device: torch.device) -> Tensor:
        """(B,) the subset met before any word: an image with fewer than C constraints has the rest met already."""
        count = self.count
        return torch.tensor(
            [sum(1 << c for c in range(len(image), count)) for image in self.words], dtype=torch.long, device=device
        )


@torch.no_grad()
def beam_search(
    decoder: CaptionDecoder,
    features: Tensor,
    *,
    start_id: int,
    end_id: int,
    max_length: int,
    beam_size: int = 3,
    length_penalty: float = 0.0,
    no_repeat_ngram_size: int = 0,
    no_end_after: Sequence[int] = (),
    modifiers: Sequence[int] = (),
    determiners: Sequence[int] = (),
    read: Read = EXPECTATION,
    banned: Sequence[int] = (),
    never: Tensor | None = None,
    constraints: Constraints | None = None,
) -> Generated:
    """Beam search for features (B, L, D), every image at once.

    A beam that emits <end> is frozen: it keeps its score and its slot, extending only with a zero-cost
    pad, so the K beams of an image always hold the K best hypotheses seen. Search stops when every beam
    of every image has ended or after max_length words; the winner is chosen by total log-probability
    divided by length^length_penalty (length counts the words and the <end>), among the beams that ended
    with <end> (a beam cut at max_length wins only when none did). Word ids in `banned` are never emitted,
    nor those `never` (B, V) marks for an image, nor, when `no_repeat_ngram_size` is n > 0, a word that would write
    one of the caption's n-grams twice, nor <end> right after a word of `no_end_after` (e.g. "the": the caption must
    finish its phrase), nor <end> right after a word of `modifiers` (e.g. "pink") that follows a word of
    `determiners` or `modifiers` ("a pink": the noun is missing; "the dog is pink" may end).

    With `constraints` (C of them at most per image) the search is constrained beam search (Anderson et al. 2017):
    it keeps K beams for each of the 2^C subsets of constraints met, a word moves a beam to the subset it then
    meets, and each subset keeps the K best of the beams that arrive in it. The caption is the ended beam of highest
    (length-normalised) score plus what the constraints it meets are worth (`Constraints.values`): by default every
    constraint must be met, so it is the best ended beam of the fullest subset that has one; a constraint worth v is
    met only where meeting it costs the caption less than v.
    """
    batch, locations = features.shape[0], features.shape[1]
    k = beam_size
    groups = 1 << (constraints.count if constraints is not None else 0)  # S subsets of constraints met
    m = groups * k  # M beams per image: K per subset, subset s in slots s*K .. s*K + K - 1
    memory, state = decoder.start(features)
    # The first step is the same for every beam of an image (all start from <start>): it runs once per image and
    # is then repeated. The M beams of an image read its one memory (see `Read`).
    words = features.new_full((batch,), start_id, dtype=torch.long)  # (B,), then (B*M,)
    rows = torch.arange(batch, device=features.device).unsqueeze(1)  # (B, 1)
    if constraints is not None:
        met_by = constraints.met_by(decoder.vocab_size, features.device)  # (B, V)
        subset = constraints.start(features.device)  # (B,) the subset met at the start
    else:
        met_by, subset = None, torch.zeros(batch, dtype=torch.long, device=features.device)
    group_of_slot = torch.arange(m, device=features.device) // k  # (M,) the subset a slot's beam has met
    # Only the first beam of each image's starting subset is alive at the start, so the beams don't duplicate it.
    scores = features.new_full((batch, m), float("-inf"))
    scores[rows.squeeze(1), subset * k] = 0.0
    tokens = features.new_zeros((batch, m, max_length), dtype=torch.long)  # (B, M, T)
    weights = features.new_zeros((batch, m, max_length, locations))  # (B, M, T, L)
    finished = torch.zeros(batch, m, dtype=torch.bool, device=features.device)
    lengths = torch.zeros(batch, m, dtype=torch.long, device=features.device)  # words, <end> excluded
    no_end_after_ids = torch.as_tensor(list(no_end_after), dtype=torch.long, device=features.device)
    modifier_ids = torch.as_tensor(list(modifiers), dtype=torch.long, device=features.device)
    opener_ids = torch.as_tensor([*determiners, *modifiers], dtype=torch.long, device=features.device)

    for t in range(max_length):
        out = decoder.step(words, state, memory, read)
        if t == 0:
            out = out.repeat(m)
        never_rows = never.repeat_interleave(m, 0) if never is not None else None  # (B*M, V)
        log_probs = next_word_log_probs(out.logits, banned, never_rows).view(batch, m, -1)  # (B, M, V)
        vocab = log_probs.shape[-1]
        if no_repeat_ngram_size:
            ban_repeated_ngrams(log_probs, tokens[:, :, :t], no_repeat_ngram_size)
        if t > 0 and len(no_end_after):
            mid_phrase = torch.isin(tokens[:, :, t - 1], no_end_after_ids)  # (B, M)
            log_probs[..., end_id].masked_fill_(mid_phrase, float("-inf"))
        if t > 1 and len(modifiers):
            # (B, M): an adjective right after an article or another adjective
            dangling = torch.isin(tokens[:, :, t - 1], modifier_ids) & torch.isin(tokens[:, :, t - 2], opener_ids)
            log_probs[..., end_id].masked_fill_(dangling, float("-inf"))
        # A finished beam continues with exactly one zero-cost candidate (index end_id) and nothing else.
        if bool(finished.any()):
            log_probs.masked_fill_(finished.unsqueeze(-1), float("-inf"))
            log_probs[..., end_id].masked_fill_(finished, 0.0)
        candidates = log_probs.add_(scores.unsqueeze(-1))  # (B, M, V)
        if met_by is None:  # one subset: the K best of all candidates
            top_scores, top_index = candidates.view(batch, m * vocab).topk(k, dim=-1)  # (B, K)
        else:  # each subset: the K best of the candidates that arrive in it
            arrives = group_of_slot.view(1, m, 1) | met_by.unsqueeze(1)  # (B, M, V) the subset a candidate meets
            picked = [
                candidates.masked_fill(arrives != s, float("-inf")).view(batch, m * vocab).topk(k, dim=-1)
                for s in range(groups)
            ]
            top_scores = torch.cat([scores_s for scores_s, _ in picked], dim=1)  # (B, M)
            top_index = torch.cat([index_s for _, index_s in picked], dim=1)  # (B, M)
        parent, word = top_index // vocab, top_index % vocab  # (B, M)

        was_finished = finished.gather(1, parent)
        tokens, weights, lengths = tokens[rows, parent], weights[rows, parent], lengths[rows, parent]
        ended_now = ~was_finished & (word == end_id)
        writes = ~was_finished & ~ended_now  # a real word was emitted
        tokens[:, :, t] = torch.where(writes, word, 0)
        weights[:, :, t] = torch.where(writes.unsqueeze(-1), out.weights.view(batch, m, locations)[rows, parent], 0.0)
        lengths = lengths + writes.long()
        finished = was_finished | ended_now
        scores = top_scores

        flat_parent = (parent + rows * m).view(-1)  # (B*M,) index into the flattened beams
        state = out.state.select(flat_parent)
        words = word.view(-1)
        if bool((finished | scores.isneginf()).all()):  # every beam ended or empty (a subset no beam reached)
            break

    # A caption ends on <end>: a hypothesis cut at max_length mid-phrase competes only when no beam ended. With
    # constraints, the fullest subset that holds a live beam wins first.
    ended = finished & ~scores.isneginf()  # (B, M) beams that ended with <end> (not empty slots)
    ranked = _length_normalised(scores, lengths + finished.long(), length_penalty)
    ranked = ranked.masked_fill(~ended & ended.any(dim=1, keepdim=True), float("-inf"))
    if met_by is not None:  # what the constraints each beam met are worth, in float64: MUST leaves scores distinct
        ranked = ranked.double() + constraints.worth(features.device).double()[:, group_of_slot]  # (B, M)
    best = ranked.argmax(dim=1)  # (B,)
    out_tokens, out_weights = [], []
    for b in range(batch):
        n = int(lengths[b, best[b]])
        out_tokens.append(tokens[b, best[b], :n].tolist())
        out_weights.append(weights[b, best[b], :n])
    return Generated(out_tokens, out_weights, scores[torch.arange(batch), best])
