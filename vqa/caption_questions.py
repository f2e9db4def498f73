"""`python -m vqa.caption_questions CAPTIONS.json OUT/`: a VQA question set from a Karpathy-layout caption file.

Forms questions from each photo's captions by COCO-QA's four rules (`data.caption_questions`: object, number, color,
location; parts of speech from WordNet, installed offline by `core.training.wordnet`), keeps the caption file's
train/val/test split by photo, thins each split's common answers, and writes the split files that
`data.vqa2.Flickr8kQa` (configs/vqa/flickr8k_qa_san.yaml) reads, with links to the photos:

    python -m vqa.caption_questions PATH/TO/flickr8k/dataset_flickr8k.json datasets/flickr8k_qa

It prints the questions per type and split and the most common answers per type. A file that is not a Karpathy
split file, or a split without questions, stops it with a one-line error.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from jsonargparse import ArgumentParser

from core.training.wordnet import ensure_wordnet
from data.caption_questions import QUESTION_TYPES, CaptionReader, WordNetLexicon
from data.errors import DatasetFormatError
from data.question_sets import (
    CAP_SHARE,
    PhotoQuestion,
    answer_counts,
    karpathy_photos,
    question_set,
    write_question_set,
)


def summary(questions: Mapping[str, Sequence[PhotoQuestion]], *, top: int = 8) -> str:
    """Questions per type and split (a Markdown table) and the training split's most common answers per type."""
    lines = ["| split | " + " | ".join(QUESTION_TYPES) + " | all |", "|---|" + "---:|" * (len(QUESTION_TYPES) + 1)]
    for split, split_questions in questions.items():
        counts = answer_counts(split_questions)
        cells = [str(sum(counts[kind].values())) for kind in QUESTION_TYPES]
        lines.append(f"| {split} | " + " | ".join(cells) + f" | {len(split_questions)} |")
    for split in ("train", "test"):
        lines.append(f"\nmost common answers, {split} (share of the type's questions):")
        for kind, counts in answer_counts(questions[split]).items():
            total = sum(counts.values())
            common = ", ".join(f"{answer} {100 * n / total:.1f}%" for answer, n in counts.most_common(top))
            lines.append(f"- {kind} ({len(counts)} answers): {common}")
    return "\n".join(lines)


def parser() -> ArgumentParser:
    parser = ArgumentParser(prog="python -m vqa.caption_questions", description=__doc__.split("\n\n")[0])
    parser.add_argument("captions", type=Path, help="a Karpathy split file, such as dataset_flickr8k.json")
    parser.add_argument("out", type=Path, help="the folder to write the question set into")
    parser.add_argument("--image-dir", default="images", help="the photos' folder, relative to the caption file's")
    parser.add_argument("--cap-share", type=float, default=CAP_SHARE,
                        help="U of COCO-QA's thinning, as a share of its type's questions in a split: an answer's "
                             "questions beyond U are kept less and less often (1: none thinned)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    arguments = parser()
    args = arguments.parse_args(argv)
    if not 0 < args.cap_share <= 1:
        arguments.error(f"--cap-share is a share in (0, 1], got {args.cap_share}")
    try:
        photos = karpathy_photos(args.captions, image_dir=args.image_dir)
        ensure_wordnet()
        from nltk.corpus import wordnet

        reader = CaptionReader(lexicon=WordNetLexicon(wordnet=wordnet))
        questions = question_set(photos, reader=reader, cap_share=args.cap_share)
    except (DatasetFormatError, FileNotFoundError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    write_question_set(questions, photos, args.out)
    print(summary(questions))
    print(f"wrote {', '.join(questions)} to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
