"""FeatureCache: builds on a miss, reuses without encoding on a hit, rebuilds on any key change or crash."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from PIL import Image
from torch import Tensor, nn

from core.model.encoder import Encoder
from core.training.features import FeatureCache

IDS = [f"img{i}" for i in range(5)]


class FakeEncoder(Encoder):
    """A deterministic 2 x 2 grid of 4-d vectors from 8 x 8 images; counts its trunk calls. When trainable, its
    top multiplies the trunk's output by a learnt scale (2 here, so the top visibly acts)."""

    def __init__(self, *, tag: str = "a", trainable: bool = False) -> None:
        super().__init__()
        self.feature_dim, self.image_size, self.input_shape, self.grid_shape = 4, 8, (8, 8), (2, 2)
        self.mean, self.std = (0.5, 0.5, 0.5), (0.5, 0.5, 0.5)
        self.tag = tag
        self.calls = 0
        self.scale = nn.Parameter(torch.full((), 2.0 if trainable else 1.0), requires_grad=trainable)

    def trunk_map(self, images: Tensor) -> Tensor:
        self.calls += 1
        pooled = F.adaptive_avg_pool2d(images, 2)  # (B, 3, 2, 2)
        trunk = torch.cat([pooled, pooled.sum(1, keepdim=True)], dim=1)  # (B, 4, 2, 2)
        return trunk if self.scale.requires_grad else trunk * self.scale

    def top_map(self, trunk: Tensor) -> Tensor:
        return trunk * self.scale if self.scale.requires_grad else trunk

    def cache_key(self) -> str:
        return f"FakeEncoder({self.tag}{',trunk' if self.scale.requires_grad else ''})"


def make_images(count: int = 5) -> list[Image.Image]:
    rng = np.random.default_rng(0)
    return [Image.fromarray(rng.integers(0, 256, size=(12, 16, 3), dtype=np.uint8)) for _ in range(count)]


IMAGES = make_images()


def build(cache: FeatureCache, encoder: Encoder, *, split: str = "train", ids: list[str] = IDS, load_image=IMAGES.__getitem__, **kwargs) -> np.memmap:
    return cache.load_or_build(
        dataset_name="toy", split=split, image_ids=ids, load_image=load_image, encoder=encoder, batch_size=2, progress=False, **kwargs
    )


def expected_features(encoder: Encoder) -> np.ndarray:
    with torch.inference_mode():
        batch = torch.stack([encoder.transform()(image) for image in IMAGES])
        return encoder(batch).to(torch.float16).numpy()  # (5, 4, 4)


def test_miss_builds_then_hit_reuses_without_encoding(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    cache = FeatureCache(root=tmp_path)
    encoder = FakeEncoder()
    built = build(cache, encoder)
    assert cache.last_status is not None and not cache.last_status.hit
    assert encoder.calls == 3  # 5 images in batches of 2
    assert built.shape == (5, 4, 4) and built.dtype == np.float16 and not built.flags.writeable
    assert built[1].shape == (4, 4)
    np.testing.assert_array_equal(built, expected_features(FakeEncoder()))

    path = cache.last_status.path
    assert path.name.startswith("toy-train-") and path.suffix == ".npy"
    meta = json.loads(path.with_suffix(".json").read_text())
    assert meta["complete"] is True
    assert (meta["num_images"], meta["num_locations"], meta["feature_dim"]) == (5, 4, 4)
    assert meta["key"]["encoder"] == "FakeEncoder(a)"

    fresh = FakeEncoder()
    with caplog.at_level(logging.INFO, logger="core.training.features"):
        again = build(cache, fresh)
    assert cache.last_status.hit and cache.last_status.path == path
    assert fresh.calls == 0
    assert f"feature cache hit: {path}" in caplog.text
    np.testing.assert_array_equal(again, built)


@pytest.mark.parametrize(
    "change",
    [
        {"encoder": FakeEncoder(tag="b")},
        {"split": "val"},
        {"ids": [*IDS[:4], "other"]},
        {"ids": list(reversed(IDS))},
    ],
    ids=["encoder", "split", "image-ids", "image-order"],
)
def test_any_key_change_rebuilds(tmp_path: Path, change: dict) -> None:
    cache = FeatureCache(root=tmp_path)
    build(cache, FakeEncoder())
    first = cache.last_status.path

    encoder = change.pop("encoder", FakeEncoder())
    build(cache, encoder, **change)
    assert not cache.last_status.hit and encoder.calls > 0
    assert cache.last_status.path != first

    build(cache, FakeEncoder())  # the original cache is still there
    assert cache.last_status.hit and cache.last_status.path == first


def test_an_image_file_replaced_under_its_name_rebuilds_and_an_untouched_one_reuses(tmp_path: Path) -> None:
    folder = tmp_path / "images"
    folder.mkdir()
    files = [folder / f"{image_id}.png" for image_id in IDS]
    for image, file in zip(IMAGES, files):
        image.save(file)
    cache = FeatureCache(root=tmp_path / "cache")
    load = lambda i: Image.open(files[i]).convert("RGB")  # noqa: E731
    build(cache, FakeEncoder(), load_image=load, image_files=files)
    first = cache.last_status.path
    build(cache, FakeEncoder(), load_image=load, image_files=files)
    assert cache.last_status.hit and cache.last_status.path == first

    # a larger copy of the same photo under the same name (what replacing a dataset's photos does)
    IMAGES[3].resize((32, 24)).save(files[3])
    encoder = FakeEncoder()
    rebuilt = build(cache, encoder, load_image=load, image_files=files)
    assert not cache.last_status.hit and encoder.calls > 0 and cache.last_status.path != first
    with torch.inference_mode():
        expected = encoder(encoder.transform()(Image.open(files[3]).convert("RGB")).unsqueeze(0))[0]
    np.testing.assert_array_equal(rebuilt[3], expected.to(torch.float16).numpy())

    # images made in memory (no files) keep the key they always had
    build(cache, FakeEncoder(), image_files=[None] * len(IDS))
    in_memory = cache.last_status.path
    build(cache, FakeEncoder())
    assert cache.last_status.hit and cache.last_status.path == in_memory
    with pytest.raises(ValueError, match="4 image files for 5 image ids"):
        build(cache, FakeEncoder(), load_image=load, image_files=files[:4])


def test_crashed_build_leaves_nothing_valid_and_next_call_rebuilds(tmp_path: Path) -> None:
    def flaky(index: int) -> Image.Image:
        if index == 3:
            raise OSError("disk went away")
        return IMAGES[index]

    cache = FeatureCache(root=tmp_path)
    with pytest.raises(OSError, match="disk went away"):
        build(cache, FakeEncoder(), load_image=flaky)
    assert sorted(p.name for p in tmp_path.iterdir()) == []

    encoder = FakeEncoder()
    rebuilt = build(cache, encoder)
    assert not cache.last_status.hit and encoder.calls == 3
    np.testing.assert_array_equal(rebuilt, expected_features(FakeEncoder()))


def test_incomplete_record_is_rebuilt(tmp_path: Path) -> None:
    cache = FeatureCache(root=tmp_path)
    build(cache, FakeEncoder())
    meta_path = cache.last_status.path.with_suffix(".json")
    meta_path.write_text(json.dumps({**json.loads(meta_path.read_text()), "complete": False}))
    encoder = FakeEncoder()
    build(cache, encoder)
    assert not cache.last_status.hit and encoder.calls == 3


def test_workers_give_the_same_features(tmp_path: Path) -> None:
    with_workers = build(FeatureCache(root=tmp_path / "a"), FakeEncoder(), num_workers=2)
    np.testing.assert_array_equal(with_workers, expected_features(FakeEncoder()))


def test_a_fine_tuned_encoder_caches_its_trunk_and_runs_its_top_on_it(tmp_path: Path) -> None:
    cache = FeatureCache(root=tmp_path)
    encoder = FakeEncoder(trainable=True)
    trunk = build(cache, encoder)  # (5, 4, 4): the trunk's output, before the learnt scale
    np.testing.assert_array_equal(trunk, expected_features(FakeEncoder()))
    assert json.loads(cache.last_status.path.with_suffix(".json").read_text())["key"]["encoder"] == "FakeEncoder(a,trunk)"

    images = torch.stack([encoder.transform()(image) for image in IMAGES])
    cached = torch.from_numpy(np.array(trunk))  # (5, 4, 4) float16, as a batch of cached inputs
    annotations = encoder.annotations(cached)  # the top runs on the cached trunk
    torch.testing.assert_close(annotations, encoder(images), atol=2e-3, rtol=2e-3)
    torch.testing.assert_close(annotations, 2 * cached.float())
    annotations.sum().backward()
    assert encoder.scale.grad is not None and encoder.scale.grad.item() == pytest.approx(cached.float().sum().item())


def test_cached_trunk_of_another_shape_is_refused() -> None:
    with pytest.raises(ValueError, match=r"do not fit this encoder's trunk \(4, 4\)"):
        FakeEncoder(trainable=True).annotations(torch.zeros(2, 9, 4))


def test_no_images_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no image ids"):
        build(FeatureCache(root=tmp_path), FakeEncoder(), ids=[])


def test_builds_are_announced_with_their_size_and_an_estimate(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    cache = FeatureCache(root=tmp_path)
    encoder = FakeEncoder()
    build(cache, encoder, split="val", ids=IDS[:2])  # an existing cache is not announced
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="core"):
        cache.announce(dataset_name="toy", splits={"train": IDS, "val": IDS[:2]}, encoder=encoder)
        build(cache, encoder)
    messages = [record.getMessage() for record in caplog.records]
    assert "building the feature caches of toy: train (5 images), 5 images through FakeEncoder" in messages[0]
    assert any(m.startswith("encoding 5 images, starting with toy/train: under a minute on this machine, at") for m in messages)


def test_progress_is_a_few_lines_when_stderr_is_not_a_terminal(tmp_path: Path, capsys, caplog) -> None:
    """140 batches, as many as the issue counted lines: a bar would redraw (or, off a terminal, print) per batch."""
    images = make_images(140)
    with caplog.at_level(logging.INFO, logger="core"):
        FeatureCache(root=tmp_path).load_or_build(
            dataset_name="toy", split="train", image_ids=[f"i{i}" for i in range(140)], load_image=images.__getitem__,
            encoder=FakeEncoder(), batch_size=1,
        )
    progress = [r.getMessage() for r in caplog.records if r.getMessage().startswith("encoding toy/train:")]
    assert 1 <= len(progress) <= 5 and progress[-1] == "encoding toy/train: 140 of 140 batches (100%)"
    assert "\r" not in capsys.readouterr().err  # no bar
