"""`python -m vqa.export` shows answers as words (DAQUAR's `tissue_roll` as "tissue roll") in the grid's title and
in what it prints, keeps the model's labels in answer.json, and notes on stderr when a question was cut."""

from __future__ import annotations

import json

import pytest
import torch
from PIL import Image

import vqa.export
import vqa.overlays
from vqa.bundled import SHAPES_SAN
from vqa.module import Answered, VqaModule


@pytest.fixture
def labelled(monkeypatch) -> list[str]:
    """The bundled ShapesWorld model made to answer with two DAQUAR labels; returns the grid titles drawn."""
    titles: list[str] = []
    draw = vqa.overlays.word_grid

    def answer(self: VqaModule, image: torch.Tensor, question: str, *, top: int = 5) -> Answered:
        cells = self.encoder.num_locations
        hops = torch.full((2, cells), 1.0 / cells)
        return Answered([("tissue_roll", 0.75), ("bottle_of_liquid", 0.25)], hops)

    def word_grid(*args, image_title: str, **kwargs) -> Image.Image:
        titles.append(image_title)
        return draw(*args, image_title=image_title, **kwargs)

    monkeypatch.setattr(VqaModule, "answer", answer)
    monkeypatch.setattr(vqa.overlays, "word_grid", word_grid)
    return titles


def test_the_export_shows_answers_as_words_and_keeps_the_labels_in_its_json(tmp_path, labelled, capsys):
    photo = tmp_path / "room.png"
    Image.new("RGB", (64, 48), "gray").save(photo)
    out = tmp_path / "answer"
    question = " ".join(["what is on the table"] * 7)  # 35 words: the model reads its first 30
    assert vqa.export.main([str(SHAPES_SAN), str(photo), "--question", question, "--output", str(out)]) == 0
    printed = capsys.readouterr()
    assert ": tissue roll (0.75) ->" in printed.out
    assert "Only the first 30 words of the question were read (it has 35)" in printed.err
    assert labelled == ["tissue roll (75%)"]
    record = json.loads((out / "answer.json").read_text())
    assert [answer for answer, _ in record["answers"]] == ["tissue_roll", "bottle_of_liquid"]
