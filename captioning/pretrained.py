"""Captioning from Python: `Captioner` loads a bundled or trained model and captions photos, `Caption` is one result.

    from captioning import Captioner

    captioner = Captioner.from_pretrained("flickr8k-soft")     # or Captioner.from_checkpoint("runs/.../best.ckpt")
    result = captioner.caption("coffee.png", beam_size=3)       # a path, a PIL image, or a list of either
    result.text, result.words, result.attention                 # attention: (len(words), rows, columns)
    result.heads                       # a Transformer's every layer and head: (len(words), layers, heads, L)
    result.tags                        # what the encoder's ImageNet head saw: [Tag("coffee", 0.85, ...), ...]
    result.save("overlays/coffee")                              # what `python -m captioning.export` writes
    captioner.follow("coffee.png", "a cup of coffee")           # where it looks at each word of a given caption

A model whose encoder ships the ImageNet head (EfficientNet-Lite: every real-photo model here) names objects by
default (`captioning.naming`): the head's confident tags must be said, in words the captions never had included;
`name_objects=False` captions with the trained vocabulary alone.

A list of photos is captioned in batches (the encoder and the beam search each take a batch at a time), which is
faster than one call per photo (`benchmarks/python_api.py`). The pictures and files come from
`captioning.overlays`, so they are those of the export command and the app, which both caption through this class.
The steps for one photo are `captioning.inference`'s.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import overload

import torch
from PIL import Image
from torch import Tensor

from captioning.bundled import MODELS, SCORE_MODELS
from captioning.inference import HeadChoice, every_head, follow_caption, head_choices, own_head
from captioning.module import CaptioningModule
from captioning.naming import DEFAULT_NAMING, ObjectNaming
from captioning.overlays import CaptionOverlays
from core.model.encoder import EfficientNetLite
from core.model.imagenet import Tag
from core.maps.overlays import DisplayScale, FixedScale
from core.model.pretrained import ImageInput, PretrainedModel, as_photo, bundled_name, find_model
from data.images import load_image


@dataclass(frozen=True)
class Caption:
    """One photo's caption and where the model looked at each of its words.

    A photo given as a path is not kept: `overlays` and `save` read it again (as the export's `OverlayWriter`
    does), so that captioning a list of a thousand photos holds their captions, not their pixels.
    """

    words: list[str]
    attention: Tensor  # (len(words), rows, columns) float32; each word's map sums to 1
    source: str  # the photo's path, or "" for a PIL image: what caption.json calls it
    given: Image.Image | None = field(default=None, repr=False)  # the PIL image given (as RGB), None for a path
    # a Transformer's every layer's and head's map of each word, (len(words), layers, heads, L), what caption.json
    # holds as "heads" (`captioning.inference.every_head`); None for Show-Attend-Tell, which has one map per word
    heads: Tensor | None = field(default=None, repr=False)
    # the words the encoder's ImageNet head found in the photo, most probable first (`captioning.naming`): what
    # caption.json holds as "tags"; None when objects were not named
    tags: list[Tag] | None = None

    @property
    def text(self) -> str:
        """The caption as one string."""
        return " ".join(self.words)

    @property
    def details(self) -> dict:
        """What caption.json holds beyond the words and their maps: for a Transformer, every layer's and head's maps
        as "heads" ([word][layer][head][location]); with object naming, the ImageNet head's "tags" ([{"word",
        "probability", "classes"}], most probable first)."""
        details = {} if self.heads is None else {"heads": self.heads.tolist()}
        if self.tags is not None:
            details["tags"] = [
                {"word": tag.word, "probability": round(tag.probability, 4), "classes": list(tag.classes)}
                for tag in self.tags
            ]
        return details

    def showing(self, choice: HeadChoice) -> Caption:
        """The same caption with another of a Transformer's maps as its attention (one of `Captioner.head_choices`):
        that layer's heads averaged, or one head. Raises ValueError for a caption without heads (Show-Attend-Tell)."""
        if self.heads is None:
            raise ValueError("this caption has one map per word (no Transformer heads) to choose from")
        return replace(self, attention=choice.of(self.heads).reshape(self.attention.shape))

    def overlays(self, *, scale: DisplayScale = FixedScale()) -> list[Image.Image]:
        """One picture per word: its attention map drawn over the photo, at the photo's size, on `scale` (by
        default the same fixed scale for every word; `core.maps.overlays.PerMapStretch()` stretches each map)."""
        return self.draw(scale=scale).pictures

    def save(self, folder: str | Path, *, scale: DisplayScale = FixedScale()) -> dict:
        """Write the files `python -m captioning.export` writes for one photo (an overlay per word, grid.png,
        attention.gif, caption.json) into folder, created when missing, drawn on `scale` (as `overlays`).
        Returns the caption.json record."""
        return self.draw(scale=scale).write(Path(folder), source=self.source, details=self.details)

    def photo(self) -> Image.Image:
        """The photo as RGB at its own size: the PIL image given, or the file read again."""
        return self.given if self.given is not None else load_image(self.source)

    def draw(self, *, scale: DisplayScale = FixedScale()) -> CaptionOverlays:
        """The overlays drawn once in memory, for a caller that shows them before it writes them (the app: JPEG
        previews, then the export files with `write(folder, source=..., details=caption.details)`)."""
        grid = tuple(self.attention.shape[-2:])  # (rows, columns)
        weights = self.attention.flatten(1)  # (n_words, L)
        return CaptionOverlays.draw(self.photo(), words=self.words, weights=weights, grid=grid, scale=scale)


class Captioner:
    """A captioning model ready to caption photos. One captioner may serve several threads (the app's tabs share
    one per model): a call to `caption` holds it while it runs, as the naming it sets is the model's.

    Args:
        model: a trained `CaptioningModule` (`from_pretrained` and `from_checkpoint` load one).
        batch_size: how many photos one batch holds when a list is captioned (more is faster, up to memory).
        metadata: what the registry says about the model, when it is a bundled one.
        naming: how objects are named by default (`captioning.naming.ObjectNaming`; its defaults when the model's
            encoder has an ImageNet head and the model names none of its own); None captions with the trained
            vocabulary alone.
    """

    def __init__(
        self,
        *,
        model: CaptioningModule,
        batch_size: int = 16,
        metadata: PretrainedModel | None = None,
        naming: ObjectNaming | None = None,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, not {batch_size}")
        self.model = model.eval()
        self.batch_size = batch_size
        self.metadata = metadata
        self.naming = naming or model.naming or (DEFAULT_NAMING if self.can_name_objects else None)
        self._lock = threading.Lock()

    @property
    def can_name_objects(self) -> bool:
        """Whether the model's encoder has an ImageNet head to name objects with (EfficientNet-Lite)."""
        return isinstance(self.model.encoder, EfficientNetLite)

    @classmethod
    def load(cls, model: str | Path, **options) -> Captioner:
        """A bundled model by name or a checkpoint by path, as every command takes `--model`.

        Raises:
            FileNotFoundError: neither a file nor a bundled model's name (the message lists the names).
        """
        name = bundled_name(cls.available(), model)
        return cls.from_checkpoint(model, **options) if name is None else cls.from_pretrained(name, **options)

    @classmethod
    def from_pretrained(cls, name: str, *, device: str | torch.device = "cpu", batch_size: int = 16) -> Captioner:
        """A bundled model by name: one of `Captioner.available()` ("flickr8k-soft", "shapes-hard", ...).

        Raises:
            core.model.pretrained.UnknownModelError: no bundled model has that name (the message lists those there are).
        """
        metadata = find_model(cls.available(), name)
        model = CaptioningModule.load(metadata.file, map_location=device)
        return cls(model=model, batch_size=batch_size, metadata=metadata)

    @classmethod
    def from_checkpoint(cls, path: str | Path, *, device: str | torch.device = "cpu", batch_size: int = 16) -> Captioner:
        """A model from any captioning checkpoint this project wrote (a run's best.ckpt, a compact copy, an
        average); `CaptioningModule.load` says why when the file is missing or is not one."""
        return cls(model=CaptioningModule.load(path, map_location=device), batch_size=batch_size)

    @staticmethod
    def available() -> dict[str, PretrainedModel]:
        """The bundled models by name, with their data, test scores, training commands, licence, encoder and grid:
        the four of `captioning.bundled.MODELS`, then the six small ShapesWorld ones of `SCORE_MODELS`, one per
        attention score function."""
        return {**MODELS, **SCORE_MODELS}

    @overload
    def caption(
        self, image: ImageInput, *, beam_size: int | None = None, name_objects: bool | None = None
    ) -> Caption: ...
    @overload
    def caption(
        self, image: Sequence[ImageInput], *, beam_size: int | None = None, name_objects: bool | None = None
    ) -> list[Caption]: ...

    def caption(self, image, *, beam_size=None, name_objects=None):
        """Caption a photo, or a list of photos (then a list of results, in the same order).

        Args:
            image: a path or a PIL image, or a list (or tuple) of them.
            beam_size: the beam width; None takes the model's own (the one its test scores were measured with).
            name_objects: name what the encoder's ImageNet head sees (`captioning.naming`); None: when the
                captioner does by default (`naming`).

        Raises:
            data.images.ImageLoadError: a path is missing or not a readable image (the message names it).
            TypeError: an image is neither a path nor a PIL image.
            ValueError: name_objects=True for a model whose encoder has no ImageNet head.
        """
        if name_objects and not self.can_name_objects:
            raise ValueError(
                f"this model's encoder ({type(self.model.encoder).__name__}) has no ImageNet head to name objects "
                "with: caption with name_objects=False"
            )
        naming = self.naming if name_objects is None else (self.naming or DEFAULT_NAMING) if name_objects else None
        images = list(image) if isinstance(image, (list, tuple)) else [image]
        with self._lock:
            self.model.set_naming(naming)
            captions = [
                caption
                for start in range(0, len(images), self.batch_size)
                for caption in self._caption_batch(images[start : start + self.batch_size], beam_size)
            ]
        return captions if isinstance(image, (list, tuple)) else captions[0]

    def follow(self, image: ImageInput, caption: str, *, max_words: int = 40) -> Caption:
        """Where the model looks at each word of a caption it is given rather than its own (teacher forcing, as
        attention correctness is measured): two models made to follow the same caption have maps that line up word
        by word (`captioning.inference.follow_caption`). The caption is read in the trained vocabulary.

        Raises:
            ValueError: the caption has no word, or more than `max_words`.
            captioning.inference.UnknownWordsError: some of its words are not in the model's vocabulary.
            data.images.ImageLoadError: a path is missing or not a readable image.
        """
        picture, source = as_photo(image)
        words, rows = follow_caption(self.model, picture, caption, max_words=max_words)
        attention = rows.float().cpu().reshape(len(words), *self.model.encoder.grid_shape)
        given = None if source else picture
        heads = every_head(self.model, picture, words)  # None but for a Transformer
        return Caption(words=words, attention=attention, source=source, given=given, heads=heads)

    def head_choices(self) -> list[HeadChoice]:
        """Every map a caption may show (`Caption.showing`): a Transformer's layers' heads averaged and each head,
        layer by layer (`captioning.inference.head_choices`); none for Show-Attend-Tell, one map per word."""
        return head_choices(self.model)

    @property
    def own_head(self) -> HeadChoice | None:
        """The map a Transformer's search records, a caption's `attention`; None for Show-Attend-Tell."""
        return own_head(self.model)

    def _caption_batch(self, images: Sequence[ImageInput], beam_size: int | None) -> list[Caption]:
        """Caption photos as one batch: encoded together, searched together."""
        photos, sources = zip(*(as_photo(image) for image in images))
        model, grid = self.model, self.model.encoder.grid_shape
        transform = model.encoder.transform()
        with torch.inference_mode():
            inputs = torch.stack([transform(picture) for picture in photos]).to(model.device)  # (B, 3, H, W)
            encoded = model.encoder.trunk(inputs)  # (B, h*w, C): encoded once, for the search and a Transformer's heads
            generated = model.generate(encoded, beam_size=beam_size, images=inputs)
        results = []
        tags = generated.tags or [None] * len(photos)
        for index, (picture, source, tokens, weights, photo_tags) in enumerate(
            zip(photos, sources, generated.tokens, generated.weights, tags)
        ):
            words, rows = model.caption_words(tokens, weights)  # rows (n_words, L)
            attention = rows.float().cpu().reshape(len(words), *grid)
            given = None if source else picture
            heads = every_head(model, picture, words, encoded=encoded[index : index + 1])  # None but for a Transformer
            results.append(
                Caption(words=words, attention=attention, source=source, given=given, heads=heads, tags=photo_tags)
            )
        return results

