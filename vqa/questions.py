"""Questions as word ids for the question encoder, with a defined behaviour for odd questions.

* Long questions are cut to their first `max_length` words (the default 30 covers every VQA v2 question);
  `cut_notice` says so for a question typed by a user, so an app can tell them which words were read.
* Words the model has not seen become `<unk>`.
* In a dataset, a question with no words at all is read as a single `<unk>` (it still has answers to learn
  from); a question typed by a user that is empty or made only of unknown words is refused with a message
  that says so, since any answer to it would be a guess. A question in another language or script (Korean,
  say) has text but no word the model knows: the message says which language and words the model reads.
"""

from __future__ import annotations

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
        shown = " ".join(words[:8]) + (" ..." if len(words) > 8 else "") if words else _shortened(text)
        raise QuestionError(f"none of the words of the question ({shown}) are known to this model; {understood(vocabulary)}")
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
