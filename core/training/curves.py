"""`python -m core.training.curves OUT.png LABEL=RUN_LOG_FOLDER ...`: training curves from Lightning's logs.

Both CLIs log through `lightning.pytorch.loggers.TensorBoardLogger` (configs/trainer.yaml), which writes the event
files of a run into its log folder (`<run folder>/logs/version_N/`), or, with `--trainer.logger
lightning.pytorch.loggers.CSVLogger`, through the CSV logger, which writes one `metrics.csv` there: a row per
logged training step and a row per validation epoch, each row holding only the columns logged at that moment.
Either way Lightning logs each value with its step and epoch. This command reads several such runs and draws one panel per metric against the epoch, one line per run, so
that runs (soft against hard attention, one hop against two) can be compared on one picture; `LABEL=A+B` draws
run B (a fine-tuning started from A's checkpoint) as the continuation of run A. A training metric, logged every
few steps, is shown as its mean over each epoch; a validation metric as its value at the end of each epoch. The
training curves in `docs/results.md` are made with it.

"""

from __future__ import annotations

import csv
import math
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from jsonargparse import ArgumentParser


@dataclass
class Curves:
    """One run's metrics per epoch: `values[metric][epoch]` is the epoch's mean of the values logged for it."""

    label: str
    values: dict[str, dict[int, float]] = field(default_factory=dict)

    @classmethod
    def read(cls, label: str, *paths: Path) -> Curves:
        """Read a run's log folder (TensorBoard event files or a CSVLogger `metrics.csv`), or its `metrics.csv`.

        Several paths are runs that continue one another, such as self-critical fine-tuning started from a
        cross-entropy run's checkpoint: each run counts its epochs from 0, so each one's epochs are placed
        after the last validated epoch of the runs before it, and the stages draw as one line. A run that
        another continues and that was stopped mid-epoch loses that unvalidated epoch: the next run started
        from a checkpoint of a validated one.
        """
        if not paths:
            raise ValueError(f"no metrics file given for {label!r}")
        values: dict[str, dict[int, float]] = defaultdict(dict)
        offset = 0
        for number, path in enumerate(paths, start=1):
            stage = _per_epoch_means(Path(path))
            epochs = {epoch for by_epoch in stage.values() for epoch in by_epoch}
            validated = {epoch for name, by_epoch in stage.items() if name.startswith("val/") for epoch in by_epoch}
            last = max(validated) if validated and number < len(paths) else max(epochs, default=-1)
            for name, by_epoch in stage.items():
                values[name].update({offset + epoch: value for epoch, value in by_epoch.items() if epoch <= last})
            offset += last + 1
        return cls(label=label, values={name: dict(sorted(by_epoch.items())) for name, by_epoch in values.items()})

    def series(self, metric: str) -> tuple[list[int], list[float]]:
        """(epochs counted from 1, values) of one metric; empty when the run did not log it."""
        by_epoch = self.values.get(metric, {})
        return [epoch + 1 for epoch in by_epoch], list(by_epoch.values())


def _per_epoch_means(path: Path) -> dict[str, dict[int, float]]:
    """`{metric: {epoch: mean of its finite values logged in that epoch}}` of one run's log: a CSVLogger metrics
    file, or a folder holding one or TensorBoard event files."""
    if path.is_dir() and not (path / "metrics.csv").is_file() and any(path.glob("events.out.tfevents.*")):
        logged = _tensorboard_values(path)
    else:
        logged = _csv_values(path / "metrics.csv" if path.is_dir() else path)
    sums: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for name, epoch, value in logged:
        if math.isfinite(value):
            sums[name][epoch].append(value)
    return {name: {epoch: sum(v) / len(v) for epoch, v in sorted(by_epoch.items())} for name, by_epoch in sums.items()}


def _csv_values(path: Path) -> list[tuple[str, int, float]]:
    """(metric, epoch, value) of every value in a CSVLogger metrics file."""
    if not path.is_file():
        raise FileNotFoundError(
            f"no metrics file at {path}: give a run's log folder (TensorBoard event files or a CSVLogger metrics.csv) "
            "or its metrics.csv"
        )
    values = []
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        if not reader.fieldnames or "epoch" not in reader.fieldnames:
            raise ValueError(f"{path} is not a Lightning CSVLogger metrics file: it has no 'epoch' column")
        for row in reader:
            if not row.get("epoch"):
                continue
            epoch = int(float(row["epoch"]))
            values += [(name, epoch, float(text)) for name, text in row.items() if name not in ("epoch", "step") and text]
    return values


def _tensorboard_values(folder: Path) -> list[tuple[str, int, float]]:
    """(metric, epoch, value) of every scalar in a TensorBoard log folder. Lightning logs the epoch as a scalar of
    its own, "epoch", at every step it logs anything, which gives each value's epoch by its step."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(folder), size_guidance={"scalars": 0})  # 0: keep every value
    events.Reload()
    names = events.Tags()["scalars"]
    if "epoch" not in names:
        raise ValueError(f"{folder} holds no Lightning log: its event files have no 'epoch' scalar")
    epoch_at = {event.step: int(event.value) for event in events.Scalars("epoch")}
    return [
        (name, epoch_at[event.step], event.value)
        for name in names if name != "epoch"
        for event in events.Scalars(name) if event.step in epoch_at
    ]


def plot_curves(runs: Sequence[Curves], metrics: Sequence[str], out: Path, *, title: str | None = None) -> Path:
    """Draw one panel per metric (x: epoch, one line per run) and save a PNG at `out`."""
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    missing = [m for m in metrics if not any(run.values.get(m) for run in runs)]
    if missing:
        known = sorted({name for run in runs for name in run.values})
        raise ValueError(f"no run logged {', '.join(missing)}; logged metrics: {', '.join(known)}")
    columns = 2 if len(metrics) == 4 else min(len(metrics), 3)  # four panels as a square
    rows = math.ceil(len(metrics) / columns)
    figure, axes = plt.subplots(rows, columns, figsize=(4.2 * columns, 3.2 * rows), squeeze=False)
    for ax, metric in zip(axes.flat, metrics):
        for run in runs:
            epochs, values = run.series(metric)
            if epochs:
                ax.plot(epochs, values, marker="o", markersize=3, label=run.label)
        ax.set_title(metric)
        ax.set_xlabel("epoch")
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    for ax in list(axes.flat)[len(metrics) :]:
        ax.set_visible(False)
    if title:
        figure.suptitle(title)
    figure.tight_layout()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out, dpi=100)
    plt.close(figure)
    return out


def parse_run(text: str) -> tuple[str, list[Path]]:
    """'LABEL=PATH' -> (LABEL, [PATH]); 'LABEL=PATH+PATH' for a run continued by another (fine-tuning);
    a bare PATH is labelled by its run folder's name."""
    label, sep, paths = text.partition("=")
    if not sep:
        paths = text
        label = Path(text).parent.name if text.endswith(".csv") else Path(text).name
    return label, [Path(path) for path in paths.split("+")]


def main(argv: Sequence[str] | None = None) -> int:
    parser = ArgumentParser(
        prog="python -m core.training.curves",
        description="Plot per-epoch training curves of one or more runs from their Lightning logs (TensorBoard or CSV).",
    )
    parser.add_argument("out", type=Path, help="the PNG to write")
    parser.add_argument(
        "runs",
        nargs="+",
        help="LABEL=RUN/logs/version_N (a run's log folder: TensorBoard or CSV logs) or its metrics.csv, one per run; "
        "LABEL=FIRST+NEXT for a run continued by "
        "another, as self-critical fine-tuning continues a cross-entropy run",
    )
    parser.add_argument(
        "--metrics",
        nargs="+",
        default=["train/cross_entropy", "val/BLEU-4", "val/CIDEr"],
        help="metrics to plot, one panel each",
    )
    parser.add_argument("--title", default=None, help="a title over the panels")
    args = parser.parse_args(argv)
    try:
        runs = [Curves.read(label, *paths) for label, paths in map(parse_run, args.runs)]
        written = plot_curves(runs, args.metrics, args.out, title=args.title)
    except (OSError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    except ImportError as err:
        print(f"error: plotting needs matplotlib ({err}); install it with `pip install matplotlib`", file=sys.stderr)
        return 1
    print(written)
    return 0


if __name__ == "__main__":
    sys.exit(main())
