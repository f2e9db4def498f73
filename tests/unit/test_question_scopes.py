"""The kinds of question each bundled VQA model is declared to answer (`vqa.bundled.QUESTION_SCOPES`) are the kinds
its training questions were: a question the app refuses with a hint is one the model never learnt to answer, and
the examples the hint gives are questions in the model's own words."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.training.checkpoints import read_checkpoint
from data.shapes_vqa import ShapesWorldVqa
from data.vocabulary import tokenize
from vqa.bundled import MODELS, QUESTION_SCOPES
from vqa.questions import QuestionError

DAQUAR = Path(__file__).resolve().parents[3] / "shared" / "data" / "daquar" / "daquar_train_questions.json"


def refused_share(scope_name: str, questions: list[str]) -> float:
    """The share of `questions` the model's scope refuses."""

    def refused(question: str) -> bool:
        try:
            QUESTION_SCOPES[scope_name].check(question)
        except QuestionError:
            return True
        return False

    return sum(map(refused, questions)) / len(questions)


@pytest.mark.parametrize("name", sorted(QUESTION_SCOPES))
def test_a_scopes_examples_are_questions_in_its_models_words(name):
    words = set(read_checkpoint(MODELS[name].file)["hyper_parameters"]["question_vocabulary"])
    for example in QUESTION_SCOPES[name].examples.values():
        assert set(tokenize(example)) <= words, example


def test_every_shapesworld_question_is_of_a_kind_the_shapes_model_answers():
    questions = [sample.question for sample in ShapesWorldVqa(train_size=200, val_size=1, test_size=1).questions("train")]
    assert len(questions) > 500 and refused_share("shapes-san", questions) == 0
    assert refused_share("shapes-san", ["what is on the table?", "where is the circle?"]) == 1  # never asked so


@pytest.mark.skipif(not DAQUAR.is_file(), reason=f"DAQUAR's questions are not at {DAQUAR} (the project's data folder)")
def test_daquars_training_questions_are_of_the_kinds_the_daquar_model_answers():
    questions = [entry["question"] for entry in json.loads(DAQUAR.read_text())["questions"]]
    assert refused_share("daquar-san", questions) < 0.005  # 14 of 6795 ask where or who
    assert refused_share("daquar-san", ["is there a dog?", "are the chairs red?", "does it have a lamp?"]) == 1
