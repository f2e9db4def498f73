"""CocoCaptions: official caption files read lazily, sorted by image id, with clear errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PIL import Image

from data.coco import CocoCaptions
from data.errors import DatasetFormatError
from data.images import ImageLoadError


def captions_file(images: list[tuple[int, str]], annotations: list[tuple[int, int, str]]) -> dict:
    """A caption file in the official layout: info, images, licenses, annotations."""
    return {
        "info": {"description": "tiny COCO", "version": "1.0", "year": 2014},
        "images": [
            {"license": 1, "file_name": name, "coco_url": "", "height": 4, "width": 6, "date_captured": "", "id": id_}
            for id_, name in images
        ],
        "licenses": [{"url": "", "id": 1, "name": "test licence"}],
        "annotations": [
            {"image_id": image_id, "id": ann_id, "caption": caption} for ann_id, image_id, caption in annotations
        ],
    }


TRAIN = captions_file(
    [(30, "COCO_train2014_000000000030.jpg"), (9, "COCO_train2014_000000000009.jpg")],
    [(1, 30, "A vase of flowers.\n"), (2, 9, "A plate of food."), (3, 30, " Flowers on a table."), (4, 9, "Dinner.")],
)
VAL = captions_file([(42, "COCO_val2014_000000000042.jpg")], [(5, 42, "A bus on a street.")])


def write(path: Path, document) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(document if isinstance(document, str) else json.dumps(document))


@pytest.fixture
def root(tmp_path):
    write(tmp_path / "annotations/captions_train2014.json", TRAIN)
    write(tmp_path / "annotations/captions_val2014.json", VAL)
    return tmp_path


def test_train_sorted_by_id_with_captions_and_paths(root):
    dataset = CocoCaptions(root=root)
    assert dataset.splits == ("train", "val", "test")
    train = dataset.samples("train")
    assert [s.image_id for s in train] == ["9", "30"]
    assert train[0].captions == ("A plate of food.", "Dinner.")
    assert train[1].captions == ("A vase of flowers.", "Flowers on a table.")
    assert train[0].path == root / "train2014" / "COCO_train2014_000000000009.jpg"
    (val,) = dataset.samples("val")
    assert (val.image_id, val.captions, val.path) == (
        "42",
        ("A bus on a street.",),
        root / "val2014" / "COCO_val2014_000000000042.jpg",
    )


def test_test_is_val_when_no_test_files_are_given(root):
    dataset = CocoCaptions(root=root)
    assert dataset.samples("test") == dataset.samples("val")


def test_separate_test_files(root):
    write(root / "annotations/image_info_test2014.json", captions_file([(77, "t.jpg"), (5, "s.jpg")], []))
    dataset = CocoCaptions(root=root, test_annotations="annotations/image_info_test2014.json", test_images="test2014")
    test = dataset.samples("test")
    assert [(s.image_id, s.captions, s.path) for s in test] == [
        ("5", (), root / "test2014" / "s.jpg"),
        ("77", (), root / "test2014" / "t.jpg"),
    ]
    assert dataset.name == "coco_train2014_val2014_test2014"


def test_name_follows_the_image_folders(root):
    assert CocoCaptions(root=root).name == "coco_train2014_val2014"
    assert CocoCaptions(root=root, train_images="train2017", val_images="val2017").name == "coco_train2017_val2017"


def test_test_files_come_in_pairs(root):
    with pytest.raises(ValueError, match="together"):
        CocoCaptions(root=root, test_annotations="annotations/captions_val2014.json")


def test_files_are_read_only_for_requested_splits(tmp_path):
    write(tmp_path / "annotations/captions_val2014.json", VAL)
    dataset = CocoCaptions(root=tmp_path)  # no train file: fine until train is asked for
    assert [s.image_id for s in dataset.samples("val")] == ["42"]
    with pytest.raises(FileNotFoundError, match=r"captions_train2014\.json.*--data\.dataset\.init_args\.root"):
        dataset.samples("train")


def test_files_are_parsed_once(root):
    dataset = CocoCaptions(root=root)
    dataset.samples("val")
    (root / "annotations/captions_val2014.json").unlink()
    assert [s.image_id for s in dataset.samples("val")] == ["42"]
    assert [s.image_id for s in dataset.samples("test")] == ["42"]


def test_missing_root(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"nowhere.*--data\.dataset\.init_args\.root"):
        CocoCaptions(root=tmp_path / "nowhere")


def test_unknown_split(root):
    with pytest.raises(ValueError, match="no split 'restval'"):
        CocoCaptions(root=root).samples("restval")


def test_load(root):
    (root / "val2014").mkdir()
    # A transparent PNG under a .jpg name: load goes through load_image, which reads the content, not the name.
    Image.new("RGBA", (6, 4), (0, 0, 0, 0)).save(root / "val2014" / "COCO_val2014_000000000042.jpg", format="PNG")
    dataset = CocoCaptions(root=root)
    image = dataset.load(dataset.samples("val")[0])
    assert (image.mode, image.size, image.getpixel((0, 0))) == ("RGB", (6, 4), (255, 255, 255))
    with pytest.raises(ImageLoadError, match=r"not found: .*COCO_train2014_000000000009\.jpg"):
        dataset.load(dataset.samples("train")[0])


def bad(document: dict, change) -> dict:
    document = json.loads(json.dumps(document))
    change(document)
    return document


@pytest.mark.parametrize(
    ("document", "message"),
    [
        (bad(TRAIN, lambda d: d.pop("images")), "no 'images' list"),
        (bad(TRAIN, lambda d: d["images"][1].pop("file_name")), r"images\[1\] has no 'file_name'"),
        (bad(TRAIN, lambda d: d["images"][0].pop("id")), r"images\[0\] has no integer 'id'"),
        (bad(TRAIN, lambda d: d["images"][1].update(id=30)), r"images\[1\] repeats image id 30"),
        (bad(TRAIN, lambda d: d["annotations"][2].pop("caption")), r"annotations\[2\] has no 'caption'"),
        (bad(TRAIN, lambda d: d["annotations"][1].pop("image_id")), r"annotations\[1\] has no 'image_id'"),
        (bad(TRAIN, lambda d: d["annotations"][3].update(image_id=5)), r"annotations\[3\] refers to image 5"),
        (bad(TRAIN, lambda d: d.update(annotations={})), "'annotations' is not a list"),
        ([], "the top level is a list"),
        (json.dumps(TRAIN)[:200], "not valid JSON"),
    ],
)
def test_malformed_files_name_the_file_and_the_entry(root, document, message):
    write(root / "annotations/captions_train2014.json", document if not isinstance(document, list) else "[]")
    dataset = CocoCaptions(root=root)
    with pytest.raises(DatasetFormatError, match=r"captions_train2014\.json: .*" + message):
        dataset.samples("train")
    assert [s.image_id for s in dataset.samples("val")] == ["42"]  # other splits still work
