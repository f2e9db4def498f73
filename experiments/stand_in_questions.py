"""How a VQA model answers questions people write, not the ones made from captions: the 40 hand-written stand-in
questions of `stand_in_questions.json`, scored by type.

The issue's held-out hand-written questions are not shared. These 40 were written from 15 Flickr8k test photos
(`random.Random(7).sample` of the test photo ids), each with the answers a person would accept, before any model was
asked. A model's top answer (`Answerer.ask`, as the Ask tab gives it) is right when it is one of them. Forty questions
leave wide margins (a standard error of about 8 points overall, more per type), and the five number questions all
have the answer two: a model that says "two" to every count gets them all.

    python -m experiments.stand_in_questions --images PATH/TO/flickr8k/images --model flickr8k-qa-san

`--model` takes a bundled name or a checkpoint; `--show` prints every question with its answer. Figures in
docs/experiments.md (Flickr8k-QA, hand-written questions).
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from jsonargparse import ArgumentParser

from data.caption_questions import QUESTION_TYPES
from vqa.pretrained import Answerer

QUESTIONS = Path(__file__).with_name("stand_in_questions.json")


def read_questions(path: Path) -> list[dict]:
    """The questions of a stand-in file: each with its photo, type, question and accepted answers.

    Raises:
        ValueError: the file is not JSON of that layout (the message names the file and what is wrong).
    """
    try:
        questions = json.loads(Path(path).read_text())["questions"]
    except (OSError, json.JSONDecodeError, KeyError, TypeError) as error:
        raise ValueError(f"{path}: not a stand-in question file ({error!r})") from error
    if not isinstance(questions, list):
        raise ValueError(f"{path}: not a stand-in question file (its \"questions\" is no list)")
    for q in questions:
        if not isinstance(q, dict) or set(q) != {"photo", "type", "question", "accepted"} \
                or q["type"] not in QUESTION_TYPES or not q["accepted"]:
            raise ValueError(f"{path}: each question needs a photo, a type of {QUESTION_TYPES}, the question and the "
                             f"accepted answers, got {q}")
    return questions


def score(model: Answerer, questions: Sequence[dict], images: Path) -> list[tuple[dict, str]]:
    """Each question with the model's top answer to it about its photo in `images`."""
    return [(q, model.ask(Path(images) / q["photo"], q["question"], warn=False).answers[0][0]) for q in questions]


def summary(answered: Sequence[tuple[dict, str]]) -> str:
    """'24 of 40 right: object 7 of 11, ...': the right answers overall and per type."""
    right, asked = Counter(), Counter()
    for q, answer in answered:
        asked[q["type"]] += 1
        right[q["type"]] += answer in q["accepted"]
    kinds = ", ".join(f"{kind} {right[kind]} of {asked[kind]}" for kind in QUESTION_TYPES if asked[kind])
    return f"{sum(right.values())} of {len(answered)} right: {kinds}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = ArgumentParser(prog="python -m experiments.stand_in_questions", description=__doc__.split("\n\n")[0])
    parser.add_argument("--images", type=Path, required=True, help="Flickr8k's photo folder")
    parser.add_argument("--model", default="flickr8k-qa-san", help="a bundled model's name or a checkpoint")
    parser.add_argument("--questions", type=Path, default=QUESTIONS, help="the stand-in question file")
    parser.add_argument("--show", type=bool, default=False, help="print every question with the model's answer")
    args = parser.parse_args(argv)
    try:
        questions = read_questions(args.questions)
        answered = score(Answerer.load(args.model), questions, args.images)
    except (ValueError, FileNotFoundError) as error:  # ImageLoadError is a ValueError: it names the photo
        print(f"error: {error}", file=sys.stderr)
        return 2
    if args.show:
        for q, answer in answered:
            mark = "" if answer in q["accepted"] else " (wrong)"
            print(f"{q['photo']} | {q['type']} | {q['question']} | {answer}{mark}")
    print(summary(answered))
    return 0


if __name__ == "__main__":
    sys.exit(main())
