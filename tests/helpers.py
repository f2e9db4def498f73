"""Plain helpers shared by the test modules: paths, CLI runners, tiny dataset layouts.

These are ordinary functions and constants, imported as `from tests.helpers import ...`. They live here rather
than in conftest.py because they are needed where fixtures are not available: at import time (argument lists,
config paths), inside module-level helper functions, and in the training processes that tests/cli starts (which
import test_crash_safety, and through it this module, outside pytest). Fixtures and hooks are in conftest.py.
"""

from __future__ import annotations

import builtins
import contextlib
import csv
import importlib
import io
import itertools
import json
import os
import runpy
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from PIL import Image

REPO = Path(__file__).resolve().parents[1]

#: Where the tests' gradio_client calls put the files they download (its default leaves a folder per file in the
#: system's temp folder): one folder per test process, made and deleted by the app tests' session fixture
#: (tests/app/conftest.py), so that a process which only imports this module (a training run a CLI test starts, and
#: may kill) leaves none behind.
GRADIO_DOWNLOADS = Path(tempfile.gettempdir()) / f"gradio-client-downloads-{os.getpid()}"
CAPTIONING_CONFIGS = REPO / "configs" / "captioning"
VQA_CONFIGS = REPO / "configs" / "vqa"


def config_chain(path: Path) -> list[Path]:
    """The configs given before the config at `path`, then itself, as its task's command line requires them
    (`TASK.command.HELP`, TASK the config's folder)."""
    return importlib.import_module(f"{path.parent.name}.command").HELP.config_chain(path)


def config_options(path: Path) -> list[str]:
    """`--config` options that give the config at `path` the way its header says: after its base and overlays."""
    return [option for config in config_chain(path) for option in ("--config", str(config))]


def printed_config(path: Path) -> dict:
    """The whole config of the config at `path` given after its base and overlays, as `python -m TASK fit ...
    --print_config` prints it (run in this process; TASK is the config's folder)."""
    import yaml

    main = importlib.import_module(f"{path.parent.name}.cli").main
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), _argv([f"python -m {path.parent.name}"]):
        try:
            main(["fit", *config_options(path), "--print_config"])
        except SystemExit as exit:
            assert exit.code in (0, None), f"--print_config of {path.name} failed: {exit.code}"
    return yaml.safe_load(printed.getvalue())


@contextlib.contextmanager
def _argv(argv: list[str]):
    """sys.argv as the command line would have it (LightningCLI warns when args and a foreign argv both show)."""
    saved, sys.argv = sys.argv, argv
    try:
        yield
    finally:
        sys.argv = saved

# ShapesWorld with tiny splits, for the captioning CLI
SMALL_SHAPES = [
    "--data.dataset.init_args.train_size=24",
    "--data.dataset.init_args.val_size=8",
    "--data.dataset.init_args.test_size=8",
    "--data.dataset.init_args.heldout_size=8",
    "--data.batch_size=8",
    "--data.eval_batch_size=8",
]

# A tiny LocalCNN for the ShapesWorld captioning configs' encoder, which trains with the model at every step
TINY_LOCAL_CNN = ["--model.encoder.init_args.widths=[4,8,8]", "--model.encoder.init_args.feature_dim=8"]

# The CSV logger instead of configs/trainer.yaml's TensorBoard one, for the tests that read metrics.csv row by row
# (every step's values); give it before any --trainer.logger.init_args.* option
CSV_LOGGER = "--trainer.logger=lightning.pytorch.loggers.CSVLogger"


def user_environment() -> dict[str, str]:
    """This process's environment as a user's shell has it: without the suite's quicker caption scorer
    (`$CAPTION_METRICS_BACKEND`, set in conftest.py), so that a command scores with coco-caption's Java tools where
    they are installed, and prints what a user's run prints."""
    from captioning.metrics import BACKEND_VARIABLE

    return {name: value for name, value in os.environ.items() if name != BACKEND_VARIABLE}


def run_python(*args: str, cwd: Path, as_user: bool = False) -> subprocess.CompletedProcess:
    """`python args...` in cwd, the repository on the path (with a user's environment, `as_user`); fails the test
    with the end of its output when it fails."""
    result = subprocess.run(
        [sys.executable, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
        env={**(user_environment() if as_user else os.environ), "PYTHONPATH": str(REPO)},
    )
    assert result.returncode == 0, f"stdout:\n{result.stdout[-3000:]}\nstderr:\n{result.stderr[-5000:]}"
    return result


def run_module(module: str, *args: str, cwd: Path, as_user: bool = False) -> subprocess.CompletedProcess:
    """`python -m module args...` in cwd (with a user's environment, `as_user`); fails the test with the end of its
    output when it fails."""
    return run_python("-m", module, *args, cwd=cwd, as_user=as_user)


@contextlib.contextmanager
def in_process(argv: list[str], *, cwd: Path | None = None, search_path: Path | None = None):
    """Run a command's entry point in this process as if the interpreter had started it with `argv`: a test process
    has torch and Lightning imported already, which spares a new process several CPU-seconds of imports. What a run
    may change for itself is put back afterwards: `sys.argv`, `sys.path` (`search_path` is put first while it runs),
    the working directory (`cwd` while it runs), torch's thread count and grad mode, and the warning filters."""
    import warnings

    import torch

    threads, grad = torch.get_num_threads(), torch.is_grad_enabled()
    old_argv, old_path, old_cwd = sys.argv, list(sys.path), os.getcwd()
    sys.argv = argv
    if search_path is not None:
        sys.path.insert(0, str(search_path))
    try:
        with warnings.catch_warnings():
            if cwd is not None:
                os.chdir(cwd)
            yield
    finally:
        os.chdir(old_cwd)
        sys.argv, sys.path[:] = old_argv, old_path
        torch.set_num_threads(threads)
        torch.set_grad_enabled(grad)


def run_benchmark(script: str, *args: str, folder: str = "benchmarks") -> dict:
    """`python <folder>/<script> args...`, as docs/performance.md runs a benchmark -> the JSON object of its last line
    of output. It runs in this process (`in_process`), as the interpreter would run the file (`runpy`, as `__main__`,
    its folder first on `sys.path`). (The scripts that time work in child processes still start them.)"""
    path = REPO / folder / script
    printed = io.StringIO()
    with in_process([str(path), *args], search_path=path.parent), contextlib.redirect_stdout(printed):
        runpy.run_path(str(path), run_name="__main__")
    return json.loads(printed.getvalue().strip().splitlines()[-1])


def run_experiment(script: str, *args: str) -> dict:
    """`python experiments/<script> args...`, as docs/experiments.md runs it: `run_benchmark` on that folder."""
    return run_benchmark(script, *args, folder="experiments")


def figures_of(value: object, where: str = "") -> dict[str, float]:
    """Every number in a benchmark's JSON answer by its path ("results.fast.soft_2x2.cpu_share"), booleans left
    out, so a test can check they are all finite."""
    if isinstance(value, dict):
        return {k: v for key, item in value.items() for k, v in figures_of(item, f"{where}.{key}".lstrip(".")).items()}
    if isinstance(value, list):
        return {k: v for i, item in enumerate(value) for k, v in figures_of(item, f"{where}[{i}]").items()}
    return {where: value} if isinstance(value, int | float) and not isinstance(value, bool) else {}


def rounding_error(digits: int | None) -> float:
    """The most a figure printed as `round(x, digits)` can be from x (0 for an exact figure, `digits` None)."""
    return 0.0 if digits is None else 0.5 * 10.0**-digits


def printed_approx(expected: float, digits: int, *, rel: float = 0.0, abs: float = 0.0) -> object:  # noqa: A002
    """`pytest.approx(expected)` for a figure printed rounded to `digits` decimals: the tolerance the figure has of its
    own (`rel` of `expected`, or `abs`, whichever is larger, as pytest.approx takes them) plus the rounding's."""
    import pytest

    return pytest.approx(expected, rel=0, abs=max(rel * builtins.abs(expected), abs) + rounding_error(digits))


def assert_printed_result(
    printed: float, digits: int, compute: Callable[..., float], *inputs: tuple[float, int | None]
) -> None:
    """Assert that `printed`, a figure a benchmark computed from unrounded measurements and printed rounded to `digits`
    decimals, is `compute` of values the printed `inputs` can stand for: each input is (its printed value, the
    decimals it was rounded to, None when exact). `compute` must be monotonic in each input (a ratio of positive
    figures, a difference), so that its range over the box of unrounded values is spanned by the box's corners.

    A check against the printed inputs alone (`pytest.approx` with a fixed tolerance) fails on a slower machine,
    where the same rounding of smaller figures is a larger share of them (0.084 printed against 2.0 / 24.4 = 0.0820).
    """
    sides = [(value - rounding_error(places), value + rounding_error(places)) for value, places in inputs]
    ends = [compute(*corner) for corner in itertools.product(*sides)]
    low, high = min(ends) - rounding_error(digits), max(ends) + rounding_error(digits)
    assert low <= printed <= high, f"{printed} is not within [{low}, {high}], what the printed inputs {inputs} allow"


def run_in_process(task: str, *args: str, cwd: Path) -> None:
    """A task's CLI, `python -m captioning args...` or `python -m vqa args...` in the folder `cwd`, run in this process
    through its entry point (`captioning.cli.main`, `vqa.cli.main`; `in_process`). A run that fails raises what the
    command would exit with: SystemExit with its message. Tests that read what the command prints run it in a child
    process (`run_module`)."""
    main = importlib.import_module(f"{task}.cli").main
    with in_process([f"python -m {task}"], cwd=cwd):  # the arguments go to `main` alone, as LightningCLI asks
        main(list(args))


def run_cli(*args: str, cwd: Path) -> None:
    """The captioning CLI, `python -m captioning args...`, in this process (`run_in_process`)."""
    run_in_process("captioning", *args, cwd=cwd)


def metrics_of(run_dir: Path) -> dict[str, float]:
    """The last logged value of every metric of a run: from the TensorBoard event files of the default logger
    (configs/trainer.yaml) and from the metrics.csv files of the CSV logger (`CSV_LOGGER`), whichever it wrote."""
    values = {}
    for folder in sorted({path.parent for path in run_dir.rglob("events.out.tfevents.*")}):
        events = tensorboard_events(folder)
        values.update({tag: events.Scalars(tag)[-1].value for tag in events.Tags()["scalars"]})
    for path in sorted(run_dir.rglob("metrics.csv")):
        for row in csv.DictReader(path.open()):
            values.update({k: float(v) for k, v in row.items() if v})
    return values


def tensorboard_events(folder: Path):
    """Everything the TensorBoard event files in `folder` hold (every value kept, none sampled away), read back
    with TensorBoard's own reader: `.Tags()`, `.Scalars(tag)`, `.Images(tag)`, `.Tensors(tag)`."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(folder), size_guidance={"scalars": 0, "images": 0, "tensors": 0})
    events.Reload()
    return events


def make_vqa_layout(root: Path, files: dict[str, tuple[str, str, str]]) -> None:
    """A tiny dataset in the VQA v2 layout: split -> (questions file, annotations file or "", image pattern)."""
    words = ["chair", "table", "lamp", "bed"]
    qid = 0
    for s, (questions_file, annotations_file, pattern) in enumerate(files.values()):
        questions, annotations = [], []
        for image_id in range(s * 10 + 1, s * 10 + 5):
            path = root / pattern.format(image_id=image_id)
            path.parent.mkdir(parents=True, exist_ok=True)
            image = Image.new("RGB", (40 + image_id, 30), (20 * image_id % 255, 80, 140))
            image.paste((250, 250, 40), (0, 0, 12, 30))  # a bar on the left: the mirror image differs
            image.save(path)
            for k in range(3):
                qid += 1
                answer = "2" if k == 2 else words[(image_id + k) % 4] + (", lamp" if k == 1 else "")
                text = f"what is near the {words[k]}" + (" on the left?" if k == 0 else "?")
                questions.append({"question_id": qid, "image_id": image_id, "question": text})
                answers = [answer] * 10
                annotations.append({
                    "question_id": qid, "image_id": image_id, "question_type": "what is",
                    "answers": [{"answer": a, "answer_confidence": "yes", "answer_id": i + 1} for i, a in enumerate(answers)],
                    "multiple_choice_answer": Counter(answers).most_common(1)[0][0],
                    "answer_type": "number" if k == 2 else "other",
                })
        (root / questions_file).write_text(json.dumps({"questions": questions}))
        if annotations_file:
            (root / annotations_file).write_text(json.dumps({"annotations": annotations}))


DAQUAR_FILES = {
    "train": ("daquar_train_questions.json", "daquar_train_annotations.json", "images/image{image_id}.jpg"),
    "test": ("daquar_test_questions.json", "daquar_test_annotations.json", "images/image{image_id}.jpg"),
}
VQA2_FILES = {
    "train": ("v2_OpenEnded_mscoco_train2014_questions.json", "v2_mscoco_train2014_annotations.json",
              "train2014/COCO_train2014_{image_id:012d}.jpg"),
    "val": ("v2_OpenEnded_mscoco_val2014_questions.json", "v2_mscoco_val2014_annotations.json",
            "val2014/COCO_val2014_{image_id:012d}.jpg"),
    "test": ("v2_OpenEnded_mscoco_test-dev2015_questions.json", "", "test2015/COCO_test2015_{image_id:012d}.jpg"),
}


def always_speaking(model):
    """An untrained Transformer captioner (`captioning.transformer`) made to say real words until its max_length: its
    output norm ignores the word's vector (weight 0, bias e_0), so every logit is the word embedding's first entry,
    set to -100 for the specials and 1, 2, ... for the other words. Its cross-attention, and so its maps, still
    depend on the image. Returns the model, in eval mode."""
    import torch

    decoder, specials = model.decoder, 4  # <pad>, <start>, <end>, <unk>
    with torch.no_grad():
        decoder.ln_out.weight.zero_()
        decoder.ln_out.bias.zero_()
        decoder.ln_out.bias[0] = 1.0
        first = decoder.embedding.weight[:, 0]
        first[:specials] = -100.0
        first[specials:] = torch.arange(1, len(first) - specials + 1, dtype=first.dtype)
    return model.eval()


TINY_CAPTIONS = {  # photo -> split and captions: a Karpathy-layout caption set for Flickr8k-QA
    0: ("train", ["a dog runs through the grass", "a black dog runs through the grass"]),
    1: ("train", ["two children play in the snow", "a man in a red shirt climbs a rock"]),
    2: ("val", ["a dog is in the water"]),
    3: ("test", ["a boy throws a ball", "a group of people"]),
    4: ("val", ["a group of people"]),  # no question: still a photo of the split
}


def karpathy_file(root: Path, photos: dict = TINY_CAPTIONS) -> Path:
    """A Karpathy split file of `photos` (imgid -> (split, captions)) with a 32-px photo each, under root."""
    (root / "images").mkdir(parents=True, exist_ok=True)
    entries = []
    for imgid, (split, captions) in photos.items():
        Image.new("RGB", (32, 32), (imgid * 40, 90, 30)).save(root / "images" / f"photo_{imgid}.jpg")
        sentences = [{"raw": c.capitalize() + ".", "tokens": c.split(), "imgid": imgid} for c in captions]
        entries.append({"filename": f"photo_{imgid}.jpg", "imgid": imgid, "split": split, "sentences": sentences})
    path = root / "dataset_tiny.json"
    path.write_text(json.dumps({"dataset": "tiny", "images": entries}))
    return path
