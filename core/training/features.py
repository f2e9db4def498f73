"""An on-disk cache of the frozen part of an encoder, so training never runs a frozen CNN twice.

For one dataset split and one encoder, the cache holds a float16 array (N, L, D): the output of the encoder's
frozen trunk for every image, flattened to L locations of D channels, in the order of the image ids given. For a
frozen encoder these are the annotation vectors themselves; when the top blocks are fine-tuned they are the
input of the first fine-tuned block, and the model runs the top on them (`Encoder.annotations`). It lives in
two files under `root`:

* `<dataset>-<split>-<key>.npy`: the array, memory-mapped on load (a dataset larger than RAM is fine);
* `<dataset>-<split>-<key>.json`: what the array is (the key fields, N, L, D) and `"complete": true`.

`key` hashes the dataset name, the split, `encoder.cache_key()` (architecture, image size, weights, where the
trunk ends), the ordered image ids and, for images read from files, each file's size and modification time, so
any change to these builds a new cache instead of reusing a stale one: replacing a dataset's photos with other
copies under the same names (larger ones, say) is seen.

A build writes the array to a temporary file, renames it into place only once every image is encoded,
and writes the JSON last: a crash at any point leaves no pair of files that looks complete, and the next
call builds again. Concurrent builders (e.g. DDP ranks) each write their own temporary file; the renames
are atomic and the contents identical, so the last one simply wins. A temporary `*.partial-*` file can only
be left behind by a process killed outright; it is never read and can be deleted.

A build can take minutes, so it says what it does before it starts: `announce` (called by a data module with
every split a stage needs) lists the caches to build, with their image counts; each build then names its split
and, once its first batch is encoded, estimates how long the rest takes on this machine from that batch's speed.
Progress is shown per split by `core.training.progress.phase_progress`.

A run that reads only part of a split (`fast_dev_run`, an integer `limit_train_batches`/`limit_val_batches`) does
not build its cache: `splits_read_in_part` names those splits from the Trainer's limits, `announce_encoding_on_read`
says so, and `EncodedOnRead` encodes each image when it is first read, in memory; `fast_dev_run` on easy-VQA
encodes about a hundred images instead of 4000.
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import os
import re
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image
from torch import Tensor
from torch.utils.data import DataLoader, Dataset

from core.model.encoder import Encoder
from core.training.batches import CachedInputs, ImageInputs
from core.training.progress import phase_progress

logger = logging.getLogger(__name__)

# Bump when the file layout or the meaning of the stored fields changes.
_FORMAT_VERSION = 1


@dataclass(frozen=True)
class CacheStatus:
    """What the last `load_or_build` did: reused the files at `path` (hit) or built them (miss)."""

    hit: bool
    path: Path


class _ImagesToEncode(Dataset):
    """Image i of the split, preprocessed for the encoder; a module-level class so workers can pickle it."""

    def __init__(self, *, count: int, load_image: Callable[[int], Image.Image], transform: Callable[[Image.Image], Tensor]):
        self.count = count
        self.load_image = load_image
        self.transform = transform

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, index: int) -> Tensor:
        return self.transform(self.load_image(index))  # (3, S, S)


class FeatureCache:
    """Builds, stores and reloads the outputs of encoders' frozen trunks under one directory.

    Args:
        root: the cache directory; created on the first build.

    Attributes:
        last_status: hit or miss, and the array's path, of the last `load_or_build` (None before the first).
    """

    def __init__(self, *, root: Path) -> None:
        self.root = Path(root)
        self.last_status: CacheStatus | None = None
        self._to_encode = 0  # images announced and not yet encoded: what the first batch's speed is applied to
        self._seconds_per_image: float | None = None  # measured on the first batch of this process's first build

    def announce(
        self,
        *,
        dataset_name: str,
        splits: Mapping[str, Sequence[str]],
        encoder: Encoder,
        image_files: Mapping[str, Sequence[Path | None]] | None = None,
    ) -> None:
        """Say which of `splits` (split name -> image ids) have no cache yet and will be built, and how many
        images that is in all; the first build's estimate then covers all of them. Says nothing when all exist.
        `image_files` gives a split's files as `load_or_build` takes them."""
        channels, height, width = encoder.trunk_shape
        missing = {}
        for split, image_ids in splits.items():
            files = (image_files or {}).get(split)
            fields = self._fields(dataset_name, split, image_ids, encoder, files)
            if image_ids and self._load_complete(*self._paths(fields), fields, (len(image_ids), height * width, channels)) is None:
                missing[split] = len(image_ids)
        if not missing:
            return
        self._to_encode = sum(missing.values())
        listed = ", ".join(f"{split} ({count} images)" for split, count in missing.items())
        logger.info(
            "building the feature caches of %s: %s, %d images through %s, once; later runs reuse them from %s",
            dataset_name, listed, self._to_encode, type(encoder).__name__, self.root,
        )

    def path_for(
        self,
        *,
        dataset_name: str,
        split: str,
        image_ids: Sequence[str],
        encoder: Encoder,
        image_files: Sequence[Path | None] | None = None,
    ) -> Path:
        """Where the array for these images and this encoder is (or would be) stored."""
        return self._paths(self._fields(dataset_name, split, image_ids, encoder, image_files))[0]

    def load_or_build(
        self,
        *,
        dataset_name: str,
        split: str,
        image_ids: Sequence[str],
        load_image: Callable[[int], Image.Image],
        encoder: Encoder,
        image_files: Sequence[Path | None] | None = None,
        batch_size: int = 32,
        num_workers: int = 0,
        progress: bool = True,
    ) -> np.memmap:
        """The read-only float16 trunk outputs (N, L, D) of `image_ids`, in that order; `result[i]` is (L, D).

        Reuses a complete cache with the same key without running the encoder; otherwise encodes every image,
        `load_image(i)` giving the image of `image_ids[i]`, and stores the result first. `image_files[i]` is the
        file `load_image(i)` reads (None for an image made in memory; `image_files` None when none is a file):
        a file changed since the cache was built makes a new key.

        Raises:
            ValueError: no image ids.
        """
        if len(image_ids) == 0:
            raise ValueError(f"no image ids to encode for {dataset_name!r} split {split!r}")

        fields = self._fields(dataset_name, split, image_ids, encoder, image_files)
        array_path, meta_path = self._paths(fields)
        channels, height, width = encoder.trunk_shape
        shape = (len(image_ids), height * width, channels)

        cached = self._load_complete(array_path, meta_path, fields, shape)
        if cached is not None:
            logger.info("feature cache hit: %s", array_path)
            self.last_status = CacheStatus(hit=True, path=array_path)
            return cached

        logger.info("feature cache miss: building %s (%d images -> %s float16)", array_path, shape[0], shape)
        self._to_encode = max(self._to_encode, shape[0])
        if self._seconds_per_image is not None:  # measured by an earlier build of this process
            logger.info("%s", self._estimate(self._to_encode, f"{dataset_name}/{split}"))
        started = time.perf_counter()
        self._build(
            array_path=array_path,
            meta_path=meta_path,
            fields=fields,
            shape=shape,
            load_image=load_image,
            encoder=encoder,
            batch_size=batch_size,
            num_workers=num_workers,
            progress=progress,
        )
        seconds = time.perf_counter() - started
        self._to_encode = max(0, self._to_encode - shape[0])
        self._seconds_per_image = seconds / shape[0]  # the whole build's speed: the next estimate's basis
        logger.info("feature cache built: %s in %.1f s", array_path, seconds)
        self.last_status = CacheStatus(hit=False, path=array_path)
        cached = self._load_complete(array_path, meta_path, fields, shape)
        if cached is None:
            raise RuntimeError(f"feature cache {array_path} was just built but does not read back as complete")
        return cached

    def _first_batch_timed(self, images: int, seconds: float, desc: str) -> None:
        if self._seconds_per_image is None:
            self._seconds_per_image = seconds / images
            logger.info("%s", self._estimate(self._to_encode, desc.removeprefix("encoding ")))

    def _estimate(self, images: int, what: str) -> str:
        """How long encoding `images` images takes at the measured speed, as a person would say it."""
        seconds = images * self._seconds_per_image
        rate = 1 / self._seconds_per_image
        when = "under a minute" if seconds < 60 else f"about {max(1, round(seconds / 60))} min"
        return f"encoding {images} images, starting with {what}: {when} on this machine, at {rate:.0f} images/s"

    @staticmethod
    def _fields(
        dataset_name: str, split: str, image_ids: Sequence[str], encoder: Encoder, image_files: Sequence[Path | None] | None
    ) -> dict:
        """Everything the features depend on; the cache key is a hash of this."""
        ids_digest = hashlib.sha256(json.dumps(list(image_ids)).encode()).hexdigest()
        fields = {
            "format": _FORMAT_VERSION,
            "dataset": dataset_name,
            "split": split,
            "encoder": encoder.cache_key(),
            "num_images": len(image_ids),
            "image_ids_sha256": ids_digest,
        }
        if image_files is not None and any(file is not None for file in image_files):
            if len(image_files) != len(image_ids):
                raise ValueError(f"{len(image_files)} image files for {len(image_ids)} image ids of split {split!r}")
            states = json.dumps([_file_state(file) for file in image_files])
            fields["image_files_sha256"] = hashlib.sha256(states.encode()).hexdigest()
        return fields

    def _paths(self, fields: dict) -> tuple[Path, Path]:
        key = hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:16]
        stem = f"{_safe_name(fields['dataset'])}-{_safe_name(fields['split'])}-{key}"
        return self.root / f"{stem}.npy", self.root / f"{stem}.json"

    @staticmethod
    def _load_complete(array_path: Path, meta_path: Path, fields: dict, shape: tuple[int, int, int]) -> np.memmap | None:
        """The stored array if both files exist, the JSON says complete and matches, and the shape is right."""
        try:
            meta = json.loads(meta_path.read_text())
            if meta.get("complete") is not True or meta.get("key") != fields:
                return None
            array = np.load(array_path, mmap_mode="r")
        except (OSError, ValueError):  # missing, unreadable or truncated files
            return None
        if array.shape != shape or array.dtype != np.float16:
            return None
        return array

    def _build(
        self,
        *,
        array_path: Path,
        meta_path: Path,
        fields: dict,
        shape: tuple[int, int, int],
        load_image: Callable[[int], Image.Image],
        encoder: Encoder,
        batch_size: int,
        num_workers: int,
        progress: bool,
    ) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        meta_path.unlink(missing_ok=True)  # an invalid record must not outlive a half-done rebuild
        partial = array_path.with_name(f"{array_path.name}.partial-{os.getpid()}-{uuid.uuid4().hex[:8]}")
        try:
            out = np.lib.format.open_memmap(partial, mode="w+", dtype=np.float16, shape=shape)
            _encode_into(
                out,
                load_image=load_image,
                encoder=encoder,
                batch_size=batch_size,
                num_workers=num_workers,
                progress=progress,
                desc=f"encoding {fields['dataset']}/{fields['split']}",
                on_first_batch=self._first_batch_timed,
            )
            out.flush()
            del out
            os.replace(partial, array_path)
        finally:
            partial.unlink(missing_ok=True)

        meta = {"key": fields, "num_images": shape[0], "num_locations": shape[1], "feature_dim": shape[2],
                "dtype": "float16", "complete": True}
        meta_partial = meta_path.with_name(f"{meta_path.name}.partial-{os.getpid()}-{uuid.uuid4().hex[:8]}")
        meta_partial.write_text(json.dumps(meta, indent=2))
        os.replace(meta_partial, meta_path)


def _encode_into(
    out: np.ndarray,
    *,
    load_image: Callable[[int], Image.Image],
    encoder: Encoder,
    batch_size: int,
    num_workers: int,
    progress: bool,
    desc: str,
    on_first_batch: Callable[[int, float, str], None] | None = None,
) -> None:
    """Fill `out` (N, L, D) with the encoder's trunk outputs for images 0..N-1, batch by batch;
    `on_first_batch(images, seconds, desc)` is told how long the first batch took, loading included."""
    device = _device_of(encoder)
    dataset = _ImagesToEncode(count=len(out), load_image=load_image, transform=encoder.transform())
    loader = DataLoader(
        dataset, batch_size=batch_size, shuffle=False, num_workers=num_workers, pin_memory=device.type == "cuda"
    )
    was_training = encoder.training
    encoder.eval()
    start = 0
    started = time.perf_counter()
    batches = phase_progress(loader, total=len(loader), desc=desc) if progress else loader
    try:
        with torch.inference_mode():
            for images in batches:
                batch = _trunk_float16(encoder, images.to(device, non_blocking=True), first=start).numpy()
                expected = (len(images), *out.shape[1:])
                if batch.shape != expected:
                    raise RuntimeError(f"{type(encoder).__name__} returned features {batch.shape}, expected {expected}")
                out[start : start + len(batch)] = batch
                if start == 0 and on_first_batch is not None:
                    on_first_batch(len(batch), time.perf_counter() - started, desc)
                start += len(batch)
    finally:
        encoder.train(was_training)
    if start != len(out):
        raise RuntimeError(f"encoded {start} images, expected {len(out)}")


def _trunk_float16(encoder: Encoder, images: Tensor, *, first: int) -> Tensor:
    """The trunk's outputs (B, L, D) for images (B, 3, S, S) as float16 on the CPU, as the cache stores them;
    `first` is the index of the first image, for the error raised when a value overflows float16."""
    features = encoder.trunk(images).to(torch.float16).cpu()  # (B, L, D)
    if not torch.isfinite(features).all():
        raise ValueError(f"{type(encoder).__name__} features overflow float16 (images {first}..{first + len(images) - 1})")
    return features


class EncodedOnRead:
    """Image i's trunk output (L, D) float16, like a cache's, computed when it is first read and kept in memory:
    the inputs of a split that a run reads only part of (`splits_read_in_part`), so it encodes those images and
    writes nothing. The encoder is copied to the CPU, where data loaders run.

    Args:
        encoder: the model's encoder (its frozen trunk is what runs).
        load_image: image i of the split.
        count: the number of images in the split.
    """

    def __init__(self, *, encoder: Encoder, load_image: Callable[[int], Image.Image], count: int) -> None:
        self.encoder = copy.deepcopy(encoder).cpu().eval()
        self.transform = encoder.transform()
        self.load_image = load_image
        self.count = count
        self._encoded: dict[int, Tensor] = {}

    def __len__(self) -> int:
        return self.count

    def __call__(self, index: int) -> Tensor:
        if index not in self._encoded:
            with torch.no_grad():
                image = self.transform(self.load_image(index)).unsqueeze(0)  # (1, 3, S, S)
                self._encoded[index] = _trunk_float16(self.encoder, image, first=index)[0]  # (L, D)
        return self._encoded[index]


def split_inputs(
    cache: FeatureCache | None,
    *,
    whole: bool,
    dataset_name: str,
    split: str,
    image_ids: Sequence[str],
    image_files: Sequence[Path],
    load_image: Callable[[int], Image.Image],
    encoder: Encoder,
    num_workers: int = 0,
) -> CachedInputs | EncodedOnRead | ImageInputs:
    """Image i of a split as the model's input: `load_image(i)` through the encoder's frozen trunk, cached under
    (dataset_name, split) on first use (`cache.load_or_build`), or encoded as it is read when the run reads only part
    of the split (`whole` False, `splits_read_in_part`); without a cache (None), the preprocessed image."""
    if cache is None:
        return ImageInputs(load_image, encoder.transform(), len(image_ids))
    if not whole:
        return EncodedOnRead(encoder=encoder, load_image=load_image, count=len(image_ids))
    features = cache.load_or_build(
        dataset_name=dataset_name, split=split, image_ids=image_ids, image_files=image_files, load_image=load_image,
        encoder=encoder, num_workers=num_workers,
    )  # fmt: skip
    return CachedInputs(features)


def items_read(trainer: Any, loader: str, *, batch_size: int) -> int | None:
    """At most how many items a run of `trainer` reads from its `loader` ("train", "val", "test", "predict") in all,
    over every process, when its batch limits bound that (`fast_dev_run` and an integer `limit_<loader>_batches`);
    None when it may read them all (no limit, a fraction, or training bounded by neither epochs nor steps).
    Evaluation reads the same first batches every time, training new ones at every epoch."""
    limit = getattr(trainer, f"limit_{loader}_batches", None)
    if not isinstance(limit, int) or isinstance(limit, bool):
        return None
    processes = max(1, getattr(trainer, "world_size", 1))
    per_pass = limit * batch_size * processes
    if loader != "train":
        return per_pass
    bounds = []
    if (trainer.max_epochs or -1) > 0:
        bounds.append(per_pass * trainer.max_epochs)
    if (trainer.max_steps or -1) > 0:
        bounds.append(trainer.max_steps * trainer.accumulate_grad_batches * batch_size * processes)
    return min(bounds) if bounds else None


def stage_loaders(
    stage: str, split_names: Mapping[str, str], *, batch_size: int, eval_batch_size: int
) -> dict[str, tuple[str, int]]:
    """The dataset splits a Trainer stage ("fit", "validate", "test") reads, as split -> (its loader: "train", "val"
    or "test", that loader's batch size); `split_names` maps "val" and "test" to the dataset's split names. Other
    stages (predict reads files) read none."""
    val, test = split_names["val"], split_names["test"]
    return {
        "fit": {"train": ("train", batch_size), val: ("val", eval_batch_size)},
        "validate": {val: ("val", eval_batch_size)},
        "test": {test: ("test", eval_batch_size)},
    }.get(stage, {})


def splits_read_in_part(trainer: Any, loaders: Mapping[str, tuple[str, int, int]]) -> dict[str, tuple[int, int]]:
    """The splits that a run of `trainer` reads only part of, as split -> (items read at most, items).

    Args:
        trainer: the Trainer (None: every split is read whole).
        loaders: split -> (its loader: "train", "val", ..., that loader's batch size, the split's number of items).
    """
    if trainer is None:
        return {}
    partly = {}
    for split, (loader, batch_size, items) in loaders.items():
        read = items_read(trainer, loader, batch_size=batch_size)
        if read is not None and read < items:
            partly[split] = (read, items)
    return partly


def announce_encoding_on_read(dataset_name: str, splits: Mapping[str, tuple[int, int]]) -> None:
    """Say, for the splits a run reads only part of (`splits_read_in_part`), that their images are encoded as they
    are read instead of cached."""
    if splits:
        listed = ", ".join(f"{split} (at most {read} of {items} items)" for split, (read, items) in splits.items())
        logger.info(
            "this run reads only part of %s: %s; their images are encoded as they are read, and no cache is built",
            dataset_name, listed,
        )


def _file_state(path: Path | None) -> tuple[int, int] | None:
    """(size in bytes, modification time in ns) of an image file, what tells a changed file from the one cached;
    None for an image made in memory or a missing file (reading it fails later, with the error naming it)."""
    if path is None:
        return None
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return stat.st_size, stat.st_mtime_ns


def _device_of(encoder: Encoder) -> torch.device:
    tensor = next(encoder.parameters(), None)
    if tensor is None:
        tensor = next(encoder.buffers(), None)
    return tensor.device if tensor is not None else torch.device("cpu")


def _safe_name(name: str) -> str:
    """A file-name-safe version of a dataset or split name (the key hash keeps distinct names apart)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name) or "_"
