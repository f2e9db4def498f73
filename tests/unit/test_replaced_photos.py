"""Photos replaced under the same file names (larger copies of a dataset, say) are encoded again, through both data
modules: the feature cache keys on each image file's size and modification time, not only on its name."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from captioning.datamodule import CaptionDataModule
from core.model.encoder import LocalCNN
from data.karpathy import KarpathyCaptions
from data.vqa2 import Daquar
from vqa.datamodule import VqaDataModule
from vqa.module import VqaModule


def replace_photo(path: Path) -> None:
    """The same name, other pixels and another size: what swapping in the source's full-size photos does."""
    Image.new("RGB", (64, 48), (10, 200, 30)).save(path)


def grid_of(encoder: LocalCNN, path: Path) -> np.ndarray:
    with torch.inference_mode():
        return encoder.trunk(encoder.transform()(Image.open(path).convert("RGB"))[None])[0].to(torch.float16).numpy()


def test_vqa_features_follow_a_replaced_photo(tmp_path: Path, daquar: Path) -> None:
    model = VqaModule(encoder=LocalCNN(image_size=32, widths=(4,), feature_dim=4))

    def train_inputs():
        data = VqaDataModule(dataset=Daquar(root=daquar), cache_dir=tmp_path / "cache", val_split="test")
        if model.question_vocabulary is None:
            model.set_vocabularies(*data.build_vocabularies())
        data.model = model  # what `setup` does under a Trainer
        return data, data.train_dataloader().dataset.inputs

    data, _ = train_inputs()
    first = data.cache.last_status.path
    data, _ = train_inputs()
    assert data.cache.last_status.hit and data.cache.last_status.path == first

    image_id = data.dataset.image_ids("train")[1]
    replace_photo(data.dataset.image_path(image_id))
    data, inputs = train_inputs()
    assert not data.cache.last_status.hit and data.cache.last_status.path != first
    np.testing.assert_array_equal(inputs(1).numpy(), grid_of(model.encoder, data.dataset.image_path(image_id)))


def test_caption_features_follow_a_replaced_photo(tmp_path: Path) -> None:
    (tmp_path / "images").mkdir()
    images = []
    for i in range(3):
        Image.new("RGB", (40, 30), (60 * i, 80, 140)).save(tmp_path / "images" / f"{i}.jpg")
        images.append({"filename": f"{i}.jpg", "imgid": i, "split": "train", "sentences": [{"raw": "a photo .", "tokens": ["a", "photo"]}]})
    (tmp_path / "dataset_tiny.json").write_text(json.dumps({"dataset": "tiny", "images": images}))
    encoder = LocalCNN(image_size=32, widths=(4,), feature_dim=4)

    def train_inputs():
        module = CaptionDataModule(
            dataset=KarpathyCaptions(root=tmp_path, annotations="dataset_tiny.json"), cache_dir=tmp_path / "cache"
        )
        module.vocabulary, module.encoder = module.build_vocabulary(), encoder  # what setup does under a Trainer
        return module, module._inputs("train")

    module, _ = train_inputs()
    first = module.cache.last_status.path
    module, _ = train_inputs()
    assert module.cache.last_status.hit and module.cache.last_status.path == first

    replace_photo(tmp_path / "images" / "2.jpg")
    module, inputs = train_inputs()
    assert not module.cache.last_status.hit and module.cache.last_status.path != first
    np.testing.assert_array_equal(inputs(2).numpy(), grid_of(encoder, tmp_path / "images" / "2.jpg"))
