"""How much of a caption-made question set any model can answer: do two annotators answer alike, and how many of
a model's wrong answers are one word for a person in place of another?

Flickr8k-QA's answers are the words one annotator happened to use (`python -m vqa.caption_questions`). Two measures
say how far a perfect reader of the photo could go on them:

* agreement: every caption of every photo is turned into questions by the set's own rules; where two or more
  captions of a photo give the same question ("where does the dog run?": grass, field), the share of pairs of them
  that give the same answer, per type: a second annotator's accuracy on those questions, with a 95% interval. (The
  set itself drops the questions whose captions disagree, `data.question_sets.photo_questions`; most of its
  questions come from one caption, which a second annotator would answer like these.)
* person words: given a model's answers to the set's test split (`python -m vqa predict ... --writer.output
  answers.json`), per type, the share of its wrong answers that name a person by another word than the caption
  did (WordNet's person.n.01 and its kinds: man, boy, girl, child, person...), and its accuracy were such answers
  right.

    python experiments/answer_agreement.py PATH/TO/flickr8k/dataset_flickr8k.json
    python experiments/answer_agreement.py PATH/TO/flickr8k/dataset_flickr8k.json --set datasets/flickr8k_qa \\
        --answers answers.json

Figures in docs/experiments.md (Flickr8k-QA).
"""

from __future__ import annotations

import json
import math
import sys
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from jsonargparse import ArgumentParser

from core.training.wordnet import ensure_wordnet
from data.caption_questions import QUESTION_TYPES, CaptionReader, Lexicon, WordNetLexicon, caption_questions
from data.errors import DatasetFormatError
from data.question_sets import CaptionedPhoto, annotation_file, karpathy_photos


@dataclass(frozen=True)
class Agreement:
    """How often two captions that ask a photo the same question of one type answer it alike."""

    questions: int  # photo-question pairs asked by two or more captions
    agreement: float  # mean over them of the share of pairs of captions with the same answer
    interval: float  # half-width of its 95% interval (normal approximation over the questions)


def pair_agreement(answers: Sequence[str]) -> float:
    """The share of ordered pairs of two different captions whose answers are the same word."""
    n = len(answers)
    return sum(count * (count - 1) for count in Counter(answers).values()) / (n * (n - 1))


def mean_interval(values: Sequence[float]) -> tuple[float, float]:
    """The mean and the half-width of its 95% interval (1.96 standard errors; 0 for fewer than two values)."""
    mean = sum(values) / len(values)
    if len(values) < 2:
        return mean, 0.0
    variance = sum((v - mean) ** 2 for v in values) / (len(values) - 1)
    return mean, 1.96 * math.sqrt(variance / len(values))


def caption_agreement(photos: Iterable[CaptionedPhoto], *, reader: CaptionReader) -> dict[str, Agreement]:
    """Per question type: `Agreement` over every photo's questions asked by two or more of its captions."""
    by_kind: dict[str, list[float]] = defaultdict(list)
    for photo in photos:
        answers: dict[tuple[str, str], list[str]] = defaultdict(list)  # (kind, question) -> one answer per caption
        for tokens in photo.captions:
            for question in caption_questions(tokens, reader=reader):
                answers[question.kind, question.question].append(question.answer)
        for (kind, _), given in answers.items():
            if len(given) > 1:
                by_kind[kind].append(pair_agreement(given))
    result = {}
    for kind in QUESTION_TYPES:
        if by_kind[kind]:
            mean, interval = mean_interval(by_kind[kind])
            result[kind] = Agreement(len(by_kind[kind]), mean, interval)
    return result


@dataclass(frozen=True)
class PersonWordErrors:
    """A model's answers to one question type, with the wrong ones that swap one person word for another."""

    questions: int
    right: int
    person_for_person: int  # wrong answers where the caption's word and the model's both name a person

    @property
    def accuracy(self) -> float:
        return self.right / self.questions

    @property
    def accuracy_person_words_as_one(self) -> float:
        return (self.right + self.person_for_person) / self.questions


def read_answers(path: Path) -> dict[int, str]:
    """The answers of `python -m vqa predict --writer.output`: [{"question_id", "answer"}, ...]."""
    try:
        rows = json.loads(Path(path).read_text())
        return {int(row["question_id"]): str(row["answer"]) for row in rows}
    except (json.JSONDecodeError, TypeError, KeyError, ValueError) as error:
        raise DatasetFormatError(
            f"{path}: not an answers file of `python -m vqa predict` ([{{'question_id', 'answer'}}, ...]): {error}"
        ) from error


def person_word_errors(
    set_root: Path, answers: Mapping[int, str], *, lexicon: Lexicon, split: str = "test"
) -> dict[str, PersonWordErrors]:
    """Per question type of the set's `split`: the model's `answers` scored against the caption's word.

    Raises:
        DatasetFormatError: an answer is missing for one of the split's questions.
    """
    annotations = json.loads((Path(set_root) / annotation_file(split)).read_text())["annotations"]
    counts: dict[str, Counter] = defaultdict(Counter)
    for annotation in annotations:
        question_id, truth = annotation["question_id"], annotation["multiple_choice_answer"]
        if question_id not in answers:
            raise DatasetFormatError(f"no answer to question {question_id} of {split}: predict on the same split")
        given = answers[question_id]
        tally = counts[annotation["question_type"]]
        tally["questions"] += 1
        tally["right"] += given == truth
        tally["swapped"] += given != truth and lexicon.names_a_person(given) and lexicon.names_a_person(truth)
    return {
        kind: PersonWordErrors(counts[kind]["questions"], counts[kind]["right"], counts[kind]["swapped"])
        for kind in QUESTION_TYPES
        if counts[kind]["questions"]
    }


def agreement_table(agreement: Mapping[str, Agreement]) -> str:
    lines = ["| type | questions asked by 2+ captions | two captions answer alike (95% interval) |", "|---|---:|---:|"]
    for kind, row in agreement.items():
        lines.append(f"| {kind} | {row.questions} | {100 * row.agreement:.1f} (+-{100 * row.interval:.1f}) |")
    return "\n".join(lines)


def errors_table(errors: Mapping[str, PersonWordErrors]) -> str:
    lines = [
        "| type | questions | accuracy | wrong | of them a person word for another | accuracy, person words as one |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    rows = dict(errors)
    rows["all"] = PersonWordErrors(*(sum(getattr(e, f) for e in errors.values())
                                     for f in ("questions", "right", "person_for_person")))  # fmt: skip
    for kind, e in rows.items():
        lines.append(f"| {kind} | {e.questions} | {100 * e.accuracy:.2f} | {e.questions - e.right} | "
                     f"{e.person_for_person} | {100 * e.accuracy_person_words_as_one:.2f} |")  # fmt: skip
    return "\n".join(lines)


def parser() -> ArgumentParser:
    parser = ArgumentParser(prog="python experiments/answer_agreement.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("captions", type=Path, help="the Karpathy split file the set was made from")
    parser.add_argument("--set", type=Path, default=None, help="the question set's folder (with --answers)")
    parser.add_argument("--answers", type=Path, default=None, help="a model's answers to its test split")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    arguments = parser()
    args = arguments.parse_args(argv)
    if (args.set is None) != (args.answers is None):
        arguments.error("--set and --answers go together: the set's folder and a model's answers to its test split")
    try:
        photos = karpathy_photos(args.captions)
        ensure_wordnet()
        from nltk.corpus import wordnet

        lexicon = WordNetLexicon(wordnet=wordnet)
        print(agreement_table(caption_agreement(photos, reader=CaptionReader(lexicon=lexicon))))
        if args.set is not None:
            print()
            print(errors_table(person_word_errors(args.set, read_answers(args.answers), lexicon=lexicon)))
    except (DatasetFormatError, FileNotFoundError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
