"""Captioning many photos from Python: `Captioner.caption([...])` against one `caption` call per photo, in images/s.

    python benchmarks/python_api.py [--model flickr8k-soft] [--images 1000] [--photos skimage|shapes|FOLDER]
                                    [--batch-size 16] [--beam-size 3] [--one-by-one 1000]

A list is captioned in batches: the photos of a batch go through the encoder together and are searched together
(`CaptioningModule.generate` on a batch). One call per photo runs the same code on batches of one. Both read the
photos from their files, as a user's paths would be; both time everything a caller waits for (reading,
preprocessing, encoding, beam search, the `Caption` records), after one untimed call of each to warm up.

`--photos skimage` (default) cycles through copies of four scikit-image photos written as JPEG files (coffee,
astronaut, chelsea, rocket: 400 x 300 to 512 x 512 px); `shapes` renders that many ShapesWorld test scenes
(224 px PNG); a folder takes its images in name order (the Flickr8k photos, say), cycled when there are fewer than
`--images`. `--one-by-one` times the one-by-one calls on the first that many photos only (default: all), when the
full run would take too long. The script checks that the two ways give the same captions on the photos both
captioned (`same_captions`). `cpu_share` is CPU seconds / (wall seconds x threads) over each timing
(`harness.Clock`): well under 1 means something else ran on the same cores. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections.abc import Sequence
from itertools import cycle, islice
from pathlib import Path

import skimage.data
from harness import Clock, cpu_info, match_threads_to_cpus
from PIL import Image

from captioning import Captioner
from captioning.datamodule import IMAGE_SUFFIXES
from data.shapes_scene import generate_split_scene, render_scene

SKIMAGE_PHOTOS = ("coffee", "astronaut", "chelsea", "rocket")


def photo_files(photos: str, count: int, folder: Path) -> list[Path]:
    """`count` image paths: copies of scikit-image photos or ShapesWorld scenes written into folder, or the
    images of the folder named by `photos`, cycled."""
    if photos == "skimage":
        files = []
        for name in SKIMAGE_PHOTOS:
            files.append(folder / f"{name}.jpg")
            Image.fromarray(getattr(skimage.data, name)()).convert("RGB").save(files[-1], quality=90)
    elif photos == "shapes":
        files = []
        for index in range(count):
            files.append(folder / f"scene_{index}.png")
            render_scene(generate_split_scene(0, "test", index), 224).save(files[-1])
    else:
        files = sorted(p for p in Path(photos).iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
        if not files:
            raise SystemExit(f"error: no images ({', '.join(sorted(IMAGE_SUFFIXES))}) in {photos}")
    return list(islice(cycle(files), count))


def timed(work, clock: Clock) -> list:
    clock.start()
    result = work()
    clock.stop()
    return result


def parse_arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--model", default="flickr8k-soft", help="a bundled captioning model (default flickr8k-soft)")
    parser.add_argument("--images", type=int, default=1000, help="how many photos to caption (default 1000)")
    parser.add_argument("--photos", default="skimage", help="skimage (default), shapes, or a folder of images")
    parser.add_argument("--batch-size", type=int, default=16, help="Captioner's batch size (default 16)")
    parser.add_argument("--beam-size", type=int, default=3, help="beam width (default 3)")
    parser.add_argument("--one-by-one", type=int, default=None, help="photos captioned one by one (default: all)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_arguments(argv)
    match_threads_to_cpus()
    captioner = Captioner.from_pretrained(args.model, batch_size=args.batch_size)
    single = min(args.one_by_one or args.images, args.images)
    with tempfile.TemporaryDirectory() as folder:
        paths = photo_files(args.photos, args.images, Path(folder))
        captioner.caption(paths[: args.batch_size], beam_size=args.beam_size)  # warm-up, untimed
        captioner.caption(paths[0], beam_size=args.beam_size)
        batched_clock, single_clock = Clock(), Clock()
        batched = timed(lambda: captioner.caption(paths, beam_size=args.beam_size), batched_clock)
        alone = timed(lambda: [captioner.caption(path, beam_size=args.beam_size) for path in paths[:single]], single_clock)
    same = sum(a.words == b.words for a, b in zip(alone, batched)) / single
    figures = {
        "model": args.model,
        "photos": args.photos,
        "beam_size": args.beam_size,
        "batched": {
            "images": args.images,
            "batch_size": args.batch_size,
            "seconds": round(batched_clock.wall, 1),
            "images_per_s": round(args.images / batched_clock.wall, 2),
            "cpu_share": batched_clock.cpu_share(),
        },
        "one_by_one": {
            "images": single,
            "seconds": round(single_clock.wall, 1),
            "images_per_s": round(single / single_clock.wall, 2),
            "cpu_share": single_clock.cpu_share(),
        },
        "speedup": round((args.images / batched_clock.wall) / (single / single_clock.wall), 2),
        "same_captions": round(same, 4),
        **cpu_info(),
    }
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
