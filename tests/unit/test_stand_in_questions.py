"""experiments/stand_in_questions.py: the committed questions read, the tally by type counted by hand, and the
command on a photo the way the docs run it, with its bad inputs."""

from __future__ import annotations

import json

import pytest
from PIL import Image

from experiments.stand_in_questions import QUESTIONS, main, read_questions, summary


def test_the_committed_file_holds_40_questions_of_the_four_types():
    questions = read_questions(QUESTIONS)
    assert len(questions) == 40
    assert {q["type"] for q in questions} == {"object", "number", "color", "location"}
    assert [q["accepted"] for q in questions if q["type"] == "number"] == [["two"]] * 5


def test_summary_counts_right_answers_per_type_by_hand():
    answered = [
        ({"type": "color", "accepted": ["red", "pink"]}, "pink"),  # right: any accepted answer
        ({"type": "color", "accepted": ["red"]}, "blue"),
        ({"type": "number", "accepted": ["two"]}, "two"),
    ]
    assert summary(answered) == "2 of 3 right: number 1 of 1, color 1 of 2"


def test_the_command_asks_the_bundled_model_and_names_bad_input(tmp_path, capsys):
    Image.new("RGB", (64, 48), (30, 140, 40)).save(tmp_path / "grass.jpg")
    questions = tmp_path / "questions.json"
    rows = [{"photo": "grass.jpg", "type": "color", "question": "what color is the grass?", "accepted": ["green"]}]
    questions.write_text(json.dumps({"questions": rows}))
    assert main(["--images", str(tmp_path), "--questions", str(questions), "--show", "true"]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith("grass.jpg | color | what color is the grass? | ")
    assert printed[-1] in ("1 of 1 right: color 1 of 1", "0 of 1 right: color 0 of 1")
    assert (printed[-1][0] == "1") == printed[0].endswith("| green")

    assert main(["--images", str(tmp_path / "nowhere"), "--questions", str(questions)]) == 2
    assert "nowhere" in capsys.readouterr().err  # the missing photo is named
    questions.write_text("{not json")
    assert main(["--images", str(tmp_path), "--questions", str(questions)]) == 2
    assert "not a stand-in question file" in capsys.readouterr().err
    questions.write_text(json.dumps({"questions": 5}))
    assert main(["--images", str(tmp_path), "--questions", str(questions)]) == 2
    assert "is no list" in capsys.readouterr().err
    questions.write_text(json.dumps({"questions": [{"photo": "grass.jpg", "type": "size"}]}))
    assert main(["--images", str(tmp_path), "--questions", str(questions)]) == 2
    assert "each question needs" in capsys.readouterr().err
    assert main(["--images", str(tmp_path), "--model", str(tmp_path / "grass.jpg")]) == 2
    assert "grass.jpg" in capsys.readouterr().err  # not a checkpoint
