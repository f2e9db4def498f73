"""Every captioning config through one fast_dev_run of `python -m captioning fit`: the Flickr8k and COCO configs on a
tiny Karpathy-split layout with real image files, the ShapesWorld one with the encoder frozen (cached grids) or
fine-tuning its top block (the cached input of that block, or images through the whole encoder when caching is off).
(In a file of their own so that the suite's two workers share the CLI tests evenly.)"""

import json
from pathlib import Path

import pytest
from PIL import Image

from tests.helpers import CAPTIONING_CONFIGS as CONFIGS
from tests.helpers import SMALL_SHAPES, config_options, run_cli

pytestmark = pytest.mark.slow  # every test here trains in a subprocess


def make_karpathy_fixture(root: Path, dataset: str = "flickr8k") -> None:
    """A tiny Karpathy-split dataset with real image files, laid out like Flickr8k or COCO."""
    images = []
    words = ["dog", "cat", "runs", "sits", "grass", "red", "ball"]
    for i, split in enumerate(["train"] * 6 + ["restval"] * 2 + ["val"] * 3 + ["test"] * 3):
        filepath = "train2014" if dataset == "coco" else None
        folder = root / "images" / (filepath or "")
        folder.mkdir(parents=True, exist_ok=True)
        Image.new("RGB", (64 + i, 48), (30 * i % 255, 90, 160)).save(folder / f"img{i}.jpg")
        sentences = [{"raw": f"a {words[i % 7]} {words[(i + j) % 7]} on the {words[(i + 2 * j) % 7]}.", "tokens": []} for j in range(5)]
        entry = {"filename": f"img{i}.jpg", "imgid": i, "split": split, "sentences": sentences}
        if filepath:
            entry["filepath"] = filepath
            entry["cocoid"] = 1000 + i
        images.append(entry)
    (root / f"dataset_{dataset}.json").write_text(json.dumps({"dataset": dataset, "images": images}))


@pytest.mark.parametrize("config", ["flickr8k_soft.yaml", "flickr8k_hard.yaml", "flickr8k_transformer.yaml", "coco_soft.yaml"])
def test_fast_dev_run_on_karpathy_configs(tmp_path, config):
    dataset = "coco" if config.startswith("coco") else "flickr8k"
    make_karpathy_fixture(tmp_path / "d", dataset)
    fast_dev_run(tmp_path, *config_options(CONFIGS / config))


def test_the_transformer_self_critical_config_fine_tunes_the_transformer_configs_checkpoint(tmp_path):
    """flickr8k_transformer_scst.yaml, given after its base and overlays, starts self-critical training from a
    checkpoint of flickr8k_transformer.yaml's model."""
    make_karpathy_fixture(tmp_path / "d")
    fast_dev_run(tmp_path, *config_options(CONFIGS / "flickr8k_transformer.yaml"), "--trainer.max_epochs=1")
    (trained,) = (tmp_path / "run").rglob("last.ckpt")
    fast_dev_run(
        tmp_path, *config_options(CONFIGS / "flickr8k_transformer_scst.yaml"), f"--model.initial_weights={trained}"
    )


def fast_dev_run(tmp_path, *config: str) -> None:
    """`python -m captioning fit` of the given configs on the tiny Karpathy layout under tmp_path / "d": one batch of
    fit and of validation with fast_dev_run (or the epochs a config option asks for, on 6 training photos)."""
    fast = () if any(option.startswith("--trainer.max_epochs") for option in config) else ("--trainer.fast_dev_run=true",)
    run_cli(
        "fit", *config, *fast,
        f"--data.dataset.init_args.root={tmp_path / 'd'}", "--data.dataset.init_args.image_dir=images",
        "--data.num_workers=0", "--data.min_word_count=1", "--data.batch_size=4", "--data.eval_batch_size=4",
        f"--data.cache_dir={tmp_path / 'cache'}", f"--trainer.default_root_dir={tmp_path / 'run'}",
        cwd=tmp_path,
    )


@pytest.mark.parametrize(("trainable_blocks", "cache_features"), [(0, True), (1, True), (1, False)])
def test_fast_dev_run_on_shapes(tmp_path, trainable_blocks, cache_features):
    """Frozen encoder: cached grids; fine-tuning the top block: the cached input of that block, or images through
    the whole encoder when caching is off."""
    run_cli(
        "fit", "--config", str(CONFIGS / "shapes_soft.yaml"), *SMALL_SHAPES, "--trainer.fast_dev_run=true",
        "--model.encoder=core.model.encoder.EfficientNetLite", "--model.encoder.init_args.output_stride=16",
        f"--model.encoder.init_args.trainable_blocks={trainable_blocks}", f"--data.cache_features={cache_features}",
        f"--data.cache_dir={tmp_path / 'cache'}", f"--trainer.default_root_dir={tmp_path / 'run'}",
        cwd=tmp_path,
    )
    records = [json.loads(path.read_text()) for path in (tmp_path / "cache").glob("*.json")]
    # fast_dev_run reads one batch of the 24 training images' pairs: those are encoded as read, not cached; the one
    # validation batch reads all 8 validation images, whose cache is built
    assert [record["key"]["split"] for record in records] == (["val"] if cache_features else [])
    trunk = ",trunk=without_top_1)" if trainable_blocks else ",v1)"
    assert all(record["key"]["encoder"].endswith(trunk) for record in records)
