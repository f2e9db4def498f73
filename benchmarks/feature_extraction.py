"""Feature extraction throughput: images per second through the feature-cache build, next to the bare encoder.

    python benchmarks/feature_extraction.py [--images FOLDER] [--limit N] [--workers 0] [--repeats 5]
    taskset -c 0,1 python benchmarks/feature_extraction.py        # the goal's setting: 2 cores

The goal, on 2 cores: the cache-building pipeline runs at no less than 0.9 of the bare encoder forward.

* `pipeline`: what training on a frozen encoder runs once per split (`CaptionDataModule` ->
  `FeatureCache.load_or_build`, a cache miss): every image file read and decoded (`data.images.load_image`),
  preprocessed by the encoder's own transform, batched by a DataLoader (batch 32 and `--workers` worker
  processes, the cache's and the data module's defaults: 32 and 0), encoded, converted to float16, checked
  and written to the memory-mapped cache file in a temporary folder. Timed once over all the images, from
  the call to its return: images / wall time.
* `bare`: the encoder's forward alone (`encoder(images)` under `torch.inference_mode`, eval mode, as the
  cache runs it) on preloaded batches of the same size made from the first `--bare-batches` batches of the
  same images; the median of `--repeats` passes over them, half measured before the pipeline, half after.
* `loading`: the pipeline's DataLoader alone (read, decode, transform, collate; no encoder), over the same
  images, to show where the difference goes.
* `ratio`: pipeline / bare.
* `cpu_share`: this process's CPU seconds / (wall seconds x threads) during the pipeline and the bare passes
  (see `harness.Clock`; DataLoader workers are other processes and not counted): well under 1 means
  something else was running on the same cores.

The encoder is the default one (`EfficientNetLite()`: Lite0, ImageNet weights, 224 px, a 7x7 grid of 1280
features). The images default to Flickr8k's 8000 JPEGs (224x224) in the project's data folder beside the
checkout (`../shared/data/flickr8k/images`); `--images` points elsewhere and `--limit` takes the first N
(sorted by name). The files are read once beforehand so that every figure finds them in the OS page cache,
and one small untimed build warms the encoder and the code paths up.

Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import torch
from harness import ROOT, Clock, cpu_info, match_threads_to_cpus, summary
from torch.utils.data import DataLoader

from core.model.encoder import EfficientNetLite
from core.training.features import FeatureCache, _ImagesToEncode
from data.images import load_image

GOAL_RATIO = 0.9
BATCH_SIZE = 32  # FeatureCache.load_or_build's default, which CaptionDataModule keeps
DEFAULT_IMAGES = ROOT.parent / "shared" / "data" / "flickr8k" / "images"
SUFFIXES = {".jpg", ".jpeg", ".png"}
WARMUP_IMAGES = 64


def image_files(folder: Path, limit: int | None) -> list[Path]:
    if not folder.is_dir():
        raise SystemExit(f"error: image folder not found: {folder} (pass --images FOLDER)")
    files = sorted(p for p in folder.iterdir() if p.suffix.lower() in SUFFIXES)
    files = files[:limit] if limit else files
    if not files:
        raise SystemExit(f"error: no images ({', '.join(sorted(SUFFIXES))}) in {folder}")
    return files


def build_cache(encoder: EfficientNetLite, files: list[Path], root: Path, workers: int, clock: Clock) -> float:
    """One cache miss over `files` through `FeatureCache.load_or_build`: seconds, from the call to its return."""
    cache = FeatureCache(root=root)
    clock.start()
    features = cache.load_or_build(
        dataset_name="benchmark",
        split="images",
        image_ids=[f.name for f in files],
        load_image=lambda i: load_image(files[i]),
        encoder=encoder,
        batch_size=BATCH_SIZE,
        num_workers=workers,
        progress=False,
    )
    seconds = clock.stop()
    if cache.last_status is None or cache.last_status.hit or features.shape[0] != len(files):
        raise SystemExit("error: the pipeline did not build a fresh cache of every image")
    return seconds


def loading_seconds(encoder: EfficientNetLite, files: list[Path], workers: int) -> float:
    """The cache's DataLoader alone (read, decode, transform, collate), without the encoder: seconds."""
    dataset = _ImagesToEncode(
        count=len(files), load_image=lambda i: load_image(files[i]), transform=encoder.transform()
    )
    loader = DataLoader(dataset, batch_size=BATCH_SIZE, shuffle=False, num_workers=workers)
    start = time.perf_counter()
    for _ in loader:
        pass
    return time.perf_counter() - start


def bare_rates(encoder: EfficientNetLite, batches: list[torch.Tensor], repeats: int, clock: Clock) -> list[float]:
    """images/s of passes over preloaded batches, forward only, as the cache runs the encoder."""
    measured = []
    with torch.inference_mode():
        encoder(batches[0])  # warm-up
        for _ in range(repeats):
            clock.start()
            for images in batches:
                encoder(images)
            measured.append(sum(len(b) for b in batches) / clock.stop())
    return measured


def parse_arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python benchmarks/feature_extraction.py", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--images", type=Path, default=DEFAULT_IMAGES, help="folder of images (default: Flickr8k's)")
    parser.add_argument("--limit", type=int, default=None, help="use only the first N images (default: all)")
    parser.add_argument("--workers", type=int, default=0, help="DataLoader worker processes (default 0)")
    parser.add_argument("--bare-batches", type=int, default=4, help="preloaded batches of 32 for the bare forward")
    parser.add_argument("--repeats", type=int, default=6, help="timed passes of the bare forward (default 6)")
    args = parser.parse_args(argv)
    if (args.limit is not None and args.limit < 1) or args.workers < 0 or min(args.bare_batches, args.repeats) < 1:
        parser.error("--limit, --bare-batches and --repeats must be at least 1, --workers at least 0")
    return args


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_arguments(argv)
    match_threads_to_cpus()
    files = image_files(args.images, args.limit)
    for path in files:
        path.read_bytes()  # into the OS page cache, so no figure pays for the disk
    encoder = EfficientNetLite()
    transform = encoder.transform()
    preloaded = files[: args.bare_batches * BATCH_SIZE]
    batches = [
        torch.stack([transform(load_image(p)) for p in preloaded[i : i + BATCH_SIZE]])
        for i in range(0, len(preloaded), BATCH_SIZE)
    ]
    bare_clock, pipeline_clock = Clock(), Clock()
    with tempfile.TemporaryDirectory(prefix="feature-extraction-") as folder:
        build_cache(encoder, files[:WARMUP_IMAGES], Path(folder) / "warmup", args.workers, Clock())
        bare = bare_rates(encoder, batches, (args.repeats + 1) // 2, bare_clock)
        pipeline_s = build_cache(encoder, files, Path(folder) / "cache", args.workers, pipeline_clock)
        bare += bare_rates(encoder, batches, args.repeats // 2, bare_clock)
    loading_s = loading_seconds(encoder, files, args.workers)
    pipeline = len(files) / pipeline_s
    bare_median = statistics.median(bare)
    ratio = pipeline / bare_median
    figures = {
        "benchmark": "feature_extraction",
        "unit": "images/s",
        "encoder": encoder.cache_key(),
        "image_size": encoder.image_size,
        "images": len(files),
        "batch_size": BATCH_SIZE,
        "workers": args.workers,
        "pipeline_images_per_s": round(pipeline, 1),
        "pipeline_seconds": round(pipeline_s, 2),
        "bare_images_per_s": summary(bare),
        "bare_images": len(preloaded),
        "loading_images_per_s": round(len(files) / loading_s, 1),
        "cpu_share": {"pipeline": pipeline_clock.cpu_share(), "bare": bare_clock.cpu_share()},
        "ratio": round(ratio, 3),
        "goal": {"ratio": GOAL_RATIO, "cores": 2},
        "goal_met": ratio >= GOAL_RATIO,
        "cpu": cpu_info(),
    }
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
