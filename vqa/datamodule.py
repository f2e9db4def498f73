"""The VQA LightningDataModule: dataset splits -> batches of image grids (or images), questions and targets.

Like captioning's data module it serves the model it trains: the question vocabulary and the answer classes
are the model's when it has them (a checkpoint), otherwise they are built from the training questions; the
encoder is the model's, and the output of its frozen trunk comes from the feature cache (`core.training.features`), one
entry per image.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

import lightning as L
import torch
from PIL import Image
from torch import Tensor
from torch.utils.data import DataLoader, Dataset

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
from data.vocabulary import Vocabulary, tokenize
from data.vqa import VqaDataset, VqaSample
from vqa.answers import AnswerVocabulary
from vqa.mirroring import SIDE_WORDS, MirrorView, mirror_image, mirror_words
from vqa.questions import question_ids


class VqaDataModule(L.LightningDataModule):
    """Batches for VQA.

    Args:
        dataset: where the images, questions and answers come from.
        batch_size: training batch size (questions).
        eval_batch_size: questions per validation/test/predict batch.
        num_workers: DataLoader worker processes.
        num_answers: N, the number of answer classes (the most frequent training answers).
        min_word_count: question words seen fewer times in training become <unk>.
        cache_dir: where feature caches are stored.
        cache_features: store the output of the encoder's frozen trunk once per image and train on it (the
            annotation vectors when the encoder is frozen, the input of its fine-tuned top blocks otherwise);
            False runs the whole encoder on the images at every step.
        mirror_images: train on each question or, at random (probability 1/2, drawn anew at every epoch), on its
            mirror image: the photo flipped left to right, "left" and "right" swapped in the question
            (`vqa.mirroring`). With a feature cache the mirror images get a cache of their own, built once.
        val_split: the split used for validation.
        test_split: the split used by `test`.
        predict_split: the split whose questions `predict` answers.
        answer_sets: score answers as sets with WUPS@0.9 / WUPS@0.0 as well (DAQUAR).
    """

    def __init__(
        self,
        *,
        dataset: VqaDataset | None = None,
        batch_size: int = 64,
        eval_batch_size: int = 256,
        num_workers: int = 0,
        num_answers: int = 1000,
        min_word_count: int = 1,
        cache_dir: Path = Path(".cache/features"),
        cache_features: bool = True,
        mirror_images: bool = False,
        val_split: str = "val",
        test_split: str = "test",
        predict_split: str = "test",
        answer_sets: bool = False,
    ) -> None:
        super().__init__()
        self.dataset = dataset
        self.batch_size = batch_size
        self.eval_batch_size = eval_batch_size
        self.num_workers = num_workers
        self.num_answers = num_answers
        self.min_word_count = min_word_count
        self.cache = FeatureCache(root=Path(cache_dir))
        self.cache_features = cache_features
        self.mirror_images = mirror_images
        self.split_names = {"val": val_split, "test": test_split, "predict": predict_split}
        self.answer_sets = answer_sets
        self._questions: dict[str, list[VqaSample]] = {}
        self._read_in_part: dict[str, tuple[int, int]] = {}  # splits this run reads only part of: encoded on read

    # -- what the model needs from the data --------------------------------------------------------------

    def questions(self, split: str) -> list[VqaSample]:
        if self.dataset is None:
            raise ValueError("no dataset configured: set --data.dataset (see configs/vqa/*.yaml)")
        if split not in self._questions:
            self._questions[split] = self.dataset.questions(split)
        return self._questions[split]

    def evaluated(self, stage: str) -> list[VqaSample]:
        """The questions of the split that `stage` ("val", "test" or "predict") runs on, in loader order."""
        return self.questions(self.split_names[stage])

    def build_vocabularies(self) -> tuple[Vocabulary, AnswerVocabulary]:
        train = self.questions("train")
        if not train:
            raise ValueError(f"the training split of {self.dataset.name} has no questions")
        words = Vocabulary.build((sample.question for sample in train), min_count=self.min_word_count)
        if self.mirror_images:  # a mirrored question says "right" where its photo's said "left"
            sides = mirror_words(word for word in words.tokens if word in SIDE_WORDS)
            words = Vocabulary([*words.tokens, *sorted(set(sides) - set(words.tokens))])
        answers = AnswerVocabulary.build((sample.answer for sample in train if sample.answer), size=self.num_answers)
        return words, answers

    # -- Lightning hooks ---------------------------------------------------------------------------------

    def setup(self, stage: str) -> None:
        model = self.trainer.lightning_module if self.trainer is not None else None
        if model is None:
            raise RuntimeError("VqaDataModule is meant to be used through a Trainer with a VqaModule")
        if model.question_vocabulary is None:
            model.set_vocabularies(*self.build_vocabularies())
        self.model = model
        loaders = stage_loaders(stage, self.split_names, batch_size=self.batch_size, eval_batch_size=self.eval_batch_size)
        if self.cache_features and loaders:  # say what the first batch waits for
            self._read_in_part = splits_read_in_part(
                self.trainer, {split: (*loader, len(self.questions(split))) for split, loader in loaders.items()}
            )
            announce_encoding_on_read(self.dataset.name, self._read_in_part)
            ids = {split: self.dataset.image_ids(split) for split in loaders if split not in self._read_in_part}
            if stage == "fit" and self.mirror_images and "train" in ids:
                ids["train-mirrored"] = ids["train"]
            files = {split: [self.dataset.image_path(image_id) for image_id in image_ids] for split, image_ids in ids.items()}
            self.cache.announce(dataset_name=self.dataset.name, splits=ids, encoder=self.model.encoder, image_files=files)

    def _split_dataset(self, split: str, *, with_targets: bool, mirror: bool = False) -> Questions:
        samples = self.questions(split)
        image_ids = self.dataset.image_ids(split)
        position = {image_id: i for i, image_id in enumerate(image_ids)}
        max_length = self.model.hparams.max_question_length
        vocabulary = self.model.question_vocabulary
        words = [question_ids(vocabulary, s.question, max_length=max_length) for s in samples]
        target = partial(self.model.target_of, answers=self.model.answer_vocabulary) if with_targets else None

        def load(i: int) -> Image.Image:
            return self.dataset.load(image_ids[i])

        inputs = self._inputs(split, image_ids, load, whole=split not in self._read_in_part)
        view = None
        if mirror:
            mirrored = [" ".join(mirror_words(tokenize(s.question))) for s in samples]
            mirrored_words = [question_ids(vocabulary, question, max_length=max_length) for question in mirrored]
            mirrored_inputs = self._inputs(
                f"{split}-mirrored", image_ids, lambda i: mirror_image(load(i)), whole=split not in self._read_in_part
            )
            view = MirrorView(mirrored_inputs, mirrored_words)
        return Questions(inputs, samples, [position[s.image_id] for s in samples], words, target, view)

    def _inputs(
        self, name: str, image_ids: list[str], load: Callable[[int], Image.Image], *, whole: bool = True
    ) -> CachedInputs | EncodedOnRead | ImageInputs:
        """Image i of `image_ids` as the model's input, cached under the name `name` (`split_inputs`)."""
        files = [self.dataset.image_path(image_id) for image_id in image_ids]
        return split_inputs(
            self.cache if self.cache_features else None, whole=whole, dataset_name=self.dataset.name, split=name,
            image_ids=image_ids, image_files=files, load_image=load, encoder=self.model.encoder,
            num_workers=self.num_workers,
        )  # fmt: skip

    def _loader(self, dataset: Questions, *, batch_size: int, shuffle: bool) -> DataLoader:
        """The split's batches; shuffled ones (training) resumable mid-epoch (`core.training.resume`)."""
        collate = partial(pad_batch, pad_id=self.model.question_vocabulary.pad_id, padded=("question",))
        return split_loader(
            dataset, batch_size=batch_size, collate_fn=collate, num_workers=self.num_workers, shuffle=shuffle,
            trainer=self.trainer,
        )  # fmt: skip

    def train_dataloader(self) -> DataLoader:
        train = self._split_dataset("train", with_targets=True, mirror=self.mirror_images)
        return self._loader(train, batch_size=self.batch_size, shuffle=True)

    def val_dataloader(self) -> DataLoader:
        split = self._split_dataset(self.split_names["val"], with_targets=True)
        return self._loader(split, batch_size=self.eval_batch_size, shuffle=False)

    def test_dataloader(self) -> DataLoader:
        split = self._split_dataset(self.split_names["test"], with_targets=True)
        return self._loader(split, batch_size=self.eval_batch_size, shuffle=False)

    def predict_dataloader(self) -> DataLoader:
        split = self._split_dataset(self.split_names["predict"], with_targets=False)
        return self._loader(split, batch_size=self.eval_batch_size, shuffle=False)


# ----------------------------------------------------------------------------------------------------
# Torch datasets that turn VQA questions into model inputs: the image's grid (or image), the question's word
# ids, its target over the answer classes and its ground-truth regions where known.
#
# Images come through the shared `CachedInputs` / `ImageInputs` (`core.training.batches`), indexed by image, so an image
# asked about many times is stored and encoded once.
#


MAX_REGIONS = 4  # ground-truth boxes kept per question (ShapesWorld scenes have at most 4 objects)


class Questions(Dataset):
    """The questions of a split.

    Args:
        inputs: image index -> (L, D) grid or (3, S, S) image.
        samples: the questions.
        image_index: for each question, the index of its image in `inputs`.
        words: for each question, its word ids (already truncated, at least one id).
        target: question -> (A,) target over the answer classes; None when not training or evaluating.
        mirror: when given, each item is the question or, with probability 1/2 (drawn from torch's generator),
            its mirror image: the mirrored photo, the sides swapped in the question, its regions flipped. The
            answer is the same either way.
    """

    def __init__(
        self,
        inputs: Callable[[int], Tensor],
        samples: Sequence[VqaSample],
        image_index: Sequence[int],
        words: Sequence[Sequence[int]],
        target: Callable[[VqaSample], Tensor] | None,
        mirror: MirrorView | None = None,
    ) -> None:
        self.inputs, self.samples, self.image_index, self.words, self.target = inputs, samples, image_index, words, target
        self.mirror = mirror

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, index: int) -> dict:
        sample = self.samples[index]
        mirrored = self.mirror is not None and bool(torch.rand(()) < 0.5)
        inputs, words = (self.mirror.inputs, self.mirror.words) if mirrored else (self.inputs, self.words)
        regions = torch.zeros(MAX_REGIONS, 4)
        for r, box in enumerate(sample.regions[:MAX_REGIONS]):
            box = box.mirrored() if mirrored else box
            regions[r] = torch.tensor([box.x0, box.y0, box.x1, box.y1])
        item = {
            "inputs": inputs(self.image_index[index]),
            "question": torch.tensor(words[index]),
            "length": len(words[index]),
            "index": index,
            "regions": regions,  # (R, 4) normalised boxes
            "region_count": min(len(sample.regions), MAX_REGIONS),
        }
        if self.target is not None:
            item["targets"] = self.target(sample)  # (A,)
        return item
