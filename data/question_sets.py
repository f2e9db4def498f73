"""A VQA question set made from the captions of many photos (Flickr8k-QA), in the VQA v2 layout.

`karpathy_photos` reads a Karpathy split file's photos and tokenised captions; `question_set` makes each split's
questions with `data.caption_questions`, one per (photo, question) (a question the photo's captions answer
differently is dropped), and thins each split's common answers as COCO-QA did (`thin_common_answers`);
`write_question_set` writes the files `data.vqa2.Flickr8kQa` reads: per split the question, annotation and photo
files, and `images/`, links to the photos.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from data.caption_questions import QUESTION_TYPES, CaptionReader, caption_questions
from data.errors import DatasetFormatError
from data.karpathy import KarpathyCaptions
from data.vocabulary import tokenize


@dataclass(frozen=True)
class PhotoQuestion:
    """A question about one photo, with the caption it was formed from."""

    photo: int  # the photo's integer id
    question: str
    answer: str
    kind: str
    caption: str


def photo_questions(photo: int, captions: Iterable[Sequence[str]], *, reader: CaptionReader) -> list[PhotoQuestion]:
    """The questions of one photo from all its captions (token lists), each once: a question that two captions
    answer differently ("the color of the shirt": red, blue) is dropped, as the photo does not settle it."""
    found: dict[str, list[PhotoQuestion]] = defaultdict(list)
    for tokens in captions:
        for q in caption_questions(tokens, reader=reader):
            found[q.question].append(PhotoQuestion(photo, q.question, q.answer, q.kind, " ".join(tokens)))
    return [same[0] for same in found.values() if len({q.answer for q in same}) == 1]


def thin_common_answers(
    questions: Sequence[PhotoQuestion], *, cap: Mapping[str, int], seed: str = "flickr8k-qa"
) -> list[PhotoQuestion]:
    """COCO-QA's thinning of common answers (Ren et al. 2015, section 4.2), so that guessing "dog" or "two" is not a
    strong answerer while the answers stay in the order of how often the photos show them.

    The questions of each (kind, answer) are enrolled one by one: while fewer than U = `cap[kind]` are kept, each
    is kept; after that, each with probability exp(-(kept - U) / (2U)). An answer with n > U questions keeps
    about U + 2U ln(1 + (n - U) / 2U) of them: "two", 1831 of 2521 training number questions as formed, keeps 967,
    "three" 426 of 461 (a hard cap at U would keep 252 of each and teach that two and three are as common).
    The enrolment order and each draw come from the SHA-256 of (seed, photo, question), so the kept questions do
    not depend on the order of `questions`, whose order they keep."""
    groups: dict[tuple[str, str], list[PhotoQuestion]] = defaultdict(list)
    for q in questions:
        groups[(q.kind, q.answer)].append(q)

    def digest(q: PhotoQuestion) -> str:
        return hashlib.sha256(f"{seed}|{q.photo}|{q.question}".encode()).hexdigest()

    kept = set()
    for (kind, _), group in groups.items():
        bound, count = cap[kind], 0
        for key, q in sorted(((digest(q), q) for q in group), key=lambda pair: pair[0]):
            draw = int(key[-13:], 16) / 16**13  # uniform in [0, 1), apart from the order's leading digits
            if count < bound or draw < math.exp(-(count - bound) / (2 * bound)):
                kept.add(id(q))
                count += 1
    return [q for q in questions if id(q) in kept]


def answer_counts(questions: Iterable[PhotoQuestion]) -> dict[str, Counter]:
    """kind -> Counter of its answers."""
    counts: dict[str, Counter] = {kind: Counter() for kind in QUESTION_TYPES}
    for q in questions:
        counts[q.kind][q.answer] += 1
    return counts


def vqa2_documents(questions: Sequence[PhotoQuestion], *, first_id: int, subtype: str) -> tuple[dict, dict]:
    """The question and annotation files (VQA v2 layout) of one split; question ids count up from `first_id`.
    Each answer is repeated 10 times (a single-answer set, scored right or wrong, as DAQUAR's files are);
    `question_type` is the rule, `answer_type` "number" or "other"; the annotation keeps the caption."""
    info = {"description": "Flickr8k-QA: questions formed from Flickr8k captions by COCO-QA's rules"}
    question_entries, annotations = [], []
    for n, q in enumerate(questions):
        question_id = first_id + n
        question_entries.append({"question_id": question_id, "image_id": q.photo, "question": q.question})
        annotations.append({
            "question_id": question_id,
            "image_id": q.photo,
            "question_type": q.kind,
            "answer_type": "number" if q.kind == "number" else "other",
            "multiple_choice_answer": q.answer,
            "answers": [{"answer": q.answer, "answer_confidence": "yes", "answer_id": k + 1} for k in range(10)],
            "caption": q.caption,
        })
    return (
        {"info": info, "data_subtype": subtype, "questions": question_entries},
        {"info": info, "data_subtype": subtype, "annotations": annotations},
    )


SPLITS: tuple[str, ...] = ("train", "val", "test")
CAP_SHARE = 0.1  # U of `thin_common_answers`: this share of its type's questions in a split (before thinning)


def question_file(split: str) -> str:
    return f"flickr8k_qa_{split}_questions.json"


def annotation_file(split: str) -> str:
    return f"flickr8k_qa_{split}_annotations.json"


def photo_file(split: str) -> str:
    """The list of every photo of the caption split, asked about or not: the feature cache's images, so that a
    change of the rules (other questions, other photos asked about) does not make the photos be encoded again."""
    return f"flickr8k_qa_{split}_photos.json"


IMAGE_PATTERN = "images/{image_id}.jpg"  # a link to the caption set's photo, made by `write_question_set`


@dataclass(frozen=True)
class CaptionedPhoto:
    """A photo of a caption set: its integer id, split, file and the token lists of its captions."""

    photo: int
    split: str
    path: Path
    captions: tuple[tuple[str, ...], ...]


def question_set(
    photos: Iterable[CaptionedPhoto], *, reader: CaptionReader, cap_share: float = CAP_SHARE
) -> dict[str, list[PhotoQuestion]]:
    """split -> its questions: every photo's questions (`photo_questions`), with each split's common answers
    thinned by COCO-QA's rule (`thin_common_answers`), U being `cap_share` of their type's questions in that split.

    Raises:
        DatasetFormatError: a split has no photos or no question could be formed on any of its photos.
    """
    found: dict[str, list[PhotoQuestion]] = {split: [] for split in SPLITS}
    photo_count: Counter = Counter()
    for photo in photos:
        photo_count[photo.split] += 1
        found[photo.split] += photo_questions(photo.photo, photo.captions, reader=reader)
    result = {}
    for split, questions in found.items():
        if not questions:
            count = photo_count[split]
            why = f"no caption of its {count} photos fits a rule" if count else "no photos"
            raise DatasetFormatError(f"the {split} split has no questions ({why}); the caption set needs all of "
                                     f"{', '.join(SPLITS)}")
        totals = Counter(q.kind for q in questions)
        cap = {kind: max(1, round(cap_share * totals[kind])) for kind in QUESTION_TYPES}
        result[split] = thin_common_answers(questions, cap=cap)
    return result


def write_question_set(
    questions: Mapping[str, Sequence[PhotoQuestion]], photos: Sequence[CaptionedPhoto], out: Path
) -> dict[str, Path]:
    """Write each split's question, annotation and photo files into `out`, and link `out/images/<id>.jpg` to each
    photo of the caption set (the photos stay where they are). Returns split -> its question file."""
    out = Path(out)
    (out / "images").mkdir(parents=True, exist_ok=True)
    written, first_id = {}, 0
    for split, split_questions in questions.items():
        documents = vqa2_documents(split_questions, first_id=first_id, subtype=f"flickr8k_qa_{split}")
        first_id += len(split_questions)
        for name, document in zip((question_file(split), annotation_file(split)), documents):
            (out / name).write_text(json.dumps(document), encoding="utf-8")
        written[split] = out / question_file(split)
        split_photos = [photo for photo in photos if photo.split == split]
        (out / photo_file(split)).write_text(json.dumps({"image_ids": [photo.photo for photo in split_photos]}))
        for photo in split_photos:
            link = out / IMAGE_PATTERN.format(image_id=photo.photo)
            if link.is_symlink() or link.exists():
                link.unlink()
            link.symlink_to(Path(photo.path).resolve())
    return written


def karpathy_photos(captions: Path, *, image_dir: str = "images") -> list[CaptionedPhoto]:
    """The photos of a Karpathy split file (`data.karpathy.KarpathyCaptions` reads and checks it), each with its
    integer id, split, file and tokenised captions.

    Raises:
        FileNotFoundError: no such file.
        DatasetFormatError: the file is not in the Karpathy layout, or a photo's id is not an integer.
    """
    captions = Path(captions)
    if not captions.is_file():  # said here: KarpathyCaptions' own message names the training CLI's option
        raise FileNotFoundError(f"caption file not found: {captions}; pass a Karpathy split file, such as "
                                "flickr8k/dataset_flickr8k.json")
    dataset = KarpathyCaptions(root=captions.parent, annotations=captions.name, image_dir=image_dir)
    photos = []
    for split in SPLITS:
        for sample in dataset.samples(split):
            if not sample.image_id.isdigit():
                raise DatasetFormatError(f"{captions}: photo {sample.image_id!r} has no integer 'imgid' or 'cocoid'")
            tokens = tuple(tuple(tokenize(caption)) for caption in sample.captions)
            photos.append(CaptionedPhoto(photo=int(sample.image_id), split=split, path=sample.path, captions=tokens))
    return photos
