"""Every bundled checkpoint still loads and says what it said when `bundled_outputs.json` was recorded: the same
words, the same answers, and attention maps with the same peak and centre of mass (to float32 rounding)."""

from __future__ import annotations

import json

import pytest

from captioning.pretrained import Captioner
from tests.unit.bundled_outputs import RECORD, answers, captions
from vqa.pretrained import Answerer

RECORDED = json.loads(RECORD.read_text())
TOLERANCE = 2e-4  # float32 sums over at most 144 cells, and the probabilities of a softmax


def test_every_bundled_model_is_recorded():
    assert sorted(RECORDED["captioners"]) == sorted(Captioner.available())
    assert sorted(RECORDED["answerers"]) == sorted(Answerer.available())


def assert_maps_equal(now: list[list[float]], then: list[list[float]]) -> None:
    assert len(now) == len(then)
    for (cell, *values), (cell_then, *values_then) in zip(now, then):
        assert cell == cell_then
        assert values == pytest.approx(values_then, abs=TOLERANCE)


@pytest.mark.parametrize("name", sorted(RECORDED["captioners"]))
def test_bundled_captioner_says_what_it_said(name):
    for photo, now in captions(name).items():
        then = RECORDED["captioners"][name][photo]
        assert now["words"] == then["words"], photo
        assert_maps_equal(now["maps"], then["maps"])


@pytest.mark.parametrize("name", sorted(RECORDED["answerers"]))
def test_bundled_answerer_answers_what_it_answered(name):
    for asked, now in answers(name).items():
        then = RECORDED["answerers"][name][asked]
        assert [label for label, _ in now["answers"]] == [label for label, _ in then["answers"]], asked
        assert [p for _, p in now["answers"]] == pytest.approx([p for _, p in then["answers"]], abs=TOLERANCE)
        assert_maps_equal(now["hops"], then["hops"])
