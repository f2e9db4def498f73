"""Caption metrics: agreement with pycocoevalcap, hand-checked values, input checks, the no-Java fallback,
and the offline WordNet install it relies on."""

from __future__ import annotations

import math
import shutil
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from pycocoevalcap.bleu.bleu import Bleu
from pycocoevalcap.cider.cider import Cider
from pycocoevalcap.meteor.meteor import Meteor
from pycocoevalcap.rouge.rouge import Rouge
from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer

from captioning import metrics
from captioning.metrics import (
    METRIC_NAMES,
    NO_JAVA_BACKEND,
    CaptionMetricFallbackWarning,
    caption_flaws,
    caption_metric_backend,
    ends_mid_phrase,
    score_captions,
    tokenize_like_ptb,
)
from core.training.wordnet import ensure_wordnet, install_wordnet

HAVE_JAVA = shutil.which("java") is not None
needs_java = pytest.mark.skipif(not HAVE_JAVA, reason="coco-caption's tokenizer and METEOR need Java")

REFERENCES = {
    "img1": [
        "A black cat is sitting on a wooden table.",
        "A cat sits on the table next to a cup.",
        "The black cat rests on a kitchen table.",
        "a small cat sitting on top of a table",
    ],
    "img2": [
        "Two dogs are running through the grass.",
        "Two brown dogs play in a green field.",
        "A pair of dogs run across a grassy park.",
    ],
    "img3": [
        "A man riding a wave on top of a surfboard.",
        "A surfer rides a large wave in the ocean.",
        "A person on a surfboard riding a wave.",
        "Man surfing on a big blue wave.",
        "A surfer in a black wetsuit catches a wave.",
    ],
    "img4": [
        "A plate of food with broccoli and rice.",
        "A white plate topped with rice, broccoli and chicken.",
        "Chicken, rice and vegetables on a plate.",
    ],
    "img5": [
        "A red double-decker bus driving down a city street.",
        "A bus is parked on the side of the road.",
        "A large red bus on a busy street.",
    ],
}
CANDIDATES = {
    "img1": "A black cat sitting on a table.",
    "img2": "two dogs running in the grass",
    "img3": "a man riding a surfboard on a wave",
    "img4": "A plate of food with broccoli",
    "img5": "",  # an empty generation must score low, not crash
}


@pytest.fixture(scope="module", autouse=True)
def offline_nltk_data(tmp_path_factory: pytest.TempPathFactory):
    """Point NLTK_DATA at a temporary directory, so the tests never write into the user's home."""
    import nltk

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("NLTK_DATA", str(tmp_path_factory.mktemp("nltk_data")))
        patch.setattr(nltk.data, "path", list(nltk.data.path))
        yield


class _RecordingMeteor(Meteor):
    """The real METEOR jar, remembering what it was asked and what it answered."""

    calls: list[tuple[dict, dict, float]] = []

    def compute_score(self, gts, res):
        score, scores = super().compute_score(gts, res)
        _RecordingMeteor.calls.append((gts, res, score))
        return score, scores


@pytest.fixture(scope="module")
def java_run() -> tuple[dict[str, float], tuple[dict, dict, float], dict, dict]:
    """One score_captions(backend="java") run (one JVM start, the slow part), what it gave METEOR, and the
    fixture tokenised by pycocoevalcap's PTBTokenizer directly."""
    if not HAVE_JAVA:
        pytest.skip("coco-caption's tokenizer and METEOR need Java")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(metrics, "Meteor", _RecordingMeteor)
        _RecordingMeteor.calls.clear()
        ours = score_captions(REFERENCES, CANDIDATES, backend="java")
    (meteor_call,) = _RecordingMeteor.calls
    tokenizer = PTBTokenizer()
    gts = tokenizer.tokenize({i: [{"caption": c} for c in caps] for i, caps in REFERENCES.items()})
    res = tokenizer.tokenize({i: [{"caption": CANDIDATES[i]}] for i in REFERENCES})
    return ours, meteor_call, gts, res


@needs_java
@pytest.mark.slow
def test_java_backend_equals_pycocoevalcap_called_directly(java_run) -> None:
    ours, (meteor_gts, meteor_res, meteor_score), gts, res = java_run
    assert list(ours) == list(METRIC_NAMES)
    # METEOR: the jar saw exactly coco-caption's tokenised corpus, once, and its answer is reported.
    assert meteor_gts == gts and meteor_res == res
    assert ours["METEOR"] == meteor_score
    # The others: pycocoevalcap's scorers called by hand on the same tokenised corpus.
    bleu, _ = Bleu(4).compute_score(gts, res, verbose=0)
    rouge, _ = Rouge().compute_score(gts, res)
    cider, _ = Cider().compute_score(gts, res)
    direct = {**{f"BLEU-{n}": b for n, b in enumerate(bleu, 1)}, "ROUGE-L": rouge, "CIDEr": cider}
    for name, value in direct.items():
        assert ours[name] == pytest.approx(float(value), rel=1e-12, abs=1e-15), name
    assert all(0.0 <= ours[name] <= 1.0 for name in METRIC_NAMES if name != "CIDEr")
    assert 0.0 < ours["METEOR"] < 1.0 and ours["CIDEr"] > 0.0
    assert res["img5"] == [""]  # the empty candidate went through as an empty caption


@pytest.mark.slow
def test_perfect_candidates_score_high() -> None:
    perfect = {image: refs[1] for image, refs in REFERENCES.items()}
    scores = score_captions(REFERENCES, perfect, backend="python")
    assert scores["BLEU-4"] > 0.99
    assert scores["ROUGE-L"] == pytest.approx(1.0)
    assert scores["METEOR"] > 0.9


def test_bleu_1_by_hand() -> None:
    # Clipped unigram precision 2/2; candidate length 2 vs reference 3 -> brevity penalty exp(1 - 3/2).
    scores = score_captions({"x": ["a cat sat"]}, {"x": "a cat"}, backend="python")
    assert scores["BLEU-1"] == pytest.approx(math.exp(1 - 3 / 2), rel=1e-6)


def test_empty_candidates_score_zero_without_crashing() -> None:
    scores = score_captions(REFERENCES, {image: "" for image in REFERENCES}, backend="python")
    assert list(scores) == list(METRIC_NAMES)
    assert all(value == pytest.approx(0.0, abs=1e-6) for value in scores.values())


@pytest.mark.parametrize(
    ("candidates", "message"),
    [
        ({i: "a" for i in list(REFERENCES)[1:]}, r"1 without a candidate \['img1'\], 0 without references"),
        ({**CANDIDATES, "extra": "a"}, r"0 without a candidate \[\], 1 without references \['extra'\]"),
    ],
)
def test_mismatched_ids_raise(candidates: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        score_captions(REFERENCES, candidates)


@pytest.mark.parametrize(
    ("references", "candidates", "error"),
    [
        ({}, {}, ValueError),
        ({"x": []}, {"x": "a"}, ValueError),
        ({"x": ["  "]}, {"x": "a"}, ValueError),
        ({"x": "a cat"}, {"x": "a"}, TypeError),
        ({"x": ["a cat"]}, {"x": None}, TypeError),
    ],
)
def test_invalid_inputs_raise(references: dict, candidates: dict, error: type[Exception]) -> None:
    with pytest.raises(error):
        score_captions(references, candidates)


def test_fallback_without_java(monkeypatch: pytest.MonkeyPatch) -> None:
    from nltk.translate.meteor_score import meteor_score

    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert caption_metric_backend() == NO_JAVA_BACKEND
    with pytest.warns(CaptionMetricFallbackWarning, match="no Java found"):
        scores = score_captions(REFERENCES, CANDIDATES, backend="auto")
    assert list(scores) == list(METRIC_NAMES)
    assert scores == score_captions(REFERENCES, CANDIDATES, backend="python")
    per_image = [
        meteor_score([tokenize_like_ptb(r).split() for r in refs], tokenize_like_ptb(CANDIDATES[image]).split())
        for image, refs in REFERENCES.items()
    ]
    assert 0.0 < scores["METEOR"] <= 1.0
    assert scores["METEOR"] == pytest.approx(sum(per_image) / len(per_image))
    with pytest.raises(RuntimeError, match="no `java`"):
        score_captions(REFERENCES, CANDIDATES, backend="java")


class _CrashingMeteor(Meteor):
    """A Meteor whose 'JVM' exits at once, as java does when it cannot reserve its -Xmx2G heap."""

    created: list[_CrashingMeteor] = []

    def __init__(self) -> None:  # deliberately not calling Meteor.__init__, which would start java
        self.meteor_p = subprocess.Popen(
            [sys.executable, "-c", "raise SystemExit(1)"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.lock = threading.Lock()
        _CrashingMeteor.created.append(self)


@needs_java
def test_java_meteor_crash_falls_back_and_cleans_up(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(metrics, "Meteor", _CrashingMeteor)
    monkeypatch.setattr(metrics, "_java_failure", None)
    with pytest.raises(RuntimeError, match="Java tools failed"):
        score_captions(REFERENCES, CANDIDATES, backend="java")
    with pytest.warns(CaptionMetricFallbackWarning, match="Java failed"):
        scores = score_captions(REFERENCES, CANDIDATES, backend="auto")
    assert scores == score_captions(REFERENCES, CANDIDATES, backend="python")
    assert caption_metric_backend().startswith("nltk METEOR fallback (Java failed:")
    for crashed in _CrashingMeteor.created:
        # Reaped, and the lock compute_score left held is free, so Meteor.__del__ cannot deadlock.
        assert crashed.meteor_p.returncode is not None
        assert not crashed.lock.locked()
    _CrashingMeteor.created.clear()


TOKENIZER_CASES = [
    ("A cat sitting on a mat.", "a cat sitting on a mat"),
    ("I can't believe they're gonna do it, don't you?", "i ca n't believe they 're gon na do it do n't you"),
    ("A dog's ball -- (red) \"big\" ...", "a dog 's ball -lrb- red -rrb- big"),
    ("The man cannot see; he won't go.", "the man can not see he wo n't go"),
    ("It costs $5 and 50% off & more/less", "it costs $ 5 and 50 % off & more/less"),
    ("A black-and-white photo of Mr. Smith in the U.S.", "a black-and-white photo of mr. smith in the u.s."),
    ("the dogs' bowls, 1,000 people at 5:30", "the dogs bowls 1,000 people at 5:30"),
    ("HELLO   World!!", "hello world !!"),
    ("don\u2019t \u201cquoted\u201d \u2018single\u2019", "do n't quoted single"),
    ("couldn't've x,y a - b", "could n't 've x y a b"),
    ("", ""),
]


@pytest.mark.parametrize(("caption", "expected"), TOKENIZER_CASES)
def test_tokenize_like_ptb(caption: str, expected: str) -> None:
    assert tokenize_like_ptb(caption) == expected


@needs_java
def test_tokenize_like_ptb_agrees_with_ptbtokenizer() -> None:
    captions = [c for c, _ in TOKENIZER_CASES] + [c for refs in REFERENCES.values() for c in refs]
    java = PTBTokenizer().tokenize({i: [{"caption": c}] for i, c in enumerate(captions)})
    assert [tokenize_like_ptb(c) for c in captions] == [java[i][0] for i in range(len(captions))]


def _synset_line(wordnet_dir: Path, lemma: str) -> bytes:
    """The data.noun line that index.noun's byte offset for `lemma` points at (wrong if CRLF shifted it)."""
    index = (wordnet_dir / "index.noun").read_bytes()
    entry = next(line for line in index.split(b"\n") if line.startswith(lemma.encode() + b" "))
    offset = entry.split()[-1]
    with open(wordnet_dir / "data.noun", "rb") as data:
        data.seek(int(offset))
        line = data.readline()
    assert line.startswith(offset + b" "), "synset offsets do not match the file's bytes"
    return line


def test_install_wordnet_is_idempotent_and_race_safe(tmp_path: Path) -> None:
    with ThreadPoolExecutor(2) as pool:  # two installers racing for the same directory
        first, second = pool.map(install_wordnet, [tmp_path, tmp_path])
    assert first == second == tmp_path / "corpora" / "wordnet"
    assert [p.name for p in (tmp_path / "corpora").iterdir()] == ["wordnet"]  # no staging leftovers
    assert b"\r\n" not in (first / "data.noun").read_bytes()
    assert b" dog " in _synset_line(first, "dog")
    stamps = {p.name: p.stat().st_mtime_ns for p in first.iterdir()}
    assert install_wordnet(tmp_path) == first
    assert {p.name: p.stat().st_mtime_ns for p in first.iterdir()} == stamps


def test_ensure_wordnet_makes_nltk_wordnet_work() -> None:
    root = ensure_wordnet()
    assert ensure_wordnet() == root
    from nltk.corpus import wordnet

    assert wordnet.synsets("dog")
    assert wordnet.synset("dog.n.01").wup_similarity(wordnet.synset("cat.n.01")) == pytest.approx(0.857, abs=1e-3)


def test_caption_flaws_count_mid_phrase_endings_and_repeated_trigrams() -> None:
    captions = [
        "a black and white dog is in the",  # ends on an article
        "a little girl in a pink hat is in a pink",  # "in a pink" twice; ends on an adjective after "a"
        "a man rides a bike with",  # ends on a preposition
        "in front of a red building in front of a red building",  # "in front of" twice
        "a dog runs through the grass .",  # fine: punctuation is not a word
        "A dog and",  # ends on a conjunction, whatever the case
        "",  # no words: neither flaw
        "the the the",  # one trigram, written once: ends on an article only
    ]
    assert caption_flaws(captions) == {"ended_mid_phrase": 5 / 8, "repeated_trigram": 2 / 8}
    # an adjective may end a caption after a verb, not after a determiner or another adjective
    assert [ends_mid_phrase(c.split()) for c in ("the dog is black", "a dog in its black", "a little black")] == [
        False, True, True
    ]
    assert caption_flaws(["a dog on a dog on a"]) == {"ended_mid_phrase": 1.0, "repeated_trigram": 1.0}
    with pytest.raises(ValueError, match="at least one caption"):
        caption_flaws([])


def test_the_environment_chooses_the_backend_of_a_run_that_names_none(monkeypatch: pytest.MonkeyPatch) -> None:
    """A training run's scores (no backend named) use $CAPTION_METRICS_BACKEND: "python" never starts Java and warns
    of nothing, "java" goes to the Java tools; a value of another kind is refused with the variable named."""
    import warnings

    def no_java(refs: dict, cands: dict) -> dict:
        raise AssertionError("the Java tools were started")

    monkeypatch.setattr(metrics, "_score_with_java", no_java)
    monkeypatch.setenv(metrics.BACKEND_VARIABLE, "python")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert score_captions(REFERENCES, CANDIDATES) == score_captions(REFERENCES, CANDIDATES, backend="python")

    monkeypatch.setattr(metrics, "_score_with_java", lambda refs, cands: {"from": "java"})
    monkeypatch.setattr(shutil, "which", lambda name: "/usr/bin/java")
    monkeypatch.setenv(metrics.BACKEND_VARIABLE, "java")
    assert score_captions(REFERENCES, CANDIDATES) == {"from": "java"}
    monkeypatch.delenv(metrics.BACKEND_VARIABLE)
    assert metrics.configured_backend() == "auto"

    monkeypatch.setenv(metrics.BACKEND_VARIABLE, "jvm")
    with pytest.raises(ValueError, match="CAPTION_METRICS_BACKEND='jvm': set it to one of auto, java, python"):
        score_captions(REFERENCES, CANDIDATES)
    from captioning.cli import main  # the command ends at once, before it trains for an epoch

    with pytest.raises(SystemExit, match="^error: CAPTION_METRICS_BACKEND='jvm': set it to one of"):
        main(["fit", "--config", "configs/captioning/shapes_soft.yaml"])
