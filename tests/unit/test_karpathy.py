"""KarpathyCaptions: splits (restval folded into train), ids, captions, image paths and clear errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PIL import Image

from data.errors import DatasetFormatError
from data.images import ImageLoadError
from data.karpathy import KarpathyCaptions
from data.vocabulary import tokenize

FLICKR8K = Path(__file__).resolve().parents[3] / "shared/data/flickr8k"


def sentence(raw: str) -> dict:
    return {"raw": raw, "tokens": tokenize(raw)}


def entry(filename: str, imgid: int, split: str, *raws: str, **extra) -> dict:
    return {"filename": filename, "imgid": imgid, "split": split, "sentences": [sentence(r) for r in raws], **extra}


def flickr_like() -> dict:
    return {
        "dataset": "tinyflickr",
        "images": [
            entry("b.jpg", 0, "train", "A dog runs.", "A brown dog."),
            entry("a.jpg", 1, "val", "Two cats."),
            entry("c.jpg", 2, "restval", "A red ball."),
            entry("d.jpg", 3, "test", "The sea."),
            entry("e.jpg", 4, "train", "A bird."),
        ],
    }


def write(root: Path, document, name: str = "dataset_tiny.json") -> Path:
    path = root / name
    path.write_text(document if isinstance(document, str) else json.dumps(document))
    return path


def test_splits_ids_captions_and_paths(tmp_path):
    write(tmp_path, flickr_like())
    dataset = KarpathyCaptions(root=tmp_path, annotations="dataset_tiny.json")
    assert dataset.name == "tinyflickr"
    assert dataset.splits == ("train", "val", "test")
    train = dataset.samples("train")
    assert [s.image_id for s in train] == ["0", "2", "4"]  # file order, restval folded in
    assert train[0].captions == ("A dog runs.", "A brown dog.")
    assert train[0].path == tmp_path / "images" / "b.jpg"
    assert train[0].grounding == ()
    assert [s.image_id for s in dataset.samples("val")] == ["1"]
    assert [(s.image_id, s.captions) for s in dataset.samples("test")] == [("3", ("The sea.",))]


def test_samples_are_a_fresh_list(tmp_path):
    write(tmp_path, flickr_like())
    dataset = KarpathyCaptions(root=tmp_path, annotations="dataset_tiny.json")
    dataset.samples("train").clear()
    assert len(dataset.samples("train")) == 3


def test_unknown_split_names_the_known_ones(tmp_path):
    write(tmp_path, flickr_like())
    dataset = KarpathyCaptions(root=tmp_path, annotations="dataset_tiny.json")
    with pytest.raises(ValueError, match="no split 'restval'; known splits: train, val, test"):
        dataset.samples("restval")


def test_coco_style_entries_use_cocoid_and_filepath(tmp_path):
    document = {
        "dataset": "coco",
        "images": [
            entry("COCO_val2014_000000000042.jpg", 0, "restval", "A plate.", filepath="val2014", cocoid=42),
            entry("COCO_val2014_000000000007.jpg", 1, "test", "A bus.", filepath="val2014", cocoid=7),
        ],
    }
    write(tmp_path, document, "dataset_coco.json")
    dataset = KarpathyCaptions(root=tmp_path, annotations="dataset_coco.json", image_dir=".")
    (sample,) = dataset.samples("train")
    assert sample.image_id == "42"
    assert sample.path == tmp_path / "val2014" / "COCO_val2014_000000000042.jpg"
    assert [s.image_id for s in dataset.samples("test")] == ["7"]


def test_fallbacks_for_name_id_and_caption(tmp_path):
    document = {"images": [{"filename": "x.jpg", "split": "train", "sentences": [{"tokens": ["a", "cat"]}]}]}
    write(tmp_path, document, "dataset_mine.json")
    dataset = KarpathyCaptions(root=tmp_path, annotations="dataset_mine.json")
    assert dataset.name == "dataset_mine"
    (sample,) = dataset.samples("train")
    assert (sample.image_id, sample.captions) == ("x.jpg", ("a cat",))


def test_load_reads_the_image_and_names_missing_files(tmp_path):
    write(tmp_path, flickr_like())
    (tmp_path / "images").mkdir()
    Image.new("L", (5, 4), 30).save(tmp_path / "images" / "b.jpg")
    dataset = KarpathyCaptions(root=tmp_path, annotations="dataset_tiny.json")
    first, second, _ = dataset.samples("train")
    image = dataset.load(first)
    assert (image.mode, image.size) == ("RGB", (5, 4))
    assert abs(image.getpixel((2, 2))[0] - 30) <= 2
    with pytest.raises(ImageLoadError, match=r"image file not found: .*images.c\.jpg"):
        dataset.load(second)


def test_missing_annotations_file_says_what_to_pass(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"dataset_flickr8k\.json.*--data\.dataset\.init_args\.root"):
        KarpathyCaptions(root=tmp_path)


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d["images"][3].pop("sentences"), r"images\[3\] has no 'sentences'"),
        (lambda d: d["images"][1].pop("filename"), r"images\[1\] has no 'filename'"),
        (lambda d: d["images"][0].pop("split"), r"images\[0\] has no 'split'"),
        (lambda d: d["images"][2].update(split="holdout"), r"images\[2\] has split 'holdout'"),
        (lambda d: d["images"][4].update(imgid=0), r"images\[4\] has the same image id '0' as images\[0\]"),
        (lambda d: d["images"][0]["sentences"][1].clear(), r"images\[0\]\.sentences\[1\] has neither"),
        (lambda d: d["images"][0].update(sentences="A dog."), r"images\[0\]\.sentences is a str"),
        (lambda d: d.pop("images"), r"no 'images' list"),
    ],
)
def test_malformed_entries_name_the_file_and_the_entry(tmp_path, mutate, message):
    document = flickr_like()
    mutate(document)
    write(tmp_path, document)
    with pytest.raises(DatasetFormatError, match=r"dataset_tiny\.json: .*" + message):
        KarpathyCaptions(root=tmp_path, annotations="dataset_tiny.json")


def test_truncated_json_is_a_format_error(tmp_path):
    text = json.dumps(flickr_like())
    write(tmp_path, text[: len(text) // 2])
    with pytest.raises(DatasetFormatError, match=r"dataset_tiny\.json: not valid JSON"):
        KarpathyCaptions(root=tmp_path, annotations="dataset_tiny.json")


def test_top_level_list_is_a_format_error(tmp_path):
    write(tmp_path, "[]")
    with pytest.raises(DatasetFormatError, match=r"dataset_tiny\.json: the top level is a list"):
        KarpathyCaptions(root=tmp_path, annotations="dataset_tiny.json")


def test_format_error_is_a_value_error():
    assert issubclass(DatasetFormatError, ValueError)


@pytest.mark.skipif(not (FLICKR8K / "dataset_flickr8k.json").is_file(), reason="Flickr8k is not in shared/data")
def test_real_flickr8k_split():
    dataset = KarpathyCaptions(root=FLICKR8K)
    assert dataset.name == "flickr8k"
    sizes = {split: len(dataset.samples(split)) for split in dataset.splits}
    assert sizes == {"train": 6000, "val": 1000, "test": 1000}
    samples = [sample for split in dataset.splits for sample in dataset.samples(split)]
    assert all(len(sample.captions) == 5 for sample in samples)
    assert len({sample.image_id for sample in samples}) == 8000
    assert samples[0].path == FLICKR8K / "images" / "1000268201_693b08cb0e.jpg"
