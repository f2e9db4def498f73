"""Mirror images: the flip, the words that change with it, and VQA training examples that use both."""

from dataclasses import astuple
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from core.model.encoder import EfficientNetLite
from data.dataset import Box
from data.vocabulary import tokenize
from data.vqa import VqaSample
from data.vqa2 import Daquar
from vqa.datamodule import Questions, VqaDataModule
from vqa.mirroring import MirrorView, mirror_image, mirror_words
from vqa.module import VqaModule


def test_mirror_image_flips_left_to_right():
    pixels = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3)  # (H, W, RGB)
    mirrored = np.asarray(mirror_image(Image.fromarray(pixels)))
    assert np.array_equal(mirrored, pixels[:, ::-1])


def test_mirror_words_swap_the_sides_only():
    words = tokenize("What is on the LEFT side of the rightmost chair, right of the lamp?")
    assert mirror_words(words) == [
        "what", "is", "on", "the", "right", "side", "of", "the", "leftmost", "chair", "left", "of", "the", "lamp",
    ]
    assert mirror_words(mirror_words(words)) == words
    assert mirror_words(["lefty", "bright"]) == ["lefty", "bright"]  # whole words only


def test_box_mirrored():
    box = Box(x0=0.1, y0=0.2, x1=0.4, y1=0.9)
    assert astuple(box.mirrored()) == pytest.approx((0.6, 0.2, 0.9, 0.9))
    assert astuple(box.mirrored().mirrored()) == pytest.approx(astuple(box))
    assert Box(x0=0.0, y0=0.0, x1=1.0, y1=1.0).mirrored() == Box(x0=0.0, y0=0.0, x1=1.0, y1=1.0)


def test_questions_draw_the_photo_or_its_mirror_image_as_a_whole():
    """Each item is all photo (grid, words, regions) or all mirror image, each about half the time."""
    sample = VqaSample(
        question_id=1, image_id="a", question="left of it?", answers=("x",), answer="x", answer_type="other",
        question_type="", regions=(Box(x0=0.0, y0=0.0, x1=0.25, y1=0.5),),
    )
    photo, mirrored = torch.zeros(1, 4), torch.ones(1, 4)  # (L, D) grids of one image
    view = MirrorView(inputs=lambda i: mirrored, words=[[7, 5]])
    questions = Questions(lambda i: photo, [sample], [0], [[6, 5]], None, view)

    torch.manual_seed(0)
    items = [questions[0] for _ in range(400)]
    flipped = [item for item in items if item["inputs"].equal(mirrored)]
    assert 150 < len(flipped) < 250  # binomial(400, 1/2): mean 200, standard deviation 10
    for item in items:
        is_mirror = item["inputs"].equal(mirrored)
        assert item["question"].tolist() == ([7, 5] if is_mirror else [6, 5])
        assert item["regions"][0].tolist() == ([0.75, 0.0, 1.0, 0.5] if is_mirror else [0.0, 0.0, 0.25, 0.5])

    plain = Questions(lambda i: photo, [sample], [0], [[6, 5]], None)
    assert all(plain[0]["inputs"].equal(photo) for _ in range(20))


def test_the_data_module_trains_on_mirror_images_with_the_sides_swapped(tmp_path: Path, daquar: Path):
    """Through the data module: mirrored words for the training questions, the mirror image's cached grid."""
    dataset = Daquar(root=daquar)
    data = VqaDataModule(dataset=dataset, mirror_images=True, cache_dir=tmp_path / "cache", val_split="test")
    model = VqaModule(encoder=EfficientNetLite(variant=0, image_size=64))
    model.set_vocabularies(*data.build_vocabularies())
    data.model = model  # what `setup` does under a Trainer

    train = data.train_dataloader().dataset
    vocabulary = model.question_vocabulary
    left, right = vocabulary.index("left"), vocabulary.index("right")
    assert right != vocabulary.unk_id  # known to the model although no training question says it
    sided = [i for i, words in enumerate(train.words) if left in words]
    assert sided and len(sided) < len(train.words)
    for i, (words, mirrored) in enumerate(zip(train.words, train.mirror.words)):
        expected = [right if w == left else w for w in words] if i in sided else words
        assert mirrored == expected

    ids = dataset.image_ids("train")
    with torch.inference_mode():
        flipped = model.encoder.trunk(model.encoder.transform()(mirror_image(dataset.load(ids[1])))[None])[0]
    torch.testing.assert_close(train.mirror.inputs(1).float(), flipped, atol=2e-2, rtol=1e-2)
    assert not data.val_dataloader().dataset.mirror  # evaluation sees the photos as they are
