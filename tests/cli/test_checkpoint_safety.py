"""Checkpoints are data, not code: a checkpoint whose unpickling would run code is refused by every way the
project loads one (the Python API, the CLIs, Lightning's own loading when resuming or testing, the demo app),
with an error that names the file, and the code never runs. A checkpoint of the wrong kind or size is refused
by name too.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import lightning as L
import pytest
import torch
from lightning.pytorch.demos.boring_classes import BoringModel
from lightning.pytorch.plugins.io import TorchCheckpointIO

import demo
from captioning.bundled import SHAPES_SOFT
from captioning.module import CaptioningModule
from core.training.checkpoints import CheckpointError, SafeCheckpointIO, read_checkpoint
from tests.helpers import CAPTIONING_CONFIGS as CONFIGS
from tests.helpers import REPO, SMALL_SHAPES
from vqa.bundled import SHAPES_SAN
from vqa.module import VqaModule


class CreatesFile:
    """Pickles as a call to `open(marker, "w")`: unpickling it creates the marker file."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (open, (str(self.marker), "w"))


def pickled_code_checkpoint(source: Path, path: Path, marker: Path) -> Path:
    """A copy of a real checkpoint with one extra entry whose unpickling creates `marker`."""
    checkpoint = read_checkpoint(source)
    checkpoint["callbacks"] = {"Innocent": CreatesFile(marker)}
    checkpoint["pytorch-lightning_version"] = L.__version__
    torch.save(checkpoint, path)
    return path


@pytest.fixture
def evil(tmp_path) -> dict[str, Path]:
    """Captioning and VQA checkpoints with pickled code, the marker their code would create, and a proof that
    the code does run when the file is loaded the unsafe way."""
    marker = tmp_path / "marker"
    files = {
        "captioning": pickled_code_checkpoint(SHAPES_SOFT, tmp_path / "evil_captioning.ckpt", marker),
        "vqa": pickled_code_checkpoint(SHAPES_SAN, tmp_path / "evil_vqa.ckpt", marker),
        "marker": marker,
    }
    torch.load(files["captioning"], weights_only=False)  # the control: unsafe loading runs the code
    assert marker.exists()
    marker.unlink()
    return files


def test_the_python_api_refuses_pickled_code(evil):
    refused = r"evil_captioning\.ckpt is not a plain-data checkpoint and was not loaded: loading it would run code"
    with pytest.raises(CheckpointError, match=refused):
        CaptioningModule.load(evil["captioning"])
    with pytest.raises(CheckpointError, match=r"evil_vqa\.ckpt is not a plain-data checkpoint"):
        VqaModule.load(evil["vqa"])
    assert not evil["marker"].exists()


def test_the_demo_refuses_pickled_code(evil):
    with pytest.raises(CheckpointError, match=r"evil_captioning\.ckpt is not a plain-data checkpoint"):
        demo.load_models({"soft": evil["captioning"]}, {"shapes": SHAPES_SAN})
    with pytest.raises(CheckpointError, match=r"evil_vqa\.ckpt is not a plain-data checkpoint"):
        demo.load_models({"soft": SHAPES_SOFT}, {"shapes": evil["vqa"]})
    assert not evil["marker"].exists()


def test_lightnings_own_loading_refuses_pickled_code_with_the_projects_checkpoint_io(evil, tmp_path, monkeypatch):
    """`trainer.test(ckpt_path=...)` reads through the CheckpointIO plugin. Lightning's default leaves
    `weights_only` to torch, which an environment variable turns off: then the plain plugin runs the code."""
    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    options = dict(default_root_dir=tmp_path, logger=False, enable_progress_bar=False, enable_model_summary=False)
    with pytest.raises(CheckpointError, match=r"evil_captioning\.ckpt is not a plain-data checkpoint"):
        L.Trainer(plugins=[SafeCheckpointIO()], **options).test(BoringModel(), ckpt_path=evil["captioning"])
    assert not evil["marker"].exists()
    with pytest.raises(Exception):  # the control: the state dict does not fit, but the code has already run
        L.Trainer(plugins=[TorchCheckpointIO()], **options).test(BoringModel(), ckpt_path=evil["captioning"])
    assert evil["marker"].exists()


def run_captioning(*args: str, cwd: Path):
    import os
    import subprocess
    import sys

    return subprocess.run(
        [sys.executable, "-m", "captioning", *args], cwd=cwd, capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONPATH": str(REPO), "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1"},
    )


@pytest.mark.slow
def test_the_cli_refuses_pickled_code_by_name_before_anything_runs(evil, tmp_path):
    result = run_captioning(
        "test", "--config", str(CONFIGS / "shapes_soft.yaml"), *SMALL_SHAPES, f"--ckpt_path={evil['captioning']}",
        f"--trainer.default_root_dir={tmp_path / 'run'}", f"--data.cache_dir={tmp_path / 'cache'}", cwd=tmp_path,
    )
    assert result.returncode != 0
    assert f"error: {evil['captioning']} is not a plain-data checkpoint" in result.stderr, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    assert not evil["marker"].exists() and not (tmp_path / "cache").exists()


def test_resuming_from_last_through_the_cli_reads_the_file_as_data(evil, tmp_path, monkeypatch):
    """`fit --ckpt_path last` is resolved and read by Lightning itself, through the CLI's CheckpointIO."""
    from captioning.cli import main

    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    checkpoints = tmp_path / "checkpoints"
    checkpoints.mkdir()
    evil["captioning"].rename(checkpoints / "last.ckpt")
    checkpoint = {"dirpath": str(checkpoints), "save_last": True}
    callbacks = json.dumps([{"class_path": "lightning.pytorch.callbacks.ModelCheckpoint", "init_args": checkpoint}])
    with pytest.raises(SystemExit, match=r"last\.ckpt is not a plain-data checkpoint"):
        main([
            "fit", "--config", str(CONFIGS / "shapes_soft.yaml"), *SMALL_SHAPES, "--ckpt_path=last",
            f"--trainer.callbacks={callbacks}", "--trainer.logger=false", "--trainer.max_epochs=1",
            f"--trainer.default_root_dir={tmp_path / 'run'}", f"--data.cache_dir={tmp_path / 'cache'}",
        ])
    assert not evil["marker"].exists()


# -- the wrong kind, the wrong size, a broken file --------------------------------------------------------------


def test_a_checkpoint_of_the_other_model_is_refused_by_name_in_the_api_and_the_clis(tmp_path):
    from captioning.cli import main as captioning_main
    from vqa.cli import main as vqa_main

    refused = r"shapes_san\.ckpt is not a captioning checkpoint \(it is a VQA one: give it to `python -m vqa`\)"
    with pytest.raises(CheckpointError, match=refused):
        CaptioningModule.load(SHAPES_SAN)
    refused = r"shapes_soft\.ckpt is not a VQA checkpoint \(it is a captioning one: give it to `python -m captioning`\)"
    with pytest.raises(CheckpointError, match=refused):
        VqaModule.load(SHAPES_SOFT)
    common = [f"--trainer.default_root_dir={tmp_path}", "--trainer.logger=false"]
    with pytest.raises(SystemExit, match=r"shapes_san\.ckpt is not a captioning checkpoint"):
        captioning_main(["test", "--config", str(CONFIGS / "shapes_soft.yaml"), f"--ckpt_path={SHAPES_SAN}", *common])
    with pytest.raises(SystemExit, match=r"shapes_soft\.ckpt is not a VQA checkpoint"):
        vqa_config = REPO / "configs" / "vqa" / "shapes_san.yaml"
        vqa_main(["test", "--config", str(vqa_config), f"--ckpt_path={SHAPES_SOFT}", *common])


def grown_vocabulary_checkpoint(path: Path) -> Path:
    """The bundled soft model's checkpoint with two more words in its vocabulary than rows in its embedding."""
    checkpoint = read_checkpoint(SHAPES_SOFT)
    checkpoint["hyper_parameters"]["vocabulary"] = [*checkpoint["hyper_parameters"]["vocabulary"], "zebra", "quokka"]
    checkpoint["pytorch-lightning_version"] = L.__version__
    torch.save(checkpoint, path)
    return path


def test_weights_of_another_vocabulary_size_are_refused_by_name(tmp_path):
    from captioning.cli import main

    path = grown_vocabulary_checkpoint(tmp_path / "grown.ckpt")
    mismatch = (
        r"grown\.ckpt has weights of other sizes than the model it is loaded into: "
        r"decoder\.embedding\.weight is \(23, 256\) here, \(25, 256\) in the model, decoder\.out\.weight"
    )
    with pytest.raises(CheckpointError, match=mismatch):
        CaptioningModule.load(path)
    # the CLI builds the model from the checkpoint's hyper-parameters (no config: nothing else to mix in)
    with pytest.raises(SystemExit, match=mismatch):
        main(["test", f"--ckpt_path={path}", f"--trainer.default_root_dir={tmp_path}", "--trainer.logger=false"])


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (lambda good: good[: len(good) // 2], "not a readable checkpoint (truncated or not a torch file)"),
        (lambda good: b"", "not a readable checkpoint"),
        (lambda good: b"just some notes\n" * 20, "not a readable checkpoint"),
        (lambda good: bytes(range(256)) * 4, "not a readable checkpoint"),
        (lambda good: _saved([1, 2, 3]), "not a Lightning checkpoint (it holds a list)"),
    ],
    ids=["truncated", "empty", "text", "random", "list"],
)
def test_a_file_that_is_not_a_whole_checkpoint_is_refused_by_name(tmp_path, content, problem):
    path = tmp_path / "broken.ckpt"
    path.write_bytes(content(SHAPES_SOFT.read_bytes()))
    with pytest.raises(CheckpointError) as raised:
        CaptioningModule.load(path)
    assert str(raised.value).startswith(f"{path} ") and problem in str(raised.value)


def _saved(value) -> bytes:
    buffer = io.BytesIO()
    torch.save(value, buffer)
    return buffer.getvalue()
