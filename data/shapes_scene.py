"""The ShapesWorld scene model: a few coloured shapes on a plain background, how to sample and draw them.

Kept apart from the caption grammar (`data.shapes`) so that other tasks over the same scenes (VQA) reuse
exactly the same objects, spatial relation and renderer. A scene is resolution independent (boxes are
normalised); `render_scene` draws it at any size.

Invariants of every generated scene, which make any description of it unambiguous:
- 1 to `MAX_OBJECTS` objects, boxes inside the image, no two closer than `MARGIN` (no overlap);
- at most one object per (colour, shape), so "the red circle" names one object;
- every ordered pair of objects has a clear `relation` (never None).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from PIL import Image, ImageDraw

from data.dataset import Box

SHAPES: tuple[str, ...] = ("circle", "square", "triangle", "cross")
COLOURS: tuple[str, ...] = ("red", "green", "blue", "yellow", "purple")
SIZES: tuple[str, ...] = ("small", "large")
RELATIONS: tuple[str, ...] = ("to the left of", "to the right of", "above", "below")

COLOUR_RGB: dict[str, tuple[int, int, int]] = {
    "red": (215, 40, 40),
    "green": (40, 160, 60),
    "blue": (45, 85, 215),
    "yellow": (235, 195, 25),
    "purple": (140, 60, 175),
}
# Side of an object's (square) box as a share of the image side. At 224 px with 32-px feature cells a
# small object is 45 px (1.4 cells) and a large one 84 px (2.6 cells).
SIZE_EXTENT: dict[str, float] = {"small": 0.2, "large": 0.375}

MAX_OBJECTS = 4
MARGIN = 0.04  # least gap between two boxes (9 px at 224), so boxes never touch
EDGE = 0.02  # least gap between a box and the image border
RELATION_RATIO = 1.5  # a relation is clear when the centre offset on one axis is >= 1.5x the other
CROSS_ARM = 0.36  # a cross's bar thickness, as a share of its side

# Every (colour, shape); the held-out ones never occur in train/val/test, and each held-out image has one.
# Each held-out colour and shape still occurs in training with other shapes and colours.
COMBINATIONS = tuple((colour, shape) for colour in COLOURS for shape in SHAPES)  # 20 (colour, shape)
HELDOUT_COMBINATIONS = (("red", "triangle"), ("green", "cross"), ("blue", "circle"))
SEEN_COMBINATIONS = tuple(c for c in COMBINATIONS if c not in HELDOUT_COMBINATIONS)  # the other 17
SPLITS: tuple[str, ...] = ("train", "val", "test", "heldout")


@dataclass(frozen=True)
class ShapeObject:
    """One shape in a scene; `box` is its normalised bounding box (a square for every shape)."""

    shape: str
    colour: str
    size: str
    box: Box

    @property
    def centre(self) -> tuple[float, float]:
        """(x, y) of the box centre, normalised; y grows downwards."""
        return (self.box.x0 + self.box.x1) / 2, (self.box.y0 + self.box.y1) / 2


@dataclass(frozen=True)
class Scene:
    """The objects of one image, in generation order, and its background RGB."""

    objects: tuple[ShapeObject, ...]
    background: tuple[int, int, int]


def relation(subject: ShapeObject, reference: ShapeObject) -> str | None:
    """The word(s) R in "subject R reference", from box centres; None when neither axis clearly dominates.

    Left/right when the horizontal centre offset is at least RELATION_RATIO times the vertical one,
    above/below in the opposite case. Generated scenes contain no pair for which this is None.
    """
    (sx, sy), (rx, ry) = subject.centre, reference.centre
    dx, dy = sx - rx, sy - ry
    if abs(dx) >= RELATION_RATIO * abs(dy) and dx != 0:
        return "to the left of" if dx < 0 else "to the right of"
    if abs(dy) >= RELATION_RATIO * abs(dx) and dy != 0:
        return "above" if dy < 0 else "below"
    return None


def generate_scene(
    rng: random.Random,
    *,
    combinations: Sequence[tuple[str, str]] = SEEN_COMBINATIONS,
    anchor_combinations: Sequence[tuple[str, str]] = (),
    max_objects: int = MAX_OBJECTS,
) -> Scene:
    """Sample a scene with 1..max_objects objects, drawing everything from `rng` only.

    Args:
        combinations: the (colour, shape) pairs objects may have; each is used at most once.
        anchor_combinations: when given, the first object's (colour, shape) is drawn from these (used to
            put a held-out combination in every held-out image); the others still come from `combinations`.
    """
    if not 1 <= max_objects <= MAX_OBJECTS:
        raise ValueError(f"max_objects must be in 1..{MAX_OBJECTS}, got {max_objects}")
    background = (rng.randint(218, 242), rng.randint(218, 242), rng.randint(218, 242))
    count = rng.randint(1, max_objects)
    kinds: list[tuple[str, str]] = []
    if anchor_combinations:
        kinds.append(rng.choice(list(anchor_combinations)))
    rest = [c for c in combinations if c not in kinds]
    kinds += rng.sample(rest, min(count - len(kinds), len(rest)))
    # Crowded scenes of large objects sometimes leave no room that keeps every relation clear; then sizes
    # and positions are drawn again. Count and kinds stay, so only sizes are skewed: in 4-object scenes
    # about 30% of objects are large (50% in 1-object scenes).
    for _ in range(200):
        objects: list[ShapeObject] = []
        for colour, shape in kinds:
            size = rng.choice(SIZES)
            box = _place(rng, SIZE_EXTENT[size], objects)
            if box is None:
                break
            objects.append(ShapeObject(shape=shape, colour=colour, size=size, box=box))
        else:
            return Scene(objects=tuple(objects), background=background)
    raise RuntimeError(f"could not place {kinds} without overlap")  # not reached in practice


def _place(rng: random.Random, extent: float, placed: Sequence[ShapeObject]) -> Box | None:
    """A box of side `extent` clear of the `placed` objects and clearly related to each, or None.

    Works on plain floats (this loop is most of the generation time); the relation test is `relation`'s,
    computed the same way, so an accepted box never yields None.
    """
    others = [(o.box.x0, o.box.y0, o.box.x1, o.box.y1) for o in placed]
    for _ in range(30):
        x0 = rng.uniform(EDGE, 1 - EDGE - extent)
        y0 = rng.uniform(EDGE, 1 - EDGE - extent)
        x1, y1 = x0 + extent, y0 + extent
        for ox0, oy0, ox1, oy1 in others:
            if not (x1 + MARGIN <= ox0 or ox1 + MARGIN <= x0 or y1 + MARGIN <= oy0 or oy1 + MARGIN <= y0):
                break  # too close
            dx = abs((x0 + x1) / 2 - (ox0 + ox1) / 2)
            dy = abs((y0 + y1) / 2 - (oy0 + oy1) / 2)
            if dx < RELATION_RATIO * dy and dy < RELATION_RATIO * dx:
                break  # diagonal: no clear relation
        else:
            return Box(x0, y0, x1, y1)
    return None  # every try was too close to, or diagonal from, a placed object


def generate_split_scene(seed: int, split: str, index: int) -> Scene:
    """The `index`-th scene of `split`: its own RNG, so it never depends on the split's size.

    Train/val/test use only SEEN_COMBINATIONS; every held-out scene has a HELDOUT_COMBINATIONS object.
    """
    if split not in SPLITS:
        raise ValueError(f"ShapesWorld has no split {split!r}; known splits: {', '.join(SPLITS)}")
    rng = random.Random(f"{seed}:{split}:{index}")
    if split == "heldout":
        return generate_scene(rng, combinations=COMBINATIONS, anchor_combinations=HELDOUT_COMBINATIONS)
    return generate_scene(rng, combinations=SEEN_COMBINATIONS)


def pixel_box(box: Box, image_size: int) -> tuple[int, int, int, int]:
    """The inclusive pixel rectangle (left, top, right, bottom) that `box` covers at `image_size`."""
    return (
        round(box.x0 * image_size),
        round(box.y0 * image_size),
        round(box.x1 * image_size) - 1,
        round(box.y1 * image_size) - 1,
    )


def render_scene(scene: Scene, image_size: int) -> Image.Image:
    """Draw the scene as an RGB image of image_size x image_size; flat colours, no antialiasing."""
    image = Image.new("RGB", (image_size, image_size), scene.background)
    draw = ImageDraw.Draw(image)
    for obj in scene.objects:
        _draw_object(draw, obj, image_size)
    return image


def _draw_object(draw: ImageDraw.ImageDraw, obj: ShapeObject, image_size: int) -> None:
    """Fill `obj`'s shape inside its pixel box."""
    left, top, right, bottom = pixel_box(obj.box, image_size)
    fill = COLOUR_RGB[obj.colour]
    if obj.shape == "circle":
        draw.ellipse((left, top, right, bottom), fill=fill)
    elif obj.shape == "square":
        draw.rectangle((left, top, right, bottom), fill=fill)
    elif obj.shape == "triangle":  # apex at the top centre, base along the bottom
        draw.polygon([((left + right) / 2, top), (right, bottom), (left, bottom)], fill=fill)
    elif obj.shape == "cross":  # a plus sign spanning the box
        half_arm = (right - left + 1) * CROSS_ARM / 2
        cx, cy = (left + right) / 2, (top + bottom) / 2
        draw.rectangle((left, round(cy - half_arm), right, round(cy + half_arm)), fill=fill)
        draw.rectangle((round(cx - half_arm), top, round(cx + half_arm), bottom), fill=fill)
    else:
        raise ValueError(f"unknown shape {obj.shape!r}; known shapes: {', '.join(SHAPES)}")
