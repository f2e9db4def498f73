"""Reading a dataset's JSON file with errors that name the file and say what is wrong with it."""

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
    if not isinstance(document, dict):
        raise DatasetFormatError(f"{path}: the top level is a {type(document).__name__}, expected an object")
    return document
