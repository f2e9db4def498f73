"""`CaptionDataModule(train_references=N)`: training reads each image's first N references; evaluation reads all."""

from __future__ import annotations

import pytest

from captioning.datamodule import CaptionDataModule
from core.model.encoder import LocalCNN
from data.shapes import ShapesWorld


def data_module(train_references: int | None) -> CaptionDataModule:
    dataset = ShapesWorld(train_size=3, val_size=2, test_size=0, heldout_size=0, image_size=32)
    module = CaptionDataModule(dataset=dataset, cache_features=False, train_references=train_references)
    module.vocabulary = module.build_vocabulary()  # what setup does through the Trainer
    module.encoder = LocalCNN(image_size=32, widths=(4,), feature_dim=4)
    return module


@pytest.mark.parametrize("train_references", [None, 1, 2])
def test_training_pairs_are_each_images_first_references(train_references: int | None) -> None:
    module = data_module(train_references)
    pairs = module.train_dataloader().dataset
    samples = module.samples("train")
    kept = train_references or len(samples[0].captions)
    expected = [(i, module.vocabulary.encode(c, max_length=20)) for i, s in enumerate(samples) for c in s.captions[:kept]]
    assert [(image, list(caption)) for image, caption in pairs.pairs] == [(i, list(c)) for i, c in expected]
    assert module._items("train") == len(expected) == 3 * kept
    assert len(module.references("val")[0]) == 5  # evaluation still scores against every reference


def test_train_references_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="train_references must be at least 1"):
        CaptionDataModule(train_references=0)
