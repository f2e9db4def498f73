"""The Show-Attend-Tell decoder (Xu et al. 2015): an LSTM that attends over the image grid at every word.

One step, from the previous word y_{t-1} and state (h_{t-1}, c_{t-1}):
    alpha_t = softmax(f_att(a_i, h_{t-1}))                 attention over the L annotation vectors a_i
    z_t     = beta_t * sum_i alpha_ti a_i,  beta_t = sigmoid(f_beta(h_{t-1}))   gated context
    h_t, c_t = LSTM([E y_{t-1}; z_t], (h_{t-1}, c_{t-1}))
    p(y_t)  ∝ exp(L_o(E y_{t-1} + L_h h_t + L_z z_t))      the deep output layer
with h_0, c_0 = tanh MLPs of the mean annotation vector. The per-image half of f_att is computed once
per image (`start`), so a step costs only its query side.

With `fast_path` (the default) three places branch to CPU speed-ups that compute the same values: the additive score
(`core.model.fast_path`, inside `AdditiveScore`), the image grid cast once to the compute dtype (`start`) and the LSTM
step of the teacher-forced unroll (`forward`; both `captioning.fast_unroll`). With `fast_path=False` every line runs as
written here.

Soft and hard attention differ only in how the context is read from alpha (a `Read`, below): the
expectation above, or hard attention's single location a_s with s ~ Multinoulli(alpha). Every call that
unrolls the decoder takes the `Read` to use; everything else is shared.

`CaptionDecoder` (below) is what every caption decoder offers the rest of the project (training, beam search,
self-critical sampling, the app): `captioning.transformer.TransformerDecoder` is the second one.
"""

from __future__ import annotations

from copy import deepcopy
from dataclasses import dataclass
from typing import Callable, Protocol

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from core.model.attention import AdditiveScore, Attention, Score, grid_positions, with_positions
from captioning.fast_unroll import UnrolledLSTM, to_compute_dtype

# ----------------------------------------------------------------------------------------------------
# How the decoder reads the image once it has attention weights alpha over the L locations.
#
# Soft attention reads the expectation sum_i alpha_i a_i. Hard attention (Xu et al. section 4.1) reads a
# single annotation vector a_s: at training time s is sampled, s ~ Multinoulli(alpha); at inference time a
# hard model may read the expectation (the default), the most likely location or a sample. Each way of
# reading is a class so that a model or a search is given one rather than a string switch.
#
# A `Reading` also says which weights were actually used — alpha itself, or a one-hot map of the chosen
# location — so that the overlays show what the model read.
#



@dataclass
class Reading:
    context: Tensor  # (B, D) what was read
    used: Tensor  # (B, L) the weights that produced it: alpha, or one-hot at the chosen location
    locations: Tensor | None  # (B,) the chosen locations; None for the expectation


class Read:
    """Base class: (alpha (N, L), annotation vectors (B, L, D)) -> Reading.

    N is B, or B * K when each image has K rows of weights in a row (K beams of a search): those rows all read
    their image's grid, which is not copied K times.
    """

    def __call__(self, weights: Tensor, features: Tensor) -> Reading:
        raise NotImplementedError


class Expectation(Read):
    """Soft attention: the weighted mean sum_i alpha_i a_i, differentiable in alpha."""

    def __call__(self, weights: Tensor, features: Tensor) -> Reading:
        grouped = weights.view(len(features), -1, weights.shape[-1])  # (B, K, L)
        context = torch.bmm(grouped, features).view(len(weights), -1)  # (N, D)
        return Reading(context, weights, None)


class _OneLocation(Read):
    """Reads a_s for one location s per row; subclasses choose s."""

    def choose(self, weights: Tensor) -> Tensor:
        """Locations (N,) for weights (N, L)."""
        raise NotImplementedError

    def __call__(self, weights: Tensor, features: Tensor) -> Reading:
        locations = self.choose(weights)  # (N,)
        images = torch.arange(len(weights), device=features.device) // (len(weights) // len(features))  # (N,)
        context = features[images, locations]  # (N, D)
        used = F.one_hot(locations, weights.shape[-1]).to(weights.dtype)  # (N, L)
        return Reading(context, used, locations)


class Sample(_OneLocation):
    """Hard attention's stochastic read: s ~ Multinoulli(alpha), drawn from torch's global generator (so a
    seeded run is reproducible). The draw is not differentiable; training uses REINFORCE."""

    def choose(self, weights: Tensor) -> Tensor:
        return torch.multinomial(weights.detach().float(), 1).squeeze(1)


class ArgMax(_OneLocation):
    """The most likely location, argmax_i alpha_i: a deterministic hard read for inference."""

    def choose(self, weights: Tensor) -> Tensor:
        return weights.argmax(dim=-1)


class Replay(_OneLocation):
    """Reads given locations, one column per call: locations (B, T) for T successive steps.

    Used to evaluate fixed attention paths through the real decoder, for example every path of a small
    problem when computing the exact hard-attention objective. Make a new one per unroll.
    """

    def __init__(self, locations: Tensor) -> None:
        self.locations = locations  # (B, T)
        self._step = 0

    def choose(self, weights: Tensor) -> Tensor:
        if self._step >= self.locations.shape[1]:
            raise IndexError(f"Replay was given {self.locations.shape[1]} steps of locations and asked for more")
        column = self.locations[:, self._step].to(weights.device)
        self._step += 1
        return column


EXPECTATION = Expectation()


# ----------------------------------------------------------------------------------------------------
# What every caption decoder offers: start from the image grid, score the next word, unroll teacher-forced.


class DecoderState(Protocol):
    """A decoder's running state for N rows (an LSTM's h and c, a Transformer's key/value cache), which beam search
    reorders and repeats row by row."""

    def select(self, index: Tensor) -> "DecoderState":
        """The rows `index` (N',) of the state, in that order."""

    def repeat(self, times: int) -> "DecoderState":
        """Each row repeated `times` times in a row: N rows -> N * times."""


@dataclass
class StepOutput:
    logits: Tensor  # (B, V) unnormalised log-probabilities of the next word
    weights: Tensor  # (B, L) the weights the image was read with: alpha, or one-hot for a hard read
    state: DecoderState

    def repeat(self, times: int) -> "StepOutput":
        """Each row repeated `times` times in a row: (B, ...) -> (B * times, ...)."""
        logits, weights = self.logits.repeat_interleave(times, 0), self.weights.repeat_interleave(times, 0)
        return StepOutput(logits, weights, self.state.repeat(times))


@dataclass
class TeacherForced:
    logits: Tensor  # (B, T, V)
    weights: Tensor  # (B, T, L) the attention over the grid at every step
    locations: Tensor | None  # (B, T) the locations read at every step by a hard read; None for soft


class CaptionDecoder(nn.Module):
    """Base class of the caption decoders: the interface that training, search, self-critical sampling, export and
    the app use. A decoder is built from three things the data and the encoder fix, `vocab_size`, `feature_dim` (D)
    and `grid_shape` (L = rows * columns cells), given first; its own sizes and options follow, keyword-only, and
    are what a config's `model.decoder.init_args` sets.

    `start` prepares the image once (the beams of a search share what it returns); `step` scores the next word
    for N = B * K rows (K rows of each image in a row, as `Read` says); `forward` runs all the words of a
    caption at once (teacher forcing). Every call returns, for each word, its attention over the L grid cells.
    """

    def start(self, features: Tensor) -> tuple[object, DecoderState]:
        """Features (B, L, D) -> (what the decoder reads of the image, the initial state of its B rows)."""
        raise NotImplementedError

    def step(self, words: Tensor, state: DecoderState, memory: object, read: Read = EXPECTATION) -> StepOutput:
        """Previous words (N,) -> next-word logits (N, V), the attention (N, L) and the next state."""
        raise NotImplementedError

    def forward(self, features: Tensor, inputs: Tensor, read: Read = EXPECTATION) -> TeacherForced:
        """Teacher forcing: features (B, L, D), input words (B, T) starting with <start> -> logits (B, T, V)."""
        raise NotImplementedError

    def word_rows(self) -> list[nn.Parameter]:
        """The parameters with one row per word (the embedding; an untied output layer's weight and bias)."""
        raise NotImplementedError

    def with_words(self, anchors: Tensor) -> "CaptionDecoder":
        """A copy that also knows N new words: word V + n gets a copy of word anchors[n]'s rows in every parameter
        of `word_rows`, so it is read and scored as its anchor is. This is the transfer of DCC (Hendricks et al.
        2016): a word the captions never had borrows the weights of a semantically close word they had (zebra from
        horse); which of the two a caption says is then up to the search (`captioning.naming`). This decoder is
        left as it is."""
        copy = deepcopy(self)
        for parameter in copy.word_rows():
            parameter.data = torch.cat([parameter.data, parameter.data[anchors]])  # (V + N, ...)
        copy.vocab_size = self.vocab_size + len(anchors)
        return copy


DecoderFactory = Callable[[int, int, tuple[int, int]], CaptionDecoder]
"""A decoder class, or a `functools.partial` of one with its options set, called as (vocab_size, feature_dim,
grid_shape) once the vocabulary is known. In YAML: `decoder: {class_path: ..., init_args: {...}}`."""


# ----------------------------------------------------------------------------------------------------
# Show, Attend and Tell.


@dataclass
class ImageMemory:
    """What the decoder attends over, prepared once per image; the K beams of a search share it."""

    features: Tensor  # (B, L, D) annotation vectors
    projected: Tensor  # (B, L, P) the score function's image-side projection (`core.model.attention`'s letters)


@dataclass
class LSTMState:
    h: Tensor  # (B, H)
    c: Tensor  # (B, H)

    def select(self, index: Tensor) -> "LSTMState":
        return LSTMState(self.h[index], self.c[index])

    def repeat(self, times: int) -> "LSTMState":
        """Each image's state repeated `times` times in a row: (B, H) -> (B * times, H)."""
        return LSTMState(self.h.repeat_interleave(times, 0), self.c.repeat_interleave(times, 0))


class ShowAttendTell(CaptionDecoder):
    """The caption decoder, for soft and hard attention alike (each unroll is given its `Read`).

    Args:
        vocab_size: number of words, specials included.
        feature_dim: D, size of an annotation vector.
        grid_shape: (rows, columns) of the encoder's grid: L = rows * columns annotation vectors per image (the
            grid positions and location-based scores need them).
        embed_dim: word embedding size (also the deep output's size).
        decoder_dim: LSTM hidden size.
        attention_dim: hidden size of the score function.
        dropout: dropout before the output layer.
        score: the attention score class.
        state_from_image: start the LSTM from MLPs of the mean annotation vector (the paper); when False it
            starts from zeros, so everything the decoder knows of the image comes through attention.
        coordinates: append each location's grid position (x, y), from -1 (left/top) to 1 (right/bottom), to its
            annotation vector (as CoordConv does for convolutions; not in the paper). The context then tells the
            LSTM where it looked, so the next look can aim relative to that ("to the left of" the object just
            described): deep features alone look alike wherever an object is.
        fast_path: take the CPU speed-ups of the additive score (`core.model.fast_path`) and of the teacher-forced LSTM
            step (`captioning.fast_unroll`): the same values, faster. False runs the code of this file and
            `core.model.attention` as written. The parameters are the same either way.
    """

    def __init__(
        self,
        vocab_size: int,
        feature_dim: int,
        grid_shape: tuple[int, int],
        *,
        embed_dim: int = 512,
        decoder_dim: int = 512,
        attention_dim: int = 512,
        dropout: float = 0.5,
        score: type[Score] = AdditiveScore,
        state_from_image: bool = True,
        coordinates: bool = False,
        fast_path: bool = True,
    ) -> None:
        super().__init__()
        self.vocab_size = vocab_size
        self.fast_path = fast_path
        self.state_from_image = state_from_image
        self.coordinates = coordinates
        num_locations = grid_shape[0] * grid_shape[1]
        if coordinates:
            self.register_buffer("positions", grid_positions(*grid_shape), persistent=False)  # (L, 2)
            feature_dim += 2
        self.attention = Attention(
            score=score(
                query_dim=decoder_dim,
                key_dim=feature_dim,
                attention_dim=attention_dim,
                num_locations=num_locations,
                fast_path=fast_path,
            )
        )
        self.embedding = nn.Embedding(vocab_size, embed_dim)
        self.init_h = nn.Linear(feature_dim, decoder_dim)
        self.init_c = nn.Linear(feature_dim, decoder_dim)
        self.f_beta = nn.Linear(decoder_dim, 1)
        self.lstm = nn.LSTMCell(embed_dim + feature_dim, decoder_dim)  # [E y_{t-1}; z_t]
        self.out_h = nn.Linear(decoder_dim, embed_dim)  # L_h
        self.out_z = nn.Linear(feature_dim, embed_dim, bias=False)  # L_z
        self.out = nn.Linear(embed_dim, vocab_size)  # L_o
        self.dropout = nn.Dropout(dropout)

    def word_rows(self) -> list[nn.Parameter]:
        return [self.embedding.weight, self.out.weight, self.out.bias]  # E, and L_o's rows

    def start(self, features: Tensor) -> tuple[ImageMemory, LSTMState]:
        """Prepare the image (B, L, D) once (D + 2 with `coordinates`): the attention's key projection and the
        initial LSTM state."""
        if self.coordinates:
            features = with_positions(features, self.positions)  # (B, L, D + 2)
        mean = features.mean(dim=1)  # (B, D)
        if not self.state_from_image:
            mean = torch.zeros_like(mean)  # the MLPs' biases alone: a learned image-independent start
        state = LSTMState(torch.tanh(self.init_h(mean)), torch.tanh(self.init_c(mean)))
        if self.fast_path:  # read at every word: cast once here rather than by autocast at every step
            features = to_compute_dtype(features)
        return ImageMemory(features, self.attention.prepare(features)), state

    def _attend(self, h: Tensor, memory: ImageMemory, read: Read) -> tuple[Tensor, Reading, Tensor]:
        """Attend with h_{t-1} (B, H) and read the gated context: -> (alpha (B, L), reading, z (B, D))."""
        alpha = self.attention.weights(h, memory.projected)  # (B, L)
        beta = torch.sigmoid(self.f_beta(h))  # (B, 1)
        reading = read(alpha, memory.features)
        return alpha, reading, beta * reading.context

    def _remembered(self, z: Tensor) -> Tensor:
        """What of the context z_t (..., D) the LSTM is given: all of it, as the paper has it. (A variant that gives it
        less, `experiments.decoder_variants`, overrides this.)"""
        return z

    def _output(self, embedded: Tensor, h: Tensor, z: Tensor) -> Tensor:
        """The deep output layer L_o(E y_{t-1} + L_h h_t + L_z z_t), for (..., E), (..., H), (..., D) -> (..., V)."""
        return self.out(self.dropout(embedded + self.out_h(h) + self.out_z(z)))

    def step(self, words: Tensor, state: LSTMState, memory: ImageMemory, read: Read = EXPECTATION) -> StepOutput:
        """One word: previous words (B,) -> next-word logits (B, V), the weights read with (B, L), new state."""
        embedded = self.embedding(words)  # (B, E)
        _, reading, z = self._attend(state.h, memory, read)
        h, c = self.lstm(torch.cat([embedded, self._remembered(z)], -1), (state.h, state.c))
        return StepOutput(self._output(embedded, h, z), reading.used, LSTMState(h, c))

    def forward(self, features: Tensor, inputs: Tensor, read: Read = EXPECTATION) -> TeacherForced:
        """Teacher forcing: features (B, L, D), input words (B, T) starting with <start> -> logits (B, T, V).

        The steps of `step`, one per input word, also keeping alpha at every step and, for a hard read, the
        locations it read (for the REINFORCE term); the output layer then runs once over all steps.
        """
        memory, state = self.start(features)
        embedded = self.embedding(inputs)  # (B, T, E) E y_{t-1} of every step
        unrolled = UnrolledLSTM(self.lstm, embedded) if self.fast_path else None
        weights, hidden, context, locations = [], [], [], []
        for t, y in enumerate(embedded.unbind(1)):  # y: (B, E)
            alpha, reading, z = self._attend(state.h, memory, read)  # attend with h_{t-1}
            if self.fast_path:  # the same cell, its weight gradients made in one product for all steps
                h, c = unrolled.step(t, self._remembered(z), state.h, state.c)
            else:
                h, c = self.lstm(torch.cat([y, self._remembered(z)], -1), (state.h, state.c))  # (B, H) each
            state = LSTMState(h, c)
            weights.append(alpha)
            hidden.append(h)
            context.append(z)
            locations.append(reading.locations)
        logits = self._output(embedded, torch.stack(hidden, 1), torch.stack(context, 1))  # (B, T, V)
        read_locations = torch.stack(locations, 1) if locations[0] is not None else None  # (B, T)
        return TeacherForced(logits, torch.stack(weights, 1), read_locations)
