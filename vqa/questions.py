"""Questions as word ids for the question encoder, with a defined behaviour for odd questions.

* Long questions are cut to their first `max_length` words (the default 30 covers every VQA v2 question);
  `cut_notice` says so for a question typed by a user, so an app can tell them which words were read.
* Words the model has not seen become `<unk>`.
* In a dataset, a question with no words at all is read as a single `<unk>` (it still has answers to learn
  from); a question typed by a user that is empty or made only of unknown words is refused with a message
  that says so, since any answer to it would be a guess. A question in another language or script (Korean,
  say) has text but no word the model knows: the message says which language and words the model reads.
* A question of a kind the model was never trained on ("is there a dog?" to a model that has seen no yes/no question)
  would still get an answer of the kinds it knows ("jacket 18%"). `question_kind` tells a question's kind from its
  first words (`QuestionKind`, `KINDS`); a model's `QuestionScope` (declared with the bundled models, in
  `vqa.bundled.QUESTION_SCOPES`) lists the kinds it answers with an example of each, and refuses the other kinds it
  recognises with a hint. A question no kind recognises, and every question to a model without a scope, is answered.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from data.vocabulary import Vocabulary, tokenize

# Questions an app may suggest to a user, in order of preference: `example_question` picks the first one all of
# whose words a model knows (the ShapesWorld and DAQUAR models know the first two).
SUGGESTED_QUESTIONS = ("what colour is the circle?", "what is on the table?", "how many objects are there?")
GENERIC_QUESTION = "what is in the picture?"  # suggested when a model knows none of the above
KNOWN_WORDS_SHOWN = 8  # how many of a model's words a refusal lists as examples


class QuestionError(ValueError):
    """A question the model cannot answer meaningfully; the message says why and what to do.

    `empty` is True for a question with no text at all (rather than text without a known word), so an app can
    suggest one of its own example questions instead (see `empty_question_message`).
    """

    def __init__(self, message: str, *, empty: bool = False) -> None:
        super().__init__(message)
        self.empty = empty


def question_ids(vocabulary: Vocabulary, text: str, *, max_length: int) -> list[int]:
    """Word ids of a dataset question: at most `max_length` of them, unknown words as <unk>, never empty."""
    ids = [vocabulary.index(word) for word in tokenize(text)[:max_length]]
    return ids or [vocabulary.unk_id]


def user_question_ids(vocabulary: Vocabulary, text: str, *, max_length: int) -> list[int]:
    """Word ids of a question asked by a user (its first `max_length` words, see `cut_notice`).

    Raises:
        QuestionError: the question has no letter or digit in any script (`empty` is set), or none of its
            words is in `vocabulary`; the message then says what the model understands.
    """
    if not any(character.isalnum() for character in text):
        raise QuestionError(empty_question_message(example_question(vocabulary)), empty=True)
    words = tokenize(text)  # ASCII words only: a question in another script has none
    ids = [vocabulary.index(word) for word in words[:max_length]]
    if all(i == vocabulary.unk_id for i in ids):
        # the question as typed, not its ASCII words: "¿cuántas" is not shown as "cu ntas"
        raise QuestionError(
            f"none of the words of the question ({_shortened(text)}) are known to this model; {understood(vocabulary)}"
        )
    return ids


def cut_notice(text: str, *, max_length: int) -> str | None:
    """What to tell a user whose question is longer than the `max_length` words the model reads; None when
    it is not. The question is still answered, from its first `max_length` words."""
    count = len(tokenize(text))
    if count <= max_length:
        return None
    return f"Only the first {max_length} words of the question were read (it has {count}); the rest was left out."


def empty_question_message(example: str) -> str:
    """What a user who asked nothing is told, with `example` as a question to try."""
    return f"the question is empty: type a question about the image, such as '{example}'"


def example_question(vocabulary: Vocabulary) -> str:
    """A question to suggest to a user of a model with this vocabulary: the first of SUGGESTED_QUESTIONS made
    only of words it knows, else GENERIC_QUESTION."""
    for question in SUGGESTED_QUESTIONS:
        if all(word in vocabulary for word in tokenize(question)):
            return question
    return GENERIC_QUESTION


def understood(vocabulary: Vocabulary) -> str:
    """Which questions a model reads: English ones (`tokenize` keeps ASCII words only) in the words of its
    training questions, with its most frequent words as examples."""
    words = vocabulary.tokens[len(Vocabulary.SPECIALS) :]  # most frequent first
    examples = ", ".join(f"'{word}'" for word in words[:KNOWN_WORDS_SHOWN])
    more = ", ..." if len(words) > KNOWN_WORDS_SHOWN else ""
    return f"this model understands English questions using the {len(words)} words of its training questions, such as {examples}{more}"


def _shortened(text: str, limit: int = 40) -> str:
    """`text` on one line, cut to `limit` characters with '...' when longer (to quote it in a message)."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


@dataclass(frozen=True)
class QuestionKind:
    """A kind of question, as its first words tell it: "yes/no" for "is there a dog?", "number" for "how many ...".

    Args:
        name: what a person is told the kind is ("yes/no", "colour").
        start: a regular expression the question's first words match (`tokenize`d, joined by single spaces), whole
            words: "how (many|much)" for a number.
    """

    name: str
    start: str
    _pattern: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_pattern", re.compile(rf"(?:{self.start})\b"))

    def matches(self, question: str) -> bool:
        """Whether `question` (as typed) starts as a question of this kind does."""
        return self._pattern.match(" ".join(tokenize(question))) is not None


_WHAT = r"(what|which)( is| are)?( the)?"  # "what colour is", "what is the colour of", "which shapes are"
YES_NO = QuestionKind(
    name="yes/no", start="is|are|am|was|were|do|does|did|can|could|will|would|should|shall|has|have|had|may|must"
)
NUMBER = QuestionKind(name="number", start="how (many|much)")
COLOUR = QuestionKind(name="colour", start=rf"{_WHAT} colou?rs?")
SHAPE = QuestionKind(name="shape", start=rf"{_WHAT} shapes?")
SIZE = QuestionKind(name="size", start=rf"{_WHAT} sizes?")
LOCATION = QuestionKind(name="location", start="where")
PERSON = QuestionKind(name="person", start="who|whom|whose")
REASON = QuestionKind(name="reason", start="why")
TIME = QuestionKind(name="time", start="when")
OBJECT = QuestionKind(name="object", start="what|which|whats")

KINDS: tuple[QuestionKind, ...] = (YES_NO, NUMBER, COLOUR, SHAPE, SIZE, LOCATION, PERSON, REASON, TIME, OBJECT)
"""The kinds `question_kind` recognises, the first that matches chosen: the narrower "what colour ..." before the
"what ..." of an object."""


def question_kind(question: str) -> QuestionKind | None:
    """The kind of `question` by its first words (the first of KINDS it matches), or None when none does ("name the
    objects on the table", or a question in another language)."""
    return next((kind for kind in KINDS if kind.matches(question)), None)


@dataclass(frozen=True, kw_only=True)
class QuestionScope:
    """The kinds of question a model was trained to answer, each with an example question in its words.

    A question of another kind that `question_kind` recognises is refused (`check`) with a hint that names the kinds
    the model answers and their examples, instead of an answer of a kind it knows; a question of no recognised kind
    is left to the model.

    Args:
        examples: an example question for each kind the model answers, in the order a person is told them; each
            example must be of its kind (checked here, so a declaration cannot contradict itself).
    """

    examples: Mapping[QuestionKind, str]

    def __post_init__(self) -> None:
        if not self.examples:
            raise ValueError("a question scope needs at least one kind of question")
        for kind, example in self.examples.items():
            found = question_kind(example)
            if found != kind:
                raise ValueError(f"the example {example!r} of {kind.name} questions reads as {found and found.name}")

    def check(self, question: str) -> None:
        """Refuse `question` when it is of a kind the model was not trained on.

        Raises:
            QuestionError: the question is of a recognised kind outside the scope; the message is `hint`'s.
        """
        kind = question_kind(question)
        if kind is not None and kind not in self.examples:
            raise QuestionError(self.hint(question, kind))

    def hint(self, question: str, kind: QuestionKind) -> str:
        """What a person who asked `question`, of `kind`, is told: the kinds this model answers, with examples."""
        names = [k.name for k in self.examples]
        kinds = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
        examples = ", ".join(f"'{example}'" for example in self.examples.values())
        return (
            f"'{_shortened(question)}' is a {kind.name} question, a kind this model was not trained on: it answers "
            f"{kinds} questions, such as {examples}."
        )
