"""Which of a Transformer captioner's cross-attention maps lands on what a word names: each layer's mean over its
heads and every single head, scored on photos with object boxes with the grounding benchmark's measures
(`captioning.grounding`: attention mass inside the named object's boxes, and whether the peak cell points inside),
beside the uniform, centre-point and random-cell baselines. Each photo is captioned once (beam search, as the app
does); every map is then read from one teacher-forced pass over that caption (`captioning.inference.every_head`).

    python experiments/transformer_maps.py --images PATH/TO/coco-boxes/images --boxes PATH/TO/coco-boxes/boxes.json \
        --model runs/flickr8k_transformer/best.ckpt

Prints one JSON object: {"model", "photos", "pairs", "baselines": {"uniform", "centre", "random_cell"},
"maps": [{"layer", "head" (null: the layer's heads averaged), "mass", "pointing", "entropy"}, ...], "best_pointing"}.
Which map the app shows by default (`TransformerDecoder.map_layer`, `map_head`) was chosen with it
(`docs/attention.md`).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from captioning.inference import every_head, head_choices
from captioning.grounding import DEFAULT_WORDS, GroundingReport, ObjectWords, load_captioner, read_photo, score_pair
from captioning.transformer import TransformerDecoder
from data.boxes import read_boxes


def map_grounding(*, images: Path, boxes: Path, model: str, beam_size: int = 3, words: Path = DEFAULT_WORDS) -> dict:
    """The grounding measures of every layer's and head's maps (see the module docstring)."""
    if not Path(images).is_dir():
        raise FileNotFoundError(f"--images {images} is not a folder (the folder of the photos the boxes file names)")
    object_words, photos, skipped = ObjectWords.read(words), read_boxes(boxes), []
    captioner = load_captioner(model)
    decoder = captioner.model.decoder
    if not isinstance(decoder, TransformerDecoder):
        raise ValueError(f"{model} has a {type(decoder).__name__} decoder: this benchmark compares a Transformer's")
    choices = head_choices(captioner.model)
    grid = tuple(captioner.model.encoder.grid_shape)
    reports = {choice: GroundingReport(model=model, grid=grid, beam_size=beam_size) for choice in choices}
    read = [(photo, image) for photo in photos if (image := read_photo(Path(images), photo, skipped)) is not None]
    if not read:
        raise FileNotFoundError(f"no photo of {boxes} could be read from {images}: " + "; ".join(skipped[:3]))
    for start in range(0, len(read), captioner.batch_size):
        chunk = read[start : start + captioner.batch_size]
        captions = captioner.caption([image for _, image in chunk], beam_size=beam_size)
        for (photo, image), caption in zip(chunk, captions):
            mentions = [m for m in object_words.mentions(caption.words) if m.classes & photo.classes]
            if not mentions:
                continue
            every = every_head(captioner.model, image, caption.words)  # (n, layers, heads, L)
            for choice, report in reports.items():
                chosen = choice.of(every)  # (n, L)
                for mention in mentions:
                    report.pairs.append(score_pair(chosen[mention.position].reshape(grid), photo, mention))
    means = {choice: report.means() for choice, report in reports.items()}
    first = means[choices[0]]
    maps = [
        {"layer": c.layer, "head": c.head, **{key: means[c][key] for key in ("mass", "pointing", "entropy")}}
        for c in choices
    ]
    return {
        "model": model,
        "photos": len(read),
        "skipped": skipped,
        "pairs": first["pairs"],
        "baselines": {key: first[key] for key in ("uniform", "centre", "random_cell")},
        "maps": maps,
        "best_pointing": max(maps, key=lambda row: (row["pointing"], row["mass"])),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--images", type=Path, required=True, help="the folder of the photos the boxes file names")
    parser.add_argument("--boxes", type=Path, required=True, help="the boxes JSON (coco-boxes or COCO instances)")
    parser.add_argument("--model", required=True, help="a Transformer captioning checkpoint, or a bundled model's name")
    parser.add_argument("--beam-size", type=int, default=3, help="beam width of the captions (default 3, the app's)")
    parser.add_argument("--words", type=Path, default=DEFAULT_WORDS, help="the word list linking words to box classes")
    args = parser.parse_args(argv)
    try:
        result = map_grounding(
            images=args.images, boxes=args.boxes, model=args.model, beam_size=args.beam_size, words=args.words
        )
    except (FileNotFoundError, ValueError) as error:  # a bad path, boxes file, word list or checkpoint: one line
        raise SystemExit(f"error: {error}") from None
    print(json.dumps(result))


if __name__ == "__main__":
    main()
