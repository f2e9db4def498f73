"""Grounding: does the map drawn for a word land on the object the word names? Measured on photos with boxes.

    python -m captioning.grounding --images PATH/TO/coco-boxes/images --boxes PATH/TO/coco-boxes/boxes.json
    python -m captioning.grounding --images photos/ --boxes my_boxes.json --model runs/.../best.ckpt --output grounding.json

Each photo is captioned as the app captions it (`Captioner`, beam 3 by default). Every caption word that names an
object class (`ObjectWords`: a word list per class, `object_words.json` by default, e.g. man, woman, boy -> person;
bike -> bicycle or motorcycle) makes a word-object pair when the photo has a box of one of those classes, and a
hallucinated object when it has none (CHAIR_i of Rohrbach et al. 2018: hallucinated / all object words). For each
pair, with the word's attention map over the encoder's grid:

* **mass inside**: the attention mass inside the union of the class's boxes (attention correctness, Liu et al.
  2017). A grid cell counts with the exact share of its area the union covers.
* **pointing**: whether the centre of the most attended cell lies inside a box (the pointing game, Zhang et al. 2016).

Both also at the photo's own pixels, on the map as the overlays draw it (`core.maps.overlays.spread`, bilinear): mass
over the pixels whose centre is inside a box, and whether the brightest pixel is. And the baselines of each pair:
uniform attention (its mass inside is the union's share of the photo), a random cell (the share of cell centres
inside; at pixels, of pixel centres) and the photo's centre point. The encoder resizes the whole photo to its input
(no crop), so grid cell (r, c) of a rows x columns grid covers x in [c, c+1] / columns and y in [r, r+1] / rows of
the photo: boxes are divided by the photo's width and height and compared with the grid there.

A few hundred pairs leave the means uncertain by several points, so the report gives 95% intervals of the mass,
the pointing and the pointing's lead over the centre point: a percentile bootstrap that resamples the photos (a
photo's words share its caption and its boxes, so they are drawn together; `GroundingReport.interval`).
"""

from __future__ import annotations

import json
import math
import sys
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from jsonargparse import ArgumentParser
from PIL import Image

from captioning.bundled import DEFAULT_CAPTIONER
from captioning.explanations import AttentionWeights, WordMaps
from captioning.mentions import MentionReport, count_mentions, novel_classes, training_counts
from captioning.naming import ObjectNaming
from captioning.object_words import DEFAULT_WORDS, ObjectWords
from captioning.pretrained import Captioner
from core.maps.grounding import PairScore, photo_interval, score_pair
from data.boxes import BoxedPhoto, read_boxes
from data.images import ImageLoadError, load_image

# ----------------------------------------------------------------------------------------------------
# A set of photos.


@dataclass(frozen=True)
class Hallucination:
    """An object word whose classes have no box in the photo."""

    photo: str
    word: str
    classes: tuple[str, ...]


@dataclass
class GroundingReport:
    """Every pair and hallucinated word of a run, and the means a reader compares."""

    model: str
    grid: tuple[int, int]
    beam_size: int
    photos: int = 0
    captions: dict[str, str] = field(default_factory=dict)
    new_words: set[str] = field(default_factory=set)  # words of the captions the model's training never had
    pairs: list[PairScore] = field(default_factory=list)
    hallucinations: list[Hallucination] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    def means(self, pairs: Sequence[PairScore] | None = None) -> dict[str, float]:
        """The mean of every measure over `pairs` (all pairs by default); an empty list gives NaN."""
        pairs = self.pairs if pairs is None else pairs

        def mean(get: Callable[[PairScore], float]) -> float:
            return sum(get(pair) for pair in pairs) / len(pairs) if pairs else math.nan

        return {
            "pairs": len(pairs),
            "mass": mean(lambda p: p.mass),
            "pointing": mean(lambda p: p.pointed),
            "mass_pixels": mean(lambda p: p.mass_pixels),
            "pointing_pixels": mean(lambda p: p.pointed_pixels),
            "uniform": mean(lambda p: p.uniform),
            "random_cell": mean(lambda p: p.random_cell),
            "random_pixel": mean(lambda p: p.random_pixel),
            "centre": mean(lambda p: p.centre),
            "entropy": mean(lambda p: p.entropy),
        }

    def groups(self, key: Callable[[PairScore], str]) -> dict[str, dict[str, float]]:
        """`means` per group of pairs, the groups in order of size."""
        grouped: dict[str, list[PairScore]] = defaultdict(list)
        for pair in self.pairs:
            grouped[key(pair)].append(pair)
        return {name: self.means(group) for name, group in sorted(grouped.items(), key=lambda item: -len(item[1]))}

    def interval(
        self, measure: Callable[[PairScore], float], *, level: float = 0.95, draws: int = 5000, seed: int = 0
    ) -> tuple[float, float]:
        """The 95% interval (at `level`) of the mean of `measure` over the pairs, resampling photos
        (`core.maps.grounding.photo_interval`)."""
        return photo_interval(self.pairs, measure, level=level, draws=draws, seed=seed)

    def intervals(self) -> dict[str, tuple[float, float]]:
        """95% intervals of the mass inside, the pointing, and the pointing minus the centre point's."""
        return {
            "mass": self.interval(lambda p: p.mass),
            "pointing": self.interval(lambda p: p.pointed),
            "pointing_minus_centre": self.interval(lambda p: p.pointed - p.centre),
        }

    @property
    def hallucination_rate(self) -> float:
        """Hallucinated object words over all object words (CHAIR_i)."""
        total = len(self.pairs) + len(self.hallucinations)
        return len(self.hallucinations) / total if total else math.nan

    def to_json(self) -> dict:
        """Everything, for `--output`: the means, the groups, every pair and hallucination, every caption."""
        return {
            "model": self.model,
            "grid": list(self.grid),
            "beam_size": self.beam_size,
            "photos": self.photos,
            "skipped": self.skipped,
            "means": self.means(),
            "intervals": {name: list(bounds) for name, bounds in self.intervals().items()},
            "by_class": self.groups(by_class),
            "by_position": self.groups(by_position),
            "by_box_share": self.groups(by_box_share),
            "by_word_kind": self.groups(self.word_kind),
            "hallucination_rate": self.hallucination_rate,
            "hallucinations": [asdict(h) for h in self.hallucinations],
            "pairs": [asdict(pair) for pair in self.pairs],
            "captions": self.captions,
        }

    def word_kind(self, pair: PairScore) -> str:
        """Whether a pair's word is one the model trained on or a new one (`captioning.naming`)."""
        return "new word" if pair.word in self.new_words else "trained word"

    def table(self) -> str:
        """The means as a plain-text table for a terminal."""
        m, spans = self.means(), self.intervals()
        lead = spans["pointing_minus_centre"]
        rows, columns = self.grid
        lines = [
            f"{self.model}: {self.photos} photos, beam {self.beam_size}, {m['pairs']} word-object pairs "
            f"on a {rows}x{columns} grid (mean map entropy {m['entropy']:.2f} of {math.log(rows * columns):.2f})",
            "",
            f"{'':<22}{'mass inside':>12}{'pointing':>10}{'mass (pixels)':>15}{'pointing (pixels)':>19}",
            f"{'word maps':<22}{m['mass']:>12.3f}{m['pointing']:>10.3f}{m['mass_pixels']:>15.3f}{m['pointing_pixels']:>19.3f}",
            f"{'uniform':<22}{m['uniform']:>12.3f}{'':>10}{m['random_pixel']:>15.3f}{'':>19}",
            f"{'random cell / pixel':<22}{'':>12}{m['random_cell']:>10.3f}{'':>15}{m['random_pixel']:>19.3f}",
            f"{'centre point':<22}{'':>12}{m['centre']:>10.3f}{'':>15}{m['centre']:>19.3f}",
            "",
            "95% intervals, resampling the photos:",
            f"{'mass inside':<22}{m['mass']:>12.3f}  ({spans['mass'][0]:.3f} to {spans['mass'][1]:.3f})",
            f"{'pointing':<22}{m['pointing']:>12.3f}  ({spans['pointing'][0]:.3f} to {spans['pointing'][1]:.3f})",
            f"{'pointing - centre':<22}{m['pointing'] - m['centre']:>+12.3f}  ({lead[0]:+.3f} to {lead[1]:+.3f})",
            "",
            f"hallucinated objects: {len(self.hallucinations)} of {len(self.pairs) + len(self.hallucinations)} "
            f"object words ({self.hallucination_rate:.1%})"
            + (": " + ", ".join(f"{w} x{n}" for w, n in Counter(h.word for h in self.hallucinations).most_common(8)) if self.hallucinations else ""),
        ]
        sections = [("class", by_class), ("word position", by_position), ("box share of the photo", by_box_share)]
        if self.new_words:
            sections.append(("word kind", self.word_kind))
        for title, key in sections:
            groups = list(self.groups(key).items())[:12]
            width = max(22, *(len(label) + 1 for label in [f"by {title}", *(name for name, _ in groups)]))  # aligned
            lines += ["", f"{'by ' + title:<{width}}{'pairs':>6}{'mass':>7}{'uniform':>9}{'pointing':>10}{'centre':>8}"]
            for name, g in groups:
                lines.append(
                    f"{name:<{width}}{g['pairs']:>6}{g['mass']:>7.2f}{g['uniform']:>9.2f}"
                    f"{g['pointing']:>10.2f}{g['centre']:>8.2f}"
                )
        if self.skipped:
            lines += ["", f"skipped {len(self.skipped)} photos: " + "; ".join(self.skipped[:5])]
        return "\n".join(lines)


def by_class(pair: PairScore) -> str:
    return "/".join(pair.classes)


def by_position(pair: PairScore) -> str:
    """Words 1-2, 3-5, 6 and later (1-based): the subject usually comes first."""
    return "word 1-2" if pair.position < 2 else "word 3-5" if pair.position < 5 else "word 6+"


def by_box_share(pair: PairScore) -> str:
    return "under 10%" if pair.box_share < 0.1 else "10-30%" if pair.box_share < 0.3 else "30% or more"


def ground(
    captioner: Captioner,
    photos: Sequence[BoxedPhoto],
    images: Path,
    *,
    words: ObjectWords,
    beam_size: int = 3,
    maps: WordMaps = AttentionWeights(),
    model_name: str = "",
    name_objects: bool | None = None,
) -> GroundingReport:
    """Caption every photo with `captioner` (as the app does) and score every object word's map (`maps`: the
    attention weights by default, or a gradient-based map of `captioning.explanations`); `name_objects` as
    `Captioner.caption` takes it.

    A photo that is missing or unreadable, or whose size is not the boxes file's, is skipped and named in
    `report.skipped` (a rotated or resized copy would put the boxes in the wrong place).
    """
    report = GroundingReport(model=model_name, grid=tuple(captioner.model.encoder.grid_shape), beam_size=beam_size)
    for start in range(0, len(photos), captioner.batch_size):  # a batch's photos in memory at a time
        chunk = [(photo, image) for photo in photos[start : start + captioner.batch_size]
                 if (image := read_photo(images, photo, report.skipped)) is not None]
        pictures = [image for _, image in chunk]
        captions = captioner.caption(pictures, beam_size=beam_size, name_objects=name_objects)
        trained = captioner.model.vocabulary
        for (photo, _), caption, word_maps in zip(chunk, captions, maps(captioner.model, pictures, captions)):
            report.photos += 1
            report.captions[photo.file] = caption.text
            report.new_words.update(word for word in caption.words if word not in trained)
            for mention in words.mentions(caption.words):
                if mention.classes & photo.classes:
                    report.pairs.append(score_pair(word_maps[mention.position], photo, mention))
                else:
                    report.hallucinations.append(Hallucination(photo.file, mention.phrase, tuple(sorted(mention.classes))))
    return report


def read_photo(images: Path, photo: BoxedPhoto, skipped: list[str]) -> Image.Image | None:
    """The photo of `photo.file` in `images`, or None with the reason added to `skipped`."""
    try:
        image = load_image(images / photo.file)
    except ImageLoadError as error:
        skipped.append(str(error))
        return None
    if image.size != photo.size:
        width, height = image.size
        skipped.append(f"{photo.file}: the image is {width}x{height}, the boxes file says {photo.size[0]}x{photo.size[1]}")
        return None
    return image


def load_captioner(model: str) -> Captioner:
    """A bundled model by name, or a captioning checkpoint by path (`Captioner.load`)."""
    return Captioner.load(model)


def grounding(
    *,
    images: Path,
    boxes: Path,
    model: str = DEFAULT_CAPTIONER,
    beam_size: int = 3,
    words: Path = DEFAULT_WORDS,
    maps: WordMaps | None = None,
    name_objects: bool | None = None,
    naming: ObjectNaming | None = None,
    captions: Path | None = None,
    output: Path | None = None,
) -> tuple[GroundingReport, MentionReport]:
    """Caption photos with boxes, measure where each object word's attention lands, and count the classes the
    captions name (`captioning.mentions`: precision, recall and F1 per class, all classes and novel ones).

    Args:
        images: the folder of the photos the boxes file names.
        boxes: a JSON file of boxes: the coco-boxes layout ({"images": {file: {"size", "objects"}}}) or a COCO
            instances file (data.boxes).
        model: a bundled captioning model's name (flickr8k-hard, the app's default; flickr8k-soft, ...) or a
            checkpoint's path.
        beam_size: the beam width (the app's default is 3).
        words: the JSON word list that links caption words to box classes (captioning/object_words.json).
        maps: which map of each word to score: the attention weights the app draws (by default), or a
            gradient-based map, captioning.explanations.GradCAM or captioning.explanations.GradientTimesInput.
        name_objects: name what the encoder's ImageNet head sees (captioning.naming); unset: as the model does by
            default (on for models with an EfficientNet-Lite encoder).
        naming: the options objects are named with, when not the defaults (captioning.naming.ObjectNaming, e.g.
            --naming.value 2.0).
        captions: the model's training captions (a Karpathy caption file): classes its training split names
            fewer than 20 times are the novel ones; unset, the classes none of whose words the model knows.
        output: also write every pair, hallucination, caption, mention count and mean to this JSON file.
    """
    if not Path(images).is_dir():
        raise FileNotFoundError(f"--images {images} is not a folder (the folder of the photos the boxes file names)")
    photos = read_boxes(boxes)
    object_words = ObjectWords.read(words)
    counts = training_counts(captions, object_words) if captions is not None else None
    captioner = load_captioner(model)
    if naming is not None:
        captioner.naming = naming
    report = ground(
        captioner, photos, Path(images), words=object_words, beam_size=beam_size, maps=maps or AttentionWeights(),
        model_name=model if maps is None else f"{model} ({type(maps).__name__})", name_objects=name_objects,
    )
    if report.photos == 0:
        raise FileNotFoundError(f"no photo of {boxes} could be read from {images}: " + "; ".join(report.skipped[:3]))
    novel = novel_classes(object_words, counts=counts, vocabulary=set(captioner.model.vocabulary.tokens))
    mentions = count_mentions(
        photos, {file: text.split() for file, text in report.captions.items()}, object_words, novel=novel
    )
    print(report.table())
    print("\n" + mentions.table())
    if output is not None:
        Path(output).parent.mkdir(parents=True, exist_ok=True)
        Path(output).write_text(json.dumps({**report.to_json(), "mentions": mentions.to_json()}, indent=1))
        print(f"\nwrote {output}")
    return report, mentions


def parser() -> ArgumentParser:
    """The command line of `grounding`, read from its signature and docstring."""
    parser = ArgumentParser(
        prog="python -m captioning.grounding",
        description="Caption photos with object boxes and measure where each object word's map lands.",
    )
    parser.add_function_arguments(grounding, as_positional=False)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    command = parser()
    arguments = command.instantiate(command.parse_args(argv))
    try:
        grounding(**{name: arguments[name] for name in arguments.keys()})
    except (FileNotFoundError, ValueError) as error:  # DatasetFormatError, CheckpointError, UnknownModelError too
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
