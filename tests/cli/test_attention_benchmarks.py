"""The attention studies' scripts in experiments/ and the attention figures of benchmarks/, each run end to end as the
docs run them, at a few scenes or questions: the JSON they print has every figure the docs read, each a finite number
in its range, checked where possible against what the measure must give (a blank photo reads uniformly, a map given
its region's cells lies inside it). The callbacks run through `python -m vqa test`, the way the docs use them."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from captioning.module import CaptioningModule
from data.shapes import scene_captions
from data.shapes_scene import SHAPES, generate_split_scene, render_scene
from tests.helpers import (
    CAPTIONING_CONFIGS,
    REPO,
    SMALL_SHAPES,
    VQA_CONFIGS,
    always_speaking,
    figures_of,
    metrics_of,
    run_benchmark,
    run_experiment,
    run_module,
    run_python,
)

pytestmark = pytest.mark.slow

SMALL_SHAPES_VQA = [
    "--data.dataset.init_args.train_size=8",
    "--data.dataset.init_args.val_size=8",
    "--data.dataset.init_args.test_size=8",
    "--data.dataset.init_args.heldout_size=8",
]


def shares(answer: dict) -> dict[str, float]:
    """Every figure of an answer that is a share (0 to 1), by its path: all but the counts."""
    return {k: v for k, v in figures_of(answer).items() if isinstance(v, float)}


def test_attention_targets_splits_a_words_attention_between_its_box_and_the_rest() -> None:
    answer = run_experiment("attention_targets.py", "captioning/bundled/shapes_soft.ckpt", "--scenes", "2", "--beam-size", "2")
    assert answer["scenes"] == 2 and answer["grounded_words"] > 0 and answer["unmatched_words"] == 0
    assert all(0 <= v <= 1 for v in shares(answer).values()), answer
    # the box grown by a cell holds at least what the box holds; the box and the other objects at most everything
    assert answer["in_box"] <= answer["beside_box"] and answer["in_box"] + answer["on_other_objects"] <= 1 + 1e-6
    assert {"peak_in_box", "own_captions", "by_word", "by_word_on_other_named"} <= answer.keys()


def test_reference_ambiguity_counts_the_words_the_words_before_them_determine() -> None:
    answer = run_experiment("reference_ambiguity.py", "--scenes", "5")
    assert answer["scenes"] == 5 and answer["grounded_words"] > 0
    assert all(0 <= v <= 1 for v in shares(answer).values()), answer
    # a determined word has a ceiling of 1, any other one of at most 1/2
    determined, ceiling = answer["determined"], answer["ceiling_uniform"]
    assert determined <= ceiling <= determined + (1 - determined) / 2 + 1e-4


def test_hop_regions_gives_each_hops_mass_in_each_region() -> None:
    answer = run_experiment("hop_regions.py", "--ckpt", "vqa/bundled/shapes_san.ckpt", "--split", "test", "--questions", "30")
    assert all(0 <= v <= 100 for v in figures_of(answer).values()), answer  # percentages
    families = {name.split()[0] for name in answer}
    assert families and all(f"{family} accuracy" in answer for family in families)
    assert any(name.endswith("hop2 on region1") for name in answer)  # a SAN(2) model: two hops


def test_score_functions_figure_and_spread(tmp_path: Path) -> None:
    figure = run_benchmark("score_functions.py", "figure", "--out", str(tmp_path / "figure.png"))
    assert Path(figure["figure"]).stat().st_size > 10_000
    answer = run_benchmark("score_functions.py", "spread", "--scenes", "2", "--draws", "50")
    assert all(math.isfinite(v) for v in figures_of(answer).values())
    assert [row["n"] for row in answer["random"]] == [16, 64, 128, 256, 512, 1024]
    trained = answer["trained"]
    assert len(trained) == 6 and all(0 <= row["map entropy"] <= math.log(196) + 1e-3 for row in trained)
    assert all(0 <= row["same query, other scene: L1 move"] <= 2 for row in trained)


def test_decoder_maps_draws_both_decoders_on_one_caption_and_names_a_missing_photo(tmp_path: Path) -> None:
    answer = run_benchmark("decoder_maps.py", "--out", str(tmp_path / "decoders.png"))
    assert Path(answer["figure"]).stat().st_size > 10_000
    models = answer["models"]
    assert list(models) == ["Show-Attend-Tell", "Transformer"]
    assert [model["cells"] for model in models.values()] == [144, 49]  # the 384-px model's 12x12, the Transformer's 7x7
    assert all(0 < model["map_entropy"] <= math.log(model["cells"]) + 1e-3 for model in models.values())
    assert all(model["own_caption"] for model in models.values())
    with pytest.raises(SystemExit, match="error: .*missing.jpg"):
        run_benchmark("decoder_maps.py", "--image", str(tmp_path / "missing.jpg"), "--out", str(tmp_path / "no.png"))


def vqa_test_with(callback: str, run_dir: Path) -> dict[str, float]:
    run_module(
        "vqa", "test", "--config", str(VQA_CONFIGS / "shapes_san.yaml"), "--ckpt_path", "vqa/bundled/shapes_san.ckpt",
        *SMALL_SHAPES_VQA, f"--trainer.callbacks+={callback}", f"--trainer.default_root_dir={run_dir}",
        f"--trainer.logger.init_args.save_dir={run_dir}", cwd=REPO,
    )
    return metrics_of(run_dir)


def test_the_question_only_callback_blanks_the_photo_in_a_vqa_run(tmp_path: Path) -> None:
    metrics = vqa_test_with("experiments.question_only.WithoutThePhoto", tmp_path / "run")
    # every cell of a blank photo is the same vector, so every hop reads all of them equally: ln 196
    for hop in (1, 2):
        assert metrics[f"test/attention_entropy/hop{hop}"] == pytest.approx(math.log(196), abs=1e-4)
    assert 0 <= metrics["test/accuracy"] <= 1


def test_the_ground_truth_hops_callback_puts_each_hop_on_its_regions(tmp_path: Path) -> None:
    metrics = vqa_test_with("experiments.ground_truth_hops.GroundTruthHops", tmp_path / "run")
    # each hop lies on the cells its region covers: most of its mass inside the question's regions, and a map
    # spread over a region's cells is far from uniform over 196 cells
    for hop in (1, 2):
        assert metrics[f"test/attention_correctness/hop{hop}"] > 0.6
        assert metrics[f"test/attention_entropy/hop{hop}"] < math.log(196) - 1
    assert 0 <= metrics["test/accuracy"] <= 1


def test_cell_word_classifier_scores_its_maps_beside_the_attention(tmp_path: Path) -> None:
    """Trained on 12 ShapesWorld training scenes laid out as Flickr8k, scored on 4 test scenes with their boxes, with
    the shapes as the box classes and the bundled ShapesWorld model's captions."""
    (tmp_path / "flickr8k" / "images").mkdir(parents=True)
    entries = []
    for index in range(12):
        scene = generate_split_scene(0, "train", index)
        render_scene(scene, 224).save(tmp_path / "flickr8k" / "images" / f"train{index}.png")
        captions, _ = scene_captions(scene, 5)
        sentences = [{"raw": caption, "tokens": []} for caption in captions]
        entries.append({"filename": f"train{index}.png", "imgid": index, "split": "train", "sentences": sentences})
    (tmp_path / "flickr8k" / "dataset_flickr8k.json").write_text(json.dumps({"dataset": "flickr8k", "images": entries}))
    (tmp_path / "photos").mkdir()
    boxes = {}
    for index in range(4):
        scene = generate_split_scene(0, "test", index)
        render_scene(scene, 224).save(tmp_path / "photos" / f"scene{index}.png")
        objects = [{"class": o.shape, "box": [o.box.x0 * 224, o.box.y0 * 224, o.box.x1 * 224, o.box.y1 * 224]} for o in scene.objects]
        boxes[f"scene{index}.png"] = {"size": [224, 224], "objects": objects}
    (tmp_path / "boxes.json").write_text(json.dumps({"images": boxes}))
    (tmp_path / "words.json").write_text(json.dumps({"classes": {shape: [shape, shape + "s"] for shape in SHAPES}}))

    answer = run_experiment(
        "cell_word_classifier.py", "--root", str(tmp_path / "flickr8k"), "--images", str(tmp_path / "photos"),
        "--boxes", str(tmp_path / "boxes.json"), "--words", str(tmp_path / "words.json"), "--model", "shapes-soft",
        "--sizes", "[224]", "--epochs", "2", "--cache_dir", str(tmp_path / "cache"),
    )
    attention, (classifier,) = answer["attention"], answer["classifier"]
    assert attention["size"] == 112 and attention["pairs"] >= 4  # the model reads 112 px; a pair per named shape
    # every pair's word is a one-word shape name, so the classifier scores the same pairs
    assert classifier == {"size": 224, "grid": [7, 7], "pairs": attention["pairs"]} | {
        key: classifier[key] for key in ("mass", "pointing")
    }
    assert all(0 <= value <= 1 for value in (*shares(attention).values(), classifier["mass"], classifier["pointing"]))
    assert attention["mass"] > 0.5  # the ShapesWorld model looks at what it names


def test_map_distillation_fine_tunes_and_writes_a_plain_captioning_checkpoint(tmp_path: Path) -> None:
    """A few steps from the bundled ShapesWorld model with itself as the teacher: the divergence is logged, and
    the checkpoint names no teacher and loads as any captioning checkpoint."""
    bundled = str(REPO / "captioning" / "bundled" / "shapes_soft.ckpt")
    config = str(CAPTIONING_CONFIGS / "shapes_soft.yaml")
    run_python(
        str(REPO / "experiments" / "map_distillation.py"), "fit", "--config", config, *SMALL_SHAPES,
        f"--data.cache_dir={tmp_path / 'cache'}", f"--trainer.default_root_dir={tmp_path / 'run'}",
        f"--model.initial_weights={bundled}", f"--model.teacher={bundled}", "--model.map_weight=2",
        "--trainer.max_steps=3", "--trainer.log_every_n_steps=1", "--trainer.limit_val_batches=1",
        cwd=REPO,
    )  # fmt: skip
    metrics = metrics_of(tmp_path / "run")
    assert 0 <= metrics["train/map_kl"] < 1, metrics  # the student starts as the teacher: its maps stay close
    checkpoint = tmp_path / "run" / "logs" / "version_0" / "checkpoints" / "last.ckpt"
    hyper_parameters = torch.load(checkpoint, weights_only=True, map_location="cpu")["hyper_parameters"]
    assert not {"teacher", "map_weight"} & hyper_parameters.keys()
    model = CaptioningModule.load(checkpoint)
    assert model.vocabulary is not None and model.decoder is not None


def test_transformer_maps_scores_every_layer_and_head_as_the_grounding_command_does(tmp_path):
    """experiments/transformer_maps.py on six ShapesWorld scenes with their boxes and a tiny untrained Transformer whose
    every word names every shape (the word list says so): each layer's and head's figures are those that
    `python -m captioning.grounding --maps captioning.explanations.CrossAttentionHead` gives for that choice."""
    from functools import partial

    from captioning.explanations import CrossAttentionHead
    from captioning.grounding import ObjectWords, ground, load_captioner
    from captioning.transformer import TransformerDecoder
    from core.model.encoder import LocalCNN
    from data.boxes import read_boxes

    size, images = 112, {}
    (tmp_path / "images").mkdir()
    for index in range(6):
        scene = generate_split_scene(0, "test", index)
        render_scene(scene, size).save(tmp_path / "images" / f"scene{index}.png")
        objects = [{"class": o.shape, "box": [o.box.x0 * size, o.box.y0 * size, o.box.x1 * size, o.box.y1 * size]}
                   for o in scene.objects]  # fmt: skip
        images[f"scene{index}.png"] = {"size": [size, size], "objects": objects}
    (tmp_path / "boxes.json").write_text(json.dumps({"images": images}))
    torch.manual_seed(0)
    words = ["<pad>", "<start>", "<end>", "<unk>", "a", "red", "circle"]
    decoder = partial(TransformerDecoder, model_dim=8, layers=2, heads=2, feedforward_dim=8)
    model = CaptioningModule(encoder=LocalCNN(widths=(8, 8, 8), coordinates=False), decoder=decoder, vocabulary=words,
                             max_length=3)  # fmt: skip
    always_speaking(model)
    checkpoint = tmp_path / "tiny.ckpt"
    torch.save({"state_dict": model.state_dict(), "hyper_parameters": dict(model.hparams)}, checkpoint)
    word_list = tmp_path / "words.json"  # every word names every shape: each word of a caption is a pair
    word_list.write_text(json.dumps({"classes": {shape: ["a", "red", "circle"] for shape in SHAPES}}))

    result = run_experiment(
        "transformer_maps.py", "--images", str(tmp_path / "images"), "--boxes", str(tmp_path / "boxes.json"),
        "--model", str(checkpoint), "--words", str(word_list),
    )  # fmt: skip
    assert result["photos"] == 6 and result["pairs"] == 6 * 3 and not result["skipped"]
    choices = [(row["layer"], row["head"]) for row in result["maps"]]
    assert choices == [(0, None), (0, 0), (0, 1), (1, None), (1, 0), (1, 1)]
    for name, value in figures_of(result).items():
        assert math.isfinite(value), name
    captioner, photos = load_captioner(str(checkpoint)), read_boxes(tmp_path / "boxes.json")
    for row in result["maps"]:
        maps = CrossAttentionHead(layer=row["layer"], head=row["head"])
        means = ground(captioner, photos, tmp_path / "images", words=ObjectWords.read(word_list), maps=maps).means()
        for key in ("mass", "pointing", "entropy"):
            assert row[key] == pytest.approx(means[key]), (row, key)
    assert result["baselines"]["uniform"] == pytest.approx(means["uniform"])
    assert result["best_pointing"]["pointing"] == max(row["pointing"] for row in result["maps"])
