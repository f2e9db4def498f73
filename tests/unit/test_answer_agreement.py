"""experiments/answer_agreement.py: how often two captions answer a question alike, and how many of a model's wrong
answers swap one person word for another, on tiny caption sets counted by hand."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from core.training.wordnet import ensure_wordnet
from data.caption_questions import CaptionReader, WordNetLexicon
from data.question_sets import karpathy_photos
from experiments.answer_agreement import caption_agreement, main, pair_agreement, person_word_errors, read_answers
from tests.helpers import karpathy_file
from vqa.caption_questions import main as make_questions

TWO_PHOTOS = {
    # "what runs through the grass?": dog, man (disagree); "where does the dog run?": grass, field (disagree)
    0: ("train", ["a dog runs through the grass", "a dog runs through the field", "a man runs through the grass"]),
    # "what runs through the grass?": dog, dog (agree); "where does the dog run?": grass, grass, field (1 of 3 pairs)
    1: ("test", ["a dog runs through the grass", "a dog runs through the grass", "a dog runs through the field"]),
}


@pytest.fixture(scope="module")
def lexicon() -> WordNetLexicon:
    ensure_wordnet()
    from nltk.corpus import wordnet

    return WordNetLexicon(wordnet=wordnet)


def test_pair_agreement_counts_ordered_pairs_of_different_captions():
    assert pair_agreement(["grass", "grass", "field"]) == pytest.approx(2 / 6)
    assert pair_agreement(["dog", "dog"]) == 1.0
    assert pair_agreement(["dog", "man"]) == 0.0


def test_caption_agreement_by_type_with_its_interval(tmp_path: Path, lexicon):
    photos = karpathy_photos(karpathy_file(tmp_path, TWO_PHOTOS))
    agreement = caption_agreement(photos, reader=CaptionReader(lexicon=lexicon))
    assert set(agreement) == {"object", "location"}  # every other question is asked by one caption only
    assert agreement["object"].questions == 2
    assert agreement["object"].agreement == pytest.approx(0.5)  # 0 and 1
    assert agreement["object"].interval == pytest.approx(1.96 * math.sqrt(0.5 / 2))  # sample variance 0.5
    assert agreement["location"].agreement == pytest.approx((0 + 1 / 3) / 2)


def test_person_word_errors_of_a_model_on_the_test_split(tmp_path: Path, lexicon):
    assert make_questions([str(karpathy_file(tmp_path / "captions")), str(tmp_path / "qa"), "--cap-share", "1"]) == 0
    truth = {a["question_id"]: a["multiple_choice_answer"]
             for a in json.loads((tmp_path / "qa" / "flickr8k_qa_test_annotations.json").read_text())["annotations"]}
    assert sorted(truth.values()) == ["ball", "boy"]  # "a boy throws a ball": what throws a ball, what does he throw
    answers = {qid: {"boy": "girl", "ball": "dog"}[word] for qid, word in truth.items()}
    errors = person_word_errors(tmp_path / "qa", answers, lexicon=lexicon)
    assert set(errors) == {"object"}
    assert (errors["object"].questions, errors["object"].right, errors["object"].person_for_person) == (2, 0, 1)
    assert errors["object"].accuracy_person_words_as_one == 0.5  # girl for boy counts, dog for ball does not

    path = tmp_path / "answers.json"
    path.write_text(json.dumps([{"question_id": q, "answer": a} for q, a in answers.items()]))
    assert read_answers(path) == answers


def test_the_command_prints_both_tables_and_names_bad_input(tmp_path: Path, capsys):
    captions = karpathy_file(tmp_path / "captions")
    assert make_questions([str(captions), str(tmp_path / "qa"), "--cap-share", "1"]) == 0
    capsys.readouterr()
    annotations = json.loads((tmp_path / "qa" / "flickr8k_qa_test_annotations.json").read_text())["annotations"]
    answers = tmp_path / "answers.json"
    answers.write_text(json.dumps([{"question_id": a["question_id"], "answer": "boy"} for a in annotations]))
    assert main([str(captions), "--set", str(tmp_path / "qa"), "--answers", str(answers)]) == 0
    out = capsys.readouterr().out
    assert "two captions answer alike" in out
    assert "| object | 2 | 50.00 | 1 | 0 | 50.00 |" in out  # "boy" right for boy, wrong (not a person) for ball

    answers.write_text(json.dumps([{"question_id": annotations[0]["question_id"], "answer": "boy"}]))
    assert main([str(captions), "--set", str(tmp_path / "qa"), "--answers", str(answers)]) == 2
    assert "no answer to question" in capsys.readouterr().err
    answers.write_text("{not json")
    assert main([str(captions), "--set", str(tmp_path / "qa"), "--answers", str(answers)]) == 2
    assert "not an answers file" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main([str(captions), "--set", str(tmp_path / "qa")])  # --answers missing
