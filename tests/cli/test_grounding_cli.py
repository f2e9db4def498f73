"""`python -m captioning.grounding` end to end, as a user runs it: ShapesWorld scenes with their true boxes, the bundled
ShapesWorld model (which looks at what it names), a JSON report; and the one-line errors for bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from captioning.grounding import main
from data.shapes_scene import SHAPES, generate_split_scene, render_scene
from tests.helpers import run_module

SIZE = 224


@pytest.fixture(scope="module")
def scenes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """12 ShapesWorld test scenes as PNG files, their boxes in the coco-boxes layout, and a word list of the shapes."""
    root = tmp_path_factory.mktemp("scenes")
    (root / "images").mkdir()
    images = {}
    for index in range(12):
        scene = generate_split_scene(0, "test", index)
        render_scene(scene, SIZE).save(root / "images" / f"scene{index}.png")
        objects = [
            {"class": obj.shape, "box": [obj.box.x0 * SIZE, obj.box.y0 * SIZE, obj.box.x1 * SIZE, obj.box.y1 * SIZE]}
            for obj in scene.objects
        ]
        images[f"scene{index}.png"] = {"size": [SIZE, SIZE], "objects": objects}
    # two photos that are skipped, each named: one missing, one whose size is not the boxes file's
    images["gone.png"] = {"size": [SIZE, SIZE], "objects": []}
    render_scene(generate_split_scene(0, "test", 0), SIZE // 2).save(root / "images" / "small.png")
    images["small.png"] = {"size": [SIZE, SIZE], "objects": []}
    (root / "boxes.json").write_text(json.dumps({"images": images}))
    (root / "words.json").write_text(json.dumps({"classes": {shape: [shape, shape + "s"] for shape in SHAPES}}))
    return root


def test_the_shapes_model_points_at_what_it_names(scenes: Path, tmp_path: Path) -> None:
    output = tmp_path / "report" / "grounding.json"
    result = run_module(
        "captioning.grounding", "--images", str(scenes / "images"), "--boxes", str(scenes / "boxes.json"),
        "--words", str(scenes / "words.json"), "--model", "shapes-soft", "--output", str(output), cwd=tmp_path,
    )
    assert "shapes-soft: 12 photos, beam 3" in result.stdout
    assert "skipped 2 photos" in result.stdout
    report = json.loads(output.read_text())
    assert "gone.png" in report["skipped"][0] and "small.png: the image is 112x112" in report["skipped"][1]
    means = report["means"]
    # every scene's caption names its shapes: a pair per named shape, none hallucinated
    assert means["pairs"] >= 12 and report["hallucination_rate"] == 0.0
    assert len(report["pairs"]) == means["pairs"] and len(report["captions"]) == 12
    # the bundled model puts most of a word's attention on its shape (85% on its own test scenes, docs/results.md),
    # far above uniform attention and a random cell, which score each box's small share of the scene
    assert means["mass"] > 0.7 and means["mass"] > means["uniform"] + 0.5
    assert means["pointing"] > 0.9 and means["random_cell"] < 0.3
    assert means["mass_pixels"] > 0.6 and means["pointing_pixels"] > 0.9
    # the means are those of the pairs
    pairs = report["pairs"]
    assert means["mass"] == pytest.approx(sum(p["mass"] for p in pairs) / len(pairs))
    # each 95% interval holds its mean; the pointing's lead over the centre point is printed with its interval
    for name, mean in (("mass", means["mass"]), ("pointing", means["pointing"]),
                       ("pointing_minus_centre", means["pointing"] - means["centre"])):  # fmt: skip
        low, high = report["intervals"][name]
        assert low <= mean <= high, name
    assert "95% intervals, resampling the photos:" in result.stdout and "pointing - centre" in result.stdout
    assert set(report["by_class"]) <= set(SHAPES)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"--images": "missing"}, "--images missing is not a folder"),
        ({"--boxes": "missing.json"}, "boxes file missing.json does not exist"),
        ({"--model": "no-such-model"}, "neither a checkpoint file nor a bundled model"),
        ({"--words": "boxes.json"}, "expected {'classes'"),
    ],
)
def test_bad_input_gets_one_line(
    scenes: Path, change: dict[str, str], message: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(scenes)
    arguments = {"--images": "images", "--boxes": "boxes.json", "--words": "words.json", "--model": "shapes-soft"}
    arguments.update(change)
    assert main([item for pair in arguments.items() for item in pair]) == 2
    error = capsys.readouterr().err
    assert error.startswith("error: ") and message in error and len(error.splitlines()) == 1
