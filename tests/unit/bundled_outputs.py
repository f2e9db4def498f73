"""What every bundled model says about fixed inputs: the captions and answers that refactors must keep.

`python -m tests.unit.bundled_outputs` records them into `bundled_outputs.json` (run it only when a model's
outputs are meant to change, and say why in the commit); `test_bundled_outputs.py` compares against it. Each
attention map is kept as a fingerprint (its peak cell, the peak's weight and the map's centre of mass), so the
file stays small while any change to the attention is still caught.
"""

from __future__ import annotations

import json
from pathlib import Path

import skimage.data
import torch
from PIL import Image

from captioning.pretrained import Captioner
from data.shapes_scene import generate_split_scene, render_scene
from vqa.pretrained import Answerer

RECORD = Path(__file__).with_name("bundled_outputs.json")
PHOTOS = ("astronaut", "chelsea")  # scikit-image photos, for the Flickr8k models
SCENES = (1, 3)  # ShapesWorld test scenes (seed 0), for the ShapesWorld models
QUESTIONS = {
    "flickr8k-qa-san": ("what is the woman holding?", "what color is the cat?"),
    "daquar-san": ("what is on the table?", "how many chairs are there?"),
    "shapes-san": ("what colour is the circle?", "how many objects are there?"),
}


def inputs(model: str) -> dict[str, Image.Image]:
    """The fixed images a bundled model is asked about, by name."""
    if model.startswith("shapes"):
        return {f"scene_{i}": render_scene(generate_split_scene(0, "test", i), 224) for i in SCENES}
    return {name: Image.fromarray(getattr(skimage.data, name)()) for name in PHOTOS}


def fingerprint(attention: torch.Tensor) -> list[list[float]]:
    """(N, rows, columns) maps -> per map [peak cell, peak weight, centre-of-mass row, centre-of-mass column]."""
    maps = attention.flatten(1).double()  # (N, L)
    rows, columns = attention.shape[-2:]
    row_of = torch.arange(rows, dtype=torch.float64).repeat_interleave(columns)  # (L,)
    column_of = torch.arange(columns, dtype=torch.float64).repeat(rows)  # (L,)
    peaks = maps.max(dim=1)
    mass = maps.sum(dim=1)
    return [
        [float(cell), float(weight), float(m @ row_of / total), float(m @ column_of / total)]
        for cell, weight, m, total in zip(peaks.indices, peaks.values, maps, mass)
    ]


def captions(name: str) -> dict[str, dict]:
    captioner = Captioner.from_pretrained(name)
    said = {}
    for photo, image in inputs(name).items():
        caption = captioner.caption(image)
        said[photo] = {"words": caption.words, "maps": fingerprint(caption.attention)}
    return said


def answers(name: str) -> dict[str, dict]:
    answerer = Answerer.from_pretrained(name)
    said = {}
    for photo, image in inputs(name).items():
        for question in QUESTIONS[name]:
            answer = answerer.ask(image, question, top_k=3)
            said[f"{photo}: {question}"] = {
                "answers": [[label, probability] for label, probability in answer.answers],
                "hops": fingerprint(answer.hops),
            }
    return said


def record() -> dict[str, dict]:
    return {
        "captioners": {name: captions(name) for name in Captioner.available()},
        "answerers": {name: answers(name) for name in Answerer.available()},
    }


if __name__ == "__main__":
    RECORD.write_text(json.dumps(record(), indent=1) + "\n")
    print(f"wrote {RECORD}")
