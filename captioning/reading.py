"""How the decoder reads the image once it has attention weights alpha over the L locations.

Soft attention reads the expectation sum_i alpha_i a_i. Hard attention (Xu et al. section 4.1) reads a
single annotation vector a_s: at training time s is sampled, s ~ Multinoulli(alpha); at inference time a
hard model may read the expectation (the default), the most likely location or a sample. Each way of
reading is a class so that a model or a search is given one rather than a string switch.

A `Reading` also says which weights were actually used — alpha itself, or a one-hot map of the chosen
location — so that the overlays show what the model read.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor


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
        """Locations (B,) for weights (B, L)."""
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
