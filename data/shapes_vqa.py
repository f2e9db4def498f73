"""ShapesWorld-VQA: questions with exact answers about the ShapesWorld caption images.

The images are ShapesWorld's own (same seed, split, index -> same image id, scene and pixels, and the same
`name`, so one feature cache serves both tasks). Each image gets up to `questions_per_image` distinct
questions, drawn from its own RNG, so a question set never depends on the split sizes. Every answer is
computed from the scene, and every question names objects the scene makes unambiguous.

Families (the question_type) and their weights:

    existence  0.20  yes/no  "is there a red circle?", "is there a green object?", "is there a cross?"
    relation   0.15  yes/no  "is the square to the left of the red circle?"
    count      0.15  number  "how many circles are there?", "how many red objects are there?",
                             "how many objects are there?"  (answers "0".."4")
    attribute  0.25  other   "what colour is the circle?", "what shape is the blue object?",
                             "what size is the green square?"
    two-step   0.25  other   "what colour is the object to the left of the square?" (find the square,
                             then the one object to its left, then read its colour)

Each question draws its family with these weights among the families asked for that the scene allows: a
one-object scene has no relation or two-step question (no pair), and a scene whose every object has zero
or several objects on each side of it has no two-step question. So measured shares differ a little from the
weights (about 23/11/17/29/19% over the default train split). Existence and relation questions are "yes" with
probability 1/2 each, so yes/no answers are balanced.

Rules that keep every answer exact:
- An object is named by a noun phrase "the [size] [colour] shape|object" that matches it and no other
  object of the scene ("the square" only when there is one square); a question never names the attribute
  it asks for.
- Relations are `data.shapes_scene.relation`'s, the same rule as the captions. A two-step question needs
  a uniquely named reference and exactly one object in the asked relation to it.
- "no" existence questions ask only about (colour, shape) pairs the split can contain, so training never
  mentions a held-out combination (which would teach that it is never there).

Regions: existence, the named objects (none for "no"); relation, the reference then the subject; count,
the counted objects (none for "0"); attribute, the object; two-step, the reference then the target.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import combinations as subsets

from PIL import Image

from data.shapes import ShapesWorld
from data.shapes_scene import (
    COLOURS,
    COMBINATIONS,
    RELATIONS,
    SEEN_COMBINATIONS,
    SHAPES,
    SIZES,
    Scene,
    ShapeObject,
    relation,
    render_scene,
)
from data.vqa import VqaDataset, VqaSample, repeated_answer

FAMILY_WEIGHTS: dict[str, float] = {
    "existence": 0.20,
    "relation": 0.15,
    "count": 0.15,
    "attribute": 0.25,
    "two-step": 0.25,
}
FAMILIES: tuple[str, ...] = tuple(FAMILY_WEIGHTS)
FAMILY_ANSWER_TYPES: dict[str, str] = {
    "existence": "yes/no",
    "relation": "yes/no",
    "count": "number",
    "attribute": "other",
    "two-step": "other",
}
ATTRIBUTES: tuple[str, ...] = ("size", "colour", "shape")  # in noun-phrase order
# The closed answer set: 18 words.
ANSWERS: tuple[str, ...] = ("yes", "no", *(str(n) for n in range(5)), *COLOURS, *SHAPES, *SIZES)

_IMAGES_PER_SPLIT = 1_000_000  # question ids are ((split number * this) + image index) * _IDS_PER_IMAGE + k
_IDS_PER_IMAGE = 100
# Every non-empty set of attributes, shortest first: the ways a noun phrase can name an object.
_NAMINGS = tuple(s for n in range(1, len(ATTRIBUTES) + 1) for s in subsets(ATTRIBUTES, n))
# What an existence question may ask about: both colour and shape, or only one.
_EXISTENCE_FORMS = (("colour", "shape"), ("colour",), ("shape",))


@dataclass(frozen=True)
class _Question:
    """A generated question before it gets its ids: text, answer and the objects it is about."""

    family: str
    text: str
    answer: str
    objects: tuple[ShapeObject, ...]


class ShapesWorldVqa(VqaDataset):
    """Questions about ShapesWorld images; see the module docstring for the families and their rules.

    Args:
        seed: selects the scenes (as in ShapesWorld) and the questions.
        image_size: side of the square rendered images, in pixels.
        train_size, val_size, test_size, heldout_size: number of images per split (at most 1,000,000).
        questions_per_image: distinct questions asked per image (1..100); fewer when the scene allows fewer
            (for example only two-step questions about a one-object scene: none).
        families: the families to ask, mixed by FAMILY_WEIGHTS; None for all. ("two-step",) alone gives
            the two-hop subset for attention ablations.
    """

    def __init__(
        self,
        *,
        seed: int = 0,
        image_size: int = 224,
        train_size: int = 6000,
        val_size: int = 500,
        test_size: int = 500,
        heldout_size: int = 500,
        questions_per_image: int = 5,
        families: tuple[str, ...] | None = None,
    ) -> None:
        if not 1 <= questions_per_image <= _IDS_PER_IMAGE:
            raise ValueError(f"questions_per_image must be in 1..{_IDS_PER_IMAGE}, got {questions_per_image}")
        if max(train_size, val_size, test_size, heldout_size) > _IMAGES_PER_SPLIT:
            raise ValueError(f"split sizes must be at most {_IMAGES_PER_SPLIT}")
        self.families = FAMILIES if families is None else tuple(families)
        unknown = [family for family in self.families if family not in FAMILY_WEIGHTS]
        if unknown or not self.families:
            raise ValueError(f"families must be a non-empty choice of {', '.join(FAMILIES)}; got {self.families}")
        self.seed = seed
        self.image_size = image_size
        self.questions_per_image = questions_per_image
        # The images, ids and scenes are ShapesWorld's own (its captions are not used).
        self._world = ShapesWorld(
            seed=seed,
            image_size=image_size,
            train_size=train_size,
            val_size=val_size,
            test_size=test_size,
            heldout_size=heldout_size,
            captions_per_image=1,
        )
        self._questions: dict[str, list[VqaSample]] = {}

    @property
    def name(self) -> str:
        return self._world.name

    @property
    def splits(self) -> tuple[str, ...]:
        return self._world.splits

    def questions(self, split: str) -> list[VqaSample]:
        self._check_split(split)
        if split not in self._questions:
            self._questions[split] = [
                question
                for index, sample in enumerate(self._world.samples(split))
                for question in self._image_questions(split, index, sample.image_id)
            ]
        return list(self._questions[split])

    def scene(self, image_id: str) -> Scene:
        """The scene behind an image id such as "train-000042"."""
        return self._world.scene(image_id)

    def load(self, image_id: str) -> Image.Image:
        return render_scene(self.scene(image_id), self.image_size)

    def _image_questions(self, split: str, index: int, image_id: str) -> list[VqaSample]:
        """The questions about one image, from an RNG of its own (seed, split, index)."""
        rng = random.Random(f"vqa:{self.seed}:{split}:{index}")
        combinations = COMBINATIONS if split == "heldout" else SEEN_COMBINATIONS
        drawn = _scene_questions(self.scene(image_id), rng, self.questions_per_image, self.families, combinations)
        first_id = (self.splits.index(split) * _IMAGES_PER_SPLIT + index) * _IDS_PER_IMAGE
        return [
            VqaSample(
                question_id=first_id + k,
                image_id=image_id,
                question=question.text,
                answers=repeated_answer(question.answer),
                answer=question.answer,
                answer_type=FAMILY_ANSWER_TYPES[question.family],
                question_type=question.family,
                regions=tuple(obj.box for obj in question.objects),
            )
            for k, question in enumerate(drawn)
        ]


def _scene_questions(
    scene: Scene,
    rng: random.Random,
    count: int,
    families: Sequence[str],
    combinations: Sequence[tuple[str, str]],
) -> list[_Question]:
    """Up to `count` distinct questions about `scene`, families drawn by FAMILY_WEIGHTS among `families`.

    A family the scene does not allow is dropped for this scene and the draw repeated. Draws that repeat
    an earlier question's text are discarded; after 20 * count draws the questions found so far are kept.
    `combinations` are the (colour, shape) pairs "no" existence questions may ask about.
    """
    available = list(families)
    found: dict[str, _Question] = {}
    for _ in range(20 * count):
        if len(found) == count or not available:
            break
        family = rng.choices(available, weights=[FAMILY_WEIGHTS[f] for f in available])[0]
        question = _MAKERS[family](scene, rng, combinations)
        if question is None:
            available.remove(family)
        else:
            found.setdefault(question.text, question)
    return list(found.values())


def _existence(scene: Scene, rng: random.Random, combinations: Sequence[tuple[str, str]]) -> _Question:
    """ "is there a red circle?" / "... a red object?" / "... a circle?"; "yes" with probability 1/2."""
    want_yes = rng.random() < 0.5
    form = rng.choice(_EXISTENCE_FORMS)
    options = _existence_options(scene, combinations, form, want_yes)
    if not options:  # "no" about a shape alone, but all four shapes are there
        form = ("colour", "shape")
        options = _existence_options(scene, combinations, form, want_yes)
    values = dict(zip(form, rng.choice(options)))
    named = tuple(o for o in scene.objects if all(getattr(o, a) == v for a, v in values.items()))
    words = [values["colour"]] if "colour" in values else []
    text = " ".join(["is there a", *words, values.get("shape", "object")]) + "?"
    return _Question("existence", text, "yes" if named else "no", named)


def _existence_options(
    scene: Scene, combinations: Sequence[tuple[str, str]], form: tuple[str, ...], present: bool
) -> list[tuple[str, ...]]:
    """The values of the attributes `form` that some object has (present), or that no object has but the
    split's `combinations` allow (not present); sorted, so the draw from them is reproducible."""
    there = {tuple(getattr(o, a) for a in form) for o in scene.objects}
    if present:
        return sorted(there)
    allowed = {tuple({"colour": colour, "shape": shape}[a] for a in form) for colour, shape in combinations}
    return sorted(allowed - there)


def _relation(scene: Scene, rng: random.Random, combinations: Sequence[tuple[str, str]]) -> _Question | None:
    """ "is the square to the left of the red circle?" about two objects; "yes" with probability 1/2."""
    if len(scene.objects) < 2:
        return None
    subject, reference = rng.sample(scene.objects, 2)
    actual = relation(subject, reference)
    asked = actual if rng.random() < 0.5 else rng.choice([r for r in RELATIONS if r != actual])
    text = f"is {rng.choice(_noun_phrases(subject, scene))} {asked} {rng.choice(_noun_phrases(reference, scene))}?"
    return _Question("relation", text, "yes" if asked == actual else "no", (reference, subject))


def _count(scene: Scene, rng: random.Random, combinations: Sequence[tuple[str, str]]) -> _Question:
    """ "how many circles are there?" / "how many red objects ..." / "how many objects ..."."""
    form = rng.choice(("shape", "colour", "all"))
    if form == "shape":
        shape = rng.choice(SHAPES)
        counted = tuple(o for o in scene.objects if o.shape == shape)
        noun = shape + ("es" if shape.endswith("s") else "s")
    elif form == "colour":
        colour = rng.choice(COLOURS)
        counted = tuple(o for o in scene.objects if o.colour == colour)
        noun = f"{colour} objects"
    else:
        counted, noun = scene.objects, "objects"
    return _Question("count", f"how many {noun} are there?", str(len(counted)), counted)


def _attribute(scene: Scene, rng: random.Random, combinations: Sequence[tuple[str, str]]) -> _Question:
    """ "what colour is the circle?": one object, named without the attribute asked for."""
    obj = rng.choice(scene.objects)
    # Size can always be asked ("the <colour> <shape>" is unique); colour or shape only when the object
    # has a unique name without it.
    attribute = rng.choice([a for a in ATTRIBUTES if _noun_phrases(obj, scene, without=a)])
    phrase = rng.choice(_noun_phrases(obj, scene, without=attribute))
    return _Question("attribute", f"what {attribute} is {phrase}?", getattr(obj, attribute), (obj,))


def _two_step(scene: Scene, rng: random.Random, combinations: Sequence[tuple[str, str]]) -> _Question | None:
    """ "what colour is the object to the left of the square?": find the reference, then its one neighbour."""
    chains = _unique_neighbours(scene)
    if not chains:
        return None
    reference, word, target = rng.choice(chains)
    attribute = rng.choice(ATTRIBUTES)
    text = f"what {attribute} is the object {word} {rng.choice(_noun_phrases(reference, scene))}?"
    return _Question("two-step", text, getattr(target, attribute), (reference, target))


_MAKERS: dict[str, Callable[[Scene, random.Random, Sequence[tuple[str, str]]], _Question | None]] = {
    "existence": _existence,
    "relation": _relation,
    "count": _count,
    "attribute": _attribute,
    "two-step": _two_step,
}


def _noun_phrases(obj: ShapeObject, scene: Scene, *, without: str | None = None) -> list[str]:
    """Every "the [size] [colour] shape|object" that matches `obj` and no other object of the scene.

    `without` leaves out phrases that mention that attribute (a question must not name what it asks).
    """
    phrases = []
    for naming in _NAMINGS:
        if without in naming:
            continue
        matching = [o for o in scene.objects if all(getattr(o, a) == getattr(obj, a) for a in naming)]
        if matching == [obj]:
            words = [getattr(obj, a) for a in ("size", "colour") if a in naming]
            phrases.append(" ".join(["the", *words, obj.shape if "shape" in naming else "object"]))
    return phrases


def _unique_neighbours(scene: Scene) -> list[tuple[ShapeObject, str, ShapeObject]]:
    """(reference, relation, target) for every reference and relation with exactly one target in it.

    A reference always has a unique name ("the <colour> <shape>"), so each triple is a valid two-step
    question.
    """
    chains = []
    for reference in scene.objects:
        for word in RELATIONS:
            related = [o for o in scene.objects if o != reference and relation(o, reference) == word]
            if len(related) == 1:
                chains.append((reference, word, related[0]))
    return chains
