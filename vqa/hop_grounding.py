"""Where a SAN's attention hops look when a question names an object: each hop's map against the object's boxes.

    python -m vqa.hop_grounding --images PATH/TO/coco-boxes/images --boxes PATH/TO/coco-boxes/boxes.json
    python -m vqa.hop_grounding ... --model runs/.../best.ckpt --output hops.json

For every photo and every boxed object class whose word the model's question vocabulary holds (`CLASS_WORDS` turns
a COCO class into the word a question uses: "dining table" -> table), the model is asked the questions of
`TEMPLATES` ("what is the color of the table?", "where is the table?"; or those of `--templates`), and each hop's
map is scored against the union of that class's boxes by `core.maps.grounding.score_pair`, the measure of
`python -m captioning.grounding`:
the attention mass inside the boxes and whether the peak cell's centre is inside one (pointing), beside uniform
attention's mass (the boxes' share of the photo), a random cell and the photo's centre point.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from jsonargparse import ArgumentParser

from core.maps.grounding import Mention, PairScore, photo_interval, score_pair
from data.boxes import BoxedPhoto, read_boxes
from data.errors import DatasetFormatError
from data.images import ImageLoadError, load_image
from data.vocabulary import Vocabulary
from vqa.bundled import MODELS
from vqa.pretrained import Answerer

# the question word of a COCO class whose name is not one ("dining table" -> table); None: no word a question
# could use without naming another class ("teddy bear": bear, "hot dog": dog)
CLASS_WORDS: dict[str, str | None] = {
    "dining table": "table", "wine glass": "glass", "traffic light": None, "cell phone": "phone",
    "tennis racket": "racket", "baseball glove": "glove", "potted plant": "plant", "stop sign": "sign",
    "sports ball": "ball", "baseball bat": "bat", "fire hydrant": "hydrant", "teddy bear": None, "hot dog": None,
    "tv": "television", "skis": "skis", "motorcycle": "motorcycle", "airplane": "airplane",
}
TEMPLATES: tuple[str, ...] = ("what is the color of the {word}?", "where is the {word}?")


def class_word(name: str) -> str | None:
    """The word a question names a COCO class by, or None when it has none of its own."""
    return CLASS_WORDS.get(name, name if " " not in name else None)


@dataclass(frozen=True)
class HopScore:
    """One hop of one question about a boxed object, scored against that object's boxes."""

    question: str
    answer: str
    hop: int  # 1-based
    pair: PairScore


def asked_about(photo: BoxedPhoto, vocabulary: Vocabulary) -> list[tuple[str, str]]:
    """(class, word) of each class boxed in the photo whose word the model knows, in class order."""
    known = set(vocabulary.tokens)
    pairs = [(name, class_word(name)) for name in sorted(photo.classes)]
    return [(name, word) for name, word in pairs if word is not None and word in known]


def score_photo(
    answerer: Answerer, photo: BoxedPhoto, image, *, templates: Sequence[str] = TEMPLATES
) -> list[HopScore]:
    """Every question of `templates` about every known boxed class of one photo, each hop scored."""
    scores = []
    for name, word in asked_about(photo, answerer.model.question_vocabulary):
        for template in templates:
            question = template.format(word=word)
            answered = answerer.ask(image, question, top_k=1)
            position = len(template.split("{word}")[0].split())  # the word's index in the question
            mention = Mention(position=position, phrase=word, classes=frozenset({name}))
            for k, hop in enumerate(answered.hops):  # (rows, columns) each
                scores.append(HopScore(question, answered.answers[0][0], k + 1, score_pair(hop, photo, mention)))
    return scores


def summary(scores: Sequence[HopScore]) -> dict:
    """Per hop: questions, mean mass inside and pointing, the baselines' (uniform mass, centre, random cell), and the
    95% interval of the pointing's lead over the centre point (`core.maps.grounding.photo_interval`)."""
    hops = sorted({s.hop for s in scores})
    result = {}
    for hop in hops:
        pairs = [s.pair for s in scores if s.hop == hop]
        n = len(pairs)
        result[f"hop {hop}"] = {
            "questions": n,
            "photos": len({p.photo for p in pairs}),
            "mass inside": sum(p.mass for p in pairs) / n,
            "pointing": sum(p.pointed for p in pairs) / n,
            "uniform mass": sum(p.uniform for p in pairs) / n,
            "centre pointing": sum(p.centre for p in pairs) / n,
            "random cell pointing": sum(p.random_cell for p in pairs) / n,
            "pointing, pixels": sum(p.pointed_pixels for p in pairs) / n,
            "pointing minus centre, 95% interval": photo_interval(pairs, lambda p: p.pointed - p.centre),
        }
    return result


def table(report: dict) -> str:
    """The summary as a Markdown table, x100."""
    columns = ["mass inside", "uniform mass", "pointing", "centre pointing", "random cell pointing"]
    lines = ["| hop | questions | " + " | ".join(columns) + " |", "|---|---:|" + "---:|" * len(columns)]
    lines[0] += " pointing minus centre (95% interval, photos resampled) |"
    lines[1] += "---:|"
    for hop, row in report.items():
        low, high = row["pointing minus centre, 95% interval"]
        lead = 100 * (row["pointing"] - row["centre pointing"])
        lines.append(f"| {hop} | {row['questions']} | " + " | ".join(f"{100 * row[c]:.1f}" for c in columns)
                     + f" | {lead:+.1f} ({100 * low:+.1f}, {100 * high:+.1f}) |")  # fmt: skip
    return "\n".join(lines)


def load_answerer(model: str) -> Answerer:
    """A bundled model by name, or a checkpoint file."""
    return Answerer.from_pretrained(model) if model in MODELS else Answerer.from_checkpoint(model)


def parser() -> ArgumentParser:
    parser = ArgumentParser(prog="python -m vqa.hop_grounding", description=__doc__.split("\n\n")[0])
    parser.add_argument("--images", type=Path, required=True, help="the folder of the photos")
    parser.add_argument("--boxes", type=Path, required=True, help="their boxes (data.boxes layouts)")
    parser.add_argument("--model", default=next(iter(MODELS)), help="a bundled model's name or a checkpoint")
    parser.add_argument("--output", type=Path, default=None, help="write every scored hop here (JSON)")
    parser.add_argument("--templates", type=list[str], default=list(TEMPLATES),
                        help="the questions asked about each object, {word} standing for its word")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    arguments = parser()
    args = arguments.parse_args(argv)
    unnamed = [template for template in args.templates if template.count("{word}") != 1]
    if unnamed or not args.templates:
        arguments.error(f"--templates: each question must hold {{word}} once (the object's word), got {unnamed}")
    try:
        photos = read_boxes(args.boxes)
    except (FileNotFoundError, DatasetFormatError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    answerer = load_answerer(args.model)
    scores, skipped = [], []
    for photo in photos:
        try:
            image = load_image(args.images / photo.file)
        except ImageLoadError as error:
            skipped.append(str(error))
            continue
        if image.size != photo.size:
            skipped.append(f"{photo.file}: the image is {image.size}, the boxes file says {photo.size}")
            continue
        scores += score_photo(answerer, photo, image, templates=args.templates)
    if not scores:
        print("error: no question could be asked: no boxed class has a word the model knows", file=sys.stderr)
        return 2
    report = summary(scores)
    print(f"{args.model}: {len(scores) // len(report)} questions on {report['hop 1']['photos']} photos "
          f"({len(skipped)} photos skipped)")
    print(table(report))
    if args.output is not None:
        records = [{"question": s.question, "answer": s.answer, "hop": s.hop, **asdict(s.pair)} for s in scores]
        args.output.write_text(json.dumps({"summary": report, "skipped": skipped, "hops": records}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
