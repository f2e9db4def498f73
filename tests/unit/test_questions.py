"""Questions typed by a user (`vqa.questions`) and answers shown to one (`vqa.answers.answer_words`): every
refusal says why and what the model understands, a question longer than the model reads says it was cut, and
answers read as words."""

from __future__ import annotations

import pytest

from data.vocabulary import Vocabulary
from vqa.answers import answer_words
from vqa.questions import (
    COLOUR,
    GENERIC_QUESTION,
    LOCATION,
    NUMBER,
    OBJECT,
    SHAPE,
    SIZE,
    YES_NO,
    QuestionError,
    QuestionScope,
    cut_notice,
    example_question,
    question_kind,
    user_question_ids,
)

VOCABULARY = Vocabulary.build(["what colour is the circle?", "what shape is the square?", "how many objects are there?"])
WORDS = len(VOCABULARY) - len(Vocabulary.SPECIALS)


def refusal(text: str) -> QuestionError:
    with pytest.raises(QuestionError) as raised:
        user_question_ids(VOCABULARY, text, max_length=30)
    return raised.value


@pytest.mark.parametrize("text", ["", "   ", "  ?! ", "\n"])
def test_a_question_without_any_letter_is_empty(text):
    error = refusal(text)
    assert error.empty and str(error).startswith("the question is empty")
    assert "'what colour is the circle?'" in str(error)  # a question this vocabulary can read, to try


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("침대는 무슨 색입니까?", "침대는 무슨 색입니까?"),  # Korean: no ASCII word at all, but not empty
        ("Какого цвета кровать?", "Какого цвета кровать?"),
        ("zebra quokka", "zebra quokka"),  # English, but words the model never saw
        ("¿cuántas sillas hay?", "¿cuántas sillas hay?"),  # Latin letters beside ASCII ones: echoed whole
    ],
)
def test_a_question_without_a_known_word_says_what_the_model_understands(text, shown):
    error = refusal(text)
    message = str(error)
    assert not error.empty and "empty" not in message
    assert f"none of the words of the question ({shown}) are known to this model" in message
    assert f"this model understands English questions using the {WORDS} words of its training questions" in message
    assert "such as 'is', 'the', 'what', 'are'" in message  # its most frequent words first


def test_a_long_question_is_answered_from_its_first_words_with_a_notice():
    text = " ".join(["what colour is the circle"] * 8)  # 40 words
    assert len(user_question_ids(VOCABULARY, text, max_length=30)) == 30
    assert cut_notice(text, max_length=30) == (
        "Only the first 30 words of the question were read (it has 40); the rest was left out."
    )
    assert cut_notice("what colour is the circle?", max_length=30) is None
    assert cut_notice(" ".join(["what"] * 30), max_length=30) is None  # exactly 30 words: all read


def test_the_suggested_question_is_one_the_model_can_read():
    assert example_question(VOCABULARY) == "what colour is the circle?"
    assert example_question(Vocabulary.build(["what is on the table?"])) == "what is on the table?"
    assert example_question(Vocabulary.build(["is it red?"])) == GENERIC_QUESTION


@pytest.mark.parametrize(
    ("label", "words"),
    [("tissue_roll", "tissue roll"), ("bottle_of_liquid", "bottle of liquid"), ("red", "red"), ("2", "2"),
     ("fire hydrant", "fire hydrant"), ("_", "_")],
)
def test_answer_labels_read_as_words(label, words):
    assert answer_words(label) == words


@pytest.mark.parametrize(
    ("question", "kind"),
    [
        ("is there a dog?", YES_NO), ("Are the chairs red?", YES_NO), ("does it rain", YES_NO), ("can you see", YES_NO),
        ("was it here?", YES_NO), ("how many chairs are there?", NUMBER), ("How much water", NUMBER),
        ("what colour is the circle?", COLOUR), ("what is the color of the dog?", COLOUR),
        ("what is colour of the sofa?", COLOUR), ("which colors are there", COLOUR),
        ("what shape is the large object?", SHAPE), ("what size is the green square?", SIZE),
        ("where is the dog?", LOCATION), ("what is on the table?", OBJECT), ("which object is made of glass?", OBJECT),
        ("what coloured object is there", OBJECT),  # "coloured" is not "colour": an object asked for
        ("name the objects", None), ("island of what?", None), ("¿cuántas sillas hay?", None), ("", None),
    ],
)  # fmt: skip
def test_a_questions_kind_is_read_from_its_first_words(question, kind):
    assert question_kind(question) == kind


DAQUAR_LIKE = QuestionScope(examples={OBJECT: "what is on the table?", NUMBER: "how many chairs are there?"})


def test_a_question_of_a_kind_outside_the_scope_gets_a_hint_naming_what_the_model_answers():
    with pytest.raises(QuestionError) as raised:
        DAQUAR_LIKE.check("is there a dog?")
    assert str(raised.value) == (
        "'is there a dog?' is a yes/no question, a kind this model was not trained on: it answers object and number "
        "questions, such as 'what is on the table?', 'how many chairs are there?'."
    )
    assert not raised.value.empty


@pytest.mark.parametrize("question", ["what is under the bed?", "how many lamps", "name the objects", "zebra", ""])
def test_a_question_of_a_kind_in_the_scope_or_of_no_kind_is_left_to_the_model(question):
    DAQUAR_LIKE.check(question)  # no refusal


def test_a_scope_cannot_contradict_its_own_examples():
    with pytest.raises(ValueError, match="the example 'is it red\\?' of colour questions reads as yes/no"):
        QuestionScope(examples={COLOUR: "is it red?"})
    with pytest.raises(ValueError, match="at least one kind"):
        QuestionScope(examples={})
