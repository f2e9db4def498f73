"""The Python API: `captioning.Captioner` and `vqa.Answerer`, and the registry of bundled models behind them.

The small ShapesWorld models keep these quick; only the README's own example, marked slow, loads the real-photo
models it names.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
from PIL import Image

import captioning.export
import captioning.inference
import vqa.export
from captioning import Captioner
from captioning.bundled import CAPTION_CHECKPOINTS, SCORE_MODELS, SHAPES_SOFT
from captioning.bundled import MODELS as CAPTION_MODELS
from captioning.overlays import word_file_name
from core.model.pretrained import UnknownModelError, metrics_table
from core.training.checkpoints import read_checkpoint
from data.images import ImageLoadError
from data.shapes_scene import generate_split_scene, render_scene
from vqa import Answerer
from vqa.bundled import MODELS as VQA_MODELS
from vqa.bundled import SHAPES_SAN, VQA_CHECKPOINTS
from vqa.questions import QuestionError

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def captioner() -> Captioner:
    return Captioner.from_pretrained("shapes-soft")


@pytest.fixture(scope="module")
def answerer() -> Answerer:
    return Answerer.from_pretrained("shapes-san")


@pytest.fixture(scope="module")
def scenes(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Three ShapesWorld test scenes as PNG files."""
    folder = tmp_path_factory.mktemp("scenes")
    paths = []
    for index in (1, 3, 6):
        paths.append(folder / f"scene_{index}.png")
        render_scene(generate_split_scene(0, "test", index), 224).save(paths[-1])
    return paths


def test_an_unknown_name_lists_the_bundled_ones():
    bundled = "'flickr8k-soft', 'flickr8k-hard', 'flickr8k-transformer', 'shapes-soft', 'shapes-hard'"
    with pytest.raises(UnknownModelError, match=bundled):
        Captioner.from_pretrained("flickr8k")
    with pytest.raises(UnknownModelError, match="no pretrained model called 'daquar'.*'flickr8k-qa-san', 'daquar-san', 'shapes-san'"):
        Answerer.from_pretrained("daquar")


def test_available_models_carry_their_metadata_and_match_their_files():
    assert list(Captioner.available()) == [
        "flickr8k-soft", "flickr8k-hard", "flickr8k-transformer", "shapes-soft", "shapes-hard",
        "shapes-additive", "shapes-dot", "shapes-scaled-dot", "shapes-general", "shapes-cosine", "shapes-location",
    ]  # fmt: skip
    assert list(Answerer.available()) == ["flickr8k-qa-san", "daquar-san", "shapes-san"]
    # the app's model choices are the registry's, under the names the app has always shown; the first is its default
    assert list(CAPTION_CHECKPOINTS) == [
        "Flickr8k soft", "Flickr8k hard", "Flickr8k Transformer", "ShapesWorld soft", "ShapesWorld hard",
    ]  # fmt: skip
    assert list(VQA_CHECKPOINTS) == ["Flickr8k-QA", "DAQUAR", "ShapesWorld"]
    assert list(CAPTION_CHECKPOINTS.values()) == [model.file for model in CAPTION_MODELS.values()]
    for model in [*Captioner.available().values(), *Answerer.available().values()]:
        config = read_checkpoint(model.file)["hyper_parameters"]["encoder"]
        encoder = config["init_args"]
        if config["class_path"] == "core.model.encoder.LocalCNN":  # trained with the model: no third-party weights
            assert model.grid == encoder["image_size"] // 2 ** len(encoder["widths"]), model.name
            assert model.encoder.startswith(f"LocalCNN trained with the model, {encoder['image_size']} px"), model.name
            assert "no third-party data or weights" in model.licence, model.name
        else:
            assert model.grid == encoder["image_size"] // encoder["output_stride"], model.name
            assert model.encoder.startswith(f"EfficientNet-Lite{encoder['variant']}, {encoder['image_size']} px"), model.name
            assert "Apache-2.0" in model.licence, model.name
        assert model.metrics and all(0 < value <= 100 for value in model.metrics.values()), model.name
        assert model.commands and all(command.startswith(("python -m ", "python experiments/")) for command in model.commands), model.name
        if model.name.startswith(("flickr8k", "daquar")):
            assert "terms of use" in model.licence, model.name


def test_the_model_card_and_the_readme_show_the_registry_figures():
    card = (ROOT / "docs" / "model-card.md").read_text(encoding="utf-8")
    assert metrics_table(list(CAPTION_MODELS.values())) in card
    assert metrics_table(list(VQA_MODELS.values())) in card
    assert metrics_table(list(SCORE_MODELS.values())) in card  # the Compare tab's six
    # the README's results table rounds the bundled Flickr8k rows to its own digits
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for label, name in (
        ("**ours, soft, bundled**", "flickr8k-soft"),
        ("**ours, hard, bundled**", "flickr8k-hard"),
        ("**ours, Transformer, bundled**", "flickr8k-transformer"),
    ):
        row = next(line for line in readme.splitlines() if line.startswith(f"| {label}"))
        cells = [cell.strip().strip("*") for cell in row.split("|")[2:-1]]  # BLEU-1 .. CIDEr-D
        shown = dict(zip(["BLEU-1", "BLEU-2", "BLEU-3", "BLEU-4", "METEOR", "ROUGE-L", "CIDEr-D"], cells))
        for metric, value in CAPTION_MODELS[name].metrics.items():
            digits = len(shown[metric].partition(".")[2])
            assert f"{value:.{digits}f}" == shown[metric], (name, metric)


@pytest.mark.slow
def test_the_bundled_transformer_captions_a_photo_with_a_map_per_word_and_every_head(tmp_path):
    """`Captioner.from_pretrained("flickr8k-transformer")`: a caption of Flickr8k words, one map per word that is its
    second layer's cross-attention averaged over the heads (its map_layer; checked against `every_head`), every layer
    and head in `heads` and in the saved caption.json."""
    import skimage.data

    transformer = Captioner.from_pretrained("flickr8k-transformer")
    photo = Image.fromarray(skimage.data.astronaut())
    result = transformer.caption(photo, beam_size=3)
    words, model = result.words, transformer.model
    assert words and set(words) <= set(model.vocabulary.tokens)
    assert result.attention.shape == (len(words), 7, 7)
    assert torch.allclose(result.attention.flatten(1).sum(1), torch.ones(len(words)), atol=1e-5)
    heads = captioning.inference.every_head(model, photo, words)  # (words, layers, heads, L)
    assert model.decoder.map_layer == 1 and torch.allclose(result.attention.flatten(1), heads[:, 1].mean(1), atol=1e-5)
    assert torch.equal(result.heads, heads)
    record = result.save(tmp_path / "astronaut")
    assert record["words"] == words and torch.tensor(record["heads"]).shape == heads.shape


def test_a_path_a_picture_and_a_list_give_the_same_captions(captioner, scenes):
    from_path = captioner.caption(scenes[0], beam_size=3)
    from_picture = captioner.caption(Image.open(scenes[0]), beam_size=3)
    assert from_path.words == from_picture.words and from_path.words
    assert from_path.source == str(scenes[0]) and from_picture.source == ""
    one_by_one = [from_path] + [captioner.caption(path, beam_size=3) for path in scenes[1:]]
    batched = Captioner(model=captioner.model, batch_size=2).caption(scenes, beam_size=3)  # two batches
    assert isinstance(batched, list) and len(batched) == len(scenes)
    for alone, together in zip(one_by_one, batched):
        assert together.words == alone.words
        torch.testing.assert_close(together.attention, alone.attention, atol=1e-4, rtol=0)


def test_a_caption_has_one_attention_map_and_one_overlay_per_word(captioner, scenes):
    result = captioner.caption(scenes[1])
    grid = CAPTION_MODELS["shapes-soft"].grid
    assert result.text == " ".join(result.words)
    assert result.attention.dtype == torch.float32
    assert result.attention.shape == (len(result.words), grid, grid)
    torch.testing.assert_close(result.attention.sum(dim=(1, 2)), torch.ones(len(result.words)))
    pictures = result.overlays()
    assert len(pictures) == len(result.words)
    assert all(picture.size == result.photo().size for picture in pictures)


def test_save_writes_what_the_export_command_writes(captioner, scenes, tmp_path):
    record = captioner.caption(scenes[2], beam_size=3).save(tmp_path / "api")
    # what `python -m captioning.export` writes for the same photo and model
    assert captioning.export.main([captioner.metadata.name, str(scenes[2]), "--output", str(tmp_path), "--beam-size", "3"]) == 0
    cli = tmp_path / scenes[2].stem
    assert sorted(path.name for path in (tmp_path / "api").iterdir()) == sorted(path.name for path in cli.iterdir())
    assert (tmp_path / "api" / "caption.json").read_text() == (cli / "caption.json").read_text()
    assert (tmp_path / "api" / "grid.png").read_bytes() == (cli / "grid.png").read_bytes()
    assert record["words"] and (tmp_path / "api" / word_file_name(1, record["words"][0])).is_file()


def test_ask_returns_sorted_answers_and_a_map_per_hop(answerer, scenes, tmp_path):
    answer = answerer.ask(scenes[0], "what colour is the circle?", top_k=5)
    probabilities = [p for _, p in answer.answers]
    assert len(answer.answers) == 5 and probabilities == sorted(probabilities, reverse=True)
    assert 0 < sum(probabilities) <= 1 + 1e-6
    hparams = read_checkpoint(SHAPES_SAN)["hyper_parameters"]
    hops, grid = hparams["san"]["init_args"]["hops"], VQA_MODELS["shapes-san"].grid
    assert answer.hops.shape == (hops, grid, grid)
    torch.testing.assert_close(answer.hops.sum(dim=(1, 2)), torch.ones(hops))
    assert len(answer.overlays()) == hops
    answer.save(tmp_path / "api")
    question = "what colour is the circle?"  # what `python -m vqa.export` does, given the bundled model's name
    assert vqa.export.main([answerer.metadata.name, str(scenes[0]), "--question", question, "--output", str(tmp_path / "cli")]) == 0
    assert sorted(path.name for path in (tmp_path / "api").iterdir()) == ["answer.json", "grid.png", "hop_1.png", "hop_2.png"]
    for name in ("answer.json", "grid.png", "hop_1.png"):
        assert (tmp_path / "api" / name).read_bytes() == (tmp_path / "cli" / name).read_bytes(), name


@pytest.mark.parametrize("question", ["", "   ", "zzyzx qwxv"], ids=["empty", "blank", "unknown words"])
def test_a_question_it_cannot_read_is_refused(answerer, scenes, question):
    with pytest.raises(QuestionError):
        answerer.ask(scenes[0], question)


def test_from_checkpoint_loads_a_bundled_file(captioner, answerer, scenes):
    loaded = Captioner.from_checkpoint(SHAPES_SOFT)
    assert loaded.metadata is None and captioner.metadata is CAPTION_MODELS["shapes-soft"]
    assert loaded.caption(scenes[0]).words == captioner.caption(scenes[0]).words
    question = "how many objects are there?"
    assert Answerer.from_checkpoint(SHAPES_SAN).ask(scenes[0], question).answers == answerer.ask(scenes[0], question).answers


def test_load_takes_a_bundled_name_or_a_checkpoint_path_as_the_commands_do(scenes, tmp_path):
    assert Answerer.load("shapes-san").metadata is not None and Answerer.load(SHAPES_SAN).metadata is None
    assert Captioner.load("shapes-soft").metadata is not None and Captioner.load(SHAPES_SOFT).metadata is None
    for load in (Answerer.load, Captioner.load):
        with pytest.raises(FileNotFoundError, match="neither a checkpoint file nor a bundled model .*shapes"):
            load(tmp_path / "missing.ckpt")


def test_a_file_that_is_not_an_image_is_named(captioner, answerer, scenes, tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("not a picture")
    for call in (
        lambda: captioner.caption(notes),
        lambda: captioner.caption([scenes[0], notes]),
        lambda: answerer.ask(notes, "what colour is the circle?"),
    ):
        with pytest.raises(ImageLoadError, match=re.escape(str(notes))):
            call()
    with pytest.raises(TypeError, match="path or a PIL image, not int"):
        captioner.caption(3)


def _readme_example() -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("### Use it from Python", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


def _coffee(folder: Path) -> None:
    """The photo the README's commands write before the example reads it."""
    import skimage.data

    (folder / "outputs").mkdir()
    Image.fromarray(skimage.data.coffee()).save(folder / "outputs" / "coffee.png")


def test_the_readme_example_runs_with_the_shapesworld_models(tmp_path, monkeypatch):
    code = _readme_example()
    assert '"flickr8k-soft"' in code and '"daquar-san"' in code
    _coffee(tmp_path)
    monkeypatch.chdir(tmp_path)
    exec(code.replace('"flickr8k-soft"', '"shapes-hard"').replace('"daquar-san"', '"shapes-san"'), {})
    assert (tmp_path / "outputs" / "overlays" / "coffee" / "caption.json").is_file()


@pytest.mark.slow
def test_the_readme_example_runs_as_written(tmp_path, monkeypatch):
    _coffee(tmp_path)
    monkeypatch.chdir(tmp_path)
    exec(_readme_example(), {})
    assert (tmp_path / "outputs" / "overlays" / "coffee" / "caption.json").is_file()
