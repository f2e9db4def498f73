"""Captions from a Karpathy split file (`dataset_flickr8k.json`, `dataset_flickr30k.json`, `dataset_coco.json`).

These files fix the train/val/test split that captioning papers report on. Their "restval" images (COCO
only) are extra training images, so they are folded into "train".
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PIL import Image

from data.captions import CaptionDataset, CaptionSample
from data.errors import DatasetFormatError
from data.images import load_image
from data.json_files import is_relative_file, read_json_object

_SPLIT_OF = {"train": "train", "restval": "train", "val": "val", "test": "test"}


class KarpathyCaptions(CaptionDataset):
    """A Karpathy split file and the images it names.

    The file is parsed here (Flickr8k's is small, COCO's takes a few seconds); image files are only
    opened by `load`, so a missing image fails when it is loaded, naming the file.

    Args:
        root: the dataset folder.
        annotations: the split file, relative to `root`.
        image_dir: the image folder, relative to `root`; an entry's image is
            `root/image_dir/[filepath/]filename` (COCO entries have a `filepath` such as "val2014").
    """

    def __init__(self, *, root: Path, annotations: str = "dataset_flickr8k.json", image_dir: str = "images") -> None:
        self._root = Path(root)
        self._annotations = self._root / annotations
        self._image_dir = self._root / image_dir
        document = _read_json(self._annotations)
        self._name = _dataset_name(document, self._annotations)
        self._samples = self._parse(document)

    @property
    def name(self) -> str:
        return self._name

    @property
    def splits(self) -> tuple[str, ...]:
        return ("train", "val", "test")

    def samples(self, split: str) -> list[CaptionSample]:
        self._check_split(split)
        return list(self._samples[split])

    def load(self, sample: CaptionSample) -> Image.Image:
        if sample.path is None:
            raise ValueError(f"sample {sample.image_id!r} has no image path; it did not come from {self._annotations}")
        return load_image(sample.path)

    def _parse(self, document: dict[str, Any]) -> dict[str, list[CaptionSample]]:
        """Turn the file's "images" list into samples per split, in file order."""
        entries = document.get("images")
        if not isinstance(entries, list):
            raise self._error("has no 'images' list at the top level; is this a Karpathy split file?")
        samples: dict[str, list[CaptionSample]] = {split: [] for split in self.splits}
        seen: dict[str, int] = {}
        for number, entry in enumerate(entries):
            where = f"images[{number}]"
            if not isinstance(entry, dict):
                raise self._error(f"{where} is a {type(entry).__name__}, not an object")
            filename = self._file_name(entry, where, "filename")
            split = self._field(entry, where, "split", str)
            if split not in _SPLIT_OF:
                raise self._error(f"{where} has split {split!r}; expected one of {', '.join(_SPLIT_OF)}")
            image_id = self._image_id(entry, where, filename)
            if image_id in seen:
                raise self._error(f"{where} has the same image id {image_id!r} as images[{seen[image_id]}]")
            seen[image_id] = number
            subdir = self._file_name(entry, where, "filepath") if "filepath" in entry else ""
            path = self._image_dir / subdir / filename
            captions = self._captions(entry, where)
            samples[_SPLIT_OF[split]].append(CaptionSample(image_id=image_id, captions=captions, path=path))
        return samples

    def _captions(self, entry: dict[str, Any], where: str) -> tuple[str, ...]:
        """The raw captions of one entry, or its joined tokens where a sentence has no raw text."""
        sentences = self._field(entry, where, "sentences", list)
        captions = []
        for number, sentence in enumerate(sentences):
            at = f"{where}.sentences[{number}]"
            if not isinstance(sentence, dict):
                raise self._error(f"{at} is a {type(sentence).__name__}, not an object")
            if isinstance(sentence.get("raw"), str):
                captions.append(sentence["raw"])
            elif isinstance(sentence.get("tokens"), list) and all(isinstance(t, str) for t in sentence["tokens"]):
                captions.append(" ".join(sentence["tokens"]))
            else:
                raise self._error(f"{at} has neither a 'raw' string nor a 'tokens' list of strings")
        return tuple(captions)

    def _field(self, entry: dict[str, Any], where: str, key: str, kind: type) -> Any:
        if key not in entry:
            raise self._error(f"{where} has no {key!r}")
        if not isinstance(entry[key], kind):
            raise self._error(f"{where}.{key} is a {type(entry[key]).__name__}, expected a {kind.__name__}")
        return entry[key]

    def _file_name(self, entry: dict[str, Any], where: str, key: str) -> str:
        """A file name ("filename") or sub-folder ("filepath", may be empty) inside the image folder."""
        name = self._field(entry, where, key, str)
        if not is_relative_file(name) and not (key == "filepath" and name == ""):
            raise self._error(f"{where}.{key} is {name!r}, not a file name inside the image folder")
        return name

    def _image_id(self, entry: dict[str, Any], where: str, filename: str) -> str:
        """COCO's id where the entry has one (it matches the COCO annotations), else the file's own id, else the
        file name."""
        for key in ("cocoid", "imgid"):
            value = entry.get(key)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, (int, str)) or value == "":
                raise self._error(f"{where}.{key} is {value!r}; expected an integer or a non-empty string")
            return str(value)
        return filename

    def _error(self, problem: str) -> DatasetFormatError:
        return DatasetFormatError(f"{self._annotations}: {problem}")


def _read_json(path: Path) -> dict[str, Any]:
    """Parse the split file, turning a missing or unparsable file into an error that says what to do."""
    if not path.is_file():
        raise FileNotFoundError(
            f"Karpathy split file not found: {path}; pass the dataset folder with --data.dataset.init_args.root "
            "(and the file name with --data.dataset.init_args.annotations if it is not the default)"
        )
    return read_json_object(path)


def _dataset_name(document: dict[str, Any], path: Path) -> str:
    """The file's "dataset" field ("flickr8k", "coco", ...), or the file name without its extension."""
    name = document.get("dataset")
    return name if isinstance(name, str) and name else path.stem
