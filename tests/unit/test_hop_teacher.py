"""experiments/hop_teacher.py: the object word of a question, the ImageNet classes a word names, the head's map
against a hand computation, and a short training run through the script the way the docs run it."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from data.vqa import VqaSample
from experiments.hop_teacher import ImageNetWords, activation_maps, object_word, place_subject
from tests.helpers import REPO, VQA_CONFIGS, karpathy_file, metrics_of, run_python
from vqa.caption_questions import main as make_questions
from vqa.module import VqaModule


def sample(question: str, answer: str, kind: str) -> VqaSample:
    return VqaSample(question_id=0, image_id="1", question=question, answers=(answer,), answer=answer,
                     answer_type="other", question_type=kind)  # fmt: skip


def test_object_word_of_each_question_type():
    assert object_word(sample("what runs through the grass?", "dog", "object")) == "dog"
    assert object_word(sample("what is the color of the shirt?", "red", "color")) == "shirt"
    assert object_word(sample("what color are the pants?", "black", "color")) == "pants"
    assert object_word(sample("how many children play in the snow?", "two", "number")) == "children"
    assert object_word(sample("how many children are there?", "two", "number")) == "children"
    assert object_word(sample("where does the dog run?", "grass", "location")) is None  # the place around it


@pytest.fixture(scope="module")
def words() -> ImageNetWords:
    return ImageNetWords()


def test_classes_of_a_word_through_wordnet(words):
    from core.model.imagenet import imagenet_synsets

    names = imagenet_synsets()
    dogs = words.classes_of("dogs")
    assert len(dogs) == 118  # ImageNet-1k's dog breeds, from the plural too
    assert all("dog.n.01" in {s.name() for s in names[i].closure(lambda x: x.hypernyms())} for i in dogs)
    person = {names[i].name() for i in words.classes_of("children")}  # no class of their own: persons and clothes
    assert {"scuba_diver.n.01", "jersey.n.03", "sombrero.n.02"} <= person
    assert words.classes_of("grass") == () and words.classes_of("qwzx") == ()


def test_place_subject_is_the_first_word_with_classes_after_the(words):
    assert place_subject(sample("where does the white dog chase a tattered ball?", "grass", "location"), words) == "dog"
    assert place_subject(sample("where is the young boy running?", "beach", "location"), words) == "boy"
    assert place_subject(sample("where do the three dogs wrestle?", "snow", "location"), words) == "dogs"
    assert place_subject(sample("where is the grass?", "field", "location"), words) is None  # no class
    assert place_subject(sample("what runs through the grass?", "dog", "object"), words) is None


def test_activation_maps_by_hand():
    classifier = torch.nn.Linear(2, 3)
    with torch.no_grad():
        classifier.weight.copy_(torch.tensor([[1.0, 0.0], [0.0, 1.0], [5.0, 5.0]]))
        classifier.bias.zero_()
    features = torch.tensor([[[2.0, 0.0], [0.0, 2.0]]])  # (1, L=2, D=2)
    classes = torch.tensor([[True, True, False]])  # class 2 is not the word's
    maps = activation_maps(features, classifier, classes, temperature=2.0)
    # the photo's mean (1, 1) gives classes 0 and 1 equal logits: weights 1/2 each; cell logits (1, 1) and (1, 1)
    assert torch.allclose(maps, torch.tensor([[0.5, 0.5]]))
    classes = torch.tensor([[True, False, False]])  # class 0 alone: cell logits 2 and 0, softmax at T=2
    expected = torch.softmax(torch.tensor([2.0, 0.0]) / 2, dim=0)
    assert torch.allclose(activation_maps(features, classifier, classes, temperature=2.0)[0], expected)


@pytest.mark.slow
@pytest.mark.parametrize("teacher_size", [224, 448])
def test_the_script_trains_with_the_divergence_and_writes_a_plain_vqa_checkpoint(tmp_path: Path, teacher_size: int):
    """A few steps on a tiny Flickr8k-QA set, the head reading the batch's grid (224) or each photo at 448 px: the
    divergence is logged, and the checkpoint loads as any VQA one."""
    assert make_questions([str(karpathy_file(tmp_path / "flickr8k")), str(tmp_path / "qa"), "--cap-share", "1"]) == 0
    run_python(
        str(REPO / "experiments" / "hop_teacher.py"), "fit", "--config", str(VQA_CONFIGS / "flickr8k_qa_san.yaml"),
        f"--data.dataset.init_args.root={tmp_path / 'qa'}", "--data.num_workers=0", "--data.batch_size=4",
        f"--data.cache_dir={tmp_path / 'cache'}", f"--trainer.default_root_dir={tmp_path / 'run'}",
        "--model.teacher_weight=2", f"--model.teacher_size={teacher_size}", "--trainer.max_steps=2",
        "--trainer.log_every_n_steps=1",
        cwd=REPO,
    )  # fmt: skip
    metrics = metrics_of(tmp_path / "run")
    assert metrics["train/hop_kl"] >= 0, metrics
    checkpoint = next((tmp_path / "run").rglob("last.ckpt"))
    hyper_parameters = torch.load(checkpoint, weights_only=True, map_location="cpu")["hyper_parameters"]
    assert not {"teacher_weight", "temperature", "teacher_size"} & hyper_parameters.keys()
    assert VqaModule.load(checkpoint).san is not None


def test_head_maps_scores_the_heads_map_of_each_boxed_class_with_a_word(tmp_path: Path, capsys):
    """experiments/head_maps.py on two photos: the cat's map is scored against its box, a person's too (clothes and
    persons' classes), a class with no ImageNet class (a kite) is left out, and bad input is named."""
    import json

    import skimage.data
    from PIL import Image

    from experiments.head_maps import main

    (tmp_path / "images").mkdir()
    Image.fromarray(skimage.data.chelsea()).save(tmp_path / "images" / "cat.png")  # 451 x 300, a cat filling it
    Image.fromarray(skimage.data.astronaut()).save(tmp_path / "images" / "astronaut.png")  # 512 x 512
    boxes = {"images": {
        "cat.png": {"size": [451, 300], "objects": [{"class": "cat", "box": [0, 0, 451, 300]},
                                                      {"class": "kite", "box": [0, 0, 10, 10]}]},
        "astronaut.png": {"size": [512, 512], "objects": [{"class": "person", "box": [100, 0, 512, 512]}]},
    }}  # fmt: skip
    (tmp_path / "boxes.json").write_text(json.dumps(boxes))
    assert main(["--images", str(tmp_path / "images"), "--boxes", str(tmp_path / "boxes.json")]) == 0
    out = capsys.readouterr().out
    # a box over the whole photo: every cell is inside, so pointing, the centre and both masses are all 100
    assert "| other classes | 1 | 100.0 | 100.0 | 100.0 | 100.0 |" in out
    assert "| persons | 1 |" in out and "| all | 2 |" in out
    # at 448 px summed onto the 7 x 7 grid: the whole-photo box still holds every cell
    assert main(["--images", str(tmp_path / "images"), "--boxes", str(tmp_path / "boxes.json"),
                 "--image-size", "448", "--pool", "2"]) == 0  # fmt: skip
    assert "| other classes | 1 | 100.0 | 100.0 | 100.0 | 100.0 |" in capsys.readouterr().out
    assert main(["--images", str(tmp_path / "images"), "--boxes", str(tmp_path / "boxes.json"), "--pool", "3"]) == 2
    assert "--pool must divide the 7 x 7 grid" in capsys.readouterr().err
    assert main(["--images", str(tmp_path / "images"), "--boxes", str(tmp_path / "nothing.json")]) == 2
    assert "nothing.json" in capsys.readouterr().err
