"""Answer classes and training targets.

A VQA model classifies over the N most frequent training answers (the SAN paper and most since: N = 1000).
What it is trained towards is a class, chosen in YAML:

* `SoftScores`: every answer the annotators gave is a target with its official VQA score (3 or more of 10
  agreeing -> 1, fewer -> partial credit), learned with a sigmoid cross-entropy per answer (Teney et al. 2018).
  For single-answer datasets this is the one-hot label.
* `MajorityAnswer`: the one most common human answer as a softmax class (the SAN paper's objective);
  questions whose answer is not among the N classes do not count in the loss.

Answers are labels as the dataset writes them (DAQUAR joins the words of an object's name with "_":
`tissue_roll`); scoring and the results files keep them so, and `answer_words` turns one into words for a
person to read ("tissue roll").
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from data.vqa import VqaSample
from vqa.metrics import vqa_score


def answer_words(label: str) -> str:
    """An answer label as words for a person: DAQUAR's `bottle_of_liquid` -> "bottle of liquid". VQA v2's
    answers, already words, come back as they are."""
    return " ".join(label.replace("_", " ").split()) or label


class AnswerVocabulary:
    """The answer classes, most frequent first."""

    def __init__(self, answers: Sequence[str]) -> None:
        if not answers:
            raise ValueError("an answer vocabulary needs at least one answer")
        self.answers = list(answers)
        self._index = {answer: i for i, answer in enumerate(self.answers)}
        if len(self._index) != len(self.answers):
            raise ValueError("answers in an answer vocabulary must be distinct")

    @classmethod
    def build(cls, labels: Iterable[str], *, size: int) -> AnswerVocabulary:
        """The `size` most frequent labels (ties broken alphabetically, so the result is deterministic)."""
        counts = Counter(labels)
        ranked = sorted(counts, key=lambda answer: (-counts[answer], answer))
        return cls(ranked[:size])

    def __len__(self) -> int:
        return len(self.answers)

    def __contains__(self, answer: object) -> bool:
        return answer in self._index

    def index(self, answer: str) -> int | None:
        return self._index.get(answer)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AnswerVocabulary) and self.answers == other.answers

    def __hash__(self) -> int:
        return hash(tuple(self.answers))


class AnswerTargets:
    """Base class: what a question's target vector over the answer classes is, and the loss against it."""

    def target(self, sample: VqaSample, answers: AnswerVocabulary) -> Tensor:
        """(A,) the target of one question."""
        raise NotImplementedError

    def loss(self, logits: Tensor, targets: Tensor) -> Tensor:
        """Mean loss of logits (B, A) against targets (B, A)."""
        raise NotImplementedError


class SoftScores(AnswerTargets):
    """Each distinct human answer that is a class gets its official VQA score; sigmoid cross-entropy summed
    over the answer classes, averaged over questions."""

    def target(self, sample: VqaSample, answers: AnswerVocabulary) -> Tensor:
        target = torch.zeros(len(answers))
        for answer in set(sample.answers or (sample.answer,)):
            index = answers.index(answer)
            if index is not None:
                target[index] = vqa_score(answer, sample.answers or (sample.answer,))
        return target

    def loss(self, logits: Tensor, targets: Tensor) -> Tensor:
        per_answer = F.binary_cross_entropy_with_logits(logits.float(), targets, reduction="none")  # (B, A)
        return per_answer.sum(dim=1).mean()


class MajorityAnswer(AnswerTargets):
    """One-hot at the question's majority answer; softmax cross-entropy over the questions whose answer is a class."""

    def target(self, sample: VqaSample, answers: AnswerVocabulary) -> Tensor:
        target = torch.zeros(len(answers))
        index = answers.index(sample.answer)
        if index is not None:
            target[index] = 1.0
        return target

    def loss(self, logits: Tensor, targets: Tensor) -> Tensor:
        known = targets.sum(dim=1) > 0  # (B,) questions whose answer is among the classes
        if not bool(known.any()):
            return logits.sum() * 0.0  # nothing to learn from this batch, but keep the graph
        log_probs = torch.log_softmax(logits[known].float(), dim=-1)  # (B', A)
        return -(targets[known] * log_probs).sum(dim=1).mean()
