"""The six attention score functions side by side: the figure and the measurements of docs/attention.md.

    python benchmarks/score_functions.py figure [--out benchmarks/figures/score_functions.png]
    python benchmarks/score_functions.py spread [--scenes 100] [--draws 2000]
    taskset -c 0,1 python benchmarks/score_functions.py speed [--steps 5] [--repeats 5]    # the study's setting: 2 cores

`figure`: one ShapesWorld test scene and one real photo (scikit-image's "coffee"); one row per bundled score-function
model (`captioning.bundled.SCORE_MODELS`), each teacher-forced on the same caption (`captioning.inference.follow_caption`)
so the columns are the same words, every map on the same fixed scale (`core.maps.overlays.FixedScale`, 1 = uniform), the
colour bar under them.

`spread`: why scaled dot-product and cosine scores exist, measured. (1) Random queries and keys of n independent
standard-normal entries, for the sizes n the project uses and around them: the standard deviation of the dot score
s^T h over the cells (sqrt(n) by the formula), of the scaled one (1) and of the cosine (1/sqrt(n)), and the entropy
of each one's softmax over L = 196 cells (ln 196 = 5.28 for uniform). (2) The bundled models on 100 ShapesWorld test
scenes, each captioning them greedily: the spread of its raw scores over the cells at each word, and the entropy of
its maps. Prints one JSON line.

`speed`: training captions per second of each bundled score-function model: one optimiser step (the trainable
LocalCNN encoder on 112-px scenes, the teacher-forced decoder, the loss of its attention mode, backward, Adam) on a
batch of 32 captions of 13 words, the median of `--repeats` timings of `--steps` steps after 3 untimed ones, with
one torch thread per CPU the process may use (2 under `taskset -c 0,1`). Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from collections.abc import Sequence
from pathlib import Path

import torch
from harness import ROOT, Clock, cpu_info, match_threads_to_cpus, rates, summary
from PIL import Image

from captioning.bundled import SCORE_MODELS
from captioning.inference import follow_caption, generate_caption
from captioning.module import CaptioningModule
from core.maps.measures import map_entropy
from core.maps.overlays import FixedScale, colour_bar, heat_maps, word_grid
from core.training.optimization import adam_with_epoch_decay
from data.shapes_scene import generate_split_scene, render_scene

SCENE = 3  # ShapesWorld test scene (seed 0) of the figure
SCENE_CAPTION = "a small red cross to the right of a small purple circle"  # its first reference
PHOTO_CAPTION = "a large red circle above a small yellow square"  # ShapesWorld words for the cup on its saucer
TILE = 112  # pixels, the longest side of a figure tile
SIZES = (
    16,
    64,
    128,
    256,
    512,
    1024,
)  # query/key sizes n of the random measurement (256: the small models' decoder)
CELLS = 196  # a 14 x 14 grid, the ShapesWorld models'


def load_models() -> dict[str, CaptioningModule]:
    """The bundled score-function models by their titles, in the registry's order."""
    return {model.title: CaptioningModule.load(model.file, map_location="cpu") for model in SCORE_MODELS.values()}


def photo() -> Image.Image:
    import skimage.data

    return Image.fromarray(skimage.data.coffee())


# -- figure ------------------------------------------------------------------------------------------------------


def panel(
    image: Image.Image,
    caption: str,
    models: dict[str, CaptioningModule],
    scale: FixedScale,
) -> list[Image.Image]:
    """One row per model: the picture titled with the score's name, then the map at every word of `caption`."""
    rows = []
    for title, model in models.items():
        words, weights = follow_caption(model, image, caption)
        maps = heat_maps(weights, model.encoder.grid_shape, image.size, scale)
        rows.append(
            word_grid(
                image,
                words,
                maps,
                columns=len(words) + 1,
                tile_size=TILE,
                image_title=title,
            )
        )
    return rows


def save_sheet(rows: Sequence[Image.Image], scale: FixedScale, out: Path) -> Path:
    """The rows one above the other, the colour bar of `scale` under them, saved as the PNG `out`."""
    width = max(row.width for row in rows)
    bar = colour_bar(scale, width)
    sheet = Image.new("RGB", (width, sum(row.height for row in rows) + bar.height), "white")
    top = 0
    for row in rows:
        sheet.paste(row, (0, top))
        top += row.height
    sheet.paste(bar, (0, top))
    out.parent.mkdir(parents=True, exist_ok=True)
    sheet.save(out, optimize=True)
    return out


def figure(out: Path) -> Path:
    models, scale = load_models(), FixedScale()
    scene = render_scene(generate_split_scene(0, "test", SCENE), 224)
    rows = panel(scene, SCENE_CAPTION, models, scale) + panel(photo(), PHOTO_CAPTION, models, scale)
    return save_sheet(rows, scale, out)


# -- spread ------------------------------------------------------------------------------------------------------


def random_spread(draws: int = 2000, seed: int = 0) -> list[dict]:
    """Per size n: the standard deviation of each score over CELLS random keys, and its softmax's entropy."""
    generator = torch.Generator().manual_seed(seed)
    rows = []
    for n in SIZES:
        query = torch.randn(draws, 1, n, generator=generator)  # (D, 1, n)
        keys = torch.randn(draws, CELLS, n, generator=generator)  # (D, L, n)
        dot = (query * keys).sum(-1)  # (D, L)
        scores = {
            "dot": dot,
            "scaled dot": dot / math.sqrt(n),
            "cosine": torch.nn.functional.cosine_similarity(query, keys, dim=-1),
        }
        row: dict = {"n": n}
        for name, score in scores.items():
            row[f"{name} std"] = round(score.std(dim=1).mean().item(), 3)
            row[f"{name} entropy"] = round(map_entropy(score.softmax(dim=1)).mean().item(), 3)
        rows.append(row)
    return rows


def same_query_over_two_images(model: CaptioningModule, first: Image.Image, second: Image.Image) -> tuple:
    """The model's first attention map of `first`, and the map the same query (the decoder state `first` starts
    from) gives over the cells of `second`: (L,), (L,). Only the score function differs between models here, so
    how far the second map is from the first says how much the score reads the cells."""
    decoder, to_input = model.decoder, model.encoder.transform()
    with torch.inference_mode():
        memories, states = zip(
            *(decoder.start(model.features(to_input(image).unsqueeze(0))) for image in (first, second))
        )
        return tuple(decoder.attention.weights(states[0].h, memory.projected)[0] for memory in memories)


def trained_spread(models: dict[str, CaptioningModule], scenes: int = 100) -> list[dict]:
    """Per bundled model, over `scenes` test scenes captioned greedily: the mean over words of the standard
    deviation of its raw scores over the cells, their mean range (max - min), and the mean entropy of its maps; and
    over the pairs of scenes (i, i + 1), how far the same query's map moves when the cells are another scene's
    (the L1 distance of `same_query_over_two_images`, 0 to 2)."""
    pictures = [render_scene(generate_split_scene(0, "test", index), 224) for index in range(scenes)]
    rows = []
    for title, model in models.items():
        captured: list[torch.Tensor] = []
        hook = model.decoder.attention.score.register_forward_hook(
            lambda m, args, out, kept=captured: kept.append(out.detach())
        )
        entropies = []
        try:
            for picture in pictures:
                _, weights = generate_caption(model, picture, 1)
                entropies.append(map_entropy(weights).mean().item())
        finally:
            hook.remove()
        scores = torch.cat(captured)  # (steps, L), every step of every caption
        pairs = [same_query_over_two_images(model, a, b) for a, b in zip(pictures, pictures[1:] + pictures[:1])]
        rows.append({
            "score": title,
            "score std": round(scores.std(dim=1).mean().item(), 3),
            "score range": round((scores.amax(dim=1) - scores.amin(dim=1)).mean().item(), 3),
            "map entropy": round(statistics.mean(entropies), 3),
            "same query, other scene: L1 move": round(statistics.mean((a - b).abs().sum().item() for a, b in pairs), 4),
        })  # fmt: skip
    return rows


# -- speed -------------------------------------------------------------------------------------------------------


def training_step(model: CaptioningModule, batch: int = 32, words: int = 13, seed: int = 0):
    """One optimiser step of `model` as its training_step runs it, minus Lightning, on a fixed batch."""
    generator = torch.Generator().manual_seed(seed)
    to_input = model.encoder.transform()
    images = torch.stack([to_input(render_scene(generate_split_scene(0, "test", i), 224)) for i in range(batch)])
    v = model.vocabulary
    middle = torch.randint(4, len(v), (batch, words), generator=generator)
    captions = torch.cat(
        [torch.full((batch, 1), v.start_id), middle, torch.full((batch, 1), v.end_id)],
        1,
    )
    model.train()
    optimizer = adam_with_epoch_decay(
        model.decoder.parameters(),
        model.encoder,
        learning_rate=1e-3,
        encoder_learning_rate=1e-3,
        lr_decay=1.0,
        fused=True,
    )["optimizer"]
    read = model.attention.training_read()

    def step() -> None:
        out = model.decoder(model.features(images), captions[:, :-1], read)
        terms = model.attention.loss(out, captions[:, 1:], pad_id=v.pad_id, label_smoothing=0.0)
        terms.total.backward()
        optimizer.step()
        optimizer.zero_grad()

    return step


def speed(steps: int, repeats: int) -> list[dict]:
    rows = []
    for title, model in load_models().items():
        step = training_step(model)
        for _ in range(3):
            step()

        def timed(step=step) -> None:
            for _ in range(steps):
                step()

        clock = Clock()
        measured = rates(timed, items=steps * 32, warmup=0, repeats=repeats, clock=clock)
        rows.append(
            {
                "score": title,
                "captions_per_s": summary(measured),
                "cpu_share": clock.cpu_share(),
            }
        )
    return rows


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python benchmarks/score_functions.py",
        description=__doc__.split("\n\n")[0],
    )
    parser.add_argument("what", choices=("figure", "spread", "speed"))
    parser.add_argument(
        "--out",
        type=Path,
        default=ROOT / "benchmarks" / "figures" / "score_functions.png",
    )
    parser.add_argument("--scenes", type=int, default=100, help="spread: test scenes the models caption (default 100)")
    parser.add_argument("--draws", type=int, default=2000, help="spread: random queries per size (default 2000)")
    parser.add_argument("--steps", type=int, default=5, help="speed: steps per timing (default 5)")
    parser.add_argument(
        "--repeats",
        type=int,
        default=5,
        help="speed: timings, the median reported (default 5)",
    )
    args = parser.parse_args(argv)
    match_threads_to_cpus()
    torch.manual_seed(0)
    if args.what == "figure":
        print(json.dumps({"figure": str(figure(args.out))}))
    elif args.what == "spread":
        with torch.inference_mode():
            trained = trained_spread(load_models(), args.scenes)
        print(json.dumps({"random": random_spread(args.draws), "trained": trained, "cpu": cpu_info()}))
    else:
        print(
            json.dumps(
                {
                    "speed": speed(args.steps, args.repeats),
                    "threads": torch.get_num_threads(),
                    "cpu": cpu_info(),
                }
            )
        )


if __name__ == "__main__":
    main()
