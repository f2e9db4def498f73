"""Which caption words name which object classes: `ObjectWords`, read from `object_words.json` (COCO's 80 classes).

`python -m captioning.grounding` finds a caption's object words with it, to score their maps and count the classes a
caption names; `captioning.naming` takes each class's own name from it ("dog", "cup") as the word an ImageNet class
is named by.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path

from core.maps.grounding import Mention
from data.errors import DatasetFormatError
from data.json_files import read_json_object

DEFAULT_WORDS = Path(__file__).with_name("object_words.json")


class ObjectWords:
    """The words and phrases that name each object class: {class: [word or phrase, ...]}.

    A phrase may name several classes ("bike": bicycle and motorcycle); a caption is read left to right taking the
    longest phrase that starts at each word, so "hot dog" names a hot dog, not a dog.

    Args:
        classes: the class names of the boxes file (COCO's own for `object_words.json`) and their words.
    """

    def __init__(self, *, classes: Mapping[str, Sequence[str]]) -> None:
        self.phrases: dict[tuple[str, ...], set[str]] = defaultdict(set)
        self.classes = {name: [word.lower() for word in words] for name, words in classes.items()}
        self._names = {name: words[0].lower() for name, words in classes.items() if words}
        for name, words in classes.items():
            for phrase in words:
                tokens = tuple(phrase.lower().split())
                if tokens:
                    self.phrases[tokens].add(name)
        if not self.phrases:
            raise ValueError("the word list names no class: give each class at least one word")
        self.longest = max(len(tokens) for tokens in self.phrases)

    @classmethod
    def read(cls, path: str | Path = DEFAULT_WORDS) -> ObjectWords:
        """The word list of a JSON file `{"classes": {class: [word, ...]}}` (the layout of `object_words.json`).

        Raises:
            FileNotFoundError: no such file.
            DatasetFormatError: it is not that layout (the message names the file and the entry).
        """
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"word list {path} does not exist (a JSON file laid out as {DEFAULT_WORDS.name})")
        classes = read_json_object(path).get("classes")
        if not isinstance(classes, dict) or not classes:
            raise DatasetFormatError(f"{path}: expected {{'classes': {{class name: [word, ...]}}}}")
        for name, words in classes.items():
            if not isinstance(words, list) or not all(isinstance(word, str) for word in words):
                raise DatasetFormatError(f"{path}: classes[{name!r}] must be a list of words, got {words!r}")
        return cls(classes=classes)

    def mentions(self, words: Sequence[str]) -> list[Mention]:
        """The object words of a caption, left to right (the longest phrase first at each word)."""
        words = [word.lower() for word in words]
        found, start = [], 0
        while start < len(words):
            for length in range(min(self.longest, len(words) - start), 0, -1):
                tokens = tuple(words[start : start + length])
                if tokens in self.phrases:
                    found.append(Mention(start + length - 1, " ".join(tokens), frozenset(self.phrases[tokens])))
                    start += length
                    break
            else:
                start += 1
        return found

    @property
    def class_names(self) -> dict[str, str]:
        """Each class's own name, the first word of its list ("dog" for dog: dog, dogs, puppy, ...)."""
        return dict(self._names)
