"""One photo through one captioning model: the steps `captioning.Captioner` is made of, for code that holds a
`CaptioningModule` itself (the benchmarks, `captioning.explanations`).

* `generate_caption`: the model's own caption (beam search) and the attention row of each word.
* `follow_caption`: where the model looks at each word of a caption it is given (teacher forcing).
* `every_head`: a Transformer decoder's cross-attention at every layer and head; `head_choices` and `HeadChoice`
  name one of those maps as a person picks it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from PIL import Image
from torch import Tensor

from captioning.module import CaptioningModule
from captioning.transformer import TransformerDecoder
from data.vocabulary import tokenize


def model_input(model: CaptioningModule, image: Image.Image) -> Tensor:
    """One photo as the model's encoder reads it: (1, 3, S, S) on the model's device."""
    return model.encoder.transform()(image).unsqueeze(0).to(model.device)


def generate_caption(model: CaptioningModule, image: Image.Image, beam_size: int = 3) -> tuple[list[str], Tensor]:
    """Caption one photo with beam search: its words and the attention row (n_words, L) of each."""
    with torch.inference_mode():
        generated = model.generate(model_input(model, image), beam_size=beam_size)
    return model.caption_words(generated.tokens[0], generated.weights[0])


def every_head(
    model: CaptioningModule, image: Image.Image, words: Sequence[str], *, encoded: Tensor | None = None
) -> Tensor | None:
    """A Transformer decoder's cross-attention at every layer and head for the words of a caption (teacher-forced on
    them: for a caption the model generated, the weights its search saw) -> (n_words, layers, heads, L), float32 on the
    CPU; None for a decoder without heads (Show-Attend-Tell has one map per word). `encoded`: the photo's trunk output
    (1, h*w, C) when the caller has it (`encoder.trunk`), so that the photo is not encoded again."""
    if not isinstance(model.decoder, TransformerDecoder):
        return None
    vocabulary = model.vocabulary_in_use  # a named object's new word included
    ids = [vocabulary.start_id, *(vocabulary.index(word) for word in words[:-1])]  # <start> and all but the last word
    inputs = torch.tensor([ids], device=model.device)  # (1, n)
    with torch.inference_mode():
        features = model.features(model_input(model, image) if encoded is None else encoded)  # (1, L, D)
        return model.decoder_in_use.all_maps(features, inputs)[0, : len(words)].float().cpu()  # (n, layers, heads, L)


@dataclass(frozen=True)
class HeadChoice:
    """One of a Transformer's cross-attention maps: a layer's heads averaged (`head` None) or one head, both counted
    from 0, as `TransformerDecoder.map_layer` and `map_head` choose the one its search records."""

    layer: int
    head: int | None = None

    @property
    def label(self) -> str:
        """How a person reads it, counting from 1: "layer 2, heads averaged", "layer 2, head 7"."""
        which = "heads averaged" if self.head is None else f"head {self.head + 1}"
        return f"layer {self.layer + 1}, {which}"

    def of(self, heads: Tensor) -> Tensor:
        """This map from every layer's and head's maps (..., layers, heads, L) -> (..., L)."""
        layer = heads[..., self.layer, :, :]  # (..., heads, L)
        return layer.mean(dim=-2) if self.head is None else layer[..., self.head, :]


def head_choices(model: CaptioningModule) -> list[HeadChoice]:
    """Every map a caption's overlays may show for this model: each layer's heads averaged, then each of its heads,
    layer by layer; none for a decoder with one map per word (Show-Attend-Tell)."""
    decoder = model.decoder
    if not isinstance(decoder, TransformerDecoder):
        return []
    return [HeadChoice(layer, head) for layer in range(len(decoder.blocks)) for head in (None, *range(decoder.heads))]


def own_head(model: CaptioningModule) -> HeadChoice | None:
    """The map a Transformer's search records (its `map_layer` and `map_head`); None for Show-Attend-Tell."""
    decoder = model.decoder
    if not isinstance(decoder, TransformerDecoder):
        return None
    return HeadChoice(decoder.map_layer % len(decoder.blocks), decoder.map_head)


class UnknownWordsError(ValueError):
    """A caption to follow has words the model's vocabulary lacks; `words` lists them, in caption order."""

    def __init__(self, words: Sequence[str], vocabulary: Sequence[str]) -> None:
        self.words = list(words)
        self.vocabulary = list(vocabulary)  # the words it does know, in vocabulary order
        self.known = ", ".join(self.vocabulary)
        super().__init__(
            f"the model does not know {', '.join(map(repr, self.words))}: write the caption with its words ({self.known})"
        )


def follow_caption(
    model: CaptioningModule, image: Image.Image, caption: str, *, max_words: int = 40
) -> tuple[list[str], Tensor]:
    """Where the model looks at each word of a caption it is given (teacher forcing, as attention correctness is
    measured): the caption's words and the attention row (n_words, L) with which the model would say each one.

    The row of word t is computed from the words before it, as when the model speaks, so two models followed
    on the same caption have maps that line up word by word whatever they would have said themselves.

    Raises:
        ValueError: the caption has no word (letters or digits), or more than `max_words`.
        UnknownWordsError: some words are not in the model's vocabulary (it has no embedding for them).
    """
    words = tokenize(caption)
    if not words:
        raise ValueError("the caption to follow is empty: type the words the models should follow")
    if len(words) > max_words:
        raise ValueError(f"the caption to follow has {len(words)} words; shorten it to at most {max_words}")
    vocabulary = model.vocabulary
    unknown = list(dict.fromkeys(word for word in words if word not in vocabulary))
    if unknown:
        raise UnknownWordsError(unknown, [t for t in vocabulary.tokens if t not in vocabulary.SPECIALS])
    ids = torch.tensor([[vocabulary.start_id, *(vocabulary.index(word) for word in words)]], device=model.device)
    with torch.inference_mode():
        features = model.features(model_input(model, image))  # (1, L, D)
        forced = model.decoder(features, ids, model.attention.inference_read())  # inputs <start> w1 .. wn
    return words, forced.weights[0, : len(words)]  # (n_words, L); the last input's row, for <end>, is left out
