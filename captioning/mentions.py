"""Which object classes a caption names, against the boxes of the photo: precision, recall and F1 per class.

Novel-object captioning (DCC, Hendricks et al. 2016; nocaps, Agrawal et al. 2019) judges a captioner by whether it
mentions the objects a photo holds: per class, the F1 of "the caption names the class" against "the photo holds
it", averaged over classes. Here, on any photos with boxes (`data.boxes`), with the caption words of each class from
`ObjectWords` (man, woman -> person; bike -> bicycle or motorcycle):

* a class is **present** in a photo when one of its boxes covers at least `PRESENT_SHARE` (2%) of the photo; a class
  whose boxes are all smaller is neither counted present nor, when a caption names it, counted false;
* a caption **names** a class when one of its object words does; a word of several classes ("bike") names those
  that are present, or, when none is, all of them (each a false mention);
* per class: right mentions (named and present), false mentions (named, absent), missed (present, not named), each
  photo once per class. **Micro** figures sum them over the classes; the **class-averaged F1** averages the F1 of
  the classes present in at least two photos (DCC's measure).

The same figures for the **novel** classes alone: those the captioner's training captions (nearly) never name,
fewer than `NOVEL_BELOW` (20) captions of the training split (`training_counts` of a Karpathy caption file), or,
without the captions, those none of whose words the model's vocabulary holds.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from captioning.object_words import ObjectWords
from data.boxes import BoxedPhoto
from data.errors import DatasetFormatError
from data.json_files import read_json_object
from data.vocabulary import tokenize

PRESENT_SHARE = 0.02  # a box covering this share of the photo makes its class present
NOVEL_BELOW = 20  # a class named by fewer training captions than this is novel


def present_classes(photo: BoxedPhoto, *, share: float = PRESENT_SHARE) -> tuple[set[str], set[str]]:
    """(classes with a box covering at least `share` of the photo, classes with any box)."""
    width, height = photo.size
    present = {
        item.name
        for item in photo.objects
        if (item.box[2] - item.box[0]) * (item.box[3] - item.box[1]) >= share * width * height
    }
    return present, set(photo.classes)


def named_classes(words: Sequence[str], object_words: ObjectWords, boxed: Collection[str]) -> set[str]:
    """The classes a caption's words name; a word of several classes names those among `boxed` when it can."""
    named = set()
    for mention in object_words.mentions(words):
        there = mention.classes & set(boxed)
        named |= there if there else mention.classes
    return named


@dataclass
class ClassCounts:
    """One class over a set of photos: photos where it was named and present, named and absent, present, not named."""

    right: int = 0
    false: int = 0
    missed: int = 0

    @property
    def present(self) -> int:
        return self.right + self.missed

    def precision(self) -> float:
        return self.right / (self.right + self.false) if self.right + self.false else math.nan

    def recall(self) -> float:
        return self.right / self.present if self.present else math.nan

    def f1(self) -> float:
        """2 right / (2 right + false + missed); 0 for a present class never named right."""
        total = 2 * self.right + self.false + self.missed
        return 2 * self.right / total if total else math.nan


@dataclass
class MentionReport:
    """Mention counts per class, and which classes are novel."""

    classes: dict[str, ClassCounts] = field(default_factory=dict)
    novel: frozenset[str] = frozenset()
    photos: int = 0

    def total(self, names: Collection[str] | None = None) -> ClassCounts:
        """The counts summed over `names` (all classes by default)."""
        chosen = [self.classes[n] for n in (self.classes if names is None else names) if n in self.classes]
        return ClassCounts(
            sum(c.right for c in chosen), sum(c.false for c in chosen), sum(c.missed for c in chosen)
        )

    def averaged_f1(self, names: Collection[str] | None = None, *, min_present: int = 2) -> float:
        """The F1 averaged over the classes (of `names`) present in at least `min_present` photos."""
        scores = [
            counts.f1()
            for name, counts in self.classes.items()
            if (names is None or name in names) and counts.present >= min_present
        ]
        return sum(scores) / len(scores) if scores else math.nan

    def summary(self, names: Collection[str] | None = None) -> dict[str, float]:
        total = self.total(names)
        return {
            "precision": total.precision(),
            "recall": total.recall(),
            "micro_f1": total.f1(),
            "class_averaged_f1": self.averaged_f1(names),
            "right": total.right,
            "false": total.false,
            "missed": total.missed,
            "present": total.present,
            "classes_averaged": sum(
                1 for n, c in self.classes.items() if (names is None or n in names) and c.present >= 2
            ),
        }

    def to_json(self) -> dict:
        return {
            "photos": self.photos,
            "all": self.summary(),
            "novel": self.summary(self.novel),
            "novel_classes": sorted(self.novel),
            "by_class": {
                name: {"right": c.right, "false": c.false, "missed": c.missed, "f1": c.f1()}
                for name, c in sorted(self.classes.items())
            },
        }

    def table(self) -> str:
        """The figures as plain text: all classes, then the novel ones, then the classes with most errors."""

        def row(title: str, s: dict[str, float]) -> str:
            return (
                f"{title:<16}{s['precision']:>10.3f}{s['recall']:>8.3f}{s['micro_f1']:>10.3f}"
                f"{s['class_averaged_f1']:>13.3f}{s['right']:>7}{s['false']:>7}{s['missed']:>8}"
            )

        lines = [
            f"class mentions on {self.photos} photos (a class is present when a box covers {PRESENT_SHARE:.0%} of "
            f"the photo; {len(self.novel)} classes novel)",
            "",
            f"{'':<16}{'precision':>10}{'recall':>8}{'micro F1':>10}{'class F1':>13}{'right':>7}{'false':>7}"
            f"{'missed':>8}",
            row("all classes", self.summary()),
            row("novel classes", self.summary(self.novel)),
        ]
        worst = sorted(self.classes.items(), key=lambda item: -(item[1].false + item[1].missed))[:10]
        lines += ["", f"{'by class':<16}{'right':>7}{'false':>7}{'missed':>8}{'novel':>7}"]
        lines += [
            f"{name:<16}{c.right:>7}{c.false:>7}{c.missed:>8}{'yes' if name in self.novel else '':>7}"
            for name, c in worst
        ]
        return "\n".join(lines)


def count_mentions(
    photos: Sequence[BoxedPhoto],
    captions: Mapping[str, Sequence[str]],
    object_words: ObjectWords,
    *,
    novel: Collection[str] = (),
) -> MentionReport:
    """Count the class mentions of `captions` (photo file -> caption words) against the photos' boxes; photos
    without a caption (skipped ones) are left out."""
    report = MentionReport(novel=frozenset(novel))
    for photo in photos:
        if photo.file not in captions:
            continue
        report.photos += 1
        present, boxed = present_classes(photo)
        named = named_classes(captions[photo.file], object_words, boxed)
        for name in present | (named - boxed):  # a named class with small boxes only is not counted
            counts = report.classes.setdefault(name, ClassCounts())
            if name in present and name in named:
                counts.right += 1
            elif name in present:
                counts.missed += 1
            else:  # named, with no box at all: a false mention
                counts.false += 1
    return report


def training_counts(captions_file: str | Path, object_words: ObjectWords, *, split: str = "train") -> Counter:
    """How many captions of a Karpathy caption file's `split` name each class (a caption once per class)."""
    document = read_json_object(Path(captions_file))
    if not isinstance(document.get("images"), list):
        raise DatasetFormatError(
            f"{captions_file}: not a Karpathy caption file (expected {{'images': [{{'split', 'sentences'}}, ...]}})"
        )
    counts: Counter = Counter()
    for image in document["images"]:
        if image.get("split") != split:
            continue
        for sentence in image.get("sentences", []):
            words = sentence.get("tokens") or tokenize(sentence.get("raw", ""))
            counts.update({name for m in object_words.mentions(words) for name in m.classes})
    return counts


def novel_classes(
    object_words: ObjectWords,
    *,
    counts: Mapping[str, int] | None = None,
    vocabulary: Collection[str] = (),
    below: int = NOVEL_BELOW,
) -> frozenset[str]:
    """The classes the training captions (nearly) never name: fewer than `below` captions by `counts`, or, without
    counts, the classes none of whose single words `vocabulary` holds."""
    if counts is not None:
        return frozenset(name for name in object_words.class_names if counts.get(name, 0) < below)
    return frozenset(
        name
        for name, words in object_words.classes.items()
        if not any(word in vocabulary for word in words if " " not in word)
    )
