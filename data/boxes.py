"""Photos with object boxes, for measuring where a model's attention lands: which objects each photo holds, and where.

Two layouts are read, told apart by their top-level keys:

* the project's own (`{"images": {"<file>": {"size": [w, h], "objects": [{"class", "box": [x0, y0, x1, y1]}, ...]}}}`,
  as in the `coco-boxes` data set): boxes in continuous pixels of the stored photo, (x0, y0) the top-left corner.
  An object's `coco_class`, when present, names it (COCO's own class names); otherwise its `class`.
* a COCO instances file (`{"images": [...], "annotations": [...], "categories": [...]}`, read with pycocotools):
  boxes `[x, y, width, height]`, categories by name. Crowd regions count as boxes of their class.

Every box is checked against its photo's size (a box outside the photo, or with x1 < x0, is a format error that
names the photo), so a measure never silently clips a wrong annotation.
"""

from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pycocotools.coco import COCO

from data.errors import DatasetFormatError
from data.json_files import is_relative_file, read_json_object

Box = tuple[float, float, float, float]  # (x0, y0, x1, y1) in pixels of the stored photo


@dataclass(frozen=True)
class BoxedObject:
    """One annotated object: its class name and its box in pixels."""

    name: str
    box: Box


@dataclass(frozen=True)
class BoxedPhoto:
    """One photo's file (relative to the images folder), its size as (width, height) and its objects."""

    file: str
    size: tuple[int, int]
    objects: tuple[BoxedObject, ...]

    def boxes_of(self, names: set[str] | frozenset[str]) -> list[Box]:
        """The boxes of every object whose class is one of `names`."""
        return [obj.box for obj in self.objects if obj.name in names]

    @property
    def classes(self) -> set[str]:
        """The classes with at least one box in the photo."""
        return {obj.name for obj in self.objects}


def read_boxes(path: str | Path) -> list[BoxedPhoto]:
    """The photos and their boxes in `path`, in the file's order; either layout of the module docstring.

    Raises:
        FileNotFoundError: no such file.
        DatasetFormatError: the file is not JSON, or is neither layout, or an entry is malformed (the message
            names the file and the entry).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"boxes file {path} does not exist (a JSON file: see data.boxes for its layouts)")
    document = read_json_object(path)
    images = document.get("images")
    if isinstance(images, dict):
        return _read_own_layout(path, images)
    if isinstance(images, list) and isinstance(document.get("annotations"), list):
        return _read_coco_instances(path, document)
    raise DatasetFormatError(
        f"{path}: expected either {{'images': {{file: {{'size', 'objects'}}}}}} (the coco-boxes layout) or a COCO "
        "instances file with 'images', 'annotations' and 'categories' lists"
    )


def _checked_box(path: Path, where: str, box: Any, size: tuple[int, int]) -> Box:
    """A box as four floats inside the photo, or DatasetFormatError naming `where`."""
    if not (isinstance(box, list) and len(box) == 4 and all(isinstance(v, (int, float)) for v in box)):
        raise DatasetFormatError(f"{path}: {where} box must be four numbers [x0, y0, x1, y1], got {box!r}")
    x0, y0, x1, y1 = (float(v) for v in box)
    width, height = size
    slack = 1.0  # annotation tools round to the pixel: a box may end one pixel past the photo
    if not (-slack <= x0 <= x1 <= width + slack and -slack <= y0 <= y1 <= height + slack):
        raise DatasetFormatError(
            f"{path}: {where} box {box} is not [x0, y0, x1, y1] inside the {width}x{height} photo"
        )
    return (max(x0, 0.0), max(y0, 0.0), min(x1, float(width)), min(y1, float(height)))


def _checked_size(path: Path, where: str, size: Any) -> tuple[int, int]:
    if not (isinstance(size, list) and len(size) == 2 and all(isinstance(v, int) and v > 0 for v in size)):
        raise DatasetFormatError(f"{path}: {where} size must be [width, height] in pixels, got {size!r}")
    return (size[0], size[1])


def _read_own_layout(path: Path, images: dict[str, Any]) -> list[BoxedPhoto]:
    photos = []
    for file, entry in images.items():
        where = f"images[{file!r}]"
        if not is_relative_file(file):
            raise DatasetFormatError(f"{path}: {where} is not a file name inside the images folder")
        if not isinstance(entry, dict) or not isinstance(entry.get("objects"), list):
            raise DatasetFormatError(f"{path}: {where} must be an object with 'size' and an 'objects' list")
        size = _checked_size(path, where, entry.get("size"))
        objects = []
        for index, obj in enumerate(entry["objects"]):
            name = obj.get("coco_class", obj.get("class")) if isinstance(obj, dict) else None
            if not isinstance(name, str) or not name:
                raise DatasetFormatError(f"{path}: {where}.objects[{index}] has no 'class' name")
            box = _checked_box(path, f"{where}.objects[{index}]", obj.get("box"), size)
            objects.append(BoxedObject(name=name, box=box))
        photos.append(BoxedPhoto(file=file, size=size, objects=tuple(objects)))
    return photos


def _read_coco_instances(path: Path, document: dict[str, Any]) -> list[BoxedPhoto]:
    coco = COCO()
    coco.dataset = document
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # pycocotools prints "creating index..."
            coco.createIndex()
        names = {category["id"]: category["name"] for category in coco.loadCats(coco.getCatIds())}
    except (KeyError, TypeError) as error:
        raise DatasetFormatError(f"{path}: not a COCO instances file ({type(error).__name__}: {error})") from error
    photos = []
    for image_id in coco.getImgIds():
        image = coco.imgs[image_id]
        where = f"image id {image_id}"
        file = image.get("file_name")
        if not isinstance(file, str) or not is_relative_file(file):
            raise DatasetFormatError(f"{path}: {where} has no file_name inside the images folder")
        size = _checked_size(path, where, [image.get("width"), image.get("height")])
        objects = []
        for annotation in coco.imgToAnns.get(image_id, []):
            bbox = annotation.get("bbox")
            if not (isinstance(bbox, list) and len(bbox) == 4 and all(isinstance(v, (int, float)) for v in bbox)):
                raise DatasetFormatError(f"{path}: annotation {annotation.get('id')} bbox must be [x, y, w, h]")
            x, y, w, h = bbox
            name = names.get(annotation.get("category_id"))
            if name is None:
                raise DatasetFormatError(
                    f"{path}: annotation {annotation.get('id')} has category_id {annotation.get('category_id')!r}, "
                    "which no category has"
                )
            box = _checked_box(path, f"annotation {annotation.get('id')}", [x, y, x + w, y + h], size)
            objects.append(BoxedObject(name=name, box=box))
        photos.append(BoxedPhoto(file=file, size=size, objects=tuple(objects)))
    return photos
