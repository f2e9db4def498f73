"""Questions as word ids for the question encoder, with a defined behaviour for odd questions.

* Long questions are cut to their first `max_length` words (the default 30 covers every VQA v2 question).
* Words the model has not seen become `<unk>`.
* In a dataset, a question with no words at all is read as a single `<unk>` (it still has answers to learn
  from); a question typed by a user that is empty or made only of unknown words is refused with a message
  that says so, since any answer to it would be a guess.
"""

from __future__ import annotations

from data.vocabulary import Vocabulary, tokenize


class QuestionError(ValueError):
    """A question the model cannot answer meaningfully; the message says why and what to do."""


def question_ids(vocabulary: Vocabulary, text: str, *, max_length: int) -> list[int]:
    """Word ids of a dataset question: at most `max_length` of them, unknown words as <unk>, never empty."""
    ids = [vocabulary.index(word) for word in tokenize(text)[:max_length]]
    return ids or [vocabulary.unk_id]


def user_question_ids(vocabulary: Vocabulary, text: str, *, max_length: int) -> list[int]:
    """Word ids of a question asked by a user; raises QuestionError when it is empty or all unknown words."""
    words = tokenize(text)
    if not words:
        raise QuestionError("the question is empty: type a question about the image, such as 'what colour is the circle?'")
    ids = [vocabulary.index(word) for word in words[:max_length]]
    if all(i == vocabulary.unk_id for i in ids):
        shown = " ".join(words[:8]) + (" ..." if len(words) > 8 else "")
        raise QuestionError(
            f"none of the words of the question ({shown}) are known to this model; "
            "ask with words from the questions it was trained on"
        )
    return ids
