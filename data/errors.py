"""Errors shared by the dataset readers.

A malformed annotation file is a data problem, not a bug: readers raise `DatasetFormatError` with a message
that names the file and the offending entry, so the user can fix or re-download the file.
"""

from __future__ import annotations


class DatasetFormatError(ValueError):
    """An annotation file exists but is not in the format its reader expects.

    The message names the file and what is wrong with it (for example "images[12] has no 'sentences'").
    """
