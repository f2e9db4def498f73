"""What a run shows in TensorBoard (core.training.tensorboard): two tiny epochs through each CLI, then the event file
read back with TensorBoard's own reader: the metrics, and per validation epoch one text and one attention picture for
each of the first 4 validation images, the same ones every epoch."""

from __future__ import annotations

import io
import math
from pathlib import Path
from types import SimpleNamespace

import pytest
from lightning.pytorch.loggers import CSVLogger
from PIL import Image

from core.training.curves import Curves
from tests.helpers import CAPTIONING_CONFIGS, VQA_CONFIGS, run_module, tensorboard_events

SHOWN = 4  # the callback's default count
# ShapesWorld rendered and encoded at 64 px (a 4 x 4 grid at stride 16), a few images, a tiny model: seconds a run
SIZES = dict(image_size=64, train_size=8, val_size=6, test_size=4, heldout_size=4)
TINY_SHAPES = [
    *(f"--data.dataset.init_args.{name}={value}" for name, value in SIZES.items()),
    "--model.encoder.init_args.image_size=64",
    "--data.batch_size=8", "--data.eval_batch_size=8",
    "--trainer.max_epochs=2", "--trainer.limit_train_batches=1", "--trainer.enable_progress_bar=false",
]


# the models' sizes: the captioning decoder's are its own options, the SAN's the module's
TINY_MODEL = {
    "captioning": ["--model.decoder.embed_dim=8", "--model.decoder.attention_dim=8"],
    "vqa": ["--model.embed_dim=8", "--model.san.attention_dim=8"],
}


def fit(task: str, config: Path, tmp_path: Path, *options: str) -> Path:
    """Two tiny epochs of `config` with the configs' own logger (TensorBoard); returns the run's log folder."""
    run_dir = tmp_path / "run"
    run_module(
        task, "fit", "--config", str(config), *TINY_SHAPES, *TINY_MODEL[task], *options,
        f"--data.cache_dir={tmp_path / 'cache'}",
        f"--trainer.default_root_dir={run_dir}", cwd=tmp_path,
    )
    (folder,) = {path.parent for path in run_dir.rglob("events.out.tfevents.*")}  # logs/version_0, as before
    assert folder == run_dir / "logs" / "version_0"
    return folder


def shown(events, metric: str) -> list[tuple[str, Image.Image]]:
    """For each shown image, its text and picture at every validation epoch, checked to be logged once per epoch
    at the steps of `metric` (a validation metric); returns the last epoch's (text, picture) of each."""
    tags = events.Tags()
    assert sorted(tags["images"]) == [f"samples/{n}" for n in range(1, SHOWN + 1)]
    assert sorted(tags["tensors"]) == [f"samples/{n}/text_summary" for n in range(1, SHOWN + 1)]
    steps = [event.step for event in events.Scalars(metric)]
    assert len(steps) == 2  # two validation epochs (not the sanity check before training)
    last = []
    for n in range(1, SHOWN + 1):
        pictures, texts = events.Images(f"samples/{n}"), events.Tensors(f"samples/{n}/text_summary")
        assert [event.step for event in pictures] == [event.step for event in texts] == steps
        text = texts[-1].tensor_proto.string_val[0].decode()
        last.append((text, Image.open(io.BytesIO(pictures[-1].encoded_image_string))))
    return last


def grid_size(tiles: int, tile: tuple[int, int] = (224, 224 + 18)) -> tuple[int, int]:
    """The size of `core.maps.overlays.word_grid`'s picture of `tiles` tiles (the photo's and one per map): 5 a row,
    4 px apart; a 64 px square photo makes 224 px tiles under an 18 px title."""
    columns, rows = min(tiles, 5), math.ceil(tiles / 5)
    return columns * (tile[0] + 4) - 4, rows * (tile[1] + 4) - 4


@pytest.mark.slow
def test_a_captioning_run_shows_captions_and_word_attention(tmp_path: Path) -> None:
    from data.shapes import ShapesWorld

    events = tensorboard_events(fit(
        "captioning", CAPTIONING_CONFIGS / "shapes_soft.yaml", tmp_path, "--model.decoder.decoder_dim=8",
        "--model.max_length=6", "--trainer.num_sanity_val_steps=0",
    ))
    assert {"val/BLEU-4", "val/CIDEr", "val/attention_correctness"} <= set(events.Tags()["scalars"])
    references = [sample.captions[0] for sample in ShapesWorld(**SIZES).samples("val")[:SHOWN]]
    for (text, picture), reference in zip(shown(events, "val/BLEU-4"), references):
        generated, _, rest = text.removeprefix("**generated:** ").partition("\n\n")
        assert rest == f"**reference:** {reference}"
        words = generated.split()
        assert len(words) <= 6
        assert picture.size == grid_size(1 + len(words))


@pytest.mark.slow
def test_a_vqa_run_shows_questions_answers_and_every_hop(tmp_path: Path) -> None:
    from data.shapes_vqa import ShapesWorldVqa

    folder = fit(
        "vqa", VQA_CONFIGS / "shapes_san.yaml", tmp_path, "--model.question_dim=8", "--model.san.classifier_hidden=8"
    )
    events = tensorboard_events(folder)
    assert {"val/accuracy", "val/attention_correctness/hop2"} <= set(events.Tags()["scalars"])
    questions = ShapesWorldVqa(**SIZES).questions("val")[:SHOWN]
    for (text, picture), question in zip(shown(events, "val/accuracy"), questions):
        lines = text.split("\n\n")
        assert lines[0] == f"**question:** {question.question}"
        predicted = lines[1].removeprefix("**predicted:** ")
        assert predicted != lines[1] and predicted.endswith("%)")
        assert lines[2] == f"**answer:** {question.answer.replace('_', ' ')}"
        assert picture.size == grid_size(1 + 2)  # the photo and the 2 hops
    # `python -m core.training.curves` reads the same log: the metrics per epoch
    accuracy = Curves.read("san", folder).values["val/accuracy"]
    assert list(accuracy.values()) == [event.value for event in events.Scalars("val/accuracy")]
    assert list(accuracy) == [0, 1]


def test_nothing_is_drawn_without_a_tensorboard_logger(tmp_path: Path) -> None:
    """Under the CSV logger (or none) the callback returns before it touches the model or the data."""
    from captioning.tensorboard import CaptionSamples

    for loggers in ([CSVLogger(tmp_path)], []):
        trainer = SimpleNamespace(loggers=loggers, sanity_checking=False, global_rank=0)  # no datamodule to read
        CaptionSamples().on_validation_epoch_end(trainer, pl_module=None)
