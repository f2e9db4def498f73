"""The DAQUAR config (`daquar_san.yaml`) through the VQA CLI on a DAQUAR-layout fixture: fit with mirrored photos and
WUPS, settings chosen on held-out training photos, the fine-tuned top block, photos read at their own aspect ratio,
single-word answers and the CNN question model. (In a file of their own so that the suite's two workers share the
CLI tests evenly.)"""

import json
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from tests.helpers import DAQUAR_FILES, make_vqa_layout, metrics_of, run_in_process, run_module
from tests.helpers import VQA_CONFIGS as CONFIGS

# the encoder daquar_san.yaml builds (EfficientNet-Lite2 and its image size)
DAQUAR_ENCODER = yaml.safe_load((CONFIGS / "daquar_san.yaml").read_text())["model"]["encoder"]["init_args"]


def run_cli(*args: str, cwd: Path) -> None:
    """`python -m vqa args...`, in this process (`tests.helpers.run_in_process`)."""
    run_in_process("vqa", *args, cwd=cwd)


def fit_daquar(tmp_path: Path, *overrides: str) -> Path:
    """One epoch of `daquar_san.yaml` on a DAQUAR-layout fixture made under tmp_path, batches of 4, features cached
    in tmp_path/cache; returns the run directory."""
    make_vqa_layout(tmp_path / "daquar", DAQUAR_FILES)
    run_dir = tmp_path / "run"
    run_cli(
        "fit", "--config", str(CONFIGS / "daquar_san.yaml"), f"--data.dataset.init_args.root={tmp_path / 'daquar'}",
        "--trainer.max_epochs=1", "--data.num_workers=0", "--data.batch_size=4", f"--data.cache_dir={tmp_path / 'cache'}",
        f"--trainer.default_root_dir={run_dir}", f"--trainer.logger.init_args.save_dir={run_dir}", *overrides,
        cwd=tmp_path,
    )
    return run_dir


@pytest.mark.slow
def test_daquar_config_trains_on_mirror_images_and_reports_wups(tmp_path):
    """The config trains on the photos and their mirror images, whose trunk outputs get their own cache."""
    from core.model.encoder import EfficientNetLite
    from data.vqa2 import Daquar
    from vqa.mirroring import mirror_image

    run_dir = fit_daquar(tmp_path)
    metrics = metrics_of(run_dir)
    for name in ["val/accuracy", "val/accuracy/number", "val/accuracy/other", "val/wups@0.9", "val/wups@0.0"]:
        assert 0.0 <= metrics[name] <= 1.0, name
    assert metrics["val/wups@0.0"] >= metrics["val/wups@0.9"] >= metrics["val/set_accuracy"]
    checkpoint = torch.load(next(run_dir.rglob("last.ckpt")), weights_only=True)
    assert checkpoint["hyper_parameters"]["san"]["init_args"]["feature_dropout"] == 0.3  # the config's setting reaches the model

    records = (tmp_path / "cache").glob("*.json")
    cached = {json.loads(path.read_text())["key"]["split"]: path.with_suffix(".npy") for path in records}
    assert sorted(cached) == ["test", "train", "train-mirrored"]  # no mirror images for evaluation
    dataset = Daquar(root=tmp_path / "daquar")
    photo = dataset.load(dataset.image_ids("train")[0])
    encoder = EfficientNetLite(**DAQUAR_ENCODER)
    with torch.inference_mode():
        flipped = encoder.eval().trunk(encoder.transform()(mirror_image(photo))[None])[0]  # (L, 1280)
    stored = {split: torch.from_numpy(np.load(path)[0]).float() for split, path in cached.items()}
    torch.testing.assert_close(stored["train-mirrored"], flipped, atol=2e-2, rtol=1e-2)  # float16 storage
    assert (stored["train-mirrored"] - stored["train"]).abs().max() > 0.1


@pytest.mark.slow
def test_daquar_settings_are_chosen_on_held_out_training_photos(tmp_path):
    """`val_images` holds training photos out as "val", and validation runs on them, never on test (and without
    mirror images, nothing else is cached)."""
    held_out = ["--data.dataset.init_args.val_images=1", "--data.val_split=val"]
    run_dir = fit_daquar(tmp_path, *held_out, "--data.mirror_images=false")
    grids = sorted(json.loads(path.read_text())["key"]["split"] for path in (tmp_path / "cache").glob("*.json"))
    assert grids == ["train", "val"]  # features of the 3 training photos left and of the 1 held out; none of test
    assert 0.0 <= metrics_of(run_dir)["val/accuracy"] <= 1.0


@pytest.mark.slow
def test_fine_tuned_top_block_trains_on_the_cached_trunk(tmp_path):
    """With `trainable_blocks`, the cache holds the input of the top block; training moves that block only."""
    from core.model.encoder import EfficientNetLite

    run_dir = fit_daquar(tmp_path, "--model.encoder.init_args.trainable_blocks=1")
    records = [json.loads(path.read_text()) for path in (tmp_path / "cache").glob("*.json")]
    assert sorted(record["key"]["split"] for record in records) == ["test", "train", "train-mirrored"]
    encoder = EfficientNetLite(**DAQUAR_ENCODER)  # the pretrained weights
    # Lite2's last block reads 208 channels on the head's grid (12 x 12 at the config's 384 px)
    locations = encoder.num_locations
    assert all((record["num_locations"], record["feature_dim"]) == (locations, 208) for record in records)

    trained = torch.load(next(run_dir.rglob("last.ckpt")), weights_only=True)["state_dict"]
    last = f"net._blocks.{encoder.num_blocks - 1}."
    moved = {name for name, value in encoder.state_dict().items() if not torch.equal(trained[f"encoder.{name}"], value)}
    assert {f"{last}_project_conv.weight", "net._conv_head.weight"} <= moved
    assert all(name.startswith((last, "net._conv_head.", "net._bn1.")) for name in moved)


@pytest.mark.slow
def test_photos_read_at_their_own_aspect_ratio_give_a_rectangular_grid_from_fit_to_export(tmp_path):
    """`image_size` as [height, width]: the DAQUAR config reads its photos at 96 x 128 px, a 3 x 4 grid at Lite2's
    stride 32, through the feature cache, grid coordinates, the checkpoint and the export's maps and answer.json."""
    from PIL import Image

    from vqa.module import VqaModule

    run_dir = fit_daquar(tmp_path, "--model.encoder.init_args.image_size=[96, 128]", "--model.san.coordinates=true")
    records = [json.loads(path.read_text()) for path in (tmp_path / "cache").glob("*.json")]
    assert records and all(record["num_locations"] == 12 for record in records)
    assert all("image_size=96x128" in record["key"]["encoder"] for record in records)
    checkpoint = next(run_dir.rglob("last.ckpt"))
    model = VqaModule.load(checkpoint)
    assert (model.encoder.input_shape, model.encoder.grid_shape) == ((96, 128), (3, 4))

    photo = tmp_path / "photo.png"
    Image.new("RGB", (200, 150), (90, 120, 30)).save(photo)
    out = tmp_path / "export"
    run_module("vqa.export", str(checkpoint), str(photo), "--question", "what is on the table?", "--output", str(out),
               cwd=tmp_path)
    record = json.loads((out / "answer.json").read_text())
    assert record["grid_size"] == [3, 4] and record["image_size"] == [200, 150]
    assert len(record["weights"]) == 2 and all(len(row) == 12 for row in record["weights"])
    assert all(sum(row) == pytest.approx(1.0, abs=1e-5) for row in record["weights"])
    assert Image.open(out / "hop_1.png").size == (200, 150)


@pytest.mark.slow
def test_single_word_answers_leave_the_lists_out_of_training_and_test(tmp_path):
    """12 training questions, 4 with list answers: 8 stay, 2 steps of 4 per epoch; test keeps its 8 of 12."""
    run_dir = fit_daquar(tmp_path, "--data.dataset.init_args.single_word_answers=true")
    checkpoint = torch.load(next(run_dir.rglob("last.ckpt")), weights_only=True)
    assert checkpoint["global_step"] == 2
    assert not any("," in answer for answer in checkpoint["hyper_parameters"]["answers"])  # no list is a class
    output = tmp_path / "answers.json"
    run_cli(
        "predict", "--config", str(CONFIGS / "daquar_san.yaml"), f"--data.dataset.init_args.root={tmp_path / 'daquar'}",
        "--data.dataset.init_args.single_word_answers=true", "--data.num_workers=0",
        f"--data.cache_dir={tmp_path / 'cache'}", f"--ckpt_path={next(run_dir.rglob('last.ckpt'))}",
        f"--writer.output={output}", f"--trainer.default_root_dir={run_dir}", "--trainer.logger=false", cwd=tmp_path,
    )
    assert len(json.loads(output.read_text())) == 8


@pytest.mark.slow
def test_the_cnn_question_model_trains_and_comes_back_from_its_checkpoint(tmp_path):
    """`--model.question_model` picks the paper's CNN question model; the checkpoint alone rebuilds it."""
    from vqa.module import VqaModule
    from vqa.question_encoder import ConvQuestionEncoder

    run_dir = fit_daquar(
        tmp_path, "--model.question_model=vqa.question_encoder.ConvQuestionEncoder", "--model.question_dim=40"
    )
    assert 0.0 <= metrics_of(run_dir)["val/accuracy"] <= 1.0
    model = VqaModule.load(next(run_dir.rglob("last.ckpt")))
    assert isinstance(model.question_encoder, ConvQuestionEncoder)
    assert [c.out_channels for c in model.question_encoder.convolutions] == [8, 16, 16]
    image = torch.rand(3, *model.encoder.input_shape)
    assert model.answer(image, "what is near the chair?").answers
