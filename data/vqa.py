"""The common shape of a VQA dataset: splits of questions about images, each with its answers.

Every reader (VQA v2 JSON, which also holds DAQUAR; the easy-VQA package; the synthetic ShapesWorld-VQA)
returns the same records, so the VQA model and its metrics never need to know where a question came from.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from pathlib import Path

from PIL import Image

from data.dataset import Box, SplitDataset

# The three answer types of VQA v2, the breakdown its accuracy is reported by.
ANSWER_TYPES: tuple[str, ...] = ("yes/no", "number", "other")
# VQA v2 collects 10 human answers per question, and its accuracy (min(#humans who gave the answer / 3, 1),
# averaged over the 10 leave-one-out subsets) is defined over them.
HUMAN_ANSWERS = 10


def repeated_answer(answer: str) -> tuple[str, ...]:
    """The human answers of a single-answer dataset: its one answer, HUMAN_ANSWERS times.

    With ten identical answers the VQA accuracy of a prediction is exactly 1 (right) or 0 (wrong), so
    single-answer datasets are scored the way their own papers score them, by the same metric code.
    """
    return (answer,) * HUMAN_ANSWERS


@dataclass(frozen=True)
class VqaSample:
    """One question about one image, and its answers.

    Args:
        question_id: identifier unique within the dataset (used in result files).
        image_id: the image the question is about, unique within the dataset (feature-cache key).
        question: the raw question text.
        answers: the human answers (10 for VQA v2; single-answer datasets repeat theirs, see
            `repeated_answer`); empty for questions whose answers are not public (VQA v2 test-dev).
        answer: the label to train on: VQA v2's majority ("multiple choice") answer; "" when unknown.
        answer_type: one of ANSWER_TYPES; "" when the answers are unknown.
        question_type: the question's family, such as VQA v2's "what color is the" (its first words) or a
            ShapesWorld-VQA family name; "" when unknown.
        regions: the boxes of the objects the question is about, where the dataset knows them (for
            two-step questions every object involved, the reference first); empty otherwise.
    """

    question_id: int
    image_id: str
    question: str
    answers: tuple[str, ...]
    answer: str
    answer_type: str
    question_type: str
    regions: tuple[Box, ...] = ()

    def __post_init__(self) -> None:
        known = self.answer_type in ANSWER_TYPES
        unknown = self.answer_type == "" and self.answer == "" and not self.answers
        if not (known or unknown):
            raise ValueError(
                f"question {self.question_id} has answer type {self.answer_type!r}; expected one of "
                f"{', '.join(ANSWER_TYPES)} (or '' with no answers, for an unannotated question)"
            )


class VqaDataset(SplitDataset):
    """A VQA dataset split into named parts ("train", "val", "test", ...): questions about images, with answers."""

    @abc.abstractmethod
    def questions(self, split: str) -> list[VqaSample]:
        """The questions of one split, in a fixed order. Raises ValueError naming the known splits."""

    @abc.abstractmethod
    def load(self, image_id: str) -> Image.Image:
        """The image as an RGB PIL image; files go through `data.images.load_image` (ImageLoadError)."""

    def image_path(self, image_id: str) -> Path | None:
        """The file the image is read from; None (this default) for images made in memory. The feature cache
        keys on the file's size and modification time, so replaced photos are encoded again."""
        return None

    def image_ids(self, split: str) -> list[str]:
        """The distinct images that the split's questions are about, in order of their first question."""
        return list(dict.fromkeys(sample.image_id for sample in self.questions(split)))
