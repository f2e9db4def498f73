"""Flickr8k-QA: COCO-QA's four rules on captions checked by hand, the question set from a tiny Karpathy-layout
caption file through `python -m vqa.caption_questions`, its reading by `Flickr8kQa` and the VQA data module, and
the one-line errors for bad input."""

from __future__ import annotations

import json
import math

import pytest

from core.training.wordnet import ensure_wordnet
from data.caption_questions import CaptionReader, WordNetLexicon, caption_questions
from data.question_sets import PhotoQuestion, photo_questions, thin_common_answers
from data.errors import DatasetFormatError
from data.vqa2 import Flickr8kQa
from tests.helpers import TINY_CAPTIONS as CAPTIONS
from tests.helpers import karpathy_file
from vqa.caption_questions import main
from vqa.datamodule import VqaDataModule


@pytest.fixture(scope="module")
def reader() -> CaptionReader:
    ensure_wordnet()
    from nltk.corpus import wordnet

    return CaptionReader(lexicon=WordNetLexicon(wordnet=wordnet))


def asked(caption: str, reader: CaptionReader) -> list[tuple[str, str, str]]:
    return [(q.kind, q.question, q.answer) for q in caption_questions(caption.split(), reader=reader)]


# -- the four rules, checked by hand ---------------------------------------------------------------------------


def test_object_and_location_from_the_issues_example(reader):
    assert asked("a dog runs through the grass", reader) == [
        ("object", "what runs through the grass?", "dog"),
        ("location", "where does the dog run?", "grass"),
    ]


def test_number_from_a_counted_subject(reader):
    assert asked("two children play in the snow", reader) == [
        ("number", "how many children play in the snow?", "two"),
        ("location", "where do the two children play?", "snow"),
    ]


def test_color_of_a_thing_named_after_the_colour(reader):
    assert asked("a man in a red shirt climbs a rock", reader) == [("color", "what is the color of the shirt?", "red")]


def test_progressive_verb_the_verbs_object_and_a_place_after_it(reader):
    assert asked("a man is riding a bike on a dirt road", reader) == [
        ("object", "what is riding a bike on a dirt road?", "man"),
        ("object", "what is the man riding?", "bike"),
        ("location", "where is the man riding a bike?", "road"),
    ]


def test_a_counted_object_and_a_copula_place(reader):
    assert asked("a man holds two puppies", reader) == [
        ("object", "what holds two puppies?", "man"),
        ("number", "how many puppies does the man hold?", "two"),
    ]
    assert asked("a black dog is in the water", reader) == [
        ("object", "what is in the water?", "dog"),
        ("color", "what is the color of the dog?", "black"),
        ("location", "where is the black dog?", "water"),
    ]


@pytest.mark.parametrize("caption", [
    "a man wearing a hat walks down the street",  # two verbs: the rules would join its parts wrongly
    "a boy and a girl bouncing on a ball",  # a subject of two phrases
    "a group of people",  # no verb
    "a skier dressed in black speeds down the mountain",  # "black" a noun: not "the color of the speeds"
    "a boy is inside holding something on top of his head",  # "is inside" without a place
    "a boy wearing brown running in dirt",  # a second verb, and "brown" a noun
    "two small children wearing blue jeans enjoy swinging in a tire swing",  # a second verb: "enjoy"
])
def test_a_caption_no_rule_reads_well_gives_no_question(reader, caption):
    assert asked(caption, reader) == []


def test_a_light_verbs_object_is_no_thing_to_ask_about(reader):
    assert asked("a snowboarder takes a rest on the mountainside", reader) == [
        ("object", "what takes a rest on the mountainside?", "snowboarder"),
        ("location", "where does the snowboarder take a rest?", "mountainside"),
    ]


def test_colours_are_never_asked_of_people_nor_of_two_coloured_things(reader):
    assert [q for q in asked("a black man runs through the grass", reader) if q[0] == "color"] == []
    assert [q for q in asked("a dog catches a red and white ball", reader) if q[0] == "color"] == []
    assert [q for q in asked("people stand around a yellow suited musician", reader) if q[0] == "color"] == []


def test_behind_and_by_name_no_place(reader):
    assert [q for q in asked("a black dog paddles behind a black cat", reader) if q[0] == "location"] == []
    assert [q for q in asked("a dog is pulled by a man", reader) if q[0] == "location"] == []


def test_a_question_two_captions_of_a_photo_answer_differently_is_dropped(reader):
    captions = ["a man in a red shirt climbs a rock", "a man in a blue shirt climbs a rock", "a dog runs in the snow"]
    questions = photo_questions(7, [c.split() for c in captions], reader=reader)
    assert {q.question for q in questions} == {"what runs in the snow?", "where does the dog run?"}
    assert {q.photo for q in questions} == {7}


def test_thinning_keeps_the_first_answers_then_fewer_and_fewer_whatever_the_order():
    """Up to U + 1 questions of an answer are always kept (enrolment probability 1 while count <= U); an answer with
    few questions loses none; the kept ones do not depend on the input order, whose order they keep."""
    questions = [PhotoQuestion(p, f"q{p}", "dog" if p < 40 else "cat", "object", "") for p in range(44)]
    kept = thin_common_answers(questions, cap={"object": 3})
    assert sum(q.answer == "cat" for q in kept) == 4  # 4 = U + 1: all kept
    assert 4 <= sum(q.answer == "dog" for q in kept) < 40
    assert set(thin_common_answers(questions[::-1], cap={"object": 3})) == set(kept)
    assert kept == [q for q in questions if q in kept]  # the input order


def test_thinning_keeps_about_the_expected_count_of_coco_qas_rule():
    """With enrolment probability exp(-(c - U) / 2U) once c > U questions are kept, the count grows as
    dc/dn = exp(-(c - U) / 2U), so n questions keep about U + 2U ln(1 + (n - U) / 2U): 20 + 40 ln(1 + 1980 / 40) =
    176.9 of 2000 at U = 20. The draws are hashes, so the count is near that, not equal; order is kept between
    answers of different frequency."""
    common = [PhotoQuestion(p, f"how many {p}?", "two", "number", "") for p in range(2000)]
    rarer = [PhotoQuestion(p, f"how many {p}?", "three", "number", "") for p in range(2000, 2400)]
    kept = thin_common_answers(common + rarer, cap={"number": 20})
    two, three = sum(q.answer == "two" for q in kept), sum(q.answer == "three" for q in kept)
    assert 150 <= two <= 205
    assert 20 + 40 * math.log(1 + 380 / 40) == pytest.approx(114.1, abs=0.1) and 90 <= three <= 140
    assert two > three


# -- the command on a tiny caption file (tests.helpers.TINY_CAPTIONS) ----------------------------------------------

def test_the_command_writes_a_set_the_vqa_reader_and_data_module_read(tmp_path, capsys):
    assert main([str(karpathy_file(tmp_path / "captions")), str(tmp_path / "qa"), "--cap-share", "1"]) == 0
    printed = capsys.readouterr().out
    assert "| train | 1 | 1 | 2 | 3 | 7 |" in printed  # questions per type: object, number, color, location
    dataset = Flickr8kQa(root=tmp_path / "qa")
    test = dataset.questions("test")
    assert [(s.question, s.answer, s.question_type) for s in test] == [
        ("what throws a ball?", "boy", "object"), ("what does the boy throw?", "ball", "object")
    ]
    assert test[0].answers == ("boy",) * 10 and test[0].answer_type == "other"
    number = next(s for s in dataset.questions("train") if s.question_type == "number")
    assert (number.question, number.answer) == ("how many children play in the snow?", "two")
    assert number.answer_type == "number"
    # every photo of the caption split, asked about or not: the feature cache's images do not follow the rules
    assert dataset.image_ids("val") == ["2", "4"] and dataset.load("4").getpixel((16, 16))[0] in range(150, 171)
    module = VqaDataModule(dataset=dataset)
    words, answers = module.build_vocabularies()
    assert set(answers.answers) == {"dog", "two", "black", "red", "grass", "snow"}
    assert "color" in words.tokens


def test_a_file_that_is_not_in_karpathy_layout_is_refused_in_one_line(tmp_path, capsys):
    path = tmp_path / "captions.json"
    path.write_text(json.dumps({"annotations": [{"image_id": 1, "caption": "a dog"}]}))
    assert main([str(path), str(tmp_path / "qa")]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "Karpathy split file" in error
    assert not (tmp_path / "qa").exists()


def test_a_missing_caption_file_is_refused_in_one_line_naming_this_commands_argument(tmp_path, capsys):
    assert main([str(tmp_path / "nothing.json"), str(tmp_path / "qa")]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and f"caption file not found: {tmp_path / 'nothing.json'}" in error
    assert "--data." not in error  # the training CLI's option is not this command's
    assert not (tmp_path / "qa").exists()


def test_a_split_without_questions_is_refused_in_one_line(tmp_path, capsys):
    photos = {k: v for k, v in CAPTIONS.items() if v[0] != "test"} | {3: ("test", ["a group of people"])}
    assert main([str(karpathy_file(tmp_path, photos)), str(tmp_path / "qa")]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1
    assert "the test split has no questions (no caption of its 1 photos fits a rule)" in error
    photos = {k: v for k, v in CAPTIONS.items() if v[0] != "val"}
    assert main([str(karpathy_file(tmp_path / "b", photos)), str(tmp_path / "qa")]) == 2
    assert "the val split has no questions (no photos)" in capsys.readouterr().err


def test_a_photo_list_without_a_questions_photo_is_refused(tmp_path):
    assert main([str(karpathy_file(tmp_path / "captions")), str(tmp_path / "qa")]) == 0
    (tmp_path / "qa" / "flickr8k_qa_val_photos.json").write_text(json.dumps({"image_ids": [4]}))
    with pytest.raises(DatasetFormatError, match="lacks photo 2, which a question of val is about"):
        Flickr8kQa(root=tmp_path / "qa").image_ids("val")
