"""Questions and answers in the VQA v2 JSON layout: real VQA v2 on COCO images, and DAQUAR converted to it.

A split is a question file `{"questions": [{"question_id", "image_id", "question"}]}`, an optional
annotation file `{"annotations": [{"question_id", "image_id", "answers": [{"answer", ...}],
"multiple_choice_answer", "answer_type", "question_type"}]}` (VQA v2 test-dev has none) and an image file
name pattern such as "train2014/COCO_train2014_{image_id:012d}.jpg". Files are read when their split is
first asked for, so a user who downloaded only train and val can still use both (VQA v2's train
annotations alone take seconds to parse).

`Vqa2` and `Daquar` are `Vqa2Questions` with each dataset's file names as defaults, so a LightningCLI
config needs only `root`.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PIL import Image

from data.question_sets import IMAGE_PATTERN, SPLITS, annotation_file, photo_file, question_file
from data.errors import DatasetFormatError
from data.images import load_image
from data.json_files import read_json_object
from data.vqa import VqaDataset, VqaSample


@dataclass(frozen=True)
class Vqa2Split:
    """The files of one split, relative to the dataset root.

    Args:
        questions: the question file.
        annotations: the annotation file, or None when the split's answers are not public; its questions
            then have no answers (`VqaSample.answers == ()`).
        images: the image file of a question, as a `str.format` pattern of the integer `image_id`
            (for example "val2014/COCO_val2014_{image_id:012d}.jpg").
    """

    questions: str
    annotations: str | None
    images: str


VQA2_TRAIN = Vqa2Split(
    questions="v2_OpenEnded_mscoco_train2014_questions.json",
    annotations="v2_mscoco_train2014_annotations.json",
    images="train2014/COCO_train2014_{image_id:012d}.jpg",
)
VQA2_VAL = Vqa2Split(
    questions="v2_OpenEnded_mscoco_val2014_questions.json",
    annotations="v2_mscoco_val2014_annotations.json",
    images="val2014/COCO_val2014_{image_id:012d}.jpg",
)
VQA2_TEST_DEV = Vqa2Split(
    questions="v2_OpenEnded_mscoco_test-dev2015_questions.json",
    annotations=None,
    images="test2015/COCO_test2015_{image_id:012d}.jpg",
)
DAQUAR_TRAIN = Vqa2Split(
    questions="daquar_train_questions.json",
    annotations="daquar_train_annotations.json",
    images="images/image{image_id}.jpg",
)
DAQUAR_TEST = Vqa2Split(
    questions="daquar_test_questions.json",
    annotations="daquar_test_annotations.json",
    images="images/image{image_id}.jpg",
)


class Vqa2Questions(VqaDataset):
    """Questions, answers and images of any dataset in the VQA v2 layout.

    Questions keep the question file's order. Every question must have exactly one annotation (same
    question and image id) and every annotation a question; otherwise the split is refused with a
    DatasetFormatError naming the file and the entry, since a silently dropped question would change
    the reported accuracy. Image ids are the files' integer ids as strings; an id must name the same
    image file in every split it occurs in.

    Args:
        root: the dataset folder; every file name is relative to it.
        splits: split name -> its files.
        name: a short name for the images (part of the feature-cache key).
    """

    def __init__(self, *, root: Path, splits: dict[str, Vqa2Split], name: str) -> None:
        self._root = Path(root)
        if not self._root.is_dir():
            raise FileNotFoundError(f"VQA dataset folder not found: {self._root}; pass it as root")
        if not splits:
            raise ValueError("give at least one split")
        for split, files in splits.items():
            _check_pattern(split, files.images)
        self._files = dict(splits)
        self._name = name
        self._questions: dict[str, list[VqaSample]] = {}
        self._paths: dict[str, Path] = {}  # image id -> file, for the splits read so far

    @property
    def name(self) -> str:
        return self._name

    @property
    def splits(self) -> tuple[str, ...]:
        return tuple(self._files)

    def questions(self, split: str) -> list[VqaSample]:
        self._check_split(split)
        if split not in self._questions:
            self._questions[split] = self._read(split)
        return list(self._questions[split])

    def image_path(self, image_id: str) -> Path:
        """The file of an image id of any split (splits are read until one has it)."""
        for split in self.splits:
            if image_id in self._paths:
                break
            self.questions(split)
        if image_id not in self._paths:
            raise ValueError(f"image id {image_id!r} is in none of the splits {', '.join(self.splits)} of {self._name}")
        return self._paths[image_id]

    def load(self, image_id: str) -> Image.Image:
        return load_image(self.image_path(image_id))

    def _read(self, split: str) -> list[VqaSample]:
        """Read one split's files and join each question with its annotation (if the split has them)."""
        files = self._files[split]
        questions = _JsonFile(self._existing(split, files.questions))
        annotations = None if files.annotations is None else _JsonFile(self._existing(split, files.annotations))
        unmatched = {} if annotations is None else annotations.annotations()
        samples = []
        for where, question_id, image_id, text in questions.questions():
            self._add_path(str(image_id), self._root / files.images.format(image_id=image_id), questions)
            if annotations is None:
                samples.append(_unanswered(question_id, str(image_id), text))
                continue
            annotation = unmatched.pop(question_id, None)
            if annotation is None:
                raise annotations.error(f"has no annotation for question {question_id} ({where} of {questions.path})")
            if annotation.image_id != image_id:
                raise annotations.error(
                    f"{annotation.where} puts question {question_id} on image {annotation.image_id}, but {where} "
                    f"of {questions.path} puts it on image {image_id}"
                )
            try:
                samples.append(annotation.sample(question_id, str(image_id), text))
            except ValueError as error:
                raise annotations.error(f"{annotation.where}: {error}") from error
        if annotations is not None and unmatched:
            extra = next(iter(unmatched.values()))
            raise annotations.error(f"{extra.where} is for a question that {questions.path} does not have")
        return samples

    def _existing(self, split: str, name: str) -> Path:
        path = self._root / name
        if not path.is_file():
            raise FileNotFoundError(
                f"VQA file not found: {path} (split {split!r} of {type(self).__name__} with root {self._root}); "
                "check root and the split's file names"
            )
        return path

    def _add_path(self, image_id: str, path: Path, source: _JsonFile) -> None:
        known = self._paths.setdefault(image_id, path)
        if known != path:
            raise source.error(f"image {image_id} is {path} here but {known} in another split; ids must be unique")


class Vqa2(Vqa2Questions):
    """Real VQA v2 (COCO 2014 images): official train/val, and test-dev questions without answers.

    Args:
        root: the folder holding the JSON files and the train2014/val2014/test2015 image folders.
        train, val, test: each split's files; set test to None to leave test-dev out.
        name: a short name for the images (part of the feature-cache key).
    """

    def __init__(
        self,
        *,
        root: Path,
        train: Vqa2Split = VQA2_TRAIN,
        val: Vqa2Split = VQA2_VAL,
        test: Vqa2Split | None = VQA2_TEST_DEV,
        name: str = "vqa2",
    ) -> None:
        splits = {"train": train, "val": val} | ({} if test is None else {"test": test})
        super().__init__(root=root, splits=splits, name=name)


class Daquar(Vqa2Questions):
    """DAQUAR ("all", 894 answers) converted to the VQA v2 layout: the official train/test split.

    DAQUAR has one answer per question (repeated 10 times in the files); a multi-object answer is one
    comma-separated string such as "table, chair", kept as it is.

    `single_word_answers` keeps only the questions whose answer is one word (about 90% of each split): the
    protocol of the DAQUAR-ALL results of the SAN paper (Yang et al. 2016), which follows Ask Your Neurons'
    single-word setting and Ma et al. and excludes the list answers from training and test alike. Its 29.3 is
    on that subset, so it is the setting to compare with it. A multi-word object is one word in DAQUAR
    ("garbage_bin"); a list has commas.

    DAQUAR has no validation split, so settings cannot be chosen on it without looking at test. `val_images`
    N > 0 holds N training photos out as a "val" split: their questions leave "train", so a setting is chosen
    on "val" (`--data.val_split val`) and the final model is then trained on the whole training split. The
    held-out photos are the N training image ids with the smallest SHA-256 of the id: a fixed choice that
    does not depend on the order of the files.

    Args:
        root: the folder holding the daquar_*.json files and images/.
        train, test: each split's files.
        val_images: how many training photos make the "val" split (0: none, the official two splits).
        single_word_answers: keep only the questions with a one-word answer, in every split (the SAN paper's
            protocol); the held-out photos are the same either way.
        name: a short name for the images (part of the feature-cache key).
    """

    def __init__(
        self,
        *,
        root: Path,
        train: Vqa2Split = DAQUAR_TRAIN,
        test: Vqa2Split = DAQUAR_TEST,
        val_images: int = 0,
        single_word_answers: bool = False,
        name: str = "daquar",
    ) -> None:
        if val_images < 0:
            raise ValueError(f"val_images is a number of training photos, 0 or more; got {val_images}")
        super().__init__(root=root, splits={"train": train, "test": test}, name=name)
        self._val_images = val_images
        self._single_word_answers = single_word_answers

    @property
    def splits(self) -> tuple[str, ...]:
        return ("train", "val", "test") if self._val_images else ("train", "test")

    def questions(self, split: str) -> list[VqaSample]:
        self._check_split(split)
        if self._val_images and split != "test":
            training = super().questions("train")
            held_out = self._held_out(training)
            samples = [sample for sample in training if (sample.image_id in held_out) == (split == "val")]
        else:
            samples = super().questions(split)
        if self._single_word_answers:
            samples = [sample for sample in samples if "," not in sample.answer]
        return samples

    def _held_out(self, training: list[VqaSample]) -> set[str]:
        photos = sorted({sample.image_id for sample in training}, key=lambda i: hashlib.sha256(i.encode()).hexdigest())
        if self._val_images >= len(photos):
            raise ValueError(
                f"val_images={self._val_images} would hold out all {len(photos)} training photos of {self.name}; "
                "give fewer (about 15%, such as 119 of DAQUAR's 794)"
            )
        return set(photos[: self._val_images])


@dataclass(frozen=True)
class _Annotation:
    """The answers to one question, as read from an annotation file (`where` locates the entry)."""

    where: str
    image_id: int
    answers: tuple[str, ...]
    answer: str
    answer_type: str
    question_type: str

    def sample(self, question_id: int, image_id: str, question: str) -> VqaSample:
        return VqaSample(
            question_id=question_id,
            image_id=image_id,
            question=question,
            answers=self.answers,
            answer=self.answer,
            answer_type=self.answer_type,
            question_type=self.question_type,
        )


class _JsonFile:
    """One question or annotation file, read and checked entry by entry; errors name the file and entry."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._document = read_json_object(path)

    def questions(self) -> list[tuple[str, int, int, str]]:
        """(where, question id, image id, question text) of each question, in file order."""
        result = []
        seen: dict[int, str] = {}
        for where, entry in self._entries("questions"):
            question_id = self._field(entry, where, "question_id", int)
            if question_id in seen:
                raise self.error(f"{where} repeats question id {question_id} of {seen[question_id]}")
            seen[question_id] = where
            image_id = self._field(entry, where, "image_id", int)
            result.append((where, question_id, image_id, self._field(entry, where, "question", str)))
        return result

    def annotations(self) -> dict[int, _Annotation]:
        """Question id -> its annotation, in file order."""
        result: dict[int, _Annotation] = {}
        for where, entry in self._entries("annotations"):
            question_id = self._field(entry, where, "question_id", int)
            if question_id in result:
                first = result[question_id].where
                raise self.error(f"{where} repeats the annotation of question {question_id} ({first})")
            result[question_id] = _Annotation(
                where=where,
                image_id=self._field(entry, where, "image_id", int),
                answers=self._answers(entry, where),
                answer=self._field(entry, where, "multiple_choice_answer", str),
                answer_type=self._field(entry, where, "answer_type", str),
                question_type=self._field(entry, where, "question_type", str),
            )
        return result

    def error(self, problem: str) -> DatasetFormatError:
        return DatasetFormatError(f"{self.path}: {problem}")

    def _answers(self, entry: dict[str, Any], where: str) -> tuple[str, ...]:
        """The "answer" of each object in the entry's "answers" list (the human answers, in file order)."""
        answers = []
        for k, answer in enumerate(self._field(entry, where, "answers", list)):
            at = f"{where}.answers[{k}]"
            answers.append(self._field(self._object(answer, at), at, "answer", str))
        if not answers:
            raise self.error(f"{where}.answers is empty; an annotation needs the human answers it is scored against")
        return tuple(answers)

    def _entries(self, key: str) -> list[tuple[str, dict[str, Any]]]:
        """("key[n]", entry) for each object of the top-level list `key`."""
        entries = self._document.get(key)
        if not isinstance(entries, list):
            raise self.error(f"has no {key!r} list at the top level; is this a VQA v2 {key[:-1]} file?")
        return [(f"{key}[{n}]", self._object(entry, f"{key}[{n}]")) for n, entry in enumerate(entries)]

    def _object(self, entry: Any, where: str) -> dict[str, Any]:
        if not isinstance(entry, dict):
            raise self.error(f"{where} is a {type(entry).__name__}, not an object")
        return entry

    def _field(self, entry: dict[str, Any], where: str, key: str, kind: type) -> Any:
        if key not in entry:
            raise self.error(f"{where} has no {key!r}")
        value = entry[key]
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise self.error(f"{where}.{key} is a {type(value).__name__}, expected a {kind.__name__}")
        return value


def _unanswered(question_id: int, image_id: str, question: str) -> VqaSample:
    """A question of a split whose answers are not public."""
    return VqaSample(
        question_id=question_id,
        image_id=image_id,
        question=question,
        answers=(),
        answer="",
        answer_type="",
        question_type="",
    )


def _check_pattern(split: str, pattern: str) -> None:
    """Refuse an image pattern that `str.format(image_id=...)` cannot fill, before any file is read."""
    try:
        pattern.format(image_id=0)
    except (KeyError, IndexError, ValueError) as error:
        raise ValueError(
            f"split {split!r}: image pattern {pattern!r} must use only the field {{image_id}} ({error!r})"
        ) from error


class Flickr8kQa(Vqa2Questions):
    """Flickr8k-QA: questions formed from Flickr8k's captions by COCO-QA's four rules (object, number, color,
    location), written by `python -m vqa.caption_questions` in the VQA v2 layout with Flickr8k's train/val/test
    photo split (`data.caption_questions`). One answer per question, repeated 10 times, as DAQUAR's.

    Args:
        root: the folder the command wrote: flickr8k_qa_{train,val,test}_*.json and images/ (links to the photos).
        name: a short name for the images (part of the feature-cache key).
    """

    def __init__(self, *, root: Path, name: str = "flickr8k-qa") -> None:
        splits = {
            split: Vqa2Split(questions=question_file(split), annotations=annotation_file(split), images=IMAGE_PATTERN)
            for split in SPLITS
        }
        super().__init__(root=root, splits=splits, name=name)
        self._photos: dict[str, list[str]] = {}

    def image_ids(self, split: str) -> list[str]:
        """Every photo of the caption split, asked about or not (its photo file), so that the feature cache keeps
        its images when the questions change."""
        self._check_split(split)
        if split not in self._photos:
            path = self._existing(split, photo_file(split))
            ids = read_json_object(path).get("image_ids")
            if not isinstance(ids, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
                raise DatasetFormatError(f"{path}: expected {{'image_ids': [integer, ...]}}")
            self._photos[split] = [str(i) for i in ids]
            missing = {s.image_id for s in self.questions(split)} - set(self._photos[split])
            if missing:
                raise DatasetFormatError(f"{path}: lacks photo {min(missing)}, which a question of {split} is about")
        return list(self._photos[split])

    def image_path(self, image_id: str) -> Path:
        return self._root / IMAGE_PATTERN.format(image_id=image_id)
