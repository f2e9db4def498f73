"""The captioning LightningDataModule: dataset splits -> batches of cached features or images, plus captions.

It serves the model it is trained with: the vocabulary is the model's when the model already has one (a
checkpoint), otherwise it is built from the training captions; the encoder is the model's, and the output of
its frozen trunk comes from the feature cache, computed once per (dataset, split, encoder, resolution).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

import lightning as L
import torch
from PIL import Image
from torch import Tensor
from torch.utils.data import DataLoader, Dataset

from core.model.encoder import Encoder
from core.training.batches import CachedInputs, ImageInputs, pad_batch
from core.training.features import (
    EncodedOnRead,
    FeatureCache,
    announce_encoding_on_read,
    split_inputs,
    splits_read_in_part,
    stage_loaders,
)
from core.training.resume import split_loader
from data.captions import CaptionDataset, CaptionSample
from data.images import load_image
from data.vocabulary import Vocabulary

log = logging.getLogger(__name__)

IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".bmp", ".gif", ".tif", ".tiff", ".webp"}


class CaptionDataModule(L.LightningDataModule):
    """Batches for captioning.

    Args:
        dataset: where the images and captions come from (ShapesWorld, Karpathy JSON, COCO).
        batch_size: training batch size ((image, caption) pairs).
        eval_batch_size: images per validation/test/predict batch.
        num_workers: DataLoader worker processes.
        min_word_count: words seen fewer times in the training captions become <unk>.
        max_caption_length: training captions are cut to this many words.
        train_references: train on each image's first this many reference captions only (all when None);
            validation and test still score against every reference. ShapesWorld's first reference follows one
            rule (the first object in mention order, then the next), so with 1 the model learns that rule and no
            longer has to guess which object a caption will name next.
        cache_dir: where feature caches are stored.
        cache_features: store the output of the encoder's frozen trunk once per image and train on it (the
            annotation vectors when the encoder is frozen, the input of its fine-tuned top blocks otherwise);
            False runs the whole encoder on the images at every step.
        predict_path: an image file or a folder of images to caption with `predict`.
        val_split: the split used for validation.
        test_split: the split used by `test` ("heldout" tests ShapesWorld's unseen attribute combinations).
    """

    def __init__(
        self,
        *,
        dataset: CaptionDataset | None = None,
        batch_size: int = 64,
        eval_batch_size: int = 100,
        num_workers: int = 0,
        min_word_count: int = 1,
        max_caption_length: int = 20,
        train_references: int | None = None,
        cache_dir: Path = Path(".cache/features"),
        cache_features: bool = True,
        predict_path: Path | None = None,
        val_split: str = "val",
        test_split: str = "test",
    ) -> None:
        super().__init__()
        self.dataset = dataset
        self.batch_size = batch_size
        self.eval_batch_size = eval_batch_size
        self.num_workers = num_workers
        self.min_word_count = min_word_count
        self.max_caption_length = max_caption_length
        if train_references is not None and train_references < 1:
            raise ValueError(f"train_references must be at least 1 (or None for all), got {train_references}")
        self.train_references = train_references
        self.cache = FeatureCache(root=Path(cache_dir))
        self.cache_features = cache_features
        self.predict_path = None if predict_path is None else Path(predict_path)
        self.split_names = {"val": val_split, "test": test_split}
        self.vocabulary: Vocabulary | None = None
        self._samples: dict[str, list[CaptionSample]] = {}
        self._read_in_part: dict[str, tuple[int, int]] = {}  # splits this run reads only part of: encoded on read

    # -- what the model needs from the data --------------------------------------------------------------

    def samples(self, split: str) -> list[CaptionSample]:
        if self.dataset is None:
            raise ValueError("no dataset configured: set --data.dataset (see configs/captioning/*.yaml)")
        if split not in self._samples:
            self._samples[split] = self.dataset.samples(split)
        return self._samples[split]

    def references(self, stage: str) -> list[tuple[str, ...]]:
        """The reference captions of the split that `stage` ("val" or "test") evaluates, in loader order."""
        return [sample.captions for sample in self.samples(self.split_names[stage])]

    def reference_ids(self, split: str = "train") -> list[list[list[int]]]:
        """Every image's reference captions as the vocabulary's word ids, without <start> and <end> and not
        shortened: what self-critical training scores its samples against (`captioning.self_critical`)."""
        if self.vocabulary is None:
            raise RuntimeError("the data module has no vocabulary before setup")
        return [[ids[1:-1] for ids in captions] for captions in self._encoded_captions(split, None)]

    def build_vocabulary(self) -> Vocabulary:
        captions = (caption for sample in self.samples("train") for caption in sample.captions)
        return Vocabulary.build(captions, min_count=self.min_word_count)

    # -- Lightning hooks ---------------------------------------------------------------------------------

    def setup(self, stage: str) -> None:
        model = self.trainer.lightning_module if self.trainer is not None else None
        if model is None:
            raise RuntimeError("CaptionDataModule is meant to be used through a Trainer with a CaptioningModule")
        if model.vocabulary is None:
            model.set_vocabulary(self.build_vocabulary())
        self.vocabulary = model.vocabulary
        self.encoder: Encoder = model.encoder
        loaders = stage_loaders(stage, self.split_names, batch_size=self.batch_size, eval_batch_size=self.eval_batch_size)
        if self.cache_features and loaders:  # say what the first batch waits for
            self._read_in_part = splits_read_in_part(
                self.trainer, {split: (*loader, self._items(split)) for split, loader in loaders.items()}
            )
            announce_encoding_on_read(self.dataset.name, self._read_in_part)
            cached = [split for split in loaders if split not in self._read_in_part]
            ids = {split: [s.image_id for s in self.samples(split)] for split in cached}
            files = {split: [s.path for s in self.samples(split)] for split in cached}
            self.cache.announce(dataset_name=self.dataset.name, splits=ids, encoder=self.encoder, image_files=files)

    def _items(self, split: str) -> int:
        """How many items a pass over the split's loader reads: (image, caption) pairs in training, images else."""
        samples = self.samples(split)
        return sum(len(sample.captions[: self.train_references]) for sample in samples) if split == "train" else len(samples)

    def _inputs(self, split: str) -> CachedInputs | EncodedOnRead | ImageInputs:
        samples = self.samples(split)
        return split_inputs(
            self.cache if self.cache_features else None, whole=split not in self._read_in_part,
            dataset_name=self.dataset.name, split=split, image_ids=[s.image_id for s in samples],
            image_files=[s.path for s in samples], load_image=lambda i: self.dataset.load(samples[i]),
            encoder=self.encoder, num_workers=self.num_workers,
        )  # fmt: skip

    def _encoded_captions(self, split: str, max_words: int | None) -> list[list[list[int]]]:
        return [
            [self.vocabulary.encode(caption, max_length=max_words) for caption in sample.captions]
            for sample in self.samples(split)
        ]

    def _loader(self, dataset: Dataset, *, batch_size: int, shuffle: bool = False) -> DataLoader:
        collate = partial(pad_batch, pad_id=self.vocabulary.pad_id)
        return split_loader(
            dataset, batch_size=batch_size, collate_fn=collate, num_workers=self.num_workers, shuffle=shuffle,
            trainer=self.trainer,
        )  # fmt: skip

    def train_dataloader(self) -> DataLoader:
        """Shuffled (image, caption) pairs, resumable mid-epoch from a checkpoint (see `core.training.resume`)."""
        captions = [refs[: self.train_references] for refs in self._encoded_captions("train", self.max_caption_length)]
        return self._loader(CaptionPairs(self._inputs("train"), captions), batch_size=self.batch_size, shuffle=True)

    def _evaluation_loader(self, stage: str) -> DataLoader:
        split = self.split_names[stage]
        images = EvaluationImages(self._inputs(split), self._encoded_captions(split, None), self.samples(split))
        return self._loader(images, batch_size=self.eval_batch_size, shuffle=False)

    def val_dataloader(self) -> DataLoader:
        return self._evaluation_loader("val")

    def test_dataloader(self) -> DataLoader:
        return self._evaluation_loader("test")

    def predict_dataloader(self) -> DataLoader:
        if self.predict_path is None:
            raise ValueError("predict needs images: pass --data.predict_path FILE_OR_FOLDER")
        files = _image_files(self.predict_path)
        return self._loader(ImageFiles(files, load_image, self.encoder.transform()), batch_size=self.eval_batch_size, shuffle=False)


def _image_files(path: Path) -> list[Path]:
    """An image file, or the image files of a folder (sorted), with a clear error when there are none."""
    if path.is_file():
        return [path]
    if not path.exists():
        raise FileNotFoundError(f"predict path not found: {path}")
    files = sorted(p for p in path.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
    if not files:
        raise FileNotFoundError(f"no image files ({', '.join(sorted(IMAGE_SUFFIXES))}) in folder {path}")
    return files




MAX_GROUNDED_WORDS = 16


class CaptionPairs(Dataset):
    """Every (image, reference caption) pair of a split, for teacher-forced training."""

    def __init__(self, inputs: Callable[[int], Tensor], captions: Sequence[Sequence[Sequence[int]]]) -> None:
        self.inputs = inputs
        self.pairs = [(image, caption) for image, refs in enumerate(captions) for caption in refs]

    def __len__(self) -> int:
        return len(self.pairs)

    def __getitem__(self, index: int) -> dict:
        image, caption = self.pairs[index]
        return {"inputs": self.inputs(image), "captions": torch.tensor(caption), "index": image}


class EvaluationImages(Dataset):
    """Each image of a split once, with its first reference caption (for the validation loss and attention
    correctness) and that caption's grounded words, when the dataset has them."""

    def __init__(
        self,
        inputs: Callable[[int], Tensor],
        captions: Sequence[Sequence[Sequence[int]]],
        samples: Sequence[CaptionSample],
    ) -> None:
        self.inputs, self.captions, self.samples = inputs, captions, samples

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, index: int) -> dict:
        sample = self.samples[index]
        grounded = sample.grounding[0][:MAX_GROUNDED_WORDS] if sample.grounding else ()
        positions = torch.full((MAX_GROUNDED_WORDS,), -1, dtype=torch.long)
        boxes = torch.zeros(MAX_GROUNDED_WORDS, 4)
        for g, word in enumerate(grounded):
            positions[g] = word.position
            boxes[g] = torch.tensor([word.box.x0, word.box.y0, word.box.x1, word.box.y1])
        return {
            "inputs": self.inputs(index),
            "captions": torch.tensor(self.captions[index][0]),
            "index": index,
            "grounded_positions": positions,  # (G,) word positions, -1 = none
            "grounded_boxes": boxes,  # (G, 4)
        }


class ImageFiles(Dataset):
    """Image files to caption (predict). A file that cannot be read yields None and is reported, not fatal."""

    def __init__(self, paths: Sequence[Path], load: Callable[[Path], Image.Image], transform: Callable) -> None:
        self.paths, self.load, self.transform = list(paths), load, transform

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int) -> dict:
        path = self.paths[index]
        try:
            image = self.transform(self.load(path))
        except ValueError as error:  # data.images.ImageLoadError names the file
            return {"error": str(error), "path": str(path)}
        return {"inputs": image, "path": str(path), "index": index}


