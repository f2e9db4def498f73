"""VQA readers: the VQA v2 layout (fixtures, errors, real DAQUAR), easy-VQA, and ShapesWorld-VQA's answers."""

from __future__ import annotations

import csv
import hashlib
import json
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from jsonargparse import ArgumentParser
from PIL import Image

from data.errors import DatasetFormatError
from data.images import ImageLoadError
from data.shapes import ShapesWorld
from data.shapes_scene import (
    COLOURS,
    HELDOUT_COMBINATIONS,
    RELATIONS,
    SHAPES,
    SIZES,
    Scene,
    ShapeObject,
    relation,
)
from data.shapes_vqa import ANSWERS, FAMILIES, FAMILY_WEIGHTS, ShapesWorldVqa
from data.vqa import VqaDataset, VqaSample
from data.vqa2 import Daquar, Vqa2, Vqa2Questions, Vqa2Split

DAQUAR = Path(__file__).resolve().parents[3] / "shared" / "data" / "daquar"
PATTERN = "img/{split}_{{image_id:04d}}.png"

# -- VQA v2 layout ---------------------------------------------------------------------------------------


def question(question_id: int, image_id: int, text: str) -> dict:
    return {"question_id": question_id, "image_id": image_id, "question": text}


def annotation(question_id: int, image_id: int, answers: list[str], answer_type: str = "other", **extra) -> dict:
    return {
        "question_id": question_id,
        "image_id": image_id,
        "answers": [{"answer": a, "answer_confidence": "yes", "answer_id": k + 1} for k, a in enumerate(answers)],
        "multiple_choice_answer": Counter(answers).most_common(1)[0][0],
        "answer_type": answer_type,
        "question_type": "what is",
        **extra,
    }


def write(path: Path, document) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(document if isinstance(document, str) else json.dumps(document))
    return path


def split_files(split: str, annotated: bool = True) -> Vqa2Split:
    return Vqa2Split(
        questions=f"{split}_questions.json",
        annotations=f"{split}_annotations.json" if annotated else None,
        images=PATTERN.format(split=split),
    )


def tiny_vqa(root: Path) -> Vqa2Questions:
    """train: 3 questions on images 7 and 2; val: 1 question on image 5; test: 1 unannotated question."""
    train_questions = [question(71, 7, "What is it?"), question(20, 2, "How many dogs?"), question(72, 7, "Is it red?")]
    train_annotations = [  # not in question order: the reader joins by question id
        annotation(72, 7, ["yes"] * 8 + ["no"] * 2, "yes/no"),
        annotation(71, 7, ["cat"] * 6 + ["kitten"] * 4),
        annotation(20, 2, ["2"] * 10, "number"),
    ]
    write(root / "train_questions.json", {"questions": train_questions})
    write(root / "train_annotations.json", {"annotations": train_annotations})
    write(root / "val_questions.json", {"questions": [question(50, 5, "Where?")]})
    write(root / "val_annotations.json", {"annotations": [annotation(50, 5, ["park"] * 10)]})
    write(root / "test_questions.json", {"questions": [question(90, 9, "Why?")]})
    for split, image_id, size in (("train", 7, (8, 6)), ("train", 2, (5, 5)), ("val", 5, (4, 4)), ("test", 9, (3, 3))):
        path = root / PATTERN.format(split=split).format(image_id=image_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        Image.new("L", size, 100).save(path)
    splits = {"train": split_files("train"), "val": split_files("val"), "test": split_files("test", annotated=False)}
    return Vqa2Questions(root=root, splits=splits, name="tiny")


def test_vqa2_questions_answers_and_images(tmp_path):
    dataset = tiny_vqa(tmp_path)
    assert isinstance(dataset, VqaDataset) and dataset.name == "tiny"
    assert dataset.splits == ("train", "val", "test")
    train = dataset.questions("train")
    assert [(q.question_id, q.image_id, q.question) for q in train] == [
        (71, "7", "What is it?"),
        (20, "2", "How many dogs?"),
        (72, "7", "Is it red?"),
    ]
    assert train[0].answers == ("cat",) * 6 + ("kitten",) * 4 and train[0].answer == "cat"
    assert (train[1].answer, train[1].answer_type, train[1].question_type) == ("2", "number", "what is")
    assert train[2].answer_type == "yes/no" and train[2].regions == ()
    assert dataset.image_ids("train") == ["7", "2"]  # first-question order, no repeats
    assert dataset.image_ids("val") == ["5"]
    image = dataset.load("7")
    assert image.mode == "RGB" and image.size == (8, 6)
    assert dataset.image_path("2") == tmp_path / "img" / "train_0002.png"
    assert dataset.questions("train") is not dataset.questions("train")  # a fresh list each time


def test_split_without_annotations_has_questions_without_answers(tmp_path):
    dataset = tiny_vqa(tmp_path)
    (test,) = dataset.questions("test")
    assert test == VqaSample(
        question_id=90, image_id="9", question="Why?", answers=(), answer="", answer_type="", question_type=""
    )
    assert dataset.load("9").size == (3, 3)  # an image of a split not read yet is found by reading it


def test_unknown_split_and_image(tmp_path):
    dataset = tiny_vqa(tmp_path)
    with pytest.raises(ValueError, match="known splits: train, val, test"):
        dataset.questions("validation")
    with pytest.raises(ValueError, match="'8' is in none of the splits"):
        dataset.load("8")


def test_missing_and_corrupt_images_name_the_file(tmp_path):
    dataset = tiny_vqa(tmp_path)
    (tmp_path / "img" / "train_0007.png").unlink()
    with pytest.raises(ImageLoadError, match="train_0007.png"):
        dataset.load("7")
    (tmp_path / "img" / "train_0002.png").write_bytes(b"\x89PNG\r\n\x1a\n not really")
    with pytest.raises(ImageLoadError, match="train_0002.png"):
        dataset.load("2")


def test_missing_files_and_bad_arguments(tmp_path):
    with pytest.raises(FileNotFoundError, match="dataset folder not found"):
        Daquar(root=tmp_path / "absent")
    dataset = Daquar(root=tmp_path)  # files are read when a split is first asked for
    with pytest.raises(FileNotFoundError, match="daquar_train_questions.json"):
        dataset.questions("train")
    tiny_vqa(tmp_path)
    (tmp_path / "val_annotations.json").unlink()
    dataset = Vqa2Questions(root=tmp_path, splits={"val": split_files("val")}, name="tiny")
    with pytest.raises(FileNotFoundError, match="val_annotations.json"):
        dataset.questions("val")
    bad_pattern = Vqa2Split(questions="q.json", annotations=None, images="{id}.jpg")
    with pytest.raises(ValueError, match="image_id"):
        Vqa2Questions(root=tmp_path, splits={"train": bad_pattern}, name="x")


def drop(key: str):
    def edit(entries: list[dict]) -> None:
        del entries[0][key]

    return edit


def set_field(key: str, value):
    def edit(entries: list[dict]) -> None:
        entries[0][key] = value

    return edit


@pytest.mark.parametrize(
    "target, edit, message",
    [
        ("questions", drop("question"), r"train_questions.json: questions\[0\] has no 'question'"),
        ("questions", set_field("question_id", "71"), r"questions\[0\].question_id is a str, expected a int"),
        ("questions", set_field("image_id", True), r"questions\[0\].image_id is a bool"),
        ("questions", lambda e: e.append(dict(e[0])), r"questions\[3\] repeats question id 71 of questions\[0\]"),
        ("questions", lambda e: e.append(question(99, 7, "New?")), r"train_annotations.json: has no annotation for"),
        ("questions", lambda e: e.pop(0), r"annotations\[1\] is for a question that .* does not have"),
        ("annotations", drop("multiple_choice_answer"), r"annotations\[0\] has no 'multiple_choice_answer'"),
        ("annotations", set_field("multiple_choice_answer", ["a", "b"]), r"multiple_choice_answer is a list"),
        ("annotations", set_field("answers", ["yes"]), r"annotations\[0\].answers\[0\] is a str, not an object"),
        ("annotations", set_field("image_id", 2), r"annotations\[0\] puts question 72 on image 2"),
        ("annotations", set_field("answer_type", "colour"), r"annotations\[0\]: .*answer type 'colour'"),
        ("annotations", lambda e: e.append(dict(e[0])), r"annotations\[3\] repeats the annotation of question 72"),
    ],
)
def test_malformed_entries_name_file_and_entry(tmp_path, target, edit, message):
    dataset = tiny_vqa(tmp_path)
    path = tmp_path / f"train_{target}.json"
    document = json.loads(path.read_text())
    edit(document[target])
    write(path, document)
    with pytest.raises(DatasetFormatError, match=message):
        dataset.questions("train")


@pytest.mark.parametrize(
    "text, message",
    [
        ('{"questions": [', "not valid JSON"),
        ("[]", "top level is a list"),
        ('{"qs": []}', "has no 'questions' list"),
        ('{"questions": [3]}', r"questions\[0\] is a int, not an object"),
    ],
)
def test_malformed_files(tmp_path, text, message):
    dataset = tiny_vqa(tmp_path)
    write(tmp_path / "train_questions.json", text)
    with pytest.raises(DatasetFormatError, match=rf"train_questions.json: .*{message}"):
        dataset.questions("train")


def test_an_image_id_names_one_file(tmp_path):
    tiny_vqa(tmp_path)
    write(tmp_path / "val_questions.json", {"questions": [question(50, 7, "Where?")]})
    write(tmp_path / "val_annotations.json", {"annotations": [annotation(50, 7, ["park"] * 10)]})
    dataset = Vqa2Questions(root=tmp_path, splits={"train": split_files("train"), "val": split_files("val")}, name="x")
    dataset.questions("train")
    with pytest.raises(DatasetFormatError, match="image 7 is .*val_0007.png here but .*train_0007.png"):
        dataset.questions("val")


def test_defaults_and_yaml_config(tmp_path):
    assert Vqa2(root=tmp_path).splits == ("train", "val", "test")
    assert Vqa2(root=tmp_path, test=None).splits == ("train", "val")
    assert Daquar(root=tmp_path).splits == ("train", "test") and Daquar(root=tmp_path).name == "daquar"
    tiny_vqa(tmp_path)
    parser = ArgumentParser()
    parser.add_subclass_arguments(VqaDataset, "dataset")
    config = parser.parse_string(
        f"""
        dataset:
          class_path: data.vqa2.Vqa2
          init_args:
            root: {tmp_path}
            train:
              questions: train_questions.json
              annotations: train_annotations.json
              images: "{split_files('train').images}"
            val:
              questions: val_questions.json
              annotations: val_annotations.json
              images: "{split_files('val').images}"
            test: null
        """
    )
    dataset = parser.instantiate(config).dataset
    assert isinstance(dataset, Vqa2) and dataset.splits == ("train", "val")
    assert [q.question_id for q in dataset.questions("train")] == [71, 20, 72]


def test_daquar_can_hold_training_photos_out_as_a_validation_split(tmp_path):
    """4 training photos with 2 questions each; holding 1 out moves its 2 questions from train to val."""
    questions = [question(10 * i + k, i, f"what is on the table {k}?") for i in (1, 2, 3, 4) for k in (1, 2)]
    write(tmp_path / "daquar_train_questions.json", {"questions": questions})
    write(
        tmp_path / "daquar_train_annotations.json",
        {"annotations": [annotation(q["question_id"], q["image_id"], ["lamp"] * 10) for q in questions]},
    )
    official = Daquar(root=tmp_path)
    assert official.splits == ("train", "test")
    with pytest.raises(ValueError, match="no split 'val'"):
        official.questions("val")
    held = min("1234", key=lambda i: hashlib.sha256(i.encode()).hexdigest())  # the smallest hash, by hand
    dataset = Daquar(root=tmp_path, val_images=1)
    assert dataset.splits == ("train", "val", "test")
    assert dataset.image_ids("val") == [held]
    assert [q.question_id for q in dataset.questions("val")] == [10 * int(held) + 1, 10 * int(held) + 2]
    assert sorted(dataset.image_ids("train")) == sorted(set("1234") - {held})
    assert len(dataset.questions("train")) == 6  # every question is in exactly one of the two
    with pytest.raises(ValueError, match="val_images=4 would hold out all 4 training photos of daquar"):
        Daquar(root=tmp_path, val_images=4).questions("val")
    with pytest.raises(ValueError, match="val_images is a number of training photos, 0 or more; got -1"):
        Daquar(root=tmp_path, val_images=-1)


def test_daquar_can_keep_only_single_word_answers_as_the_san_paper_does(tmp_path):
    """Lists ("chair, table") leave every split; one-word answers, underscores included, stay; so do the photos."""
    answers = {11: "lamp", 12: "chair, table", 21: "garbage_bin", 22: "2", 31: "pillow, blanket, sofa", 32: "red"}
    for split, ids in (("train", (11, 12, 21, 22)), ("test", (31, 32))):
        items = [question(q, q // 10, f"what is there {q}?") for q in ids]
        write(tmp_path / f"daquar_{split}_questions.json", {"questions": items})
        write(
            tmp_path / f"daquar_{split}_annotations.json",
            {"annotations": [annotation(q, q // 10, [answers[q]] * 10) for q in ids]},
        )
    single = Daquar(root=tmp_path, single_word_answers=True)
    assert [q.question_id for q in single.questions("train")] == [11, 21, 22]
    assert [q.question_id for q in single.questions("test")] == [32]
    assert [q.question_id for q in Daquar(root=tmp_path).questions("train")] == [11, 12, 21, 22]
    held = min("12", key=lambda i: hashlib.sha256(i.encode()).hexdigest())  # the same photo with or without lists
    tuning = Daquar(root=tmp_path, val_images=1, single_word_answers=True)
    assert tuning.image_ids("val") == [held]
    kept = {"1": [11], "2": [21, 22]}
    assert [q.question_id for q in tuning.questions("val")] == kept[held]
    assert [q.question_id for q in tuning.questions("train")] == kept["12".replace(held, "")]


@pytest.mark.skipif(not DAQUAR.is_dir(), reason=f"real DAQUAR not present at {DAQUAR}")
def test_real_daquar():
    dataset = Daquar(root=DAQUAR)
    train, test = dataset.questions("train"), dataset.questions("test")
    assert (len(train), len(test)) == (6795, 5673)
    assert (len(dataset.image_ids("train")), len(dataset.image_ids("test"))) == (794, 653)
    tuning = Daquar(root=DAQUAR, val_images=119)  # the README's held-out photos for choosing settings
    assert (len(tuning.image_ids("train")), len(tuning.image_ids("val"))) == (675, 119)
    assert len(tuning.questions("train")) + len(tuning.questions("val")) == 6795
    assert not set(dataset.image_ids("train")) & set(dataset.image_ids("test"))
    assert {q.answer_type for q in train + test} == {"number", "other"}
    assert all(q.answers == (q.answer,) * 10 for q in train + test)  # one answer, repeated
    assert any(", " in q.answer for q in train)  # multi-object answers are one comma-separated string
    assert len({q.question_id for q in train + test}) == len(train) + len(test)
    image = dataset.load(test[0].image_id)
    manifest = {row["image_id"]: row["stored_size"] for row in csv.DictReader(open(DAQUAR / "images_manifest.csv"))}
    assert image.mode == "RGB" and f"{image.width}x{image.height}" == manifest[str(test[0].image_id)]
    single = Daquar(root=DAQUAR, single_word_answers=True)  # the SAN paper's subset: "90% of the original"
    assert (len(single.questions("train")), len(single.questions("test"))) == (6149, 5076)
    assert len(single.questions("test")) == sum("," not in q.answer for q in test)


# -- easy-VQA --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def easy_vqa():
    pytest.importorskip("easy_vqa", reason="the easy-vqa package is not installed (pip install easy-vqa)")
    from data.easy_vqa import EasyVqa

    return EasyVqa(val_images=400)


def test_easy_vqa(easy_vqa):
    from data.easy_vqa import FAMILIES as EASY_FAMILIES
    from data.easy_vqa import question_family

    assert easy_vqa.name == "easy-vqa" and easy_vqa.splits == ("train", "val", "test")
    train, val, test = (easy_vqa.questions(split) for split in easy_vqa.splits)
    assert (len(train) + len(val), len(test)) == (38575, 9673)
    assert len(easy_vqa.image_ids("val")) == 400 and len(easy_vqa.image_ids("test")) == 1000
    assert not set(easy_vqa.image_ids("train")) & set(easy_vqa.image_ids("val"))
    assert len({q.question_id for q in train + val + test}) == len(train) + len(val) + len(test)
    everything = train + val + test
    assert sum(q.answer_type == "yes/no" for q in everything) == 28407 + 7136  # the package README's counts
    assert {q.answer for q in everything} == {"yes", "no", "circle", "rectangle", "triangle"} | {
        "red", "green", "blue", "black", "gray", "teal", "brown", "yellow"
    }
    assert {q.question_type for q in everything} == set(EASY_FAMILIES)
    for q in everything:
        assert q.answers == (q.answer,) * 10
        assert (q.answer_type == "yes/no") == (q.answer in ("yes", "no"))
        assert (q.question_type in ("what colour", "what shape")) == (q.answer_type == "other")
    assert question_family("is there not a circle in the image?") == "shape absence"
    assert question_family("does the image contain a red shape?") == "colour existence"
    assert question_family("what is the color of the shape?") == "what colour"
    assert question_family("what is the blue shape?") == "what shape"
    image = easy_vqa.load(test[0].image_id)
    assert test[0].image_id.startswith("test-") and image.mode == "RGB" and image.size == (64, 64)
    with pytest.raises(ValueError, match="known splits"):
        easy_vqa.questions("heldout")


# -- ShapesWorld-VQA -------------------------------------------------------------------------------------

_NP = rf"the(?: ({'|'.join(SIZES)}))?(?: ({'|'.join(COLOURS)}))? ({'|'.join(SHAPES)}|object)"
_REL = "|".join(RELATIONS)
_PLURALS = "circles|squares|triangles|crosses|objects"
_GRAMMAR = {
    "existence": re.compile(rf"is there a(?: ({'|'.join(COLOURS)}))? ({'|'.join(SHAPES)}|object)\?"),
    "relation": re.compile(rf"is {_NP} ({_REL}) {_NP}\?"),
    "count": re.compile(rf"how many (?:({'|'.join(COLOURS)}) )?({_PLURALS}) are there\?"),
    "attribute": re.compile(rf"what (size|colour|shape) is {_NP}\?"),
    "two-step": re.compile(rf"what (size|colour|shape) is the object ({_REL}) {_NP}\?"),
}


def matching(scene: Scene, size: str | None, colour: str | None, shape: str | None) -> list[ShapeObject]:
    """The objects with every given attribute ("object" and None mean any shape)."""
    wanted = {"size": size, "colour": colour, "shape": None if shape == "object" else shape}
    return [o for o in scene.objects if all(v is None or getattr(o, a) == v for a, v in wanted.items())]


def the(scene: Scene, size: str | None, colour: str | None, shape: str) -> ShapeObject:
    """The one object a noun phrase names; fails if it names none or several."""
    (obj,) = matching(scene, size, colour, shape)
    return obj


def expected(q: VqaSample, scene: Scene) -> tuple[str, list[ShapeObject]]:
    """The answer and the region objects of a question, worked out from the scene by the spec."""
    match = _GRAMMAR[q.question_type].fullmatch(q.question)
    assert match, q
    g = match.groups()
    if q.question_type == "existence":
        named = matching(scene, None, g[0], g[1])
        return ("yes" if named else "no"), named
    if q.question_type == "relation":
        subject, reference = the(scene, *g[0:3]), the(scene, *g[4:7])
        assert subject is not reference
        return ("yes" if relation(subject, reference) == g[3] else "no"), [reference, subject]
    if q.question_type == "count":
        shape = None if g[1] == "objects" else g[1].removesuffix("es" if g[1] == "crosses" else "s")
        counted = matching(scene, None, g[0], shape)
        return str(len(counted)), counted
    if q.question_type == "attribute":
        obj = the(scene, *g[1:4])
        named = {"size": g[1], "colour": g[2], "shape": None if g[3] == "object" else g[3]}
        assert named[g[0]] is None, f"{q.question!r} names the attribute it asks for"
        return getattr(obj, g[0]), [obj]
    reference = the(scene, *g[2:5])
    (target,) = [o for o in scene.objects if o is not reference and relation(o, reference) == g[1]]
    return getattr(target, g[0]), [reference, target]


@pytest.fixture(scope="module")
def shapes_vqa() -> ShapesWorldVqa:
    return ShapesWorldVqa(train_size=1000, val_size=40, test_size=40, heldout_size=100)


def test_shapes_vqa_answers_and_regions_follow_the_scene(shapes_vqa):
    for split in ("train", "heldout"):
        for q in shapes_vqa.questions(split)[::2]:
            scene = shapes_vqa.scene(q.image_id)
            answer, objects = expected(q, scene)
            assert q.answer == answer, q
            assert q.regions == tuple(o.box for o in objects), q
            assert q.answers == (answer,) * 10 and answer in ANSWERS
            assert q.answer_type == {"count": "number", "attribute": "other", "two-step": "other"}.get(
                q.question_type, "yes/no"
            )


def test_shapes_vqa_regions_cover_object_pixels(shapes_vqa):
    size = shapes_vqa.image_size
    for q in [q for q in shapes_vqa.questions("val") if q.regions][:30]:
        pixels = np.asarray(shapes_vqa.load(q.image_id))
        for box in q.regions:  # Box itself guarantees 0 <= x0 < x1 <= 1 and likewise for y
            (obj,) = [o for o in shapes_vqa.scene(q.image_id).objects if o.box == box]
            x0, y0, x1, y1 = (round(v * size) for v in (box.x0, box.y0, box.x1, box.y1))
            centre = pixels[(y0 + y1) // 2, (x0 + x1) // 2]
            assert tuple(centre) != tuple(shapes_vqa.scene(q.image_id).background), (q, obj)


def test_shapes_vqa_mix_balance_and_closed_answers(shapes_vqa):
    train = shapes_vqa.questions("train")
    assert len(train) == 5 * 1000  # every scene allows 5 distinct questions
    shares = Counter(q.question_type for q in train)
    assert set(shares) == set(FAMILIES)
    for family, weight in FAMILY_WEIGHTS.items():  # one-object scenes move weight off relation and two-step
        assert abs(shares[family] / len(train) - weight) < 0.08, shares
    yes_no = Counter(q.answer for q in train if q.answer_type == "yes/no")
    assert abs(yes_no["yes"] / (yes_no["yes"] + yes_no["no"]) - 0.5) < 0.04, yes_no
    assert {q.answer for q in train} == set(ANSWERS)
    for image_id in shapes_vqa.image_ids("val"):
        texts = [q.question for q in shapes_vqa.questions("val") if q.image_id == image_id]
        assert len(texts) == len(set(texts))  # distinct questions per image
    ids = [q.question_id for split in shapes_vqa.splits for q in shapes_vqa.questions(split)]
    assert len(ids) == len(set(ids))


def test_shapes_vqa_never_mentions_heldout_combinations_outside_heldout(shapes_vqa):
    for split in ("train", "val", "test"):
        for q in shapes_vqa.questions(split):
            for colour, shape in HELDOUT_COMBINATIONS:
                assert f"{colour} {shape}" not in q.question, q


def test_shapes_vqa_is_deterministic_and_shares_shapesworld_images(shapes_vqa):
    again = ShapesWorldVqa(train_size=1000, val_size=40, test_size=40, heldout_size=100)
    assert again.questions("val") == shapes_vqa.questions("val")
    smaller = ShapesWorldVqa(train_size=10, val_size=0, test_size=0, heldout_size=0)
    first_ten = [q for q in shapes_vqa.questions("train") if q.image_id in shapes_vqa.image_ids("train")[:10]]
    assert smaller.questions("train") == first_ten
    assert ShapesWorldVqa(seed=1, train_size=10).questions("train") != first_ten
    world = ShapesWorld(train_size=1000, val_size=40, test_size=40, heldout_size=100)
    assert shapes_vqa.name == world.name == "shapesworld-s0-224px-v1"
    for split in ("val", "heldout"):
        assert shapes_vqa.image_ids(split) == [s.image_id for s in world.samples(split)]
        for sample in world.samples(split)[:3]:
            assert np.array_equal(np.asarray(shapes_vqa.load(sample.image_id)), np.asarray(world.load(sample)))


def test_shapes_vqa_two_step_only():
    dataset = ShapesWorldVqa(train_size=200, val_size=0, test_size=0, heldout_size=0, families=("two-step",))
    questions = dataset.questions("train")
    assert questions and {q.question_type for q in questions} == {"two-step"}
    for q in questions:
        scene = dataset.scene(q.image_id)
        assert len(scene.objects) >= 2
        answer, objects = expected(q, scene)  # exactly one target, or `expected` fails
        assert (q.answer, q.regions) == (answer, tuple(o.box for o in objects))
    one_object = [f"train-{i:06d}" for i in range(200) if len(dataset.scene(f"train-{i:06d}").objects) == 1]
    assert one_object and not set(one_object) & set(dataset.image_ids("train"))


def test_shapes_vqa_arguments():
    with pytest.raises(ValueError, match="families"):
        ShapesWorldVqa(families=("colour",))
    with pytest.raises(ValueError, match="questions_per_image"):
        ShapesWorldVqa(questions_per_image=0)
    with pytest.raises(ValueError, match="known splits"):
        ShapesWorldVqa(train_size=1).questions("dev")
