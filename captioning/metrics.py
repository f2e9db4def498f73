"""Caption metrics as the COCO caption evaluation (coco-caption / pycocoevalcap) computes them.

`score_captions` returns BLEU-1..4, METEOR, ROUGE-L and CIDEr (pycocoevalcap's `Cider`, i.e. CIDEr-D) on a
0..1 scale (CIDEr is unbounded above; 1.0 is already a good score), scored against *all* references of each
image with one corpus-level call per scorer, so the numbers are comparable with published ones.

coco-caption needs Java twice: Stanford's PTBTokenizer and the METEOR 1.5 jar. Not every machine has
Java, so there are two backends (see `caption_metric_backend`):

* "coco-caption (Java)": pycocoevalcap's PTBTokenizer and Meteor -- the reference numbers.
* the nltk fallback: `tokenize_like_ptb` (pure Python, mimics PTBTokenizer on plain captions) and nltk's
  METEOR with an offline WordNet. nltk scores each image and the corpus METEOR is the *mean over images*
  (Java METEOR instead pools matching statistics over the corpus), and nltk's METEOR has no paraphrase
  table, so the fallback METEOR is close to but not the published METEOR. BLEU, ROUGE-L and CIDEr use
  the same pycocoevalcap scorers on both backends and differ only where the tokenisers do.

The fallback is announced with a `CaptionMetricFallbackWarning`. If the Java backend fails at run time
(e.g. the JVM cannot start), that call is rescored with the fallback and later calls in the process
use the fallback too, so one run never mixes backends; `caption_metric_backend()` then says why.

Which backend a training run scores with is the environment's choice, `$CAPTION_METRICS_BACKEND` ("auto", the
default; "java"; "python"; see `configured_backend`): the Java tools cost about 10 CPU-seconds a scoring (METEOR
loads its paraphrase table at every start), which a quick run whose METEOR nobody reads can skip.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import warnings
from collections.abc import Hashable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Literal

from pycocoevalcap.bleu.bleu import Bleu
from pycocoevalcap.cider.cider import Cider
from pycocoevalcap.meteor.meteor import Meteor
from pycocoevalcap.rouge.rouge import Rouge
from pycocoevalcap.tokenizer.ptbtokenizer import PUNCTUATIONS, PTBTokenizer

from core.training.wordnet import ensure_wordnet
from data.vocabulary import tokenize

METRIC_NAMES: tuple[str, ...] = ("BLEU-1", "BLEU-2", "BLEU-3", "BLEU-4", "METEOR", "ROUGE-L", "CIDEr")

#: Articles and determiners ("a dog is near the" stopped mid-phrase), and with the possessives the words that open a
#: noun phrase ("a", "the", "its"): `DETERMINERS`.
ARTICLES: frozenset[str] = frozenset("a an the this that these those some each every".split())
DETERMINERS: frozenset[str] = ARTICLES | frozenset("his her its their".split())

#: English closed-class words a finished caption does not end on: articles and determiners, prepositions,
#: conjunctions ("a dog is in the", "a man on a bike and"). A caption that ends on one stopped mid-phrase.
CLOSED_CLASS_WORDS: frozenset[str] = ARTICLES | frozenset(
    # prepositions
    "about above across after against along among around at before behind below beneath beside between "
    "beyond by down during for from in inside into near of off on onto out outside over past through "
    "throughout to toward towards under underneath up upon with within without".split()
    # conjunctions
    + "and or but nor so yet because while as if than".split()
)


#: The adjectives captions use most (colours, sizes, ages, textures: those of Flickr8k's captions). Right after a
#: determiner or another of them, one cannot end a caption: "wearing a pink", "a little black" lack their noun.
#: After a verb it may: "the dog is black".
MODIFIERS: frozenset[str] = frozenset(
    "black white brown red blue green yellow pink purple orange gray grey tan dark light blond blonde golden silver "
    "small large big little tiny tall short long young old older wet muddy snowy grassy sandy rocky dirty colorful "
    "colourful striped spotted fluffy furry shaggy".split()
)


def ends_mid_phrase(words: Sequence[str]) -> bool:
    """Whether a caption stops before its phrase is done: on a closed-class word ("a dog is in the"), or on a
    modifier that follows a determiner or another modifier ("a girl in a pink")."""
    if not words:
        return False
    if words[-1] in CLOSED_CLASS_WORDS:
        return True
    return words[-1] in MODIFIERS and len(words) > 1 and words[-2] in DETERMINERS | MODIFIERS


def caption_flaws(captions: Sequence[str]) -> dict[str, float]:
    """Two flaws of generated captions that the n-gram metrics barely punish, each as a share of `captions`:

    * "ended_mid_phrase": the caption stops before its phrase is done (`ends_mid_phrase`): "a black dog is in the",
      "a girl in a pink";
    * "repeated_trigram": some three consecutive words occur twice: "in front of a building in front of a".

    Words are `data.vocabulary.tokenize`'s; an empty caption has neither flaw.
    """
    if not captions:
        raise ValueError("caption_flaws needs at least one caption")
    ended = repeated = 0
    for caption in captions:
        words = tokenize(caption)
        ended += ends_mid_phrase(words)
        trigrams = list(zip(words, words[1:], words[2:]))
        repeated += len(set(trigrams)) < len(trigrams)
    return {"ended_mid_phrase": ended / len(captions), "repeated_trigram": repeated / len(captions)}
JAVA_BACKEND = "coco-caption (Java)"
NO_JAVA_BACKEND = "nltk METEOR fallback (no Java found)"
# A METEOR subprocess that has not answered after this long is killed (and the nltk fallback used), so a
# hung JVM cannot hang training. COCO's 5000-image test split takes well under a minute.
METEOR_TIMEOUT_S = 600.0

Backend = Literal["auto", "java", "python"]
BACKENDS: tuple[Backend, ...] = ("auto", "java", "python")
BACKEND_VARIABLE = "CAPTION_METRICS_BACKEND"

# Why the Java backend failed earlier in this process, if it did; from then on "auto" uses the fallback.
_java_failure: str | None = None


class CaptionMetricFallbackWarning(UserWarning):
    """Scores were computed with the nltk fallback, not coco-caption's Java tools."""


def caption_metric_backend() -> str:
    """Which tokeniser/METEOR `score_captions(..., backend="auto")` uses now, as a human-readable string.

    `JAVA_BACKEND` when `java` is on PATH and has not failed in this process, otherwise a string starting
    with "nltk METEOR fallback" that gives the reason. Log it next to the scores.
    """
    if shutil.which("java") is None:
        return NO_JAVA_BACKEND
    if _java_failure is not None:
        return f"nltk METEOR fallback (Java failed: {_java_failure})"
    return JAVA_BACKEND


def configured_backend() -> Backend:
    """The backend `score_captions` uses when its caller names none (a training run's validation and test):
    `$CAPTION_METRICS_BACKEND` when set, else "auto". "python" scores without starting Java (about 10 CPU-seconds a
    scoring, mostly METEOR's start), for quick runs; the test suite sets it, and its tests of the Java tools name
    them. ValueError, naming the variable, for any other value."""
    value = os.environ.get(BACKEND_VARIABLE, "auto")
    if value not in BACKENDS:
        raise ValueError(f"{BACKEND_VARIABLE}={value!r}: set it to one of {', '.join(BACKENDS)}, or unset it")
    return value  # type: ignore[return-value]


def score_captions(
    references: Mapping[Hashable, Sequence[str]],
    candidates: Mapping[Hashable, str],
    *,
    backend: Backend | None = None,
) -> dict[str, float]:
    """Score one candidate caption per image against that image's references.

    Args:
        references: image id -> one or more reference captions (raw text; tokenised here).
        candidates: image id -> the generated caption; must have exactly the ids of `references`.
            An empty caption is allowed and simply scores low.
        backend: "auto" (Java if available, else the nltk fallback with a warning), "java" (raise
            instead of falling back) or "python" (the fallback, without a warning); None: `configured_backend()`.

    Returns:
        {name: score} for every name in `METRIC_NAMES`, in that order.
    """
    global _java_failure
    _validate(references, candidates)
    refs = {image: list(captions) for image, captions in references.items()}
    cands = {image: candidates[image] for image in refs}

    backend = configured_backend() if backend is None else backend
    if backend not in BACKENDS:
        raise ValueError(f"backend must be 'auto', 'java' or 'python', got {backend!r}")
    if backend == "java" and shutil.which("java") is None:
        raise RuntimeError("backend='java' was requested but no `java` executable is on PATH")
    chosen = caption_metric_backend() if backend == "auto" else backend
    if chosen in (JAVA_BACKEND, "java"):
        try:
            return _score_with_java(refs, cands)
        except (OSError, ValueError, RuntimeError, subprocess.SubprocessError) as error:
            if backend == "java":
                raise RuntimeError(f"coco-caption's Java tools failed: {error!r}") from error
            _java_failure = f"{type(error).__name__}: {error}"[:200]
            chosen = caption_metric_backend()
    if backend == "auto":
        warnings.warn(
            f"caption metrics use the {chosen}: METEOR (and, rarely, tokenisation) differ from coco-caption's; "
            "install Java for comparable numbers",
            CaptionMetricFallbackWarning,
            stacklevel=2,
        )
    return _score_with_python(refs, cands)


def _validate(references: Mapping[Hashable, Sequence[str]], candidates: Mapping[Hashable, str]) -> None:
    """Raise a clear error for inputs the scorers would reject with a bare assert, or score wrongly."""
    if len(references) == 0:
        raise ValueError("no images to score: `references` is empty")
    missing = [image for image in references if image not in candidates]
    extra = [image for image in candidates if image not in references]
    if missing or extra:
        raise ValueError(
            "candidates and references must have the same image ids: "
            f"{len(missing)} without a candidate {_few(missing)}, {len(extra)} without references {_few(extra)}"
        )
    for image, captions in references.items():
        if isinstance(captions, str) or not isinstance(captions, Sequence):
            raise TypeError(f"references[{image!r}] must be a sequence of caption strings, got {captions!r}")
        if len(captions) == 0:
            raise ValueError(f"image {image!r} has no reference captions; every image needs at least one")
        for caption in captions:
            if not isinstance(caption, str):
                raise TypeError(f"references[{image!r}] contains a non-string caption {caption!r}")
            if not caption.strip():
                raise ValueError(f"image {image!r} has an empty reference caption")
    for image, caption in candidates.items():
        if not isinstance(caption, str):
            raise TypeError(f"candidates[{image!r}] must be a string, got {type(caption).__name__}")


def _few(ids: list[Hashable], shown: int = 5) -> str:
    """A short, sorted preview of image ids for error messages."""
    head = sorted(ids, key=str)[:shown]
    return "[" + ", ".join(repr(i) for i in head) + (", ...]" if len(ids) > shown else "]")


def _score_ngram_metrics(gts: dict[Hashable, list[str]], res: dict[Hashable, list[str]]) -> dict[str, float]:
    """BLEU-1..4, ROUGE-L and CIDEr-D on tokenised captions, one corpus-level pycocoevalcap call each."""
    bleu, _ = Bleu(4).compute_score(gts, res, verbose=0)
    rouge, _ = Rouge().compute_score(gts, res)
    cider, _ = Cider().compute_score(gts, res)
    scores = {f"BLEU-{n}": float(value) for n, value in enumerate(bleu, start=1)}
    scores["ROUGE-L"] = float(rouge)
    scores["CIDEr"] = float(cider)
    return scores


def _ordered(scores: dict[str, float]) -> dict[str, float]:
    return {name: scores[name] for name in METRIC_NAMES}


# --- coco-caption (Java) backend -------------------------------------------------------------------------


def _score_with_java(refs: dict[Hashable, list[str]], cands: dict[Hashable, str]) -> dict[str, float]:
    gts, res = _ptb_tokenize(refs, cands)
    scores = _score_ngram_metrics(gts, res)
    scores["METEOR"] = _java_meteor(gts, res)
    return _ordered(scores)


def _one_line(caption: str) -> str:
    """Collapse all whitespace to single spaces.

    PTBTokenizer runs with -preserveLines and pairs output lines with captions by position; pycocoevalcap
    only replaces "\\n", so a caption containing "\\r", "\\f", "\\x85" or "\\u2028" would silently shift
    every later caption onto the wrong image.
    """
    return " ".join(caption.split())


def _ptb_tokenize(
    refs: dict[Hashable, list[str]], cands: dict[Hashable, str]
) -> tuple[dict[Hashable, list[str]], dict[Hashable, list[str]]]:
    """PTB-tokenise references and candidates with one Java start (tokenisation is per line anyway)."""
    batch: dict[tuple[str, Hashable], list[dict[str, str]]] = {}
    for image, captions in refs.items():
        batch[("ref", image)] = [{"caption": _one_line(c)} for c in captions]
    for image, caption in cands.items():
        batch[("cand", image)] = [{"caption": _one_line(caption)}]
    with without_tokenizer_chatter():
        tokenised = PTBTokenizer().tokenize(batch)
    for key, captions in batch.items():
        if len(tokenised.get(key, ())) != len(captions):
            raise RuntimeError(f"PTBTokenizer returned {len(tokenised.get(key, ()))} lines for {len(captions)} captions")
    gts = {image: tokenised[("ref", image)] for image in refs}
    res = {image: tokenised[("cand", image)] for image in refs}
    return gts, res


#: What Stanford's PTBTokenizer writes to stderr at every call, in the middle of a run's progress bar.
TOKENIZER_CHATTER = re.compile(r"PTBTokenizer tokenized \d+ tokens at [\d.]+ tokens per second\.\s*")


@contextmanager
def without_tokenizer_chatter() -> Iterator[None]:
    """Run the block with the process's stderr (file descriptor 2, which the Java child inherits) caught in a
    temporary file, then pass on everything written there but the tokenizer's count of tokens: its errors still show."""
    sys.stderr.flush()
    with tempfile.TemporaryFile() as caught:
        saved = os.dup(2)
        os.dup2(caught.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            caught.seek(0)
            written = caught.read().decode(errors="replace")
            if rest := TOKENIZER_CHATTER.sub("", written):
                sys.stderr.write(rest)


def _java_meteor(gts: dict[Hashable, list[str]], res: dict[Hashable, list[str]]) -> float:
    """Corpus METEOR 1.5 from pycocoevalcap's jar; the JVM is always shut down before returning."""
    meteor = Meteor()
    watchdog = threading.Timer(METEOR_TIMEOUT_S, meteor.meteor_p.kill)
    watchdog.daemon = True
    watchdog.start()
    try:
        score, _ = meteor.compute_score(gts, res)
    finally:
        watchdog.cancel()
        close_meteor(meteor)
    score = float(score)
    if not math.isfinite(score) or not 0.0 <= score <= 1.0:
        raise ValueError(f"METEOR jar returned an invalid score {score}")
    return score


def close_meteor(meteor: Meteor) -> None:
    """Stop the METEOR JVM and leave the object safe to garbage-collect.

    pycocoevalcap 1.2 only stops the JVM in `Meteor.__del__`, which first acquires `meteor.lock`; when
    `compute_score` raises (e.g. the JVM died) that lock is never released, so `__del__` would block
    forever. Here the JVM gets EOF on stdin (it exits cleanly), is killed if it lingers, and the lock is
    freed, after which `__del__` is a harmless no-op.
    """
    process = meteor.meteor_p
    try:
        process.stdin.close()
    except OSError:
        pass
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    for stream in (process.stdout, process.stderr):
        if stream is not None:
            stream.close()
    if meteor.lock.locked():
        meteor.lock.release()


# --- pure-Python (nltk) fallback -------------------------------------------------------------------------

# Tokens PTBTokenizer's output loses in coco-caption (its own list: quotes, . ? ! , : ; - -- ...). Note
# that "-lrb-" etc. survive: coco-caption lowercases before comparing against "-LRB-".
_REMOVED = frozenset(PUNCTUATIONS) | {'"'}
_BRACKETS = {"(": "-lrb-", ")": "-rrb-", "[": "-lsb-", "]": "-rsb-", "{": "-lcb-", "}": "-rcb-"}
_UNICODE_PUNCTUATION = {"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u2026": " ... "}
# Words PTB splits in two, and clitics it splits off the end of a word ("can't" -> "ca n't").
_SPLIT_WORDS = {
    "cannot": ("can", "not"),
    "gonna": ("gon", "na"),
    "wanna": ("wan", "na"),
    "gotta": ("got", "ta"),
    "lemme": ("lem", "me"),
    "gimme": ("gim", "me"),
}
_CLITICS = ("n't", "'s", "'m", "'re", "'ve", "'ll", "'d")
_APOSTROPHE_WORDS = frozenset(_CLITICS) | {"'em", "'n'"}
# Words whose final period PTB keeps ("mr.", "etc."); also kept: initials ("a.") and "u.s."-style words.
_ABBREVIATIONS = frozenset(
    "mr mrs ms dr st jr sr prof etc vs inc ltd co corp mt ave blvd rd jan feb mar apr jun jul aug sep sept oct nov dec".split()
)
_SEPARATE = re.compile(r"([()\[\]{}\"+#%$])")
_SEPARATE_UNLESS_BETWEEN_DIGITS = re.compile(r"(?<!\d)[,:;]|[,:;](?!\d)")
_TRAILING_MARKS = re.compile(r"[.?!]+$")


def tokenize_like_ptb(caption: str) -> str:
    """Tokenise a caption the way coco-caption does (PTBTokenizer -lowerCase, then punctuation removed).

    A pure-Python approximation for machines without Java, exact on ordinary captions (checked against
    the real tokenizer in the tests): lowercases; splits off punctuation and drops what coco-caption drops;
    brackets become "-lrb-" etc.; clitics split as in "ca n't", "dog 's", "gon na". Rare constructions
    (e.g. "y'all", "a...b", HTML entities) can differ.
    """
    text = caption.lower()
    for mark, replacement in _UNICODE_PUNCTUATION.items():
        text = text.replace(mark, replacement)
    text = re.sub(r"--+", " -- ", text)
    text = re.sub(r"\.\.\.+", " ... ", text)
    text = _SEPARATE.sub(r" \1 ", text)
    text = _SEPARATE_UNLESS_BETWEEN_DIGITS.sub(lambda m: f" {m.group()} ", text)
    tokens = [token for word in text.split() for token in _split_word(word)]
    tokens = [_BRACKETS.get(token, token) for token in tokens]
    return " ".join(token for token in tokens if token and token not in _REMOVED)


def _split_word(word: str) -> list[str]:
    """PTB's treatment of one whitespace-free word: quotes, hyphens, final marks, clitics."""
    if word in _APOSTROPHE_WORDS or word in _REMOVED:
        return [word]
    trailing: list[str] = []
    while True:  # peel quotes, dangling hyphens and sentence marks off the end, innermost last
        stripped = word.rstrip("'`-")
        if stripped != word:
            word = stripped
            continue
        marks = _TRAILING_MARKS.search(word)
        if marks and not (marks.group() == "." and _keeps_period(word)):
            trailing.insert(0, marks.group())
            word = word[: marks.start()]
            continue
        break
    word = word.lstrip("'`")
    if word[1:2].isalpha():
        word = word.lstrip("-")
    return [*_split_clitics(word), *trailing]


def _keeps_period(word: str) -> bool:
    """Whether PTB keeps a word's final period as part of it (abbreviations, initials, "u.s.")."""
    stem = word[:-1]
    return "." in stem or stem in _ABBREVIATIONS or (len(stem) == 1 and stem.isalpha())


def _split_clitics(word: str) -> list[str]:
    if word in _SPLIT_WORDS:
        return list(_SPLIT_WORDS[word])
    for clitic in _CLITICS:
        if word.endswith(clitic) and len(word) > len(clitic):
            return [*_split_clitics(word[: -len(clitic)]), clitic]
    return [word]


def _score_with_python(refs: dict[Hashable, list[str]], cands: dict[Hashable, str]) -> dict[str, float]:
    gts = {image: [tokenize_like_ptb(c) for c in captions] for image, captions in refs.items()}
    res = {image: [tokenize_like_ptb(cands[image])] for image in refs}
    scores = _score_ngram_metrics(gts, res)
    scores["METEOR"] = _nltk_meteor(gts, res)
    return _ordered(scores)


def _nltk_meteor(gts: dict[Hashable, list[str]], res: dict[Hashable, list[str]]) -> float:
    """nltk METEOR per image (best over its references), averaged over images."""
    ensure_wordnet()
    from nltk.translate.meteor_score import meteor_score

    per_image = [meteor_score([r.split() for r in gts[image]], res[image][0].split()) for image in gts]
    return float(sum(per_image) / len(per_image))
