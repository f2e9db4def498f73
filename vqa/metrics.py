"""VQA accuracy as the official VQA evaluation computes it, and DAQUAR's WUPS set measures.

VQA accuracy reproduces the GT-Vision-Lab evaluation script (`vqaEval.py` of the VQA API, Antol et al.
2015 / Goyal et al. 2017): an answer counts as fully right when at least 3 of the 10 annotators gave it,
averaged over the 10 leave-one-annotator-out subsets; answers are normalised (punctuation, lowercase,
articles, number words, contractions) only when the annotators disagree, and compared exactly otherwise, so
"Yes" against ten "yes" scores 0 as it does there (`ignore_case=True` is the lenient variant). Published VQA
numbers come from that script, so its quirks are kept on purpose and are marked where they look like bugs. Results are reported like the
script: percentages rounded to 2 places, overall, per answer type and per question type.

DAQUAR (Malinowski & Fritz, NIPS 2014) treats an answer as a *set* of words ("chair, table") and scores a
prediction by WUPS: a fuzzy set match whose word similarity is Wu-Palmer similarity over WordNet noun
synsets, down-weighted by 0.1 below a threshold (0.9 and 0.0 are reported). This follows the authors'
`calculate_wups.py`. WordNet comes from nltk, installed offline by `core.training.wordnet.ensure_wordnet`
on first use.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from statistics import fmean
from typing import Any

from core.training.wordnet import ensure_wordnet

# ---------------------------------------------------------------------------------------------------------
# Answer normalisation (vqaEval.py: processPunctuation + processDigitArticle)
# ---------------------------------------------------------------------------------------------------------

# The official contraction map, verbatim (including its oddities: "somebody'd" -> "somebodyd", and keys
# with capitals such as "Im" that can never match because words are lowercased first).
CONTRACTIONS: Mapping[str, str] = {
    "aint": "ain't", "arent": "aren't", "cant": "can't", "couldve": "could've", "couldnt": "couldn't",
    "couldn'tve": "couldn't've", "couldnt've": "couldn't've", "didnt": "didn't", "doesnt": "doesn't",
    "dont": "don't", "hadnt": "hadn't", "hadnt've": "hadn't've", "hadn'tve": "hadn't've", "hasnt": "hasn't",
    "havent": "haven't", "hed": "he'd", "hed've": "he'd've", "he'dve": "he'd've", "hes": "he's",
    "howd": "how'd", "howll": "how'll", "hows": "how's", "Id've": "I'd've", "I'dve": "I'd've", "Im": "I'm",
    "Ive": "I've", "isnt": "isn't", "itd": "it'd", "itd've": "it'd've", "it'dve": "it'd've", "itll": "it'll",
    "let's": "let's", "maam": "ma'am", "mightnt": "mightn't", "mightnt've": "mightn't've",
    "mightn'tve": "mightn't've", "mightve": "might've", "mustnt": "mustn't", "mustve": "must've",
    "neednt": "needn't", "notve": "not've", "oclock": "o'clock", "oughtnt": "oughtn't",
    "ow's'at": "'ow's'at", "'ows'at": "'ow's'at", "'ow'sat": "'ow's'at", "shant": "shan't",
    "shed've": "she'd've", "she'dve": "she'd've", "she's": "she's", "shouldve": "should've",
    "shouldnt": "shouldn't", "shouldnt've": "shouldn't've", "shouldn'tve": "shouldn't've",
    "somebody'd": "somebodyd", "somebodyd've": "somebody'd've", "somebody'dve": "somebody'd've",
    "somebodyll": "somebody'll", "somebodys": "somebody's", "someoned": "someone'd",
    "someoned've": "someone'd've", "someone'dve": "someone'd've", "someonell": "someone'll",
    "someones": "someone's", "somethingd": "something'd", "somethingd've": "something'd've",
    "something'dve": "something'd've", "somethingll": "something'll", "thats": "that's",
    "thered": "there'd", "thered've": "there'd've", "there'dve": "there'd've", "therere": "there're",
    "theres": "there's", "theyd": "they'd", "theyd've": "they'd've", "they'dve": "they'd've",
    "theyll": "they'll", "theyre": "they're", "theyve": "they've", "twas": "'twas", "wasnt": "wasn't",
    "wed've": "we'd've", "we'dve": "we'd've", "weve": "we've", "werent": "weren't", "whatll": "what'll",
    "whatre": "what're", "whats": "what's", "whatve": "what've", "whens": "when's", "whered": "where'd",
    "wheres": "where's", "whereve": "where've", "whod": "who'd", "whod've": "who'd've",
    "who'dve": "who'd've", "wholl": "who'll", "whos": "who's", "whove": "who've", "whyll": "why'll",
    "whyre": "why're", "whys": "why's", "wont": "won't", "wouldve": "would've", "wouldnt": "wouldn't",
    "wouldnt've": "wouldn't've", "wouldn'tve": "wouldn't've", "yall": "y'all", "yall'll": "y'all'll",
    "y'allll": "y'all'll", "yall'd've": "y'all'd've", "y'alld've": "y'all'd've", "y'all'dve": "y'all'd've",
    "youd": "you'd", "youd've": "you'd've", "you'dve": "you'd've", "youll": "you'll", "youre": "you're",
    "youve": "you've",
}  # fmt: skip

NUMBER_WORDS: Mapping[str, str] = {
    "none": "0", "zero": "0", "one": "1", "two": "2", "three": "3", "four": "4", "five": "5",
    "six": "6", "seven": "7", "eight": "8", "nine": "9", "ten": "10",
}  # fmt: skip

ARTICLES: frozenset[str] = frozenset({"a", "an", "the"})

PUNCTUATION: tuple[str, ...] = (
    ";", "/", "[", "]", '"', "{", "}", "(", ")", "=", "+", "\\", "_", "-", ">", "<", "@", "`", ",", "?", "!",
)  # fmt: skip

# The official `(?!<=\d)` was meant as a look-behind but is a look-ahead for the text "<=digit", which never
# follows a period: in effect every period not followed by a digit is removed ("3.5" keeps its period).
_PERIOD_STRIP = re.compile(r"(?!<=\d)(\.)(?!\d)")
_COMMA_STRIP = re.compile(r"(\d)(\,)(\d)")
# The official call is `periodStrip.sub("", text, re.UNICODE)`, which passes re.UNICODE (= 32) as `count`.
_MAX_PERIODS_REMOVED = int(re.UNICODE)

# Annotators needed for full credit in one leave-one-out subset (the "3 humans" of the VQA metric).
_HUMANS_FOR_FULL_CREDIT = 3


def process_punctuation(text: str) -> str:
    """The official `processPunctuation`: delete or blank out punctuation, then strip periods.

    Each punctuation mark is deleted everywhere when it touches a space somewhere in the answer, or when
    the answer contains a digit-comma-digit pattern ("1,000" -> "1000"); otherwise it is replaced by a
    space ("black-white" -> "black white"). Both tests look at the original text, per mark.
    """
    has_thousands_comma = _COMMA_STRIP.search(text) is not None
    out = text
    for mark in PUNCTUATION:
        touches_space = (mark + " " in text) or (" " + mark in text)
        out = out.replace(mark, "" if touches_space or has_thousands_comma else " ")
    return _PERIOD_STRIP.sub("", out, count=_MAX_PERIODS_REMOVED)


def process_digit_article(text: str) -> str:
    """The official `processDigitArticle`: lowercase, number words -> digits, drop articles, contractions."""
    words = [NUMBER_WORDS.get(word, word) for word in text.lower().split()]
    words = [CONTRACTIONS.get(word, word) for word in words if word not in ARTICLES]
    return " ".join(words)


def normalize_answer(answer: str) -> str:
    """Normalise an answer as the official VQA evaluation does before comparing disagreeing answers.

    Punctuation rule, periods not followed by a digit removed, lowercase, "none"/"zero".."ten" -> digits,
    articles a/an/the dropped, contractions written with their apostrophe ("dont" -> "don't"); words end
    up separated by single spaces. E.g. "Two dogs!" -> "2 dogs", "the dog." -> "dog".
    """
    return process_digit_article(process_punctuation(answer))


def _clean_whitespace(answer: str) -> str:
    """Newlines and tabs become spaces and the ends are stripped (done to every answer, always)."""
    return answer.replace("\n", " ").replace("\t", " ").strip()


# ---------------------------------------------------------------------------------------------------------
# VQA accuracy
# ---------------------------------------------------------------------------------------------------------


def vqa_score(prediction: str, human_answers: Sequence[str], *, ignore_case: bool = False) -> float:
    """VQA accuracy of one predicted answer against the N human answers, on 0..1.

    Score = mean over the N leave-one-out subsets of min(1, #subset answers equal to the prediction / 3).
    As in the official script (GT-Vision-Lab's `vqaEval.py`), newlines and tabs become spaces and the ends
    are stripped; then, only when the human answers are not all identical, prediction and answers are
    normalised (`normalize_answer`, which lowercases); the strings are then compared exactly. So when all
    annotators agree the comparison is case-sensitive: "Yes" against ten "yes" scores 0, as it does there.
    For N = 10 (VQA v1/v2) this is the official number; DAQUAR-style data that repeats one answer 10 times
    scores exact match.

    (An earlier revision of the script, still in some copies, normalised the prediction always and the
    human answers' punctuation only: there "Yes" scores 1. The current one is followed here.)

    Args:
        prediction: the predicted answer, raw text.
        human_answers: the annotators' answers, raw text.
        ignore_case: compare case-insensitively even when the annotators agree ("Yes" = "yes"): not the
            official number, for data whose answers' case carries no meaning.

    For N < 4 the official threshold of 3 agreeing humans is out of reach, so it becomes N - 1 (all the
    other annotators agreeing is full credit), and N = 1 is plain exact match. N >= 4 is unchanged.

    Raises:
        ValueError: if `human_answers` is empty.
    """
    if isinstance(human_answers, str):
        raise TypeError(f"human_answers must be a sequence of answers, not the string {human_answers!r}")
    if len(human_answers) == 0:
        raise ValueError("vqa_score needs at least one human answer; got an empty list")
    predicted = _clean_whitespace(prediction)
    answers = [_clean_whitespace(answer) for answer in human_answers]
    if len(set(answers)) > 1:
        predicted = normalize_answer(predicted)
        answers = [normalize_answer(answer) for answer in answers]
    if ignore_case:
        predicted, answers = predicted.lower(), [answer.lower() for answer in answers]
    matches = [answer == predicted for answer in answers]
    if len(answers) == 1:
        return float(matches[0])
    needed = min(_HUMANS_FOR_FULL_CREDIT, len(answers) - 1)
    total = sum(matches)
    # Leaving answer i out leaves `total - matches[i]` matching answers among the other N - 1.
    return fmean(min(1.0, (total - left_out) / needed) for left_out in matches)


@dataclass(frozen=True)
class QuestionRecord:
    """What the VQA evaluation needs to know about one question (a VQA v2 annotation entry).

    Attributes:
        question_id: the question's id (the key into the predictions).
        answers: the human answers (10 in VQA v1/v2).
        answer_type: "yes/no", "number" or "other".
        question_type: the first words of the question as annotated, e.g. "what color is the".
    """

    question_id: Hashable
    answers: tuple[str, ...]
    answer_type: str
    question_type: str

    @classmethod
    def from_annotation(cls, annotation: Mapping[str, Any]) -> QuestionRecord:
        """Build from one entry of a VQA v2 annotations file (`{"annotations": [entry, ...]}`)."""
        return cls(
            question_id=annotation["question_id"],
            answers=tuple(answer["answer"] for answer in annotation["answers"]),
            answer_type=annotation["answer_type"],
            question_type=annotation["question_type"],
        )


@dataclass(frozen=True)
class VqaReport:
    """VQA accuracies as the official script reports them: percentages (0..100) rounded to 2 places.

    Attributes:
        overall: mean accuracy over all questions.
        per_answer_type: answer type -> mean accuracy over its questions.
        per_question_type: question type -> mean accuracy over its questions.
        num_questions: how many questions were scored.
    """

    overall: float
    per_answer_type: dict[str, float] = field(default_factory=dict)
    per_question_type: dict[str, float] = field(default_factory=dict)
    num_questions: int = 0

    def as_metrics(self, prefix: str = "accuracy") -> dict[str, float]:
        """Flatten to `{name: value}` on a 0..1 scale (percent / 100), the scale the project logs.

        Keys: `prefix` (overall), `prefix/<answer type>` (e.g. "accuracy/yes/no") and
        `prefix/question_type/<question type>` (e.g. "accuracy/question_type/what color is the").
        """
        metrics = {prefix: self.overall / 100}
        metrics.update({f"{prefix}/{kind}": value / 100 for kind, value in self.per_answer_type.items()})
        metrics.update(
            {f"{prefix}/question_type/{kind}": value / 100 for kind, value in self.per_question_type.items()}
        )
        return metrics


def vqa_accuracy(
    predictions: Mapping[Hashable, str], questions: Iterable[QuestionRecord], *, ignore_case: bool = False
) -> VqaReport:
    """Score predicted answers with `vqa_score` and aggregate them like the official script.

    Args:
        predictions: question id -> predicted answer (raw text). Ids not among `questions` are ignored,
            so one prediction file can be scored on a subset of questions.
        questions: the questions to score, each with its human answers and types.
        ignore_case: passed to `vqa_score`; False (the official comparison) unless asked for.

    Returns:
        A `VqaReport` (percentages rounded to 2 places).

    Raises:
        ValueError: if there are no questions, or some question has no prediction (the message gives
            how many and the first few ids).
    """
    records = list(questions)
    if not records:
        raise ValueError("vqa_accuracy needs at least one question; `questions` is empty")
    _require_predictions(predictions, [record.question_id for record in records])
    scores: list[float] = []
    by_answer_type: dict[str, list[float]] = defaultdict(list)
    by_question_type: dict[str, list[float]] = defaultdict(list)
    for record in records:
        score = vqa_score(predictions[record.question_id], record.answers, ignore_case=ignore_case)
        scores.append(score)
        by_answer_type[record.answer_type].append(score)
        by_question_type[record.question_type].append(score)
    return VqaReport(
        overall=_percent(scores),
        per_answer_type={kind: _percent(values) for kind, values in by_answer_type.items()},
        per_question_type={kind: _percent(values) for kind, values in by_question_type.items()},
        num_questions=len(records),
    )


def _percent(scores: Sequence[float]) -> float:
    """Mean of 0..1 scores as a percentage rounded to 2 places (the official `round(100 * mean, 2)`)."""
    return round(100 * sum(scores) / len(scores), 2)


def _require_predictions(predictions: Mapping[Hashable, str], question_ids: Sequence[Hashable]) -> None:
    """Raise a ValueError naming the questions that have no prediction, if any."""
    missing = [qid for qid in question_ids if qid not in predictions]
    if missing:
        shown = ", ".join(repr(qid) for qid in missing[:5]) + (", ..." if len(missing) > 5 else "")
        raise ValueError(
            f"{len(missing)} of {len(question_ids)} questions have no prediction (first missing: {shown})"
        )


# ---------------------------------------------------------------------------------------------------------
# DAQUAR: WUPS and set accuracy
# ---------------------------------------------------------------------------------------------------------

# Below the threshold, a Wu-Palmer similarity counts only this much (Malinowski & Fritz 2014).
_BELOW_THRESHOLD_WEIGHT = 0.1


def answer_set(answer: str) -> frozenset[str]:
    """A DAQUAR answer as a set of items: "chair, table" -> {"chair", "table"}; blanks are dropped."""
    return frozenset(item.strip() for item in answer.split(",") if item.strip())


@lru_cache(maxsize=1)
def _wordnet() -> Any:
    """nltk's WordNet reader, installed offline on first use."""
    ensure_wordnet()
    from nltk.corpus import wordnet

    return wordnet


@lru_cache(maxsize=None)
def _noun_synsets(word: str) -> tuple[Any, ...]:
    """The WordNet noun synsets of `word` (empty for words WordNet does not know)."""
    wordnet = _wordnet()
    return tuple(wordnet.synsets(word, pos=wordnet.NOUN))


@lru_cache(maxsize=None)
def _wup_ordered(a: str, b: str) -> float:
    """`wup` for a pair already put in a fixed order, so (a, b) and (b, a) share one cache entry."""
    if a == b:
        return 1.0
    similarities = (x.wup_similarity(y) or 0.0 for x in _noun_synsets(a) for y in _noun_synsets(b))
    return max(similarities, default=0.0)


def wup(a: str, b: str) -> float:
    """Wu-Palmer similarity of two words on 0..1: the best over all pairs of their WordNet noun synsets.

    Identical strings score 1.0; a word without noun synsets scores 0.0 against any other word.
    """
    return _wup_ordered(*sorted((a, b)))


def _membership(word: str, others: frozenset[str], threshold: float) -> float:
    """Fuzzy membership of `word` in `others`: max over t in `others` of the thresholded WUP."""
    best = 0.0
    for other in others:
        similarity = wup(word, other)
        best = max(best, similarity if similarity >= threshold else _BELOW_THRESHOLD_WEIGHT * similarity)
    return best


def wups(prediction: str, truth: str, threshold: float) -> float:
    """WUPS of one question on 0..1 (Malinowski & Fritz 2014).

    With A = answer_set(prediction), T = answer_set(truth) and mu(a, t) = WUP if WUP >= threshold else
    0.1 * WUP: min(prod_{a in A} max_{t in T} mu(a, t), prod_{t in T} max_{a in A} mu(a, t)).
    Two empty sets score 1, one empty set scores 0 (as in the authors' script).
    """
    predicted, expected = answer_set(prediction), answer_set(truth)
    if not predicted and not expected:
        return 1.0
    if not predicted or not expected:
        return 0.0
    precision = math.prod(_membership(word, expected, threshold) for word in predicted)
    recall = math.prod(_membership(word, predicted, threshold) for word in expected)
    return min(precision, recall)


@dataclass(frozen=True)
class DaquarReport:
    """DAQUAR metrics averaged over questions, each on a 0..1 scale (multiply by 100 to report).

    Attributes:
        accuracy: fraction of questions whose predicted answer set equals the true one.
        wups_09: mean WUPS at threshold 0.9.
        wups_00: mean WUPS at threshold 0.0.
        num_questions: how many questions were scored.
    """

    accuracy: float
    wups_09: float
    wups_00: float
    num_questions: int

    def as_metrics(self) -> dict[str, float]:
        """Flatten to `{"accuracy": .., "wups@0.9": .., "wups@0.0": ..}` on 0..1, for logging."""
        return {"accuracy": self.accuracy, "wups@0.9": self.wups_09, "wups@0.0": self.wups_00}


def daquar_metrics(predictions: Mapping[Hashable, str], truths: Mapping[Hashable, str]) -> DaquarReport:
    """Set accuracy, WUPS@0.9 and WUPS@0.0 of predicted DAQUAR answers, each a mean over questions on 0..1.

    Args:
        predictions: question id -> predicted answer (may be a comma-separated list).
        truths: question id -> true answer (may be a comma-separated list); these are the questions scored,
            and ids only in `predictions` are ignored.

    Raises:
        ValueError: if `truths` is empty or some question has no prediction.
    """
    if not truths:
        raise ValueError("daquar_metrics needs at least one question; `truths` is empty")
    question_ids = list(truths)
    _require_predictions(predictions, question_ids)
    pairs = [(predictions[qid], truths[qid]) for qid in question_ids]
    return DaquarReport(
        accuracy=fmean(float(answer_set(p) == answer_set(t)) for p, t in pairs),
        wups_09=fmean(wups(p, t, 0.9) for p, t in pairs),
        wups_00=fmean(wups(p, t, 0.0) for p, t in pairs),
        num_questions=len(pairs),
    )
