"""Where a SAN's hops look on photos with boxes (`vqa.hop_grounding`): which boxed classes are asked about, each hop
scored by the same `score_pair` as `python -m captioning.grounding`, and vqa kept apart from captioning."""

from __future__ import annotations

import math
import subprocess
import sys
from types import SimpleNamespace

import pytest
import torch

from core.maps.grounding import score_pair
from data.boxes import BoxedObject, BoxedPhoto
from data.vocabulary import Vocabulary
from tests.helpers import REPO
from vqa.hop_grounding import TEMPLATES, asked_about, class_word, score_photo, summary

PHOTO = BoxedPhoto(
    file="p.jpg",
    size=(200, 100),
    objects=(
        BoxedObject("dining table", (0.0, 0.0, 90.0, 45.0)),  # 81% of the top-left cell of a 2x2 grid
        BoxedObject("teddy bear", (100.0, 50.0, 200.0, 100.0)),  # no word of its own
        BoxedObject("dog", (100.0, 0.0, 200.0, 50.0)),  # a word the model below does not know
    ),
)


class PointingAnswerer:
    """Answers every question "red"; over a 2x2 grid, hop 1 peaks at the bottom right, hop 2 is all on the top left."""

    model = SimpleNamespace(question_vocabulary=Vocabulary.build(["what is the color of the table", "where is it"]))

    def ask(self, image, question: str, *, top_k: int = 5):
        hops = torch.tensor([[[0.1, 0.2], [0.3, 0.4]], [[1.0, 0.0], [0.0, 0.0]]])  # (K, rows, columns)
        return SimpleNamespace(answers=[("red", 0.9)], hops=hops)


def test_classes_are_asked_about_by_a_word_the_model_knows():
    assert class_word("dining table") == "table" and class_word("teddy bear") is None and class_word("dog") == "dog"
    assert asked_about(PHOTO, PointingAnswerer.model.question_vocabulary) == [("dining table", "table")]


def test_each_hop_is_scored_against_the_named_objects_boxes():
    scores = score_photo(PointingAnswerer(), PHOTO, image=None)
    assert [(s.question, s.hop) for s in scores] == [
        (template.format(word="table"), hop) for template in TEMPLATES for hop in (1, 2)
    ]
    report = summary(scores)
    hop1, hop2 = report["hop 1"], report["hop 2"]
    assert hop1["mass inside"] == pytest.approx(0.081) and hop1["uniform mass"] == pytest.approx(0.2025)
    assert hop1["pointing"] == 0.0 and hop1["random cell pointing"] == 0.25
    assert hop2["mass inside"] == pytest.approx(0.81) and hop2["pointing"] == 1.0 and hop2["centre pointing"] == 0.0
    assert scores[1].pair == score_pair(torch.tensor([[1.0, 0.0], [0.0, 0.0]]), PHOTO, _mention())


def _mention():
    from core.maps.grounding import Mention

    return Mention(position=6, phrase="table", classes=frozenset({"dining table"}))


def test_captioning_scores_with_the_same_code_and_vqa_never_imports_captioning():
    import captioning.grounding
    import core.maps.grounding

    assert captioning.grounding.score_pair is core.maps.grounding.score_pair
    code = "import sys, vqa.hop_grounding; print(sorted(m for m in sys.modules if m.startswith('captioning')))"
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_other_questions_can_be_asked_and_a_template_without_the_word_is_refused(tmp_path, capsys):
    from vqa.hop_grounding import main

    scores = score_photo(PointingAnswerer(), PHOTO, image=None, templates=["what is on the {word}?"])
    assert [(s.question, s.hop) for s in scores] == [("what is on the table?", 1), ("what is on the table?", 2)]
    with pytest.raises(SystemExit):
        main(["--images", str(tmp_path), "--boxes", str(tmp_path / "b.json"), "--templates", '["what is this?"]'])
    assert "{word}" in capsys.readouterr().err


def test_the_leads_interval_resamples_photos_and_needs_two():
    from dataclasses import replace

    from core.maps.grounding import photo_interval

    one = score_pair(torch.tensor([[1.0, 0.0], [0.0, 0.0]]), PHOTO, _mention())  # points, the centre does not
    assert one.pointed and not one.centre
    same = [one, replace(one, photo="q.jpg"), replace(one, photo="r.jpg")]
    assert photo_interval(same, lambda p: p.pointed - p.centre) == (1.0, 1.0)  # every draw leads by one
    mixed = [one, one, replace(one, photo="q.jpg", pointed=False)]  # photo p leads twice, photo q not at all
    low, high = photo_interval(mixed, lambda p: p.pointed - p.centre)
    assert 0.0 <= low < 2 / 3 < high <= 1.0
    assert all(math.isnan(x) for x in photo_interval([one, one], lambda p: p.pointed))  # one photo: no interval
    report = summary(score_photo(PointingAnswerer(), PHOTO, image=None))
    assert all(math.isnan(x) for x in report["hop 2"]["pointing minus centre, 95% interval"])
