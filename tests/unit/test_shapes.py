"""ShapesWorld: determinism, scene invariants, caption grammar, grounding against rendered pixels, splits."""

from __future__ import annotations

import itertools
import random
import re

import numpy as np
import pytest

from data.dataset import Box
from data.shapes import ShapesWorld, describe, scene_captions
from data.shapes_scene import (
    COLOUR_RGB,
    COLOURS,
    HELDOUT_COMBINATIONS,
    SHAPES,
    SIZES,
    Scene,
    ShapeObject,
    generate_scene,
    generate_split_scene,
    pixel_box,
    relation,
    render_scene,
)
from data.vocabulary import tokenize

_NP = rf"a ({'|'.join(SIZES)}) ({'|'.join(COLOURS)}) ({'|'.join(SHAPES)})"
_CAPTION = re.compile(rf"{_NP}(?: (to the left of|to the right of|above|below) {_NP})?")


def small_world(**overrides: int) -> ShapesWorld:
    sizes = dict(train_size=40, val_size=30, test_size=30, heldout_size=30)
    sizes.update(overrides)
    return ShapesWorld(**sizes)


def named_kinds(caption: str) -> set[tuple[str, str]]:
    """The (colour, shape) of each noun phrase of a caption."""
    match = _CAPTION.fullmatch(caption)
    assert match, caption
    return {match.group(2, 3)} | ({match.group(6, 7)} if match.group(4) else set())


def find(scene: Scene, size: str, colour: str, shape: str) -> ShapeObject:
    (match,) = [o for o in scene.objects if (o.size, o.colour, o.shape) == (size, colour, shape)]
    return match


def test_known_caption_and_grounding() -> None:
    left = ShapeObject(shape="circle", colour="red", size="small", box=Box(0.05, 0.4, 0.25, 0.6))
    right = ShapeObject(shape="square", colour="blue", size="large", box=Box(0.6, 0.3, 0.975, 0.675))
    text, grounding = describe(left, right)
    assert text == "a small red circle to the left of a large blue square"
    assert [g.position for g in grounding] == [1, 2, 3, 9, 10, 11]
    assert [g.box for g in grounding] == [left.box] * 3 + [right.box] * 3
    assert describe(right, left)[0] == "a large blue square to the right of a small red circle"
    above = ShapeObject(shape="cross", colour="green", size="small", box=Box(0.62, 0.02, 0.82, 0.22))
    assert relation(above, right) == "above" and relation(right, above) == "below"
    steep = ShapeObject(shape="cross", colour="green", size="small", box=Box(0.3, 0.0, 0.5, 0.2))
    assert relation(steep, left) == "above"  # centre offset (0.25, -0.4): ratio 1.6 >= 1.5
    diagonal = ShapeObject(shape="cross", colour="green", size="small", box=Box(0.4, 0.05, 0.6, 0.25))
    assert relation(diagonal, left) is None  # centre offset (0.35, -0.35)


def test_captions_cycle_and_order() -> None:
    a = ShapeObject(shape="circle", colour="red", size="small", box=Box(0.05, 0.4, 0.25, 0.6))
    b = ShapeObject(shape="square", colour="blue", size="large", box=Box(0.6, 0.3, 0.975, 0.675))
    captions, grounding = scene_captions(Scene(objects=(a, b), background=(230, 230, 230)), 5)
    ab = "a small red circle to the left of a large blue square"
    ba = "a large blue square to the right of a small red circle"
    assert captions == (ba, ab, ba, ab, ba)  # large first, then cycled to exactly 5
    assert len(grounding) == 5
    single, _ = scene_captions(Scene(objects=(a,), background=(230, 230, 230)), 3)
    assert single == ("a small red circle",) * 3


def test_deterministic_and_independent_of_split_size() -> None:
    first, second = small_world(), small_world()
    assert first.name == second.name == "shapesworld-s0-224px-v1"
    assert first.samples("val") == second.samples("val")
    for sample in first.samples("val")[:5]:
        assert np.array_equal(np.asarray(first.load(sample)), np.asarray(second.load(sample)))
    assert small_world(train_size=7).samples("train") == small_world().samples("train")[:7]
    other_seed = ShapesWorld(seed=1, train_size=40)
    assert other_seed.name == "shapesworld-s1-224px-v1"
    assert other_seed.samples("train") != small_world().samples("train")
    # A fresh instance (no `samples` call) renders the same pixels from the id alone.
    sample = first.samples("test")[3]
    assert np.array_equal(np.asarray(ShapesWorld().load(sample)), np.asarray(first.load(sample)))


def test_splits_sizes_ids_and_unknown_split() -> None:
    world = small_world(train_size=12, val_size=3, test_size=0, heldout_size=4)
    assert world.splits == ("train", "val", "test", "heldout")
    assert [len(world.samples(s)) for s in world.splits] == [12, 3, 0, 4]
    assert world.samples("train")[42 % 12].image_id == "train-000006"
    with pytest.raises(ValueError, match="known splits"):
        world.samples("validation")
    with pytest.raises(ValueError):
        ShapesWorld(captions_per_image=0)


def test_scene_invariants() -> None:
    scenes = [generate_split_scene(0, split, i) for split in ("train", "heldout") for i in range(300)]
    assert {len(s.objects) for s in scenes} == {1, 2, 3, 4}
    for scene in scenes:
        kinds = [(o.colour, o.shape) for o in scene.objects]
        assert len(set(kinds)) == len(kinds)
        for a, b in itertools.combinations(scene.objects, 2):
            gap_x = max(a.box.x0 - b.box.x1, b.box.x0 - a.box.x1)
            gap_y = max(a.box.y0 - b.box.y1, b.box.y0 - a.box.y1)
            assert max(gap_x, gap_y) > 0.03  # separated on some axis, so no overlap
            dx, dy = abs(a.centre[0] - b.centre[0]), abs(a.centre[1] - b.centre[1])
            assert max(dx, dy) >= 1.5 * min(dx, dy)  # clearly horizontal or clearly vertical
            assert relation(a, b) is not None and relation(b, a) is not None
        for obj in scene.objects:
            side = {"small": 0.2, "large": 0.375}[obj.size]
            assert obj.box.x1 - obj.box.x0 == pytest.approx(side)
            assert obj.box.y1 - obj.box.y0 == pytest.approx(side)


def test_captions_parse_and_relations_hold() -> None:
    world = small_world()
    for sample in world.samples("train") + world.samples("heldout"):
        scene = world.scene(sample.image_id)
        assert len(sample.captions) == 5 and len(sample.grounding) == 5
        distinct = len(set(sample.captions))
        n = len(scene.objects)
        assert distinct == min(5, n * (n - 1)) if n > 1 else distinct == 1
        for caption, grounding in zip(sample.captions, sample.grounding):
            match = _CAPTION.fullmatch(caption)
            assert match, caption
            subject = find(scene, *match.group(1, 2, 3))
            words = tokenize(caption)
            expected = [(1, subject), (2, subject), (3, subject)]  # "a SIZE COLOUR SHAPE ..."
            if match.group(4) is None:
                assert n == 1 and len(words) == 4
            else:
                reference = find(scene, *match.group(5, 6, 7))
                assert reference is not subject
                (sx, sy), (rx, ry) = subject.centre, reference.centre
                holds = {
                    "to the left of": sx < rx and abs(sx - rx) > abs(sy - ry),
                    "to the right of": sx > rx and abs(sx - rx) > abs(sy - ry),
                    "above": sy < ry and abs(sy - ry) > abs(sx - rx),
                    "below": sy > ry and abs(sy - ry) > abs(sx - rx),
                }
                assert holds[match.group(4)], (caption, subject, reference)
                last = len(words) - 3  # "... a SIZE COLOUR SHAPE" ends the caption
                expected += [(last, reference), (last + 1, reference), (last + 2, reference)]
            assert [(g.position, g.box) for g in grounding] == [(p, o.box) for p, o in expected]
            named = [words[p] for p, _ in expected]
            attributes = [a for _, o in expected[::3] for a in (o.size, o.colour, o.shape)]
            assert named == attributes


def test_boxes_contain_object_pixels() -> None:
    world = small_world()
    for sample in world.samples("val")[:20]:
        scene = world.scene(sample.image_id)
        pixels = np.asarray(world.load(sample))  # (224, 224, 3) uint8
        assert pixels.shape == (224, 224, 3)
        for obj in scene.objects:
            x0, y0, x1, y1 = (224 * v for v in (obj.box.x0, obj.box.y0, obj.box.x1, obj.box.y1))
            alone = np.asarray(render_scene(Scene(objects=(obj,), background=scene.background), 224))
            drawn = np.all(alone == COLOUR_RGB[obj.colour], axis=-1)  # (224, 224) bool
            ys, xs = np.nonzero(drawn)
            # Pixel k covers [k, k + 1): the drawn pixels fit in the box and reach each of its sides,
            # up to rounding to whole pixels.
            assert x0 - 0.5 <= xs.min() <= x0 + 0.5 and x1 - 0.5 <= xs.max() + 1 <= x1 + 0.5
            assert y0 - 0.5 <= ys.min() <= y0 + 0.5 and y1 - 0.5 <= ys.max() + 1 <= y1 + 0.5
            # The central 40% of the box is (almost) all the object's colour, in the full image too.
            inner_y = slice(round(y0 + 0.3 * (y1 - y0)), round(y1 - 0.3 * (y1 - y0)))
            inner_x = slice(round(x0 + 0.3 * (x1 - x0)), round(x1 - 0.3 * (x1 - x0)))
            centre = np.all(pixels[inner_y, inner_x] == COLOUR_RGB[obj.colour], axis=-1)
            assert centre.size > 100 and centre.mean() > 0.9, (obj, centre.mean())
        # Every object-coloured pixel of the full image lies in the box of an object of that colour.
        for colour in {o.colour for o in scene.objects}:
            mask = np.all(pixels == COLOUR_RGB[colour], axis=-1)
            for obj in (o for o in scene.objects if o.colour == colour):
                left, top, right, bottom = pixel_box(obj.box, 224)
                corners = (obj.box.x0, obj.box.y0, obj.box.x1, obj.box.y1)
                assert (left, top, right + 1, bottom + 1) == tuple(round(224 * v) for v in corners)
                mask[top : bottom + 1, left : right + 1] = False
            assert not mask.any()
        background = np.all(pixels == scene.background, axis=-1).mean()
        assert 0.3 < background < 1.0


def test_heldout_combinations() -> None:
    world = small_world(train_size=200, val_size=100, test_size=100, heldout_size=60)
    assert world.heldout_combinations == HELDOUT_COMBINATIONS and len(HELDOUT_COMBINATIONS) == 3
    for split in ("train", "val", "test"):
        for sample in world.samples(split):
            kinds = {(o.colour, o.shape) for o in world.scene(sample.image_id).objects}
            assert not kinds & set(HELDOUT_COMBINATIONS), sample.image_id
    seen = set()
    for sample in world.samples("heldout"):
        kinds = {(o.colour, o.shape) for o in world.scene(sample.image_id).objects}
        assert kinds & set(HELDOUT_COMBINATIONS), sample.image_id
        seen |= kinds & set(HELDOUT_COMBINATIONS)
        named = {kind for caption in sample.captions for kind in named_kinds(caption)}
        assert named & set(HELDOUT_COMBINATIONS), sample.captions  # the captions name a held-out object
    assert seen == set(HELDOUT_COMBINATIONS)


def test_generate_scene_uses_only_the_given_rng() -> None:
    a = generate_scene(random.Random(5), combinations=[("red", "circle"), ("blue", "square")])
    b = generate_scene(random.Random(5), combinations=[("red", "circle"), ("blue", "square")])
    assert a == b
    assert {(o.colour, o.shape) for o in a.objects} <= {("red", "circle"), ("blue", "square")}
    assert np.array_equal(np.asarray(render_scene(a, 64)), np.asarray(render_scene(b, 64)))
    assert render_scene(a, 64).size == (64, 64)
