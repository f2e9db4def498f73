"""Where a ShapesWorld captioning model's attention goes when it names an object.

Attention correctness (the `test/attention_correctness` of `python -m captioning test`) says how much of a
word's attention falls inside the box of the object the word names. This script says where the rest goes, on
ShapesWorld validation scenes, for the size, colour and shape words of every noun phrase:

- `in_box`: the mass inside the named object's box (attention correctness, teacher-forced on each scene's first
  reference caption, as the test command measures it);
- `beside_box`: the mass inside that box grown by one grid cell on every side (a map hugging the object's edge
  scores high here and low above);
- `on_other_objects`: the mass inside the boxes of the scene's other objects;
- `peak_in_box`: the share of words whose most attended cell is (partly) inside the box;
- `by_word`: `in_box` for each word of the first and the second noun phrase ("first colour", ...), in scenes of
  one object and of several: a model that reads an object at one word and says the next from memory, while it
  looks elsewhere, shows here; `by_word_on_other_named` is the mass, at the same words, on the object the
  caption's other noun phrase names;
- `own_captions`: the mass inside the box on the model's own beam-search caption, each noun phrase
  "a SIZE COLOUR SHAPE" matched to the scene's one object that fits it (phrases that fit none or several are
  counted in `unmatched_words` and left out), so a model is not judged against a reference it did not choose.

    python experiments/attention_targets.py captioning/bundled/shapes_soft.ckpt --scenes 200

Prints one JSON object. ShapesWorld renders the scenes, so no dataset or feature cache is needed.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from captioning.module import CaptioningModule
from core.maps.measures import box_masks
from data.dataset import Box
from data.shapes import ShapesWorld
from data.shapes_scene import COLOURS, SHAPES, SIZES
from data.vocabulary import tokenize


def cells(boxes: list[Box], grid: int, grow: float = 0.0) -> torch.Tensor:
    """(grid * grid,) the covered fraction of every cell of a square grid (ShapesWorld's) by the union of boxes,
    each grown by `grow` (image units)."""
    if not boxes:
        return torch.zeros(grid * grid)
    corners = [
        [max(0.0, b.x0 - grow), max(0.0, b.y0 - grow), min(1.0, b.x1 + grow), min(1.0, b.y1 + grow)] for b in boxes
    ]
    return box_masks(torch.tensor(corners), grid, grid).amax(dim=0)


def word_kind(index: int, objects: int) -> tuple[str, str]:
    """("first colour", "several objects") for the grounded word `index` of a ShapesWorld caption (`describe`
    grounds size, colour and shape of the first noun phrase, then of the second) in a scene of `objects` objects."""
    word = f"{('first', 'second')[index // 3]} {('size', 'colour', 'shape')[index % 3]}"
    return word, "one object" if objects == 1 else "several objects"


def measure(model: CaptioningModule, scenes: int, beam_size: int) -> dict[str, float]:
    dataset = ShapesWorld(train_size=0, val_size=scenes, test_size=0, heldout_size=0)
    (grid, _), transform, v = model.encoder.grid_shape, model.encoder.transform(), model.vocabulary
    sums = dict(in_box=0.0, beside_box=0.0, on_other_objects=0.0, peak_in_box=0.0)
    by_word: dict[str, list[float]] = {}
    by_word_other: dict[str, list[float]] = {}
    words = own_words = unmatched = 0
    own_sum = 0.0
    for sample in dataset.samples("val"):
        scene = dataset.scene(sample.image_id)
        image = transform(dataset.load(sample)).unsqueeze(0)  # (1, 3, S, S)
        features = model.features(image)  # (1, L, D)
        # teacher-forced on the first reference, as the test command measures attention correctness
        ids = [v.start_id, *(v.tokens.index(w) for w in tokenize(sample.captions[0])), v.end_id]
        alpha = model.decoder(features, torch.tensor([ids[:-1]]), model.attention.inference_read()).weights[0]  # (T, L)
        for index, grounded in enumerate(sample.grounding[0]):
            weights = alpha[grounded.position]  # (L,)
            box = grounded.box
            others = [o.box for o in scene.objects if o.box != box]
            inside = cells([box], grid)
            mass = float((weights * inside).sum())
            sums["in_box"] += mass
            # grounding lists (size, colour, shape) of the first noun phrase, then of the second
            word, scenes_of = word_kind(index, len(scene.objects))
            by_word.setdefault(f"{word}, {scenes_of}", []).append(mass)
            named_other = [g.box for g in sample.grounding[0] if g.box != box][:1]  # the other phrase's object
            if named_other:
                by_word_other.setdefault(word, []).append(float((weights * cells(named_other, grid)).sum()))
            sums["beside_box"] += float((weights * cells([box], grid, grow=1.0 / grid)).sum())
            sums["on_other_objects"] += float((weights * cells(others, grid)).sum())
            sums["peak_in_box"] += float(inside[weights.argmax()] > 0)
            words += 1
        # the model's own caption: its noun phrases matched to the scene's objects
        generated = model.generate(image, beam_size=beam_size)
        said, rows = model.caption_words(generated.tokens[0], generated.weights[0])
        for i in range(len(said) - 3):
            phrase = tuple(said[i + 1 : i + 4])
            if said[i] != "a" or phrase[0] not in SIZES or phrase[1] not in COLOURS or phrase[2] not in SHAPES:
                continue
            fitting = [o for o in scene.objects if (o.size, o.colour, o.shape) == phrase]
            if len(fitting) != 1:
                unmatched += 3
                continue
            inside = cells([fitting[0].box], grid)
            for j in range(1, 4):
                own_sum += float((rows[i + j] * inside).sum())
                own_words += 1
    result = {name: round(total / words, 4) for name, total in sums.items()}
    result["own_captions"] = round(own_sum / max(own_words, 1), 4)
    for name, table in (("by_word", by_word), ("by_word_on_other_named", by_word_other)):
        result[name] = {word: round(sum(masses) / len(masses), 4) for word, masses in sorted(table.items())}
    result.update(grounded_words=words, own_caption_words=own_words, unmatched_words=unmatched, scenes=scenes)
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint", type=Path, help="a ShapesWorld captioning checkpoint")
    parser.add_argument("--scenes", type=int, default=200, help="validation scenes to measure (default 200)")
    parser.add_argument("--beam-size", type=int, default=3, help="beam width of the model's own captions (default 3)")
    args = parser.parse_args(argv)
    with torch.no_grad():
        model = CaptioningModule.load(args.checkpoint)
        print(json.dumps({"checkpoint": str(args.checkpoint), **measure(model, args.scenes, args.beam_size)}))


if __name__ == "__main__":
    main()
