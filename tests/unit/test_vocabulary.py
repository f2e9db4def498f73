"""tokenize and Vocabulary: exact tokens, deterministic ids, and encode/decode that undo each other."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from data.vocabulary import Vocabulary, tokenize

SPECIALS = ["<pad>", "<start>", "<end>", "<unk>"]


def test_tokenize_lowercases_and_drops_punctuation():
    assert tokenize("A man's 2 Dogs, running!  Fast-ish.") == ["a", "man", "s", "2", "dogs", "running", "fast", "ish"]


def test_tokenize_drops_non_ascii_letters():
    assert tokenize("Café <end> naïve") == ["caf", "end", "na", "ve"]
    assert tokenize("  ... ") == []


@given(st.text())
def test_tokenize_gives_only_lowercase_ascii_words(text):
    words = tokenize(text)
    assert all(word and all(c in "abcdefghijklmnopqrstuvwxyz0123456789" for c in word) for word in words)
    assert tokenize(" ".join(words)) == words


def test_build_orders_by_count_then_alphabetically():
    vocabulary = Vocabulary.build(["b a a", "c b a", "d e"])
    assert vocabulary.tokens == [*SPECIALS, "a", "b", "c", "d", "e"]
    assert [vocabulary.index(word) for word in "abcde"] == [4, 5, 6, 7, 8]


def test_build_does_not_depend_on_text_order():
    texts = ["the dog runs", "a dog sits", "the cat", "cat and dog"]
    assert Vocabulary.build(texts) == Vocabulary.build(list(reversed(texts)))


def test_build_min_count():
    vocabulary = Vocabulary.build(["b a a", "c b a", "d"], min_count=2)
    assert vocabulary.tokens == [*SPECIALS, "a", "b"]
    with pytest.raises(ValueError, match="min_count"):
        Vocabulary.build(["a"], min_count=0)


def test_special_ids():
    vocabulary = Vocabulary.build(["x"])
    assert (vocabulary.pad_id, vocabulary.start_id, vocabulary.end_id, vocabulary.unk_id) == (0, 1, 2, 3)
    assert [vocabulary.index(token) for token in SPECIALS] == [0, 1, 2, 3]
    assert (Vocabulary.PAD, Vocabulary.START, Vocabulary.END, Vocabulary.UNK) == tuple(SPECIALS)
    assert len(vocabulary) == 5


def test_contains_and_unknown_words():
    vocabulary = Vocabulary.build(["a dog"])
    assert "dog" in vocabulary and "<unk>" in vocabulary
    assert "cat" not in vocabulary
    assert vocabulary.index("cat") == 3


def test_encode():
    vocabulary = Vocabulary.build(["a dog runs", "a dog"])  # a=4, dog=5, runs=6
    assert vocabulary.encode("A dog, a CAT runs.") == [1, 4, 5, 4, 3, 6, 2]
    assert vocabulary.encode("") == [1, 2]


def test_encode_max_length_truncates_words_and_keeps_end():
    vocabulary = Vocabulary.build(["a dog runs", "a dog"])
    assert vocabulary.encode("a dog runs", max_length=2) == [1, 4, 5, 2]
    assert vocabulary.encode("a dog runs", max_length=3) == [1, 4, 5, 6, 2]
    assert vocabulary.encode("a dog runs", max_length=10) == [1, 4, 5, 6, 2]
    assert vocabulary.encode("a dog runs", max_length=0) == [1, 2]
    with pytest.raises(ValueError, match="max_length"):
        vocabulary.encode("a", max_length=-1)


def test_decode_skips_start_and_pad_and_stops_at_end():
    vocabulary = Vocabulary.build(["a dog runs", "a dog"])
    ids = [1, 4, 0, 5, 3, 6, 2, 4, 4, 0]
    assert vocabulary.words(ids) == ["a", "dog", "<unk>", "runs"]
    assert vocabulary.decode(ids) == "a dog <unk> runs"
    assert vocabulary.decode([1, 2, 4]) == ""
    assert vocabulary.decode(iter([4, 5])) == "a dog"


def test_decode_rejects_ids_outside_the_vocabulary():
    vocabulary = Vocabulary.build(["a"])
    with pytest.raises(ValueError, match="token id 5 is outside this vocabulary of 5 tokens"):
        vocabulary.decode([4, 5])
    with pytest.raises(ValueError, match="token id -1"):
        vocabulary.decode([-1])


def test_decode_accepts_tensor_ids():
    torch = pytest.importorskip("torch")
    vocabulary = Vocabulary.build(["a dog"])
    assert vocabulary.decode(torch.tensor([1, 4, 5, 2, 0])) == "a dog"


def test_tokens_round_trip_and_are_a_copy():
    vocabulary = Vocabulary.build(["a dog runs"])
    tokens = vocabulary.tokens
    tokens.append("extra")
    assert "extra" not in vocabulary
    assert Vocabulary(vocabulary.tokens) == vocabulary
    assert Vocabulary([*SPECIALS, "dog"]) != Vocabulary([*SPECIALS, "cat"])
    assert Vocabulary([*SPECIALS, "a", "b"]) != Vocabulary([*SPECIALS, "b", "a"])
    assert vocabulary != vocabulary.tokens


@pytest.mark.parametrize(
    ("tokens", "message"),
    [
        (["<start>", "<pad>", "<end>", "<unk>", "a"], "must start with <pad>, <start>, <end>, <unk>"),
        (["<pad>", "<start>", "<end>"], "must start with"),
        ([*SPECIALS, "a", "b", "a"], "'a' appears twice"),
        ([*SPECIALS, "<pad>"], "'<pad>' appears twice"),
        ([*SPECIALS, ""], "non-empty strings"),
    ],
)
def test_constructor_validates_tokens(tokens, message):
    with pytest.raises(ValueError, match=message):
        Vocabulary(tokens)


@given(st.lists(st.sampled_from(["a", "dog", "red", "ball", "2", "zebra"]), max_size=12))
def test_decode_undoes_encode_for_known_words(words):
    vocabulary = Vocabulary.build(["a dog red ball 2 zebra a a dog"])
    text = " ".join(words)
    assert vocabulary.decode(vocabulary.encode(text)) == text
