"""Reading a dataset's JSON file with errors that name the file and say what is wrong with it, and checking
the file names such a file holds."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from data.errors import DatasetFormatError


def read_json_object(path: Path) -> dict[str, Any]:
    """The JSON object in `path`; DatasetFormatError for text that is not JSON, not UTF-8 or not an object."""
    try:
        with path.open(encoding="utf-8") as file:
            document = json.load(file)
    except json.JSONDecodeError as error:
        raise DatasetFormatError(
            f"{path}: not valid JSON ({error}); the file may be truncated, download it again"
        ) from error
    except UnicodeDecodeError as error:
        raise DatasetFormatError(f"{path}: not UTF-8 text ({error}); is this the right file?") from error
    except ValueError as error:  # a number Python refuses to read, such as an integer of 5000 digits
        raise DatasetFormatError(f"{path}: not readable JSON ({error})") from error
    except RecursionError as error:
        raise DatasetFormatError(f"{path}: not readable JSON (nested too deeply)") from error
    if not isinstance(document, dict):
        raise DatasetFormatError(f"{path}: the top level is a {type(document).__name__}, expected an object")
    return document


def is_relative_file(name: str) -> bool:
    """Whether a file name from a dataset file names a file inside the folder it is relative to: not empty,
    not absolute, no ".." step, no NUL character (a name that is none of these would make the reader open a
    file elsewhere, or fail later with an error that does not point at the dataset file)."""
    path = Path(name)
    return bool(name) and "\x00" not in name and not path.is_absolute() and not path.anchor and ".." not in path.parts
