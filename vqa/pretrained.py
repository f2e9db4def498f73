"""Visual question answering from Python: `Answerer` loads a bundled or trained model, `Answer` is one result.

    from vqa import Answerer

    answerer = Answerer.from_pretrained("daquar-san")           # or Answerer.from_checkpoint("runs/.../best.ckpt")
    answer = answerer.ask("coffee.png", "what is on the table?", top_k=5)
    answer.answers                                               # [(answer, probability), ...], best first
    answer.hops                                                  # (K, rows, columns): where each hop looked
    answer.save("answer/")                                       # what `python -m vqa.export` writes

Answers are the model's labels, as answer.json keeps them ("tissue_roll"); `vqa.answers.answer_words` turns one
into words. The pictures and files come from `vqa.overlays`, so they are those of the export command and the app, which
both answer through this class.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from pathlib import Path

import torch
from PIL import Image
from torch import Tensor

from core.maps.overlays import DisplayScale, FixedScale, heat_maps, overlay
from core.model.pretrained import ImageInput, PretrainedModel, as_photo, bundled_name, find_model
from data.images import load_image
from vqa.bundled import MODELS
from vqa.module import VqaModule
from vqa.overlays import write_answer_overlays
from vqa.questions import cut_notice


@dataclass(frozen=True)
class Answer:
    """The model's answers to one question about one photo, and where each attention hop looked."""

    question: str
    answers: list[tuple[str, float]]  # (answer label, probability), most probable first
    hops: Tensor  # (K, rows, columns) float32; each hop's map sums to 1
    source: str  # the photo's path, or "" for a PIL image: what answer.json calls it
    given: Image.Image | None = field(default=None, repr=False)  # the PIL image given (as RGB), None for a path
    notice: str | None = None  # what was left unread of a question longer than the model reads (`cut_notice`)

    def photo(self) -> Image.Image:
        """The photo as RGB at its own size: the PIL image given, or the file read again (as `Caption.photo`)."""
        return self.given if self.given is not None else load_image(self.source)

    def overlays(self, *, scale: DisplayScale = FixedScale()) -> list[Image.Image]:
        """One picture per hop: its attention map drawn over the photo, at the photo's size, on `scale` (by
        default the same fixed scale for every hop; `core.maps.overlays.PerMapStretch()` stretches each map)."""
        picture = self.photo()
        grid = tuple(self.hops.shape[-2:])  # (rows, columns)
        maps = heat_maps(self.hops.flatten(1), grid, picture.size, scale)  # K maps (height, width)
        return [overlay(picture, heat) for heat in maps]

    def save(self, folder: str | Path, *, scale: DisplayScale = FixedScale()) -> dict:
        """Write the files `python -m vqa.export` writes (hop_1.png, ..., grid.png, answer.json) into folder,
        created when missing, drawn on `scale` (as `overlays`). Returns the answer.json record."""
        return write_answer_overlays(
            self.photo(),
            question=self.question,
            answers=self.answers,
            weights=self.hops.flatten(1),
            grid=tuple(self.hops.shape[-2:]),
            out_dir=Path(folder),
            source=self.source,
            scale=scale,
        )


class Answerer:
    """A VQA model ready to answer questions about photos.

    Args:
        model: a trained `VqaModule` (`from_pretrained` and `from_checkpoint` load one).
        metadata: what the registry says about the model, when it is a bundled one.
    """

    def __init__(self, *, model: VqaModule, metadata: PretrainedModel | None = None) -> None:
        self.model = model.eval()
        self.metadata = metadata

    @classmethod
    def load(cls, model: str | Path, **options) -> Answerer:
        """A bundled model by name or a checkpoint by path, as every command takes a model.

        Raises:
            FileNotFoundError: neither a file nor a bundled model's name (the message lists the names).
        """
        name = bundled_name(cls.available(), model)
        return cls.from_checkpoint(model, **options) if name is None else cls.from_pretrained(name, **options)

    @classmethod
    def from_pretrained(cls, name: str, *, device: str | torch.device = "cpu") -> Answerer:
        """A bundled model by name: one of `Answerer.available()` ("flickr8k-qa-san", "daquar-san", "shapes-san").

        Raises:
            core.model.pretrained.UnknownModelError: no bundled model has that name (the message lists those there are).
        """
        metadata = find_model(MODELS, name)
        return cls(model=VqaModule.load(metadata.file, map_location=device), metadata=metadata)

    @classmethod
    def from_checkpoint(cls, path: str | Path, *, device: str | torch.device = "cpu") -> Answerer:
        """A model from any VQA checkpoint this project wrote; `VqaModule.load` says why when the file is
        missing or is not one."""
        return cls(model=VqaModule.load(path, map_location=device))

    @staticmethod
    def available() -> dict[str, PretrainedModel]:
        """The bundled models by name, with their data, test scores, training commands, licence, encoder and grid."""
        return dict(MODELS)

    def ask(self, image: ImageInput, question: str, *, top_k: int = 5, warn: bool = True) -> Answer:
        """Answer a typed question about a photo. A question longer than the model reads is answered from its
        first words, with a warning that says so (and the answer's `notice`).

        Args:
            image: a path or a PIL image.
            question: the question, as a person would type it.
            top_k: how many answers to keep, most probable first.
            warn: warn of a question that was cut; False for a caller that tells its user `notice` its own way (the
                export command on stderr, the app in its page).

        Raises:
            data.images.ImageLoadError: the path is missing or not a readable image (the message names it).
            vqa.questions.QuestionError: the question is empty or made only of words the model does not know.
        """
        picture, source = as_photo(image)
        model = self.model
        with torch.inference_mode():
            answered = model.answer(model.encoder.transform()(picture).to(model.device), question, top=top_k)
        notice = cut_notice(question, max_length=model.hparams.max_question_length)
        if notice is not None and warn:
            warnings.warn(notice, stacklevel=2)
        hops = answered.weights.float().cpu().reshape(-1, *model.encoder.grid_shape)
        given = None if source else picture
        return Answer(
            question=question, answers=answered.answers, hops=hops, source=source, given=given, notice=notice
        )
