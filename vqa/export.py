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
The pictures are drawn by `core.maps.overlays`, the same as the caption overlays.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

import torch
from jsonargparse import ArgumentParser, Namespace
from jsonargparse.typing import PositiveInt
from PIL import Image

from core.maps.measures import top_area_share
from core.maps.overlays import DisplayScale, FixedScale, PerMapStretch, heat_maps, overlay, save_png, word_grid
from core.training.results import write_json_atomically
from data.images import load_image
from vqa.answers import answer_words
from vqa.module import VqaModule
from vqa.questions import QuestionError, cut_notice


def export_answer(
    model: VqaModule,
    image: Image.Image,
    question: str,
    out_dir: Path,
    *,
    top: int = 5,
    source: str = "",
    scale: DisplayScale = FixedScale(),
) -> dict:
    """Answer `question` about one photo and write the hop overlays, grid and answer.json into out_dir.

    Args:
        model: a trained VQA model (e.g. `VqaModule.load(path)`).
        image: the photo, as `data.images.load_image` gives it.
        question: the question as typed.
        out_dir: the folder to write into (created when missing).
        top: how many answers to keep, most probable first.
        source: what the photo is called in answer.json (its path, usually).
        scale: how the pictures show the weights (default: the same fixed scale for every hop).

    Returns:
        The answer.json record.

    Raises:
        vqa.questions.QuestionError: the question is empty or all unknown words (nothing is written).
    """
    with torch.inference_mode():
        answered = model.answer(model.encoder.transform()(image).to(model.device), question, top=top)
    return write_answer_overlays(
        image,
        question=question,
        answers=answered.answers,
        weights=answered.weights,
        grid=model.encoder.grid_shape,
        out_dir=out_dir,
        source=source,
        scale=scale,
    )


def write_answer_overlays(
    image: Image.Image,
    *,
    question: str,
    answers: Sequence[tuple[str, float]],
    weights: torch.Tensor,
    grid: tuple[int, int],
    out_dir: Path,
    source: str = "",
    scale: DisplayScale = FixedScale(),
) -> dict:
    """Write one answer's hop overlays, grid and answer.json into out_dir (created when missing); returns the
    answer.json record. Shared by `export_answer` and `vqa.Answer.save`.

    Args:
        image: the original photo (its own size; the maps are stretched onto it).
        question: the question as typed.
        answers: (answer label, probability) pairs, most probable first.
        weights: (K, L) attention weights of the K hops, L = rows * columns.
        grid: (rows, columns), the encoder's `grid_shape`.
        out_dir: the folder to write into.
        source: what the photo is called in answer.json.
        scale: how the pictures show the weights (default: the same fixed scale for every hop).
    """
    maps = heat_maps(weights, grid, image.size, scale)  # K maps (height, width)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    for hop, heat in enumerate(maps, start=1):
        save_png(overlay(image, heat), out_dir / f"hop_{hop}.png")
    best, probability = answers[0]
    titles = [f"hop {hop}" for hop in range(1, len(maps) + 1)]
    title = f"{answer_words(best)} ({probability:.0%})"
    save_png(word_grid(image, titles, maps, image_title=title, scale=scale, heading=question), out_dir / "grid.png")
    record = {
        "image": source,
        "question": question,
        "answers": [[answer, p] for answer, p in answers],
        "grid_size": list(grid),
        "image_size": list(image.size),
        "weights": weights.float().cpu().tolist(),
        "scale": scale.describe(),
        "concentration": top_area_share(weights).tolist(),  # (K,)
    }
    write_json_atomically(out_dir / "answer.json", record)
    return record


def parse_arguments(argv: Sequence[str] | None) -> Namespace:
    parser = ArgumentParser(
        prog="python -m vqa.export",
        description="Answer a question about an image and write every attention hop as an overlay, a grid and JSON.",
    )
    parser.add_argument("checkpoint", type=Path, help="a VQA checkpoint (best.ckpt)")
    parser.add_argument("image", type=Path, help="the image file")
    parser.add_argument("--question", required=True, help="the question about the image")
    parser.add_argument("--output", type=Path, required=True, help="folder that receives the files")
    parser.add_argument("--top", type=PositiveInt, default=5, help="how many answers to list")
    parser.add_argument(
        "--stretch",
        action="store_true",
        help="draw each hop's map up to its own maximum (even a flat map looks peaked) instead of the default "
        "fixed scale, the same for every hop (1 = uniform attention)",
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_arguments(argv)
    try:
        model = VqaModule.load(args.checkpoint)  # FileNotFoundError, or ValueError for another kind of file
        image = load_image(args.image)
    except (FileNotFoundError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    try:
        scale = PerMapStretch() if args.stretch else FixedScale()
        record = export_answer(
            model, image, args.question, args.output, top=args.top, source=str(args.image), scale=scale
        )
    except QuestionError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    notice = cut_notice(args.question, max_length=model.hparams.max_question_length)
    if notice is not None:
        print(f"note: {notice}", file=sys.stderr)
    answer, probability = record["answers"][0]
    print(f"{args.question!r}: {answer_words(answer)} ({probability:.2f}) -> {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
