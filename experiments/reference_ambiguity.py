"""How much of ShapesWorld's attention correctness a model can reach at all, teacher-forced on the first reference.

Attention correctness (`test/attention_correctness` of `python -m captioning test`) feeds the model the first
reference caption word by word and asks, at each size, colour and shape word, how much of the attention lies in
the box of the object that word names. But the attention of step t is computed *before* word t is known: at
"a large ..." in a scene with two large objects, the words so far fit both, and nothing tells the model which
one this reference goes on to name. This script counts, for every grounded word of each test scene's first
reference, the objects that some caption of the scene (any of its distinct references) names at that position
after the same words, and prints:

- `determined`: the share of grounded words for which that set is one object;
- `ceiling_uniform`: the correctness of a model whose attention lies wholly, and evenly, on those objects (the
  mean of 1 / their number): a perfect grounder that does not guess which object the reference picks;
- the same per word ("first size, several objects", ...).

A model can beat `ceiling_uniform` only by guessing right which object the reference names, for instance
by learning that the first reference's subject is the scene's first object in mention order.

    python experiments/reference_ambiguity.py --scenes 500

Prints one JSON object; needs no model, no dataset and no feature cache (ShapesWorld is generated).
"""

from __future__ import annotations

import argparse
import json

from attention_targets import word_kind  # the benchmark beside this one (run from the repository root)
from data.dataset import Box
from data.shapes import ShapesWorld, scene_captions
from data.vocabulary import tokenize


def named_objects(captions: tuple[str, ...], groundings: tuple, prefix: list[str], position: int) -> set[Box]:
    """The boxes that the captions starting with `prefix` name with their word at `position`."""
    boxes = set()
    for caption, grounding in zip(captions, groundings):
        if tokenize(caption)[:position] == prefix:
            boxes.update(word.box for word in grounding if word.position == position)
    return boxes


def measure(scenes: int) -> dict:
    dataset = ShapesWorld(train_size=0, val_size=0, test_size=scenes, heldout_size=0)
    shares: dict[str, list[float]] = {}
    determined = []
    for sample in dataset.samples("test"):
        scene = dataset.scene(sample.image_id)
        count = len(scene.objects)
        captions, groundings = scene_captions(scene, max(1, count * (count - 1)))  # every distinct caption
        reference = tokenize(sample.captions[0])
        for index, grounded in enumerate(sample.grounding[0]):
            candidates = named_objects(captions, groundings, reference[: grounded.position], grounded.position)
            word, scenes_of = word_kind(index, count)
            shares.setdefault(f"{word}, {scenes_of}", []).append(1 / len(candidates))
            shares.setdefault("all", []).append(1 / len(candidates))
            determined.append(len(candidates) == 1)
    return {
        "determined": round(sum(determined) / len(determined), 4),
        "ceiling_uniform": round(sum(shares["all"]) / len(shares["all"]), 4),
        "by_word": {name: round(sum(v) / len(v), 4) for name, v in sorted(shares.items()) if name != "all"},
        "grounded_words": len(determined),
        "scenes": scenes,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenes", type=int, default=500, help="test scenes (default 500, the test split)")
    args = parser.parse_args(argv)
    print(json.dumps(measure(args.scenes)))


if __name__ == "__main__":
    main()
