"""Training curves from Lightning's CSV logs (`core.training.curves`): the per-epoch values against a hand
computation, the picture, and the command's errors."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from PIL import Image

from core.training.curves import Curves, main, parse_run

COLUMNS = ["epoch", "step", "train/cross_entropy", "val/BLEU-4"]


def write_log(path: Path, rows: list[dict]) -> Path:
    """A metrics.csv as CSVLogger writes it: every column in the header, empty where a row did not log it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    return path


@pytest.fixture
def log(tmp_path) -> Path:
    return write_log(
        tmp_path / "soft" / "metrics.csv",
        [
            {"epoch": 0, "step": 49, "train/cross_entropy": 4.0},
            {"epoch": 0, "step": 99, "train/cross_entropy": 3.0},
            {"epoch": 0, "step": 99, "val/BLEU-4": 0.10},
            {"epoch": 1, "step": 149, "train/cross_entropy": 2.5},
            {"epoch": 1, "step": 199, "train/cross_entropy": "nan"},  # a bad step is left out, not averaged in
            {"epoch": 1, "step": 199, "val/BLEU-4": 0.15},
        ],
    )


def test_training_metrics_are_averaged_per_epoch_and_validation_kept(log):
    curves = Curves.read("soft", log)
    assert curves.series("train/cross_entropy") == ([1, 2], [3.5, 2.5])  # (4 + 3) / 2, then 2.5 alone
    assert curves.series("val/BLEU-4") == ([1, 2], [0.10, 0.15])
    assert curves.series("val/CIDEr") == ([], [])
    assert Curves.read("soft", log.parent).values == curves.values  # the run folder works too


def test_the_command_draws_one_panel_per_metric(log, tmp_path):
    pytest.importorskip("matplotlib")
    other = write_log(tmp_path / "hard" / "metrics.csv", [{"epoch": 0, "step": 9, "val/BLEU-4": 0.2}])
    out = tmp_path / "figures" / "curves.png"
    assert main([str(out), f"soft={log}", str(other), "--metrics", "train/cross_entropy", "val/BLEU-4"]) == 0
    with Image.open(out) as picture:
        assert picture.format == "PNG" and picture.size == (840, 320)  # 2 panels of 4.2 x 3.2 inches at 100 dpi
    assert parse_run(str(other)) == ("hard", [other])


def test_a_continued_run_follows_the_one_it_started_from(log, tmp_path):
    fine_tuning = write_log(
        tmp_path / "scst" / "metrics.csv",
        [
            {"epoch": "", "step": 0},  # a learning-rate row before the first epoch
            {"epoch": 0, "step": 9, "val/BLEU-4": 0.20},
            {"epoch": 1, "step": 19, "val/BLEU-4": 0.22},
        ],
    )
    stopped = write_log(  # a first stage stopped in its third epoch, before that epoch's validation
        tmp_path / "stopped" / "metrics.csv", [*csv.DictReader(log.open()), {"epoch": 2, "train/cross_entropy": 2.0}]
    )
    for first in (log, stopped):
        curves = Curves.read("soft", first, fine_tuning)
        # the first run's epochs 1-2, then the fine-tuning's epochs 1-2 as epochs 3-4
        assert curves.series("val/BLEU-4") == ([1, 2, 3, 4], [0.10, 0.15, 0.20, 0.22])
        assert curves.series("train/cross_entropy") == ([1, 2], [3.5, 2.5])  # logged by the first stage only
    assert Curves.read("soft", stopped).series("train/cross_entropy") == ([1, 2, 3], [3.5, 2.5, 2.0])  # alone: kept
    assert parse_run(f"soft={log}+{fine_tuning}") == ("soft", [log, fine_tuning])
    with pytest.raises(ValueError, match="no metrics file given for 'soft'"):
        Curves.read("soft")


def test_the_command_names_what_is_wrong(log, tmp_path, capsys):
    out = tmp_path / "curves.png"
    assert main([str(out), f"soft={tmp_path / 'nowhere.csv'}"]) == 1
    assert "no metrics file at" in capsys.readouterr().err
    pytest.importorskip("matplotlib")
    assert main([str(out), f"soft={log}", "--metrics", "val/CIDEr"]) == 1
    assert "no run logged val/CIDEr; logged metrics: train/cross_entropy, val/BLEU-4" in capsys.readouterr().err
    (tmp_path / "other.csv").write_text("a,b\n1,2\n")
    assert main([str(out), str(tmp_path / "other.csv")]) == 1
    assert "not a Lightning CSVLogger metrics file" in capsys.readouterr().err
    assert not out.exists()
