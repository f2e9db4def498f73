"""VQA accuracy (official vqaEval.py rules) and DAQUAR WUPS, checked on hand-computed cases."""

from __future__ import annotations

import math

import pytest

from core.training.wordnet import ensure_wordnet
from vqa.metrics import (
    DaquarReport,
    QuestionRecord,
    VqaReport,
    answer_set,
    daquar_metrics,
    normalize_answer,
    vqa_accuracy,
    vqa_score,
    wup,
    wups,
)

# ------------------------------------------------------------------------------------------------------
# vqa_score: the leave-one-out "3 humans" rule
# ------------------------------------------------------------------------------------------------------


def test_two_of_ten_matching_scores_0_6() -> None:
    # 10 leave-one-out subsets of 9 answers. The 8 subsets that drop a "yes" keep both "no": 2 matches ->
    # 2/3. The 2 subsets that drop a "no" keep one "no": 1 match -> 1/3. Mean = (8*2/3 + 2*1/3)/10 = 0.6.
    assert vqa_score("no", ["yes"] * 8 + ["no"] * 2) == pytest.approx(0.6, abs=1e-12)


def test_eight_of_ten_matching_scores_1() -> None:
    # Every subset keeps at least 7 "yes" -> min(1, 7/3) = 1.
    assert vqa_score("yes", ["yes"] * 8 + ["no"] * 2) == 1.0


def test_three_of_ten_matching_scores_0_9() -> None:
    # The 7 subsets that drop a non-match keep 3 matches -> 1; the 3 that drop a match keep 2 -> 2/3.
    # Mean = (7*1 + 3*2/3)/10 = 0.9.
    assert vqa_score("red", ["red"] * 3 + ["blue"] * 7) == pytest.approx(0.9, abs=1e-12)


def test_one_of_ten_matching_scores_0_3() -> None:
    # Dropping the match leaves 0 -> 0; the 9 other subsets keep 1 match -> 1/3. Mean = 9/3/10 = 0.3.
    assert vqa_score("no", ["no"] + ["yes"] * 9) == pytest.approx(0.3, abs=1e-12)


def test_no_match_scores_0() -> None:
    assert vqa_score("cat", ["dog"] * 5 + ["puppy"] * 5) == 0.0


def test_empty_answer_list_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="at least one human answer"):
        vqa_score("yes", [])


def test_a_bare_string_is_not_taken_for_a_list_of_answers() -> None:
    with pytest.raises(TypeError, match="sequence of answers"):
        vqa_score("yes", "yes")


def test_repeated_single_answer_is_exact_match() -> None:
    # DAQUAR in VQA layout repeats its one answer 10 times: every subset keeps 9 matches or none.
    assert vqa_score("chair", ["chair"] * 10) == 1.0
    assert vqa_score("table", ["chair"] * 10) == 0.0


def test_fewer_than_four_answers_still_give_full_credit() -> None:
    assert vqa_score("cat", ["cat"]) == 1.0
    assert vqa_score("dog", ["cat"]) == 0.0
    assert vqa_score("cat", ["cat", "cat"]) == 1.0
    # Dropping "cat" leaves {"dog"}: 0; dropping "dog" leaves {"cat"}: 1/1. Mean 0.5.
    assert vqa_score("cat", ["cat", "dog"]) == 0.5


# ------------------------------------------------------------------------------------------------------
# Normalisation: only when the human answers differ
# ------------------------------------------------------------------------------------------------------


def test_identical_answers_are_not_normalised() -> None:
    # All ten say "Two": no normalisation, so "2" != "two" and nothing matches.
    assert vqa_score("2", ["Two"] * 10) == 0.0
    assert vqa_score("dog", ["a dog"] * 10) == 0.0


def test_differing_answers_are_normalised_on_both_sides() -> None:
    # Answers differ, so all are normalised: "two" -> "2"; all ten become "2" and match the prediction.
    assert vqa_score("2", ["two"] * 9 + ["2"]) == 1.0
    assert vqa_score("dog", ["a dog"] * 9 + ["the dog"]) == 1.0
    assert vqa_score("Two", ["2"] * 9 + ["3"]) == 1.0


def test_unanimous_answers_are_compared_case_sensitively() -> None:
    # GT-Vision-Lab's vqaEval.py compares `item['answer'] == resAns` and lowercases only inside the
    # normalisation it applies when the answers differ: ten "yes" give "Yes" 0, as there.
    assert vqa_score("Yes", ["yes"] * 10) == 0.0
    assert vqa_score("yes", ["Yes"] * 10) == 0.0
    assert vqa_score("yes", ["yes"] * 10) == 1.0


def test_differing_answers_are_lowercased_by_the_normalisation() -> None:
    # Not unanimous, so both sides are normalised (lowercased): "Yes" matches the 7 "yes" and the 2 "YES".
    # Leaving out a "yes" or "YES" leaves 8 matches, leaving out the "no" leaves 9: every subset >= 3 -> 1.0.
    assert vqa_score("Yes", ["yes"] * 7 + ["YES"] * 2 + ["no"]) == 1.0
    # "The Dog." normalises to "dog": it matches the two answers "a dog" and "Dog"; each of those left out
    # leaves 1 match (1/3), each of the 8 "cat" left out leaves 2 (2/3): (2 * 1/3 + 8 * 2/3) / 10 = 0.6.
    assert vqa_score("The Dog.", ["a dog", "Dog"] + ["cat"] * 8) == pytest.approx(0.6, abs=1e-12)


def test_ignore_case_is_the_lenient_option() -> None:
    assert vqa_score("Yes", ["yes"] * 10, ignore_case=True) == 1.0
    assert vqa_score("YES", ["Yes"] * 10, ignore_case=True) == 1.0
    assert vqa_score("no", ["yes"] * 10, ignore_case=True) == 0.0
    # When the answers differ the normalisation lowercases anyway: the option changes nothing there.
    answers = ["yes"] * 7 + ["no"] * 3
    assert vqa_score("Yes", answers, ignore_case=True) == vqa_score("Yes", answers) == 1.0


def test_vqa_accuracy_passes_ignore_case_on() -> None:
    question = QuestionRecord(question_id=1, answers=("yes",) * 10, answer_type="yes/no", question_type="is the")
    assert vqa_accuracy({1: "Yes"}, [question]).overall == 0.0
    assert vqa_accuracy({1: "Yes"}, [question], ignore_case=True).overall == 100.0


def test_newlines_and_tabs_become_spaces_and_ends_are_stripped() -> None:
    assert vqa_score("  yes\n", ["yes\t"] * 10) == 1.0
    # Identical answers, so no normalisation: only the newline -> space replacement makes these equal.
    assert vqa_score("red\nwhite", ["red white"] * 10) == 1.0
    assert vqa_score("red\twhite", ["red white"] * 10) == 1.0


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("Two", "2"),
        ("none", "0"),
        ("zero", "0"),
        ("ten", "10"),
        ("eleven", "eleven"),  # the number map stops at ten
        ("a dog", "dog"),
        ("The Dog", "dog"),
        ("an apple", "apple"),
        ("YES", "yes"),
        ("yes!", "yes"),  # "!" touches no space -> replaced by a space, which the final split removes
        ("what?", "what"),
        ("black-white", "black white"),  # no space next to "-": replaced by a space, not deleted
        ("black - white", "black white"),  # "-" touches a space: deleted
        # digit-comma-digit anywhere in the answer: every punctuation mark is deleted, not spaced, so the
        # thousands comma disappears ("1,000" -> "1000") and so does a hyphen next to it.
        ("1,000", "1000"),
        ("1,000-2", "10002"),
        ("red,blue", "red blue"),  # no digits around the comma: replaced by a space
        ("3.5", "3.5"),  # a period followed by a digit stays
        ("dog.", "dog"),  # other periods go
        ("mr.smith", "mrsmith"),
        ("dont", "don't"),
        ("whats", "what's"),
        ("aint", "ain't"),
        ("Im", "im"),  # the map's capitalised keys never match after lowercasing (official behaviour)
        ("don't", "don't"),  # apostrophes are not in the punctuation list
        ("  two   dogs ", "2 dogs"),
    ],
)
def test_normalize_answer(raw: str, expected: str) -> None:
    assert normalize_answer(raw) == expected


# ------------------------------------------------------------------------------------------------------
# vqa_accuracy: aggregation like the official script
# ------------------------------------------------------------------------------------------------------

_YES_NO_MIX = ("yes",) * 8 + ("no",) * 2
_QUESTIONS = [
    QuestionRecord(1, ("yes",) * 10, "yes/no", "is the"),  # "yes" -> 1.0
    QuestionRecord(2, _YES_NO_MIX, "yes/no", "is this"),  # "no"  -> 0.6
    QuestionRecord(3, ("no",) + ("yes",) * 9, "yes/no", "is the"),  # "no"  -> 0.3
    QuestionRecord(4, ("3",) * 3 + ("4",) * 7, "number", "how many"),  # "three" -> "3" -> 0.9
    QuestionRecord(5, ("blue",) * 10, "other", "what color is the"),  # "red" -> 0.0
]
_PREDICTIONS = {1: "yes", 2: "no", 3: "no", 4: "three", 5: "red"}


def test_vqa_accuracy_overall_and_per_type() -> None:
    report = vqa_accuracy(_PREDICTIONS, _QUESTIONS)
    assert report == VqaReport(
        overall=56.0,  # (1 + 0.6 + 0.3 + 0.9 + 0) / 5 = 0.56
        per_answer_type={"yes/no": 63.33, "number": 90.0, "other": 0.0},  # yes/no: 1.9/3 = 0.6333..
        per_question_type={"is the": 65.0, "is this": 60.0, "how many": 90.0, "what color is the": 0.0},
        num_questions=5,
    )


def test_vqa_report_flattens_to_a_0_to_1_scale() -> None:
    metrics = vqa_accuracy(_PREDICTIONS, _QUESTIONS).as_metrics()
    assert metrics == pytest.approx(
        {
            "accuracy": 0.56,
            "accuracy/yes/no": 0.6333,
            "accuracy/number": 0.9,
            "accuracy/other": 0.0,
            "accuracy/question_type/is the": 0.65,
            "accuracy/question_type/is this": 0.6,
            "accuracy/question_type/how many": 0.9,
            "accuracy/question_type/what color is the": 0.0,
        }
    )


def test_missing_predictions_are_named() -> None:
    partial = {qid: answer for qid, answer in _PREDICTIONS.items() if qid not in (3, 5)}
    with pytest.raises(ValueError, match=r"2 of 5 questions have no prediction \(first missing: 3, 5\)"):
        vqa_accuracy(partial, _QUESTIONS)


def test_extra_predictions_are_ignored_and_no_questions_is_an_error() -> None:
    assert vqa_accuracy({**_PREDICTIONS, 99: "yes"}, _QUESTIONS[:1]).overall == 100.0
    with pytest.raises(ValueError, match="at least one question"):
        vqa_accuracy(_PREDICTIONS, [])


def test_question_record_from_a_vqa_v2_annotation() -> None:
    annotation = {
        "question_id": 1000,
        "image_id": 1,
        "question_type": "what is",
        "answer_type": "other",
        "multiple_choice_answer": "lamp",
        "answers": [{"answer": "lamp", "answer_confidence": "yes", "answer_id": i} for i in range(1, 11)],
    }
    record = QuestionRecord.from_annotation(annotation)
    assert record == QuestionRecord(1000, ("lamp",) * 10, "other", "what is")


# ------------------------------------------------------------------------------------------------------
# DAQUAR: answer sets, WUP, WUPS
# ------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def wordnet():
    ensure_wordnet()
    from nltk.corpus import wordnet

    return wordnet


def test_answer_set_splits_on_commas() -> None:
    assert answer_set("chair, table") == frozenset({"chair", "table"})
    assert answer_set("table,chair , ") == frozenset({"chair", "table"})
    assert answer_set("garbage_bin") == frozenset({"garbage_bin"})
    assert answer_set("") == frozenset()


def test_identical_words_and_unknown_words() -> None:
    assert wup("chair", "chair") == 1.0
    assert wup("qwzxv", "qwzxv") == 1.0  # identical strings, even without synsets
    assert wup("qwzxv", "chair") == 0.0  # no synsets
    assert wups("chair", "chair", 0.9) == 1.0


def test_set_answers_in_any_order_score_1() -> None:
    assert wups("chair, table", "table, chair", 0.9) == 1.0
    assert wups("chair,table", "table, chair", 0.0) == 1.0


def test_wup_is_the_best_noun_synset_pair(wordnet) -> None:
    dog, cat = wordnet.synset("dog.n.01"), wordnet.synset("cat.n.01")
    expected = dog.wup_similarity(cat)
    assert expected == pytest.approx(6 / 7)  # the value nltk gives on WordNet 3.0, pinned
    # ... and no other pair of noun senses of "dog" and "cat" is closer:
    assert expected == max(
        x.wup_similarity(y) for x in wordnet.synsets("dog", pos="n") for y in wordnet.synsets("cat", pos="n")
    )
    assert wup("dog", "cat") == expected
    assert wup("cat", "dog") == expected


def test_dissimilar_pair_is_down_weighted_below_the_threshold() -> None:
    similarity = wup("dog", "cat")
    assert similarity < 0.9
    assert wups("dog", "cat", 0.9) == pytest.approx(0.1 * similarity)
    assert wups("dog", "cat", 0.0) == pytest.approx(similarity)


def test_threshold_is_inclusive(wordnet) -> None:
    # sofa.n.01 and chair.n.01 are both seats: Wu-Palmer 0.9 exactly, so WUPS@0.9 keeps it undiminished.
    similarity = wordnet.synset("sofa.n.01").wup_similarity(wordnet.synset("chair.n.01"))
    assert similarity == pytest.approx(0.9)
    assert wup("sofa", "chair") == similarity
    assert wups("sofa", "chair", 0.9) == similarity


def test_wups_of_sets_is_the_min_of_both_products() -> None:
    # A = {dog, chair}, T = {dog}. Precision side: mu(dog,T) * mu(chair,T) = 1 * mu(chair,dog).
    # Recall side: mu(dog, A) = 1. WUPS = min = mu(chair, dog).
    chair_dog = wup("chair", "dog")
    assert 0.0 < chair_dog < 0.9
    assert wups("dog, chair", "dog", 0.0) == pytest.approx(chair_dog)
    assert wups("dog, chair", "dog", 0.9) == pytest.approx(0.1 * chair_dog)
    assert wups("dog", "dog, chair", 0.9) == pytest.approx(0.1 * chair_dog)  # symmetric


def test_wups_with_empty_answers() -> None:
    assert wups("", "", 0.9) == 1.0
    assert wups("", "dog", 0.9) == 0.0
    assert wups("dog", "", 0.0) == 0.0


def test_daquar_metrics_means_over_questions() -> None:
    truths = {1: "table, chair", 2: "cat", 3: "lamp"}
    predictions = {1: "chair, table", 2: "dog", 3: "lamp", 4: "ignored"}
    dog_cat = wup("dog", "cat")
    report = daquar_metrics(predictions, truths)
    assert report.num_questions == 3
    assert report.accuracy == pytest.approx(2 / 3)  # set equality: questions 1 and 3
    assert report.wups_09 == pytest.approx((1 + 0.1 * dog_cat + 1) / 3)
    assert report.wups_00 == pytest.approx((1 + dog_cat + 1) / 3)
    assert report.as_metrics() == {
        "accuracy": report.accuracy,
        "wups@0.9": report.wups_09,
        "wups@0.0": report.wups_00,
    }
    assert isinstance(report, DaquarReport)


def test_daquar_metrics_errors() -> None:
    with pytest.raises(ValueError, match=r"1 of 2 questions have no prediction \(first missing: 'b'\)"):
        daquar_metrics({"a": "dog"}, {"a": "dog", "b": "cat"})
    with pytest.raises(ValueError, match="at least one question"):
        daquar_metrics({}, {})


def test_set_accuracy_ignores_order_and_spaces_but_not_content() -> None:
    report = daquar_metrics({1: "red,blue", 2: "red"}, {1: "blue, red", 2: "red, blue"})
    assert math.isclose(report.accuracy, 0.5)
