"""`python -m vqa.answer_prior --root PATH/TO/flickr8k_qa`: the answer a question's type alone earns.

The honest floor of a question set made by rules (COCO-QA's papers report it): every test question is answered with
the most common training answer of its question type ("dog" for what-questions, "two" for how-many), and scored
as the CLI's `test` scores a model: VQA accuracy overall and per question type (`vqa.metrics.vqa_accuracy`) and
WUPS@0.9 / WUPS@0.0 (`vqa.metrics.daquar_metrics`), x100.
"""

from __future__ import annotations

import sys
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path

from jsonargparse import ArgumentParser

from data.vqa import VqaSample
from data.vqa2 import Flickr8kQa
from vqa.metrics import QuestionRecord, daquar_metrics, vqa_accuracy


def type_priors(train: Sequence[VqaSample]) -> dict[str, str]:
    """question type -> its most common training answer (ties: the answer seen first)."""
    counts: dict[str, Counter] = defaultdict(Counter)
    for sample in train:
        counts[sample.question_type][sample.answer] += 1
    return {kind: answers.most_common(1)[0][0] for kind, answers in counts.items()}


def prior_scores(train: Sequence[VqaSample], test: Sequence[VqaSample]) -> dict[str, float]:
    """The metrics (x100) of answering each test question with its type's prior; a type unseen in training gets
    the most common training answer overall."""
    priors = type_priors(train)
    fallback = Counter(sample.answer for sample in train).most_common(1)[0][0]
    predictions = {i: priors.get(sample.question_type, fallback) for i, sample in enumerate(test)}
    records = [QuestionRecord(i, s.answers, s.answer_type, s.question_type) for i, s in enumerate(test)]
    scores = {name: 100 * value for name, value in vqa_accuracy(predictions, records).as_metrics().items()}
    report = daquar_metrics(predictions, {i: sample.answer for i, sample in enumerate(test)})
    return scores | {"wups@0.9": 100 * report.wups_09, "wups@0.0": 100 * report.wups_00}


def main(argv: Sequence[str] | None = None) -> int:
    parser = ArgumentParser(prog="python -m vqa.answer_prior", description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, required=True, help="the folder python -m vqa.caption_questions wrote")
    parser.add_argument("--split", default="test", help="the split to score")
    args = parser.parse_args(argv)
    dataset = Flickr8kQa(root=args.root)
    train = dataset.questions("train")
    print("most common training answer per type:", type_priors(train))
    for name, value in prior_scores(train, dataset.questions(args.split)).items():
        print(f"{args.split}/{name}: {value:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
