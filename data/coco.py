"""Captions from the official COCO caption files (`annotations/captions_train2014.json`, ...).

Use this reader for COCO's own train/val split (and the test-server images); use `KarpathyCaptions` with
`dataset_coco.json` for the split most papers report on. Files are read only when their split is first
asked for, so a user who downloaded only train and val can still use both.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PIL import Image
from pycocotools.coco import COCO

from data.captions import CaptionDataset, CaptionSample
from data.errors import DatasetFormatError
from data.images import load_image
from data.json_files import is_relative_file, read_json_object


class CocoCaptions(CaptionDataset):
    """COCO images and their reference captions, split as the annotation files split them.

    "test" is read from `test_annotations` / `test_images` when both are given. When they are not,
    "test" is the val annotations and images again (the official test captions are not public), so
    "val" and "test" then hold the same samples.

    Samples are ordered by ascending COCO image id; captions keep the file's order, with surrounding
    whitespace (some COCO captions end in a newline) removed. Images that have no captions (as in the
    `image_info_test2014.json` files) are kept with an empty caption tuple.

    Args:
        root: the COCO folder; every other path is relative to it.
        train_annotations, val_annotations, test_annotations: caption files in the official format.
        train_images, val_images, test_images: the folders holding each split's image files.
    """

    def __init__(
        self,
        *,
        root: Path,
        train_annotations: str = "annotations/captions_train2014.json",
        val_annotations: str = "annotations/captions_val2014.json",
        train_images: str = "train2014",
        val_images: str = "val2014",
        test_annotations: str | None = None,
        test_images: str | None = None,
    ) -> None:
        self._root = Path(root)
        if not self._root.is_dir():
            raise FileNotFoundError(f"COCO folder not found: {self._root}; pass it with --data.dataset.init_args.root")
        if (test_annotations is None) != (test_images is None):
            raise ValueError("give test_annotations and test_images together, or neither (then test is the val split)")
        self._sources: dict[str, tuple[str, str, str]] = {
            "train": ("train_annotations", train_annotations, train_images),
            "val": ("val_annotations", val_annotations, val_images),
            "test": ("test_annotations", test_annotations, test_images)
            if test_annotations is not None and test_images is not None
            else ("val_annotations", val_annotations, val_images),
        }
        image_dirs = dict.fromkeys(Path(images).name for _, _, images in self._sources.values())
        self._name = "_".join(["coco", *image_dirs])
        self._indexes: dict[Path, COCO] = {}
        self._samples: dict[str, list[CaptionSample]] = {}

    @property
    def name(self) -> str:
        """The word coco and the image folder names, joined by underscores ("coco_train2014_val2014" by
        default), so that feature caches of COCO 2014 and COCO 2017 images never mix."""
        return self._name

    @property
    def splits(self) -> tuple[str, ...]:
        return ("train", "val", "test")

    def samples(self, split: str) -> list[CaptionSample]:
        self._check_split(split)
        if split not in self._samples:
            argument, annotations, images = self._sources[split]
            coco = self._index(self._root / annotations, argument)
            image_dir = self._root / images
            self._samples[split] = [
                CaptionSample(
                    image_id=str(image_id),
                    captions=tuple(annotation["caption"].strip() for annotation in coco.imgToAnns[image_id]),
                    path=image_dir / coco.imgs[image_id]["file_name"],
                )
                for image_id in sorted(coco.imgs)
            ]
        return list(self._samples[split])

    def load(self, sample: CaptionSample) -> Image.Image:
        if sample.path is None:
            raise ValueError(f"sample {sample.image_id!r} has no image path; it did not come from COCO files")
        return load_image(sample.path)

    def _index(self, path: Path, argument: str) -> COCO:
        """The pycocotools index of one caption file, read and checked on first use, then cached."""
        if path not in self._indexes:
            if not path.is_file():
                raise FileNotFoundError(
                    f"COCO caption file not found: {path}; pass the COCO folder with --data.dataset.init_args.root "
                    f"(and the file with --data.dataset.init_args.{argument} if it is not the default)"
                )
            document = read_json_object(path)
            _check_captions_file(document, path)
            coco = COCO()
            coco.dataset = document
            try:
                coco.createIndex()
            except (KeyError, TypeError, ValueError) as error:
                raise DatasetFormatError(f"{path}: pycocotools could not index it ({error!r})") from error
            self._indexes[path] = coco
        return self._indexes[path]


def _check_captions_file(document: dict[str, Any], path: Path) -> None:
    """Check what pycocotools and this reader rely on, so a bad file fails with the entry at fault.

    Needed: an "images" list of objects with an integer "id" and a "file_name"; an optional "annotations"
    list of objects with "id", "image_id" (one of the images) and a "caption" string.
    """

    def fail(problem: str) -> DatasetFormatError:
        return DatasetFormatError(f"{path}: {problem}")

    images = document.get("images")
    if not isinstance(images, list):
        raise fail("has no 'images' list; is this a COCO caption file (captions_*.json)?")
    image_ids: set[int] = set()
    for number, image in enumerate(images):
        if not isinstance(image, dict):
            raise fail(f"images[{number}] is a {type(image).__name__}, not an object")
        if not _is_integer(image.get("id")):
            raise fail(f"images[{number}] has no integer 'id'")
        if not isinstance(image.get("file_name"), str):
            raise fail(f"images[{number}] has no 'file_name' string")
        if not is_relative_file(image["file_name"]):
            raise fail(f"images[{number}].file_name is {image['file_name']!r}, not a file name inside the image folder")
        if image["id"] in image_ids:
            raise fail(f"images[{number}] repeats image id {image['id']}")
        image_ids.add(image["id"])
    annotations = document.get("annotations", [])
    if not isinstance(annotations, list):
        raise fail("'annotations' is not a list")
    for number, annotation in enumerate(annotations):
        if not isinstance(annotation, dict):
            raise fail(f"annotations[{number}] is a {type(annotation).__name__}, not an object")
        for key in ("id", "image_id"):
            if key not in annotation:
                raise fail(f"annotations[{number}] has no {key!r}")
            if not _is_integer(annotation[key]):
                raise fail(f"annotations[{number}].{key} is {annotation[key]!r}, expected an integer")
        if not isinstance(annotation.get("caption"), str):
            raise fail(f"annotations[{number}] has no 'caption' string; is this a caption file (captions_*.json)?")
        if annotation["image_id"] not in image_ids:
            raise fail(f"annotations[{number}] refers to image {annotation['image_id']!r}, which is not in 'images'")


def _is_integer(value: Any) -> bool:
    """An integer as COCO's ids are (JSON's true and false are not ids, though Python counts them as ints)."""
    return isinstance(value, int) and not isinstance(value, bool)
