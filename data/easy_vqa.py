"""easy-VQA (V. Zhou, 2020): 64x64 images of one coloured shape, with simple questions, from its PyPI package.

The `easy-vqa` package ships the whole dataset (question files and 5000 PNG images), so this reader works
offline: 4000 train images / 38575 questions and 1000 test images / 9673 questions, 13 answers (yes, no,
3 shapes, 8 colours). It is an external benchmark that every machine can install, small enough to train on
a CPU.

Choices made here, since the package gives only (question, answer, image number) triples:
- one answer per question, repeated as the 10 human answers (`data.vqa.repeated_answer`), as for DAQUAR;
- answer type "yes/no" for yes/no answers, "other" for shapes and colours (there are no counts);
- question type: a family read from the question text (`question_family`);
- train and test both number their images from 0, so image ids are "train-<n>" / "test-<n>";
- question ids: train question n is n, test question n is TEST_QUESTION_IDS + n;
- an optional "val" split: the questions on the `val_images` highest-numbered train images, taken out of
  train (images were generated at random, so these are a random sample, and no image is in both).
"""

from __future__ import annotations

import re
from pathlib import Path
from types import ModuleType

from PIL import Image

from data.errors import DatasetFormatError
from data.images import load_image
from data.vqa import VqaDataset, VqaSample, repeated_answer

# The package's shapes and the yes/no answers; every other answer is a colour.
SHAPES: tuple[str, ...] = ("circle", "rectangle", "triangle")
YES_NO: tuple[str, ...] = ("yes", "no")
FAMILIES: tuple[str, ...] = (
    "what colour",  # what color is the circle? / what is the color of the shape?
    "what shape",  # what is the blue shape? / what shape is present?
    "colour existence",  # is there a red shape? / does the image contain a red shape?
    "shape existence",  # is there a circle in the image? / is a circle present?
    "colour absence",  # is there not a red shape? / is no red shape present?
    "shape absence",  # does the image not contain a circle?
)
TEST_QUESTION_IDS = 1_000_000  # offset of test question ids, so that ids are unique across splits


def question_family(question: str) -> str:
    """The family (one of FAMILIES) of an easy-VQA question, from its words alone.

    "what ..." questions ask for a colour when they say "color", else for a shape; the others ask whether
    a shape (when they name one) or a colour is present, negated ("absence") when they say "not" or "no".
    """
    words = set(re.findall(r"[a-z]+", question.lower()))
    if "what" in words:
        return "what colour" if "color" in words else "what shape"
    subject = "shape" if words & set(SHAPES) else "colour"
    return f"{subject} {'absence' if words & {'not', 'no'} else 'existence'}"


class EasyVqa(VqaDataset):
    """The easy-VQA questions and images installed with the `easy-vqa` package.

    Splits are "train" and "test" (the official ones), plus "val" between them when `val_images` > 0.

    Args:
        val_images: how many train images (the highest-numbered) form a "val" split; 0 for none.
    """

    def __init__(self, *, val_images: int = 0) -> None:
        package = _package()
        train_files = package.get_train_image_paths()  # image number -> file
        if not 0 <= val_images < len(train_files):
            raise ValueError(f"val_images must be in 0..{len(train_files) - 1}, got {val_images}")
        self._paths = {f"train-{n}": Path(path) for n, path in train_files.items()}
        self._paths |= {f"test-{n}": Path(path) for n, path in package.get_test_image_paths().items()}
        train = self._read("train", package.get_train_questions(), first_id=0)
        test = self._read("test", package.get_test_questions(), first_id=TEST_QUESTION_IDS)
        val_ids = {f"train-{n}" for n in sorted(train_files)[len(train_files) - val_images :]}
        self._questions = {"train": [q for q in train if q.image_id not in val_ids]}
        if val_images:
            self._questions["val"] = [q for q in train if q.image_id in val_ids]
        self._questions["test"] = test

    @property
    def name(self) -> str:
        return "easy-vqa"

    @property
    def splits(self) -> tuple[str, ...]:
        return tuple(self._questions)

    def questions(self, split: str) -> list[VqaSample]:
        self._check_split(split)
        return list(self._questions[split])

    def image_path(self, image_id: str) -> Path:
        if image_id not in self._paths:
            raise ValueError(f"{image_id!r} is not an easy-VQA image id like 'train-17' or 'test-3'")
        return self._paths[image_id]

    def load(self, image_id: str) -> Image.Image:
        return load_image(self.image_path(image_id))

    def _read(self, source: str, triples: tuple[list, list, list], *, first_id: int) -> list[VqaSample]:
        """The package's (texts, answers, image numbers) lists of one source split, as samples."""
        texts, answers, images = triples
        where = f"easy_vqa/data/{source}/questions.json"
        if not len(texts) == len(answers) == len(images):
            raise DatasetFormatError(f"{where}: {len(texts)} questions, {len(answers)} answers, {len(images)} images")
        samples = []
        for n, (text, answer, image) in enumerate(zip(texts, answers, images)):
            image_id = f"{source}-{image}"
            if image_id not in self._paths:
                raise DatasetFormatError(f"{where}: question {n} is about image {image}, which has no file")
            samples.append(
                VqaSample(
                    question_id=first_id + n,
                    image_id=image_id,
                    question=text,
                    answers=repeated_answer(answer),
                    answer=answer,
                    answer_type="yes/no" if answer in YES_NO else "other",
                    question_type=question_family(text),
                )
            )
        return samples


def _package() -> ModuleType:
    """The installed `easy_vqa` package, or an ImportError that says how to install it."""
    try:
        from easy_vqa import easy_vqa
    except ImportError as error:
        raise ImportError("EasyVqa needs the easy-vqa package: pip install easy-vqa") from error
    return easy_vqa
