"""Maps of a caption's words over the image grid: the attention the decoder read with, or what the word depended on.

The attention weights alpha_t say where the decoder read its context at word t. They need not say what the word
depended on: the LSTM also carries the image from its initial state and from earlier contexts. Gradient-based maps
(Selvaraju et al., Grad-CAM, ICCV 2017, with captioning among its tasks) answer that second question: how the
word's log-probability log p(y_t | y_<t, a) changes with each cell's annotation vector a_i, on the caption the
model generated, teacher-forced.

* `AttentionWeights`: alpha_t, what the app draws.
* `GradientTimesInput`: relu(sum_d a_id * d log p(y_t) / d a_id) per cell i.
* `GradCAM`: relu(sum_d w_d a_id) with w_d = mean_i d log p(y_t) / d a_id (a channel's weight is its mean gradient).
* `CrossAttentionHead`: a Transformer decoder's cross-attention at any layer and head, to compare them.

Every map is normalised to sum to 1 over the cells (uniform where the relu leaves nothing), so the grounding measures
read them as they read attention. `python -m captioning.grounding --maps captioning.explanations.GradCAM` scores
them on photos with boxes.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from PIL import Image
from torch import Tensor

from captioning.inference import HeadChoice, every_head, model_input
from captioning.module import CaptioningModule
from captioning.pretrained import Caption
from captioning.transformer import TransformerDecoder


class WordMaps(ABC):
    """One map over the grid for every word of each caption: (n_words, rows, columns), each map summing to 1."""

    @abstractmethod
    def __call__(self, model: CaptioningModule, photos: Sequence[Image.Image], captions: Sequence[Caption]) -> list[Tensor]:
        """The maps of `captions`, which `model` generated for `photos` (in the same order)."""


class AttentionWeights(WordMaps):
    """The attention weights alpha_t each word was generated with (what the app and the overlays show)."""

    def __call__(self, model: CaptioningModule, photos: Sequence[Image.Image], captions: Sequence[Caption]) -> list[Tensor]:
        return [caption.attention for caption in captions]


class _WordGradients(WordMaps):
    """The gradient of every word's log-probability with respect to the annotation vectors, turned into a map."""

    @abstractmethod
    def combine(self, gradient: Tensor, features: Tensor) -> Tensor:
        """(L, D) gradient of one word's log-probability, (L, D) annotation vectors -> (L,) non-negative map."""

    def __call__(self, model: CaptioningModule, photos: Sequence[Image.Image], captions: Sequence[Caption]) -> list[Tensor]:
        vocabulary, (rows, columns) = model.vocabulary_in_use, model.encoder.grid_shape
        maps = []
        for photo, caption in zip(photos, captions):
            if not caption.words:
                maps.append(torch.zeros(0, rows, columns))
                continue
            with torch.inference_mode():
                features = model.features(model_input(model, photo))  # (1, L, D)
            features = features.clone().requires_grad_(True)
            words = [vocabulary.index(word) for word in caption.words]
            inputs = torch.tensor([[vocabulary.start_id, *words[:-1]]], device=model.device)  # (1, n)
            with torch.enable_grad():
                logits = model.decoder_in_use(features, inputs, model.attention.inference_read()).logits[0]  # (n, V)
                log_probs = F.log_softmax(logits.float(), dim=-1)[torch.arange(len(words)), words]  # (n,)
                word_maps = []
                for t in range(len(words)):
                    (gradient,) = torch.autograd.grad(log_probs[t], features, retain_graph=t < len(words) - 1)
                    word_maps.append(self.combine(gradient[0].float(), features[0].detach().float()))
            maps.append(_normalised(torch.stack(word_maps)).reshape(len(words), rows, columns))
        return maps


class GradientTimesInput(_WordGradients):
    """relu(sum_d a_id * gradient_id): how much each cell's features, as they are, raised the word."""

    def combine(self, gradient: Tensor, features: Tensor) -> Tensor:
        return (gradient * features).sum(dim=-1).clamp(min=0.0)  # (L,)


class GradCAM(_WordGradients):
    """Grad-CAM: channel weights w_d = mean_i gradient_id, map relu(sum_d w_d a_id) (Selvaraju et al. eq. 1-2)."""

    def combine(self, gradient: Tensor, features: Tensor) -> Tensor:
        return (features @ gradient.mean(dim=0)).clamp(min=0.0)  # (L,)


class CrossAttentionHead(WordMaps):
    """A Transformer decoder's cross-attention weights at one layer and head, or averaged over the layer's heads, for
    each word of the generated caption (teacher-forced on it: the weights its search saw). The app draws the layer and
    head of the decoder's `map_layer` and `map_head`; this reads any other, to compare them on photos with boxes.

    Args:
        layer: the block, from 0 (-1: the last).
        head: the head, from 0; None averages the layer's heads.
    """

    def __init__(self, *, layer: int = -1, head: int | None = None) -> None:
        self.layer, self.head = layer, head

    def __call__(self, model: CaptioningModule, photos: Sequence[Image.Image], captions: Sequence[Caption]) -> list[Tensor]:
        if not isinstance(model.decoder, TransformerDecoder):
            raise ValueError(f"CrossAttentionHead reads a Transformer decoder's heads; this model's decoder is a "
                             f"{type(model.decoder).__name__}: use the attention weights (the default maps)")
        rows, columns = model.encoder.grid_shape
        maps = []
        for photo, caption in zip(photos, captions):
            if not caption.words:
                maps.append(torch.zeros(0, rows, columns))
                continue
            chosen = HeadChoice(self.layer, self.head).of(every_head(model, photo, caption.words))  # (n, L)
            maps.append(chosen.reshape(len(caption.words), rows, columns))
        return maps


def _normalised(maps: Tensor) -> Tensor:
    """(n, L) non-negative maps scaled to sum to 1; a map of zeros becomes uniform."""
    totals = maps.sum(dim=-1, keepdim=True)
    uniform = torch.full_like(maps, 1.0 / maps.shape[-1])
    return torch.where(totals > 0, maps / totals.clamp(min=1e-30), uniform)
