"""The compact checkpoints that ship with the package: how `python -m captioning.bundle` writes them, that every
bundled model loads and works on real photos, and that the loader refuses a compact checkpoint it cannot
complete."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from PIL import Image

from captioning.bundle import DECODING
from captioning.bundled import (
    CAPTION_CHECKPOINTS,
    COMPARE_CHECKPOINTS,
    FLICKR8K_SOFT,
    FLICKR8K_TRANSFORMER,
    SHAPES_SOFT,
)
from captioning.module import CaptioningModule
from core.training import bundle as core_bundle
from core.training.checkpoints import ENCODER_FROM_PACKAGE, ENCODER_WEIGHTS, read_checkpoint
from data.shapes_scene import generate_split_scene, render_scene
from vqa.bundled import VQA_CHECKPOINTS
from vqa.module import VqaModule

BUNDLED = (*CAPTION_CHECKPOINTS.values(), *VQA_CHECKPOINTS.values(), *COMPARE_CHECKPOINTS.values())
MAX_BYTES = 25 * 2**20  # each bundled model at most 25 MB, so the package stays small enough to install anywhere
MAX_COMPARE_BYTES = 2 * 10**6  # each of the Compare tab's six models at most 2 MB
SPECIALS = {"<pad>", "<start>", "<end>", "<unk>"}
# A caption that stops on one of these was cut off, not ended: "a dog runs through the".
DANGLING = {"a", "an", "the", "of", "on", "in", "with", "and", "to", "at", "its", "his", "her", "their", "is", "are"}
FLICKR8K_TRANSFORMER_MAP_LAYER = 1  # the layer whose map the bundled Transformer draws, chosen on photos with boxes
PHOTOS = ("coffee", "chelsea", "astronaut")  # real photos that ship with scikit-image (public domain / CC0)


def bundle_main(argv: list[str], model_class: type = CaptioningModule) -> int:
    """`python -m captioning.bundle ARGV` (or `python -m vqa.bundle` with VqaModule, without settings) as a call."""
    settings = DECODING if model_class is CaptioningModule else ()
    return core_bundle.main(argv, model_class=model_class, prog="bundle", settings=settings)


def bundle(source: Path, target: Path) -> dict:
    return core_bundle.bundle(source, target, model_class=CaptioningModule)


@pytest.fixture(scope="module")
def photos() -> dict[str, Image.Image]:
    skimage_data = pytest.importorskip("skimage.data")
    return {name: Image.fromarray(getattr(skimage_data, name)()) for name in PHOTOS}


@pytest.fixture(scope="module")
def coffee(photos) -> Image.Image:
    return photos["coffee"]


@pytest.fixture(scope="module")
def soft_model() -> CaptioningModule:
    return CaptioningModule.load(SHAPES_SOFT)


@pytest.mark.parametrize("path", BUNDLED, ids=lambda p: p.name)
def test_bundled_checkpoints_are_small_float16_and_leave_a_pretrained_encoder_to_its_package(path: Path):
    assert path.is_file() and path.stat().st_size <= MAX_BYTES
    if path in COMPARE_CHECKPOINTS.values():
        assert path.stat().st_size <= MAX_COMPARE_BYTES
    checkpoint = read_checkpoint(path)
    state = checkpoint["state_dict"]
    encoder = [name for name in state if name.startswith("encoder.")]
    trained_with_the_model = checkpoint["hyper_parameters"]["encoder"]["class_path"] == "core.model.encoder.LocalCNN"
    if trained_with_the_model:
        assert ENCODER_WEIGHTS not in checkpoint and encoder
    else:
        assert checkpoint[ENCODER_WEIGHTS] == ENCODER_FROM_PACKAGE
        assert state and not encoder
    assert all(t.dtype == torch.float16 for t in state.values() if t.is_floating_point())
    assert "optimizer_states" not in checkpoint


@pytest.fixture(scope="module")
def scenes() -> dict[str, Image.Image]:
    """ShapesWorld test scenes, what the bundled ShapesWorld models were trained on."""
    return {f"scene_{i}": render_scene(generate_split_scene(0, "test", i), 224) for i in range(3)}


@pytest.mark.parametrize("name", [*CAPTION_CHECKPOINTS, *COMPARE_CHECKPOINTS])
@pytest.mark.slow
def test_every_bundled_captioning_model_captions_in_its_own_words_and_ends_properly(name, photos, scenes):
    """The real-photo models on scikit-image's photos; the ShapesWorld ones (the Compare tab's six too) on scenes
    (on a photo they ramble in shape words until the length cap, which is no fault of theirs)."""
    model = CaptioningModule.load({**CAPTION_CHECKPOINTS, **COMPARE_CHECKPOINTS}[name])
    assert not model.training and all(p.dtype == torch.float32 for p in model.parameters())
    words_known = set(model.vocabulary.tokens) - SPECIALS
    pictures = photos if name.startswith("Flickr8k") else scenes
    transform = model.encoder.transform()
    inputs = torch.stack([transform(picture) for picture in pictures.values()])  # (3, 3, S, S)
    with torch.inference_mode():
        captions = model.caption(inputs)  # with the beam width the model carries
    for picture, caption in zip(pictures, captions):
        words = caption.split()
        assert words and set(words) <= words_known, (picture, caption)  # no <unk>, nothing outside the vocabulary
        # it ended with <end>, before the length cap, on a word that can end a sentence
        assert len(words) < model.hparams.max_length and words[-1] not in DANGLING, (picture, caption)


@pytest.mark.slow
def test_the_flickr8k_models_tell_photos_apart(photos):
    """Trained on real photos, a model gives different photos different captions (the ShapesWorld ones need not)."""
    for name, path in CAPTION_CHECKPOINTS.items():
        if "Flickr8k" in name:
            model = CaptioningModule.load(path)
            inputs = torch.stack([model.encoder.transform()(photo) for photo in photos.values()])
            with torch.inference_mode():
                assert len(set(model.caption(inputs, beam_size=3))) == len(photos), name


@pytest.mark.parametrize("name", list(VQA_CHECKPOINTS))
@pytest.mark.slow
def test_every_bundled_vqa_model_answers_in_its_answers_with_one_map_per_hop(name, coffee):
    model = VqaModule.load(VQA_CHECKPOINTS[name])
    question = "what colour is the circle?" if name == "ShapesWorld" else "what is on the table?"  # real photos
    with torch.inference_mode():
        answered = model.answer(model.encoder.transform()(coffee), question)
    assert len(answered.answers) == 5 and sum(p for _, p in answered.answers) <= 1 + 1e-6
    assert {answer for answer, _ in answered.answers} <= set(model.hparams.answers)
    assert answered.weights.shape == (len(model.san.hops), model.encoder.num_locations)


def full_checkpoint(model: CaptioningModule, path: Path) -> Path:
    """A Lightning-style checkpoint of `model`: every weight in float32, encoder included."""
    torch.save({"state_dict": model.state_dict(), "hyper_parameters": dict(model.hparams), "epoch": 3}, path)
    return path


@pytest.mark.parametrize(
    ("path", "encoder", "shrink"),
    [(FLICKR8K_SOFT, "encoder weights from its package", 1.9), (SHAPES_SOFT, "encoder weights included", 1.9)],
    ids=["pretrained encoder", "encoder trained with the model"],
)
@pytest.mark.slow
def test_bundle_writes_a_compact_copy_that_captions_like_the_original(path, encoder, shrink, coffee, tmp_path, capsys):
    """A frozen ImageNet encoder is left to its package; a LocalCNN trained with the model is kept, in float16
    like the rest (either way the copy is about half the size or less)."""
    model = CaptioningModule.load(path)
    source = full_checkpoint(model, tmp_path / "best.ckpt")
    assert bundle_main([str(source), str(tmp_path / "compact.ckpt")]) == 0
    assert encoder in capsys.readouterr().out
    assert (tmp_path / "compact.ckpt").stat().st_size < source.stat().st_size / shrink
    compact = CaptioningModule.load(tmp_path / "compact.ckpt")
    inputs = model.encoder.transform()(coffee).unsqueeze(0)
    with torch.inference_mode():
        assert compact.caption(inputs) == model.caption(inputs)


@pytest.mark.slow
def test_a_compact_copy_can_carry_other_decoding_settings(soft_model, coffee, tmp_path, capsys):
    source = full_checkpoint(soft_model, tmp_path / "best.ckpt")
    settings = ["--beam-size", "1", "--length-penalty", "0.5", "--no-repeat-ngram-size", "2", "--complete-phrases", "false"]
    assert bundle_main([str(source), str(tmp_path / "greedy.ckpt"), *settings]) == 0
    greedy = CaptioningModule.load(tmp_path / "greedy.ckpt")
    h = greedy.hparams
    assert (h.beam_size, h.length_penalty, h.no_repeat_ngram_size, h.complete_phrases) == (1, 0.5, 2, False)
    reference = CaptioningModule.load(SHAPES_SOFT)
    reference.hparams.update(length_penalty=0.5, no_repeat_ngram_size=2, complete_phrases=False)
    inputs = soft_model.encoder.transform()(coffee).unsqueeze(0)
    with torch.inference_mode():
        assert greedy.caption(inputs) == reference.caption(inputs, beam_size=1)
    vqa = VqaModule.load(VQA_CHECKPOINTS["ShapesWorld"])
    vqa_source = tmp_path / "san.ckpt"
    torch.save({"state_dict": vqa.state_dict(), "hyper_parameters": dict(vqa.hparams)}, vqa_source)
    with pytest.raises(SystemExit):  # python -m vqa.bundle has no beam-search options
        bundle_main([str(vqa_source), str(tmp_path / "san_small.ckpt"), "--beam-size", "3"], VqaModule)
    assert "unrecognized arguments: --beam-size 3" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        bundle_main([str(source), str(tmp_path / "wide.ckpt"), "--beam-size", "0"])
    assert 'Parser key "beam_size"' in (error := capsys.readouterr().err) and "0 does not conform to restriction v>0" in error
    with pytest.raises(SystemExit):
        bundle_main([str(source), str(tmp_path / "wide.ckpt"), "--complete-phrases", "maybe"])
    assert 'Parser key "complete_phrases"' in capsys.readouterr().err
    assert not (tmp_path / "wide.ckpt").exists()
    with pytest.raises(ValueError, match="has no hyper-parameter beam_size to change"):
        core_bundle.bundle(vqa_source, tmp_path / "san_small.ckpt", model_class=VqaModule, changes={"beam_size": 3})


@pytest.mark.slow
def test_a_transformers_copy_can_draw_another_layers_map(photos, tmp_path, capsys):
    """`--map-layer 0`: the copy's maps are its first layer's cross-attention averaged over the heads; a
    Show-Attend-Tell checkpoint has no such setting, and a layer the model lacks is refused (no
    file left behind)."""
    import captioning.inference

    transformer = CaptioningModule.load(FLICKR8K_TRANSFORMER)
    source = full_checkpoint(transformer, tmp_path / "best.ckpt")
    assert bundle_main([str(source), str(tmp_path / "layer0.ckpt"), "--map-layer", "0"]) == 0
    copy = CaptioningModule.load(tmp_path / "layer0.ckpt")
    assert (copy.decoder.map_layer, transformer.decoder.map_layer) == (0, FLICKR8K_TRANSFORMER_MAP_LAYER)
    photo = photos["astronaut"]
    inputs = copy.encoder.transform()(photo).unsqueeze(0)
    with torch.inference_mode():
        generated = copy.generate(inputs, beam_size=3)
    words, rows = copy.caption_words(generated.tokens[0], generated.weights[0])
    heads = captioning.inference.every_head(copy, photo, words)  # (words, layers, heads, L)
    assert torch.allclose(rows.float(), heads[:, 0].mean(1), atol=1e-4)
    soft = full_checkpoint(CaptioningModule.load(SHAPES_SOFT), tmp_path / "soft.ckpt")
    assert bundle_main([str(soft), str(tmp_path / "no.ckpt"), "--map-layer", "1"]) == 2
    assert "has no hyper-parameter decoder.init_args.map_layer to change" in capsys.readouterr().err
    assert bundle_main([str(source), str(tmp_path / "no.ckpt"), "--map-layer", "3"]) == 2
    assert "map_layer 3 names no layer of 3: give one from -3 to 2" in capsys.readouterr().err
    assert not (tmp_path / "no.ckpt").exists()


def test_compact_loader_refuses_a_checkpoint_missing_decoder_weights(tmp_path):
    checkpoint = read_checkpoint(FLICKR8K_SOFT)
    del checkpoint["state_dict"]["decoder.lstm.weight_hh"]
    torch.save(checkpoint, tmp_path / "broken.ckpt")
    with pytest.raises(ValueError, match=r"broken\.ckpt .*missing decoder\.lstm\.weight_hh"):
        CaptioningModule.load(tmp_path / "broken.ckpt")


@pytest.mark.parametrize("vocabulary", ["a b c", [1, 2, 3]])
def test_loader_refuses_a_vocabulary_that_is_not_a_list_of_words_naming_the_file(tmp_path, vocabulary):
    checkpoint = read_checkpoint(SHAPES_SOFT)
    checkpoint["hyper_parameters"]["vocabulary"] = vocabulary
    torch.save(checkpoint, tmp_path / "odd.ckpt")
    with pytest.raises(ValueError, match=r"odd\.ckpt has a vocabulary its model cannot take: a vocabulary's tokens"):
        CaptioningModule.load(tmp_path / "odd.ckpt")


def test_loader_refuses_missing_encoder_weights_without_the_mark(tmp_path):
    checkpoint = read_checkpoint(FLICKR8K_SOFT)
    del checkpoint[ENCODER_WEIGHTS]
    torch.save(checkpoint, tmp_path / "unmarked.ckpt")
    with pytest.raises(ValueError, match=rf"missing encoder\..*{ENCODER_WEIGHTS}"):
        CaptioningModule.load(tmp_path / "unmarked.ckpt")


def test_bundle_refuses_a_file_that_is_not_a_checkpoint(tmp_path, capsys):
    (tmp_path / "notes.ckpt").write_text("not a checkpoint")
    assert bundle_main([str(tmp_path / "notes.ckpt"), str(tmp_path / "out.ckpt")]) == 2
    assert "notes.ckpt" in capsys.readouterr().err and not (tmp_path / "out.ckpt").exists()
    with pytest.raises(FileNotFoundError):
        bundle(tmp_path / "missing.ckpt", tmp_path / "out.ckpt")


def test_a_compact_checkpoint_cannot_supply_a_fine_tuned_encoder():
    """A compact checkpoint's encoder weights come from the package: for a fine-tuned encoder they would be wrong."""
    from core.model.encoder import EfficientNetLite
    from core.training.checkpoints import CheckpointError, supply_packaged_encoder

    compact = read_checkpoint(VQA_CHECKPOINTS["ShapesWorld"])
    frozen = VqaModule.load(VQA_CHECKPOINTS["ShapesWorld"])
    supply_packaged_encoder(frozen, compact)
    assert set(frozen.state_dict()) == set(compact["state_dict"])  # now whole, as Lightning's strict loading wants
    fine_tuned = VqaModule(encoder=EfficientNetLite(variant=0, trainable_blocks=1))
    with pytest.raises(CheckpointError, match="fine-tuned"):
        supply_packaged_encoder(fine_tuned, read_checkpoint(FLICKR8K_SOFT))
