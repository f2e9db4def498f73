"""Naming what the captions never named: ImageNet classes as words, new decoder rows, constrained beam search."""

import itertools
import json
import math
from dataclasses import dataclass

import pytest
import torch
from torch import Tensor

from captioning.decoder import CaptionDecoder, ShowAttendTell, StepOutput
from captioning.naming import ObjectNaming, anchor_words
from captioning.search import Constraints, beam_search
from captioning.transformer import TransformerDecoder
from core.model.imagenet import ClassWords, imagenet_synsets
from data.vocabulary import Vocabulary

PAD, START, END, UNK = 0, 1, 2, 3


# ----------------------------------------------------------------------------------------------------
# A decoder whose next word depends on the previous word alone, from a table: captions whose probabilities can be
# worked out by hand.


@dataclass
class LastWord:
    words: Tensor  # (N,)

    def select(self, index: Tensor) -> "LastWord":
        return LastWord(self.words[index])

    def repeat(self, times: int) -> "LastWord":
        return LastWord(self.words.repeat_interleave(times, 0))


class BigramDecoder(CaptionDecoder):
    """p(next | previous) = probabilities[previous]; the map is one-hot at the previous word's id (mod L)."""

    def __init__(self, probabilities: Tensor, locations: int = 4) -> None:
        super().__init__()
        self.table = probabilities.log()  # (V, V); a word of probability 0 cannot follow
        self.vocab_size, self.locations = len(probabilities), locations

    def start(self, features: Tensor):
        return None, LastWord(torch.full((len(features),), START))

    def step(self, words: Tensor, state: LastWord, memory, read=None) -> StepOutput:
        weights = torch.nn.functional.one_hot(words % self.locations, self.locations).float()
        return StepOutput(self.table[words], weights, LastWord(words))


def bigram(rows: dict[int, dict[int, float]], vocab: int) -> Tensor:
    """The table of `rows` (previous -> {next: p}); a word without a row is followed by <end>."""
    table = torch.zeros(vocab, vocab)
    table[:, END] = 1.0
    for previous, nexts in rows.items():
        table[previous] = 0.0
        for word, p in nexts.items():
            table[previous, word] = p
    return table


A, DOG, ZEBRA, RUNS, ZEBRAS = 4, 5, 6, 7, 8


def toy_search(decoder, constraints=None, never=None, beam_size=2, max_length=5, batch=1):
    return beam_search(
        decoder, torch.zeros(batch, decoder.locations, 3), start_id=START, end_id=END, max_length=max_length,
        beam_size=beam_size, banned=(PAD, START, UNK), constraints=constraints, never=never,
    )  # fmt: skip


def hand_checked_table() -> Tensor:
    """<start> -> a (1.0); a -> dog 0.7 | zebra 0.3; dog -> runs 0.6 | <end> 0.4; zebra -> <end> 0.5 | runs 0.5;
    runs -> <end> 1.0."""
    return bigram(
        {START: {A: 1.0}, A: {DOG: 0.7, ZEBRA: 0.3}, DOG: {RUNS: 0.6, END: 0.4}, ZEBRA: {END: 0.5, RUNS: 0.5},
         RUNS: {END: 1.0}},
        vocab=9,
    )  # fmt: skip


def test_constrained_beam_search_on_a_hand_checked_case():
    """<start> -> a (1.0); a -> dog 0.7 | zebra 0.3; dog -> runs 0.6 | <end> 0.4; zebra -> <end> 0.5 | runs 0.5;
    runs -> <end> 1.0. Best caption: "a dog runs" (0.42, against "a dog" 0.28 and "a zebra" 0.15); holding "zebra":
    "a zebra" and "a zebra runs" (0.15 each; the first has the fewer words and is found first)."""
    table = hand_checked_table()
    decoder = BigramDecoder(table)
    plain = toy_search(decoder)
    assert plain.tokens == [[A, DOG, RUNS]]
    assert plain.log_probs.item() == pytest.approx(math.log(0.42), abs=1e-5)
    named = toy_search(decoder, Constraints([[(ZEBRA,)]]))
    assert named.tokens[0][:2] == [A, ZEBRA]
    assert named.log_probs.item() == pytest.approx(math.log(0.15), abs=1e-5)
    # the map of each word comes along: the one-hot of the word before it
    assert named.weights[0][1].argmax().item() == A % decoder.locations


def test_a_constraint_is_met_where_it_costs_less_than_its_value():
    """The case above: holding "zebra" costs log(0.42 / 0.15) = 1.03 nats. Worth 1.5 nats it is said; worth 0.5 it
    is not, and the caption is the plain one."""
    table = hand_checked_table()
    decoder = BigramDecoder(table)
    for value, expected in ((1.5, [A, ZEBRA]), (0.5, [A, DOG, RUNS])):
        found = beam_search(
            decoder, torch.zeros(1, 4, 3), start_id=START, end_id=END, max_length=5, beam_size=2,
            banned=(PAD, START, UNK), constraints=Constraints([[(ZEBRA,)]], [[value]]),
        )  # fmt: skip
        assert found.tokens[0][: len(expected)] == expected


def test_a_must_constraint_and_a_gated_one_together():
    """"zebra" must be said; "runs" is worth 0.1 nat: after "a zebra" (0.15), saying "runs" costs nothing more
    ("a zebra runs" is 0.15 too), so it is said; worth 0.1 against "a dog runs" it would not be."""
    table = hand_checked_table()
    found = toy_search(BigramDecoder(table), Constraints([[(ZEBRA,), (RUNS,)]], [[math.inf, 0.1]]))
    assert found.tokens == [[A, ZEBRA, RUNS]]
    with pytest.raises(ValueError, match="1 constraints and 2 values"):
        Constraints([[(ZEBRA,)]], [[1.0, 2.0]])


def test_constrained_beam_search_is_exact_when_the_beam_holds_every_caption():
    """With beams wide enough to keep every hypothesis, the search's caption is the most probable of all captions
    that hold one of each constraint's words: checked against enumerating them all."""
    torch.manual_seed(0)
    vocab, length = 9, 4
    table = torch.softmax(torch.randn(vocab, vocab) * 2, dim=-1)
    table[:, [PAD, START, UNK]] = 0.0  # words a caption never holds (the search's `banned`)
    table = table / table.sum(dim=-1, keepdim=True)
    decoder = BigramDecoder(table)
    constraints = [(ZEBRA, ZEBRAS), (RUNS,)]
    words = [w for w in range(vocab) if w not in (PAD, START, UNK, END)]
    best, best_score = None, -math.inf
    for n in range(1, length + 1):
        for caption in itertools.product(words, repeat=n):
            if not all(set(c) & set(caption) for c in constraints):
                continue
            ids = [START, *caption, END]
            score = sum(table[a, b].log().item() for a, b in zip(ids, ids[1:]))
            if score > best_score:
                best, best_score = list(caption), score
    found = toy_search(decoder, Constraints([constraints]), beam_size=len(words) ** length, max_length=length)
    assert found.tokens == [best]
    assert found.log_probs.item() == pytest.approx(best_score, abs=1e-4)


def test_images_with_fewer_constraints_and_unreachable_ones():
    """Each image of a batch has its own constraints: one with none captions as the plain search does; one whose
    word cannot be reached in max_length words gets the best caption of the constraints it can meet."""
    table = bigram(
        {START: {A: 1.0}, A: {DOG: 0.7, ZEBRA: 0.3}, DOG: {RUNS: 0.6, END: 0.4}, ZEBRA: {END: 0.5, RUNS: 0.5},
         RUNS: {END: 0.9, ZEBRAS: 0.1}, ZEBRAS: {END: 1.0}},
        vocab=9,
    )  # fmt: skip
    decoder = BigramDecoder(table)
    plain = toy_search(decoder, batch=3, max_length=4)
    found = toy_search(
        decoder, Constraints([[], [(ZEBRA,), (RUNS,)], [(ZEBRAS,)]]), batch=3, max_length=4, beam_size=3
    )
    assert found.tokens[0] == plain.tokens[0] == [A, DOG, RUNS]
    assert found.tokens[1] == [A, ZEBRA, RUNS]
    # "zebras" comes fourth at the earliest, and the caption must then end in a fifth step: the best caption
    # that ends within four words, meeting no constraint
    assert found.tokens[2] == [A, DOG, RUNS]


def test_words_never_said():
    table = bigram({START: {A: 1.0}, A: {DOG: 0.7, ZEBRA: 0.3}, DOG: {END: 1.0}, ZEBRA: {END: 1.0}}, vocab=9)
    never = torch.zeros(2, 9, dtype=torch.bool)
    never[1, DOG] = True
    found = toy_search(BigramDecoder(table), never=never, batch=2)
    assert found.tokens == [[A, DOG], [A, ZEBRA]]


def test_too_many_constraints_are_refused():
    with pytest.raises(ValueError, match="at most 3"):
        Constraints([[(4,), (5,), (6,), (7,)]])


# ----------------------------------------------------------------------------------------------------
# New words: rows copied from an anchor.


@pytest.mark.parametrize(
    "make",
    [
        lambda: ShowAttendTell(10, 6, (2, 2), embed_dim=8, decoder_dim=8, attention_dim=8),
        lambda: TransformerDecoder(10, 6, (2, 2), model_dim=8, layers=1, heads=2, feedforward_dim=16),
    ],
)
def test_a_new_word_is_read_and_scored_as_its_anchor(make):
    torch.manual_seed(0)
    decoder = make().eval()
    before = {name: tensor.clone() for name, tensor in decoder.state_dict().items()}
    extended = decoder.with_words(torch.tensor([5, 7]))  # words 10 and 11 borrow the rows of 5 and 7
    assert extended.vocab_size == 12 and decoder.vocab_size == 10
    assert all(torch.equal(before[name], tensor) for name, tensor in decoder.state_dict().items())  # untouched
    features = torch.randn(2, 4, 6)
    with torch.no_grad():
        old = decoder(features, torch.tensor([[START, 5, 4], [START, 7, 4]])).logits
        new = extended(features, torch.tensor([[START, 10, 4], [START, 11, 4]])).logits
    assert new.shape[-1] == 12
    assert torch.allclose(new[..., :10], old, atol=1e-6)  # reading the new word = reading its anchor
    assert torch.allclose(new[..., 10], old[..., 5], atol=1e-6) and torch.allclose(new[..., 11], old[..., 7], atol=1e-6)


def test_anchors_meet_the_new_word_under_its_nearest_hypernym():
    synsets = {synset.lemma_names()[0]: synset for synset in imagenet_synsets()}
    vocabulary = Vocabulary([*Vocabulary.SPECIALS, "man", "dog", "horse", "computer", "ball", "orange"])
    anchors = anchor_words(
        {"zebra": synsets["zebra"], "laptop": synsets["laptop"], "lemon": synsets["lemon"]}, vocabulary, candidates=6
    )
    assert anchors == {"zebra": "horse", "laptop": "computer", "lemon": "orange"}


# ----------------------------------------------------------------------------------------------------
# ImageNet classes as words.


@pytest.fixture(scope="module")
def class_words():
    return ClassWords(preferred=["dog", "cat", "elephant", "banana", "bird"], known=["coffee", "cup", "arm"])


def test_imagenet_classes_map_to_caption_words(class_words):
    words = dict(zip((class_words.class_name(i) for i in range(1000)), class_words.words))
    assert len(class_words.words) == 1000
    assert words["tabby"] == "cat" and words["Egyptian cat"] == "cat"  # two steps up: domestic cat, cat
    assert words["espresso"] == "coffee"  # a known word one step up
    assert words["African elephant"] == "elephant" and words["banana"] == "banana"
    assert words["golden retriever"] == "dog"  # four steps up: retriever, sporting dog, hunting dog, dog
    assert words["ostrich"] == "bird"
    assert words["missile"] != "arm"  # "weapon, arm" is a hypernym, but arm's first sense is the limb
    assert words["snow leopard"] == "leopard"  # no known word near: the last word of its own name


def test_a_words_probability_sums_its_classes(class_words):
    logits = torch.full((1, 1000), -30.0)
    dogs = class_words.classes_of("dog")
    logits[0, dogs[0]] = logits[0, dogs[1]] = 0.0  # two breeds, each half the mass
    tags = class_words.tags(logits, top=2)[0]
    assert tags[0].word == "dog" and tags[0].probability == pytest.approx(1.0, abs=1e-6)
    assert set(tags[0].classes[:2]) == {class_words.class_name(dogs[0]), class_words.class_name(dogs[1])}
    # several views of a photo: a word's probability is its highest in any view
    views = torch.full((1, 2, 1000), -30.0)
    views[0, 0, dogs[0]] = 0.0
    views[0, 1, class_words.classes_of("cat")[0]] = 0.0
    assert {t.word for t in class_words.tags(views, top=2, threshold=0.5)[0]} == {"dog", "cat"}


@pytest.mark.parametrize(
    "options, message",
    [({"threshold": 0}, "threshold"), ({"max_constraints": 4}, "max_constraints"),
     ({"absent_below": 0.5, "threshold": 0.3}, "absent_below")],
)  # fmt: skip
def test_naming_options_out_of_range_are_refused(options, message):
    with pytest.raises(ValueError, match=message):
        ObjectNaming(**options)


# ----------------------------------------------------------------------------------------------------
# Counting the classes captions name.


def _photo(file: str, size: tuple[int, int], *objects: tuple[str, tuple[float, float, float, float]]):
    from data.boxes import BoxedObject, BoxedPhoto

    return BoxedPhoto(file=file, size=size, objects=tuple(BoxedObject(name, box) for name, box in objects))


def test_mention_counts_by_hand():
    from captioning.mentions import count_mentions, novel_classes
    from captioning.object_words import ObjectWords

    words = ObjectWords(
        classes={"dog": ["dog", "dogs"], "zebra": ["zebra"], "bicycle": ["bike"], "motorcycle": ["bike"], "cup": ["cup"]}
    )
    photos = [
        # 100 x 100: the zebra covers 25%, the cup 1% (below the 2% that makes a class present), the bicycle 4%
        _photo(
            "a.jpg", (100, 100), ("zebra", (0, 0, 50, 50)), ("cup", (90, 90, 100, 100)), ("bicycle", (0, 80, 20, 100))
        ),
        _photo("b.jpg", (100, 100), ("dog", (0, 0, 100, 100))),
        _photo("c.jpg", (100, 100), ("dog", (0, 0, 50, 50))),
    ]
    captions = {
        "a.jpg": "a dog and a cup by a bike".split(),  # dog absent: false; cup too small: neither; bike: bicycle right
        "b.jpg": "two dogs".split(),  # right
        # c.jpg: no caption (a skipped photo): left out
    }
    report = count_mentions(photos, captions, words, novel={"zebra"})
    assert report.photos == 2
    counts = {name: (c.right, c.false, c.missed) for name, c in report.classes.items()}
    assert counts == {"dog": (1, 1, 0), "zebra": (0, 0, 1), "bicycle": (1, 0, 0)}
    total = report.summary()
    assert (total["right"], total["false"], total["missed"]) == (2, 1, 1)
    assert total["precision"] == pytest.approx(2 / 3) and total["recall"] == pytest.approx(2 / 3)
    assert total["micro_f1"] == pytest.approx(2 * 2 / (2 * 2 + 1 + 1))
    # class F1 averages classes present in two photos or more: none here; with one: dog's 2/3, zebra's 0, bicycle's 1
    assert math.isnan(total["class_averaged_f1"])
    assert report.averaged_f1(min_present=1) == pytest.approx((2 / 3 + 0 + 1) / 3)
    assert report.summary(report.novel)["recall"] == 0.0
    # a bike with no bicycle or motorcycle in the photo is a false mention of both
    lone = count_mentions([_photo("d.jpg", (10, 10), ("dog", (0, 0, 10, 10)))], {"d.jpg": ["bike"]}, words)
    assert {n: c.false for n, c in lone.classes.items() if c.false} == {"bicycle": 1, "motorcycle": 1}
    # novel classes from training counts, or from a vocabulary without counts
    novel = novel_classes(words, counts={"dog": 50, "zebra": 3, "bicycle": 19})
    assert novel == {"zebra", "bicycle", "motorcycle", "cup"}
    assert novel_classes(words, vocabulary={"dog", "bike", "cup"}) == {"zebra"}


def test_training_counts_reads_a_karpathy_file_and_refuses_another(tmp_path):
    from captioning.mentions import training_counts
    from captioning.object_words import ObjectWords
    from data.errors import DatasetFormatError

    words = ObjectWords(classes={"dog": ["dog", "dogs"], "cat": ["cat"]})
    document = {"images": [
        {"split": "train", "sentences": [{"tokens": ["a", "dog", "and", "dogs"]}, {"raw": "A cat."}]},
        {"split": "test", "sentences": [{"tokens": ["a", "cat"]}]},
    ]}  # fmt: skip
    path = tmp_path / "captions.json"
    path.write_text(json.dumps(document))
    assert training_counts(path, words) == {"dog": 1, "cat": 1}  # a caption once per class; test split left out
    path.write_text(json.dumps({"questions": []}))
    with pytest.raises(DatasetFormatError, match="not a Karpathy caption file"):
        training_counts(path, words)


# ----------------------------------------------------------------------------------------------------
# The bundled model naming objects on real photos.


@pytest.fixture(scope="module")
def captioner():
    from captioning import Captioner

    return Captioner.from_pretrained("flickr8k-soft")


def test_the_bundled_model_names_the_coffee_and_the_cat(captioner):
    from skimage import data
    from PIL import Image

    coffee, cat = (Image.fromarray(picture) for picture in (data.coffee(), data.chelsea()))
    named = captioner.caption([coffee, cat], beam_size=3)
    plain = captioner.caption([coffee, cat], beam_size=3, name_objects=False)
    assert named[0].tags[0].word == "coffee" and named[0].tags[0].probability > 0.5
    assert "espresso" in named[0].tags[0].classes
    # the Flickr8k model can hold "coffee" in no caption that costs it less than naming's value: it is not said
    assert "coffee" not in named[0].words and "coffee" not in plain[0].words
    assert named[1].tags[0].word == "cat" and "cat" in named[1].words and "cat" not in plain[1].words
    assert plain[0].tags is None
    # every word has its map, the new words' included
    assert all(len(c.words) == len(c.attention) for c in named)


def test_a_photo_the_head_is_unsure_of_is_captioned_as_without_naming(captioner):
    from PIL import Image

    grey = Image.new("RGB", (320, 240), (128, 128, 128))
    named = captioner.caption(grey, beam_size=3)
    plain = captioner.caption(grey, beam_size=3, name_objects=False)
    assert named.tags and all(tag.probability < captioner.naming.threshold for tag in named.tags)
    assert named.words == plain.words


def test_a_new_word_is_said_when_the_head_asks_for_it(captioner):
    """A word the captions never had ("zebra" is not in Flickr8k's vocabulary) gets its anchor's rows; with the head
    sure of it, the search must say it, and it gets a map like every other word."""
    from PIL import Image
    from captioning.search import Constraints

    model = captioner.model
    model.set_naming(captioner.naming)
    namer = model.namer
    assert "zebra" not in model.vocabulary and namer.anchors["zebra"] == "horse"
    zebra = namer.vocabulary.index("zebra")
    photo = Image.new("RGB", (224, 224), (90, 140, 60))
    images = model.encoder.transform()(photo)[None]
    with torch.no_grad():
        features = model.features(images)
        found = beam_search(
            namer.decoder, features, start_id=START, end_id=END, max_length=12, beam_size=3,
            banned=(PAD, START, UNK), constraints=Constraints([[(zebra,)]]),
        )  # fmt: skip
    words = namer.vocabulary.words(found.tokens[0])
    assert "zebra" in words and found.weights[0].shape == (len(words), model.encoder.num_locations)


def test_naming_needs_an_imagenet_head():
    from captioning import Captioner

    shapes = Captioner.from_pretrained("shapes-soft")
    assert shapes.naming is None and not shapes.can_name_objects
    from PIL import Image

    with pytest.raises(ValueError, match="no ImageNet head"):
        shapes.caption(Image.new("RGB", (64, 64)), name_objects=True)


def test_a_word_that_meets_no_candidate_borrows_the_most_frequent_object_word():
    """A new word whose hypernyms meet the candidates' only near WordNet's root ("zebra" and "beach" at "object",
    "ball" at "whole"; "running" is no physical thing) falls back to the most frequent candidate that is a physical
    object: "beach", before "ball"."""
    synsets = {synset.lemma_names()[0]: synset for synset in imagenet_synsets()}
    vocabulary = Vocabulary([*Vocabulary.SPECIALS, "running", "beach", "ball"])
    assert anchor_words({"zebra": synsets["zebra"]}, vocabulary, candidates=3) == {"zebra": "beach"}


def test_a_malformed_object_word_list_is_named(tmp_path):
    from captioning import Captioner
    from captioning.naming import Namer
    from data.errors import DatasetFormatError

    words = tmp_path / "words.json"
    words.write_text('{"classes": {"dog": "dog"}}')
    model = Captioner.from_pretrained("flickr8k-soft").model
    with pytest.raises(DatasetFormatError, match="words.json"):
        Namer(
            naming=ObjectNaming(words=words), decoder=model.decoder, vocabulary=model.vocabulary, encoder=model.encoder
        )
