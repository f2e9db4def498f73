"""One answer's attention hops drawn over its photo: an overlay per hop, the grid with the question and the best
answer, and answer.json, as `python -m vqa.export`, `vqa.Answer.save` and the app write them (`vqa.export` lists
the files). The drawing itself is `core.maps.overlays`', the same as the caption overlays'.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch
from PIL import Image

from core.maps.measures import top_area_share
from core.maps.overlays import DisplayScale, FixedScale, heat_maps, overlay, save_png, word_grid
from core.training.results import write_json_atomically
from vqa.answers import answer_words


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
    answer.json record (`vqa.Answer.save`, which `python -m vqa.export` and the app use).

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
