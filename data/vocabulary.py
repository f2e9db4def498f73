"""Words to ids and back, for captions and questions.

`tokenize` is the single definition of a "word" in the project; it reproduces the `tokens` lists of the
Karpathy split files, so a vocabulary built from raw captions matches one built from those lists.
The four special tokens always have the same ids, so padding masks and decoding loops can rely on them.
"""

from __future__ import annotations

import operator
import re
from collections import Counter
from collections.abc import Iterable, Sequence

_WORD = re.compile(r"[a-z0-9]+")


def tokenize(text: str) -> list[str]:
    """Lower-case `text` and return its runs of ASCII letters and digits; punctuation is dropped."""
    return _WORD.findall(text.lower())


class Vocabulary:
    """An ordered list of tokens; a token's id is its position.

    Ids 0..3 are always `<pad>`, `<start>`, `<end>`, `<unk>`. Construct from a saved token list with
    `Vocabulary(tokens)`, or count words in texts with `Vocabulary.build`.
    """

    PAD = "<pad>"
    START = "<start>"
    END = "<end>"
    UNK = "<unk>"
    SPECIALS = (PAD, START, END, UNK)

    def __init__(self, tokens: Sequence[str]) -> None:
        """Args:
        tokens: every token in id order, starting with the four specials (as `tokens` returns them).
        """
        tokens = list(tokens)
        if tuple(tokens[: len(self.SPECIALS)]) != self.SPECIALS:
            raise ValueError(
                f"a vocabulary's tokens must start with {', '.join(self.SPECIALS)} (in that order); "
                f"got {tokens[: len(self.SPECIALS)]}"
            )
        for position, token in enumerate(tokens):
            if not isinstance(token, str) or not token:
                raise ValueError(f"vocabulary token {position} is {token!r}; tokens must be non-empty strings")
        ids: dict[str, int] = {}
        for position, token in enumerate(tokens):
            if token in ids:
                raise ValueError(f"vocabulary token {token!r} appears twice (ids {ids[token]} and {position})")
            ids[token] = position
        self._tokens = tokens
        self._ids = ids

    @classmethod
    def build(cls, texts: Iterable[str], *, min_count: int = 1) -> Vocabulary:
        """Count the words of `texts` (see `tokenize`) and keep those seen at least `min_count` times.

        Words are ordered by descending count, ties alphabetically, so the same texts always give the
        same ids whatever order they come in.
        """
        if min_count < 1:
            raise ValueError(f"min_count must be at least 1, got {min_count}")
        counts = Counter(word for text in texts for word in tokenize(text))
        kept = sorted((word for word, count in counts.items() if count >= min_count), key=lambda w: (-counts[w], w))
        return cls([*cls.SPECIALS, *kept])

    @property
    def tokens(self) -> list[str]:
        """All tokens in id order (a copy; pass it to `Vocabulary(...)` to rebuild this vocabulary)."""
        return list(self._tokens)

    @property
    def pad_id(self) -> int:
        return 0

    @property
    def start_id(self) -> int:
        return 1

    @property
    def end_id(self) -> int:
        return 2

    @property
    def unk_id(self) -> int:
        return 3

    def __len__(self) -> int:
        return len(self._tokens)

    def __contains__(self, word: object) -> bool:
        return word in self._ids

    def index(self, word: str) -> int:
        """The id of `word`, or `unk_id` when the vocabulary does not have it."""
        return self._ids.get(word, self.unk_id)

    def encode(self, text: str, *, max_length: int | None = None) -> list[int]:
        """`[start] + ids of the words of text + [end]`, keeping at most `max_length` words when given."""
        words = tokenize(text)
        if max_length is not None:
            if max_length < 0:
                raise ValueError(f"max_length must be at least 0, got {max_length}")
            words = words[:max_length]
        return [self.start_id, *(self.index(word) for word in words), self.end_id]

    def words(self, ids: Iterable[int]) -> list[str]:
        """The words of an id sequence: start and pad ids are skipped, and the first end id stops it."""
        words = []
        for value in ids:
            token_id = operator.index(value)
            if not 0 <= token_id < len(self._tokens):
                raise ValueError(f"token id {token_id} is outside this vocabulary of {len(self._tokens)} tokens")
            if token_id == self.end_id:
                break
            if token_id not in (self.start_id, self.pad_id):
                words.append(self._tokens[token_id])
        return words

    def decode(self, ids: Iterable[int]) -> str:
        """`words(ids)` joined with single spaces."""
        return " ".join(self.words(ids))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Vocabulary):
            return NotImplemented
        return self._tokens == other._tokens

    def __hash__(self) -> int:
        return hash(tuple(self._tokens))

    def __repr__(self) -> str:
        return f"Vocabulary({len(self)} tokens)"
