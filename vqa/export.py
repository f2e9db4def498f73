"""`python -m vqa.export CHECKPOINT IMAGE --question "..." --output DIR [--top 5] [--stretch]`: answer a question
about a photo and write where each attention hop looked.

DIR receives `hop_1.png`, `hop_2.png`, ... (one overlay per hop), `grid.png` (the question over the photo titled
with the best answer, then the hops titled "hop k", and the colour bar) and `answer.json` {"image", "question",
"answers": [[answer, prob], ...], "grid_size": [rows, columns], "image_size": [width, height], "weights": one row of
rows x columns raw weights per hop, "scale": the scale the pictures are drawn on, "concentration": per hop, the
share of its attention on the most attended 5% of the photo}. The pictures use one fixed scale for every hop
(`core.maps.overlays.FixedScale`: 1 = uniform attention); `--stretch` draws each hop up to its own maximum instead.
The pictures and the printed answer show answers as words ("tissue roll"); answer.json keeps the model's labels
("tissue_roll"), as its answer classes name them.
An empty question, or one made only of unknown words, exits with the reason and writes nothing; a question
longer than the model reads is answered from its first words, with a note on stderr.
The command answers with `vqa.Answerer` and writes the result with `Answer.save` (drawn by `vqa.overlays`), as a
Python user and the app do.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from jsonargparse import ArgumentParser, Namespace
from jsonargparse.typing import PositiveInt

from core.maps.overlays import add_scale_flag, chosen_scale
from vqa.answers import answer_words
from vqa.pretrained import Answerer


def parse_arguments(argv: Sequence[str] | None) -> Namespace:
    parser = ArgumentParser(
        prog="python -m vqa.export",
        description="Answer a question about an image and write every attention hop as an overlay, a grid and JSON.",
    )
    parser.add_argument(
        "model", help="a bundled VQA model's name (flickr8k-qa-san, daquar-san, shapes-san) or a checkpoint (best.ckpt)"
    )
    parser.add_argument("image", type=Path, help="the image file")
    parser.add_argument("--question", required=True, help="the question about the image")
    parser.add_argument("--output", type=Path, required=True, help="folder that receives the files")
    parser.add_argument("--top", type=PositiveInt, default=5, help="how many answers to list")
    add_scale_flag(parser, unit="hop")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_arguments(argv)
    try:
        answerer = Answerer.load(args.model)
        answer = answerer.ask(args.image, args.question, top_k=args.top, warn=False)
    except (FileNotFoundError, ValueError) as error:  # no checkpoint, an unreadable image, a question it cannot read
        print(f"error: {error}", file=sys.stderr)  # nothing is written
        return 2
    if answer.notice is not None:
        print(f"note: {answer.notice}", file=sys.stderr)
    answer.save(args.output, scale=chosen_scale(args))
    best, probability = answer.answers[0]
    print(f"{args.question!r}: {answer_words(best)} ({probability:.2f}) -> {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
