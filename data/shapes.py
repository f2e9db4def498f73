"""ShapesWorld: a seeded synthetic captioning dataset of coloured shapes that needs no download.

Small enough to learn in minutes on a CPU, and every caption word that names an object comes with that
object's box, so attention maps can be scored. The scenes come from `data.shapes_scene` (shared with VQA);
this file adds the caption grammar and the `CaptionDataset` around it:

    caption := NP | NP RELATION NP
    NP      := "a" SIZE COLOUR SHAPE
    RELATION:= "to the left of" | "to the right of" | "above" | "below"
"""

from __future__ import annotations

from itertools import combinations

from PIL import Image

from data.captions import CaptionDataset, CaptionSample, GroundedWord
from data.shapes_scene import (
    COLOURS,
    HELDOUT_COMBINATIONS,
    SHAPES,
    SIZES,
    SPLITS,
    Scene,
    ShapeObject,
    generate_split_scene,
    relation,
    render_scene,
)

GENERATOR_VERSION = 1  # part of `name`: bump when scenes or rendering change, so cached features go stale


def describe(
    subject: ShapeObject, reference: ShapeObject | None = None
) -> tuple[str, tuple[GroundedWord, ...]]:
    """One caption ("a large red circle" or "<subject> <relation> <reference>") and its grounded words.

    The size, colour and shape words of each noun phrase are grounded to that object's box; positions
    index the caption's words, which are exactly what `data.vocabulary.tokenize` returns for it.
    """
    words: list[str] = []
    grounding: list[GroundedWord] = []

    def noun_phrase(obj: ShapeObject) -> None:
        words.append("a")
        for word in (obj.size, obj.colour, obj.shape):
            grounding.append(GroundedWord(position=len(words), box=obj.box))
            words.append(word)

    noun_phrase(subject)
    if reference is not None:
        words.extend(_relation_of(subject, reference).split())
        noun_phrase(reference)
    return " ".join(words), tuple(grounding)


def _relation_of(subject: ShapeObject, reference: ShapeObject) -> str:
    word = relation(subject, reference)
    if word is None:
        raise ValueError(f"{subject} and {reference} have no clear relation")
    return word


def mention_order(obj: ShapeObject) -> tuple[int, int, int]:
    """Sort key giving the order objects are mentioned in: large first, then COLOURS order, then SHAPES.

    A content-based order lets a model pick the first-named object without spatial reasoning, and makes
    the captions of a scene independent of the order the generator placed its objects in.
    """
    return (-SIZES.index(obj.size), COLOURS.index(obj.colour), SHAPES.index(obj.shape))


def scene_captions(scene: Scene, count: int) -> tuple[tuple[str, ...], tuple[tuple[GroundedWord, ...], ...]]:
    """Exactly `count` captions of the scene and their grounding, distinct ones first, then repeated.

    With objects o0, o1, ... in `mention_order`, the distinct captions describe the pairs (o0, o1),
    (o1, o0), (o0, o2), (o2, o0), (o0, o3), ..., (o2, o3), (o3, o2); one object gives one caption. So the
    first-ranked object is the subject of most references, which keeps the best single caption clear.
    """
    ranked = sorted(scene.objects, key=mention_order)
    if len(ranked) == 1:
        distinct = [describe(ranked[0])]
    else:
        pairs = [pair for i, j in combinations(range(len(ranked)), 2) for pair in ((i, j), (j, i))]
        distinct = [describe(ranked[i], ranked[j]) for i, j in pairs[:count]]
    chosen = [distinct[k % len(distinct)] for k in range(count)]
    return tuple(text for text, _ in chosen), tuple(grounding for _, grounding in chosen)


class ShapesWorld(CaptionDataset):
    """Synthetic captions of 1-4 coloured shapes; images are rendered on demand from stored scenes.

    Image `i` of a split comes from its own seed, so it is the same whatever the split sizes.
    The "heldout" split holds images that each contain a (colour, shape) in HELDOUT_COMBINATIONS,
    which never occur in train/val/test, to test compositional generalisation.

    Args:
        seed: selects the scenes; the same seed always gives the same samples and pixels.
        image_size: side of the square rendered images, in pixels.
        train_size, val_size, test_size, heldout_size: number of images per split.
        captions_per_image: references per image (distinct while the scene allows, then repeated).
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
        captions_per_image: int = 5,
    ) -> None:
        sizes = {"train": train_size, "val": val_size, "test": test_size, "heldout": heldout_size}
        for split, size in sizes.items():
            if size < 0:
                raise ValueError(f"{split}_size must be >= 0, got {size}")
        if image_size < 16:
            raise ValueError(f"image_size must be >= 16, got {image_size}")
        if captions_per_image < 1:
            raise ValueError(f"captions_per_image must be >= 1, got {captions_per_image}")
        self.seed = seed
        self.image_size = image_size
        self.captions_per_image = captions_per_image
        self._sizes = sizes
        self._samples: dict[str, list[CaptionSample]] = {}
        self._scenes: dict[str, Scene] = {}  # image_id -> scene, filled by `samples`

    @property
    def name(self) -> str:
        return f"shapesworld-s{self.seed}-{self.image_size}px-v{GENERATOR_VERSION}"

    @property
    def splits(self) -> tuple[str, ...]:
        return SPLITS

    @property
    def heldout_combinations(self) -> tuple[tuple[str, str], ...]:
        """The (colour, shape) pairs that only the "heldout" split contains."""
        return HELDOUT_COMBINATIONS

    def samples(self, split: str) -> list[CaptionSample]:
        self._check_split(split)
        if split not in self._samples:
            samples = []
            for index in range(self._sizes[split]):
                image_id = f"{split}-{index:06d}"
                scene = generate_split_scene(self.seed, split, index)
                self._scenes[image_id] = scene
                captions, grounding = scene_captions(scene, self.captions_per_image)
                samples.append(CaptionSample(image_id=image_id, captions=captions, grounding=grounding))
            self._samples[split] = samples
        return list(self._samples[split])

    def scene(self, image_id: str) -> Scene:
        """The scene behind an image id such as "train-000042" (regenerated if `samples` was not called)."""
        if image_id not in self._scenes:
            split, _, index = image_id.rpartition("-")
            self._check_split(split)
            if not index.isdigit():
                raise ValueError(f"{image_id!r} is not a ShapesWorld image id like 'train-000042'")
            self._scenes[image_id] = generate_split_scene(self.seed, split, int(index))
        return self._scenes[image_id]

    def load(self, sample: CaptionSample) -> Image.Image:
        return render_scene(self.scene(sample.image_id), self.image_size)
