"""What a person sees: each command says what it does, and no library notice unrelated to their work reaches them."""

from __future__ import annotations

import importlib
import runpy
import socket
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from core.training.command_help import SUBCOMMANDS
from tests.helpers import CAPTIONING_CONFIGS, REPO, SMALL_SHAPES, in_process, run_module

#: Printed by the libraries at every run, none about the user's work (see core.training.cli.hide_library_notices)
NOTICES = (
    "save_hyperparameters(ignore=",  # Lightning, for a module passed to a LightningModule
    "is deprecated",  # torch's LeafSpec deprecation, raised inside Lightning
    "in eval mode at the start of training",  # Lightning, for the frozen encoder
    "litlogger",  # Lightning's cloud-logging advertisement
    "v_num",  # the progress bar's logger version, shown as a metric
    "FLOPs",  # Lightning's model summary, which counts none without an example input ("Total FLOPs: 0")
    "Trainer already configured",  # Lightning, for the project's own model summary
    "PTBTokenizer tokenized",  # Stanford's tokenizer, at every evaluation
    "dirpath has changed",  # Lightning, when a checkpoint is scored from another run folder (checked in test_cli.py)
)


@pytest.mark.slow
def test_a_fit_says_what_it_does_and_shows_no_library_notices(tmp_path: Path) -> None:
    result = run_module(
        "captioning",
        # every batch of the tiny splits is read, so their caches are built (a run limited to a few batches encodes
        # what it reads instead, and builds none)
        "fit", "--config", str(CAPTIONING_CONFIGS / "shapes_soft.yaml"), *SMALL_SHAPES, "--trainer.max_epochs=1",
        "--trainer.log_every_n_steps=1",
        f"--data.cache_dir={tmp_path / 'cache'}", f"--trainer.default_root_dir={tmp_path / 'run'}",
        cwd=tmp_path, as_user=True,  # scored as a user's run is: the Java tools, whose tokenizer counts its tokens
    )
    output = result.stdout + result.stderr
    assert [notice for notice in NOTICES if notice in output] == []
    assert "fit: training CaptioningModule on shapesworld" in result.stderr
    assert "train (24 images), val (8 images), 32 images" in result.stderr  # the caches, before they are built
    assert "on this machine, at" in result.stderr  # the estimate
    assert len(result.stderr.splitlines()) < 40, result.stderr  # stderr is not a terminal: no bar redraws
    assert "| Params" in result.stdout + result.stderr  # the model summary, without its FLOPs


def test_the_modules_take_their_submodules_without_lightning_hints() -> None:
    """As the export command and the app build them from a checkpoint: with the encoder and attention objects."""
    from captioning.module import CaptioningModule
    from captioning.objectives import SoftAttention
    from core.model.encoder import EfficientNetLite
    from vqa.module import VqaModule

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        captioning = CaptioningModule(encoder=EfficientNetLite(), attention=SoftAttention())
        vqa = VqaModule(encoder=EfficientNetLite())
    assert [str(w.message) for w in caught if "save_hyperparameters" in str(w.message)] == []
    # the modules are still saved as plain configs, which is what a checkpoint rebuilds them from
    assert captioning.hparams["encoder"]["class_path"] == "core.model.encoder.EfficientNetLite"
    assert captioning.hparams["attention"]["class_path"] == "captioning.objectives.SoftAttention"
    assert vqa.hparams["encoder"]["class_path"] == "core.model.encoder.EfficientNetLite"


@pytest.mark.slow
def test_the_app_says_where_it_is_and_no_share_hint(capsys: pytest.CaptureFixture[str], monkeypatch) -> None:
    monkeypatch.setenv("GRADIO_ANALYTICS_ENABLED", "False")
    import gradio as gr

    import demo

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with gr.Blocks() as app:
        gr.Markdown("hello")
    demo.launch_app(app, port=port, prevent_thread_lock=True)
    try:
        printed = capsys.readouterr().out
    finally:
        app.close()
    assert "share=True" not in printed
    assert f"http://127.0.0.1:{port}/ (this computer only" in printed


@pytest.mark.parametrize("task", ["captioning", "vqa"])
def test_the_help_says_what_the_command_is_its_subcommands_whole_and_every_config(
    task: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "argv", [f"python -m {task}"])  # the test runner's own arguments are not the CLI's
    quick = run_module(task, "--help", cwd=tmp_path).stdout  # answered before torch loads
    with pytest.raises(SystemExit) as exit:  # the full parser, as `python -m TASK -c CONFIG --help` reaches it
        importlib.import_module(f"{task}.cli").main(["--help"])
    assert exit.value.code == 0
    full = capsys.readouterr().out
    configs = sorted((REPO / "configs" / task).glob("*.yaml"))
    assert len(configs) >= 4
    for text in (quick, full):
        assert text.startswith(f"usage: python -m {task} ") and "__main__.py" not in text
        assert "attention" in text.split("\n\n")[1]  # the description, right under the usage
        if task == "captioning":  # both decoders the configs train
            assert "Show-Attend-Tell" in text.split("\n\n")[1] and "Transformer" in text.split("\n\n")[1]
        flat = " ".join(text.split())
        assert all(" ".join(words.split()) in flat for words in SUBCOMMANDS.values())  # each said whole
        assert all(f"configs/{task}/{config.name}: " in text for config in configs)


def test_a_bare_help_does_not_load_torch(tmp_path: Path) -> None:
    program = (
        "import runpy, sys; sys.argv = ['captioning', '--help']; runpy.run_module('captioning', run_name='__main__'); "
        "print('torch loaded' if 'torch' in sys.modules else 'torch not loaded')"
    )
    result = subprocess.run([sys.executable, "-c", program], cwd=REPO, capture_output=True, text=True, check=True)
    assert result.stdout.rstrip().endswith("torch not loaded") and "configs/captioning/flickr8k_soft.yaml" in result.stdout


def test_a_help_read_only_in_part_ends_quietly() -> None:
    """`python -m captioning --help | head -1`: the reader may close the pipe before the help is written; the
    command then ends without a traceback. Here the pipe is closed before Python has even started."""
    help_ = subprocess.Popen([sys.executable, "-m", "captioning", "--help"], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    help_.stdout.close()
    errors = help_.stderr.read().decode()
    assert help_.wait() == 0, errors
    assert errors == ""


@pytest.mark.parametrize(
    ("module", "arguments", "named"),
    [
        ("demo", ["--max-queue", "0"], "max_queue"),
        ("demo", ["--caption-model", "no-such.ckpt"], "--caption-model: 'no-such.ckpt' is neither a bundled model"),
        ("captioning.export", ["in.ckpt", "photo.jpg", "--output", "out", "--beam-size", "0"], "beam_size"),
        ("vqa.export", ["in.ckpt", "photo.jpg", "--question", "what?", "--output", "out", "--top", "-1"], "top"),
        ("captioning.bundle", ["in.ckpt", "out.ckpt", "--complete-phrases", "maybe"], "complete_phrases"),
        ("captioning.averaging", ["out.ckpt", "a.ckpt", "b.ckpt", "--weights", "half", "half"], "weights"),
        ("core.training.curves", ["out.png"], "runs"),
    ],
    ids=lambda value: value if isinstance(value, str) else None,
)
@pytest.mark.filterwarnings("ignore:.*found in sys.modules:RuntimeWarning")  # runpy, for a module a test imported
def test_each_tool_refuses_a_bad_option_by_its_name_before_it_reads_a_file(module, arguments, named, tmp_path, capsys):
    """The tools' command lines (jsonargparse, as the task CLIs): a value of the wrong type, or a missing argument,
    stops at once with the option named and the usage, and no file is read or written."""
    program = str(REPO / "demo.py") if module == "demo" else module
    run = runpy.run_path if module == "demo" else runpy.run_module  # `python demo.py`, or `python -m module`
    with in_process([program, *arguments], cwd=tmp_path), pytest.raises(SystemExit) as stop:
        run(program, run_name="__main__")
    error = capsys.readouterr().err
    assert stop.value.code == 2 and named in error and "usage:" in error, error
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize(
    ("task", "config", "options", "named"),
    [
        # the SAN is built once the data fixes its sizes, when the run sets up: no option type can refuse it earlier
        ("vqa", "shapes_san.yaml", ["--model.san.init_args.hops=0"], "needs at least one hop, got hops=0"),
        ("vqa", "shapes_san.yaml", ["--model.entropy_weight=-1"], "entropy_weight must be at least 0"),
        (
            "captioning", "shapes_soft.yaml",
            ["--model.decoder=captioning.transformer.TransformerDecoder", "--model.decoder.init_args.model_dim=30",
             "--model.decoder.init_args.heads=4"],
            "model_dim 30 does not split into 4 heads",
        ),
    ],
    ids=["san-hops", "vqa-entropy-weight", "transformer-heads"],
)
@pytest.mark.slow  # each sets up a run: about 5 s
def test_a_model_option_the_model_cannot_be_built_with_ends_the_run_with_one_line_naming_it(
    task, config, options, named, tmp_path
):
    """A bad model option is the user's to fix, not a bug: the command ends with the constructor's message (the
    option and its value) instead of a traceback, and before any step or checkpoint. (A SystemExit whose code is the
    message: the interpreter prints that one line and exits with status 1.)"""
    configs = CAPTIONING_CONFIGS if task == "captioning" else CAPTIONING_CONFIGS.parent / task
    argv = [
        task, "fit", "--config", str(configs / config), *SMALL_SHAPES, *options, "--trainer.max_epochs=1",
        f"--data.cache_dir={tmp_path / 'cache'}", f"--trainer.default_root_dir={tmp_path / 'run'}",
    ]  # fmt: skip
    with in_process(argv, cwd=tmp_path), pytest.raises(SystemExit) as stop:
        runpy.run_module(task, run_name="__main__")
    message = str(stop.value.code)
    assert message.startswith("error: ") and named in message and "a model option" in message, message
    assert not list(tmp_path.rglob("*.ckpt"))


@pytest.mark.parametrize(("task", "config"), [("captioning", "shapes_soft.yaml"), ("vqa", "shapes_san.yaml")])
@pytest.mark.parametrize("subcommand", ["test", "fit"])
@pytest.mark.filterwarnings("ignore:.*found in sys.modules:RuntimeWarning")  # runpy, for a module a test imported
def test_a_ckpt_path_that_is_no_file_ends_in_one_line_before_a_run_folder_is_made(task, config, subcommand, tmp_path):
    """A mistyped or not-yet-made `--ckpt_path` is the user's to fix: one line naming it and where the config's fit
    keeps its best checkpoint, no traceback, and no logs/version_N folder left behind for each try."""
    run = tmp_path / "run"
    argv = [
        task, subcommand, "--config", str(REPO / "configs" / task / config), *SMALL_SHAPES,
        f"--data.cache_dir={tmp_path / 'cache'}", f"--trainer.default_root_dir={run}",
        "--ckpt_path", str(run / "best.ckpt"),
    ]  # fmt: skip
    with in_process(argv, cwd=tmp_path), pytest.raises(SystemExit) as stop:
        runpy.run_module(task, run_name="__main__")
    message = str(stop.value.code)
    assert message == (
        f"error: --ckpt_path {run / 'best.ckpt'}: no such checkpoint file; a fit with this config keeps its best "
        f"checkpoint as {run / 'best.ckpt'} (none there yet)"
    )
    assert not list(tmp_path.iterdir())
