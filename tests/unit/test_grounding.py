"""The grounding benchmark's parts against hand computations: box unions on the grid, the pointing game, the map at
the photo's pixels, the grid-to-photo mapping through the encoder's own transform, word lists and boxes files."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import pytest
import torch
from PIL import Image, ImageDraw

from captioning.grounding import DEFAULT_WORDS, GroundingReport, ObjectWords, PairScore, score_pair
from core.maps.grounding import Mention
from core.maps.measures import cell_centres, inside_any, mass_in_boxes, pixel_mask, union_cover
from core.model.encoder import ImageTransform
from data.boxes import BoxedObject, BoxedPhoto, read_boxes
from data.errors import DatasetFormatError


def test_union_cover_counts_overlap_once() -> None:
    # a 2x2 grid; the first box is cell 0 exactly, the second the square [0.25, 0.75]^2 across all four cells
    boxes = torch.tensor([[0.0, 0.0, 0.5, 0.5], [0.25, 0.25, 0.75, 0.75]])
    # cell 0 wholly covered; each other cell by a 0.25 x 0.25 corner, a quarter of its 0.5 x 0.5 area
    torch.testing.assert_close(union_cover(boxes, 2, 2), torch.tensor([1.0, 0.25, 0.25, 0.25]))
    # two copies of a box over half a cell cover half of it, not all (capping the sum, as mass_in_boxes does, says 1)
    twice = torch.tensor([[0.0, 0.0, 0.5, 1.0], [0.0, 0.0, 0.5, 1.0]])
    assert union_cover(twice, 1, 1).item() == pytest.approx(0.5)
    capped = mass_in_boxes(torch.ones(1, 1), twice[None], torch.ones(1, 2, dtype=torch.bool), 1, 1)
    assert capped.item() == pytest.approx(1.0)


def test_union_cover_mean_is_the_union_area() -> None:
    boxes = torch.tensor([[0.1, 0.2, 0.6, 0.5], [0.4, 0.3, 0.9, 0.8], [0.0, 0.0, 0.05, 0.05]])
    # inclusion-exclusion: 0.5*0.3 + 0.5*0.5 - (0.2*0.2) + 0.05^2
    area = 0.15 + 0.25 - 0.04 + 0.0025
    for rows, columns in [(7, 7), (3, 5), (1, 1)]:
        assert union_cover(boxes, rows, columns).mean().item() == pytest.approx(area, rel=1e-6)


def test_cell_centres_and_inside() -> None:
    torch.testing.assert_close(cell_centres(1, 2), torch.tensor([[0.25, 0.5], [0.75, 0.5]]))
    box = torch.tensor([[0.0, 0.0, 0.5, 1.0]])
    assert inside_any(torch.tensor([[0.25, 0.5], [0.75, 0.5], [0.5, 0.5]]), box).tolist() == [True, False, True]


def test_pixel_mask_takes_pixel_centres() -> None:
    # a 4x2 photo, the box [0.6, 0, 2, 2]: centres x = 0.5 (out), 1.5 (in), 2.5, 3.5 (out)
    mask = pixel_mask(torch.tensor([[0.6, 0.0, 2.0, 2.0]]), 4, 2)
    assert mask.tolist() == [[False, True, False, False], [False, True, False, False]]


def _photo(size: tuple[int, int], *objects: tuple[str, tuple[float, float, float, float]]) -> BoxedPhoto:
    return BoxedPhoto(file="p.jpg", size=size, objects=tuple(BoxedObject(name, box) for name, box in objects))


def test_score_pair_by_hand() -> None:
    # a 4x2 photo on a 1x2 grid; the dog's box is the left half, x in [0, 2]
    photo = _photo((4, 2), ("dog", (0.0, 0.0, 2.0, 2.0)), ("cat", (3.0, 0.0, 4.0, 1.0)))
    score = score_pair(torch.tensor([[0.75, 0.25]]), photo, Mention(2, "dog", frozenset({"dog"})))
    assert score.mass == pytest.approx(0.75)
    assert score.pointed  # the left cell's centre (1, 1) is inside
    assert score.box_share == pytest.approx(0.5) and score.uniform == pytest.approx(0.5)
    assert score.random_cell == pytest.approx(0.5) and score.random_pixel == pytest.approx(0.5)
    assert score.centre  # (2, 1) lies on the box's edge, which counts
    # the overlay's bilinear stretch to 4 pixels: source x = -0.25, 0.25, 0.75, 1.25 -> 0.75, 0.625, 0.375, 0.25;
    # the two left pixels hold (0.75 + 0.625) / 2 of it
    assert score.mass_pixels == pytest.approx(1.375 / 2.0)
    assert score.pointed_pixels
    # a map on the right cell misses: pointing 0, mass 0.1
    miss = score_pair(torch.tensor([[0.1, 0.9]]), photo, Mention(0, "dog", frozenset({"dog"})))
    assert miss.mass == pytest.approx(0.1) and not miss.pointed and not miss.pointed_pixels
    assert miss.entropy == pytest.approx(-(0.1 * torch.tensor(0.1).log() + 0.9 * torch.tensor(0.9).log()).item())


def _pair(photo: str, pointed: bool, centre: bool) -> PairScore:
    return PairScore(photo=photo, word="dog", position=1, classes=("dog",), box_share=0.5, mass=float(pointed),
                     pointed=pointed, mass_pixels=0.0, pointed_pixels=pointed, random_cell=0.5, random_pixel=0.5,
                     centre=centre, entropy=0.0)  # fmt: skip


def test_the_intervals_resample_photos_with_all_their_words() -> None:
    """Photo a: 3 words pointed right; photo b: 1 word pointed wrong. Drawing 2 photos gives a mean of 1 (a, a),
    3/4 (a, b, either order) or 0 (b, b, probability 1/4): the 95% interval is 0 to 1. Drawing the 4 words one by
    one instead would give 0.25 as its low end (3 or 4 wrong words of 4 drawn: probability 0.051)."""
    report = GroundingReport(model="m", grid=(1, 2), beam_size=3)
    report.pairs = [_pair("a", True, True)] * 3 + [_pair("b", False, True)]
    assert report.means()["pointing"] == pytest.approx(0.75)
    assert report.interval(lambda p: p.pointed) == (0.0, 1.0)
    spans = report.intervals()
    assert spans["pointing"] == spans["mass"] == (0.0, 1.0)
    assert spans["pointing_minus_centre"] == (-1.0, 0.0)  # the centre point is inside every box
    assert "pointing - centre           -0.250  (-1.000 to +0.000)" in report.table()
    report.pairs = [_pair("a", True, False), _pair("b", True, False)]  # every draw the same: no spread
    assert report.interval(lambda p: p.pointed - p.centre) == (1.0, 1.0)
    report.pairs = report.pairs[:1]  # one photo: nothing to resample
    assert all(math.isnan(bound) for bound in report.interval(lambda p: p.pointed))


def test_score_pair_takes_the_union_of_every_named_class() -> None:
    # "bike" names bicycles and motorcycles: the boxes of both count, the person's not
    photo = _photo((10, 10), ("bicycle", (0, 0, 5, 5)), ("motorcycle", (5, 5, 10, 10)), ("person", (5, 0, 10, 5)))
    weights = torch.tensor([[0.1, 0.2], [0.3, 0.4]])  # cells: top-left, top-right, bottom-left, bottom-right
    score = score_pair(weights, photo, Mention(1, "bike", frozenset({"bicycle", "motorcycle"})))
    assert score.classes == ("bicycle", "motorcycle")
    assert score.mass == pytest.approx(0.1 + 0.4)
    assert score.pointed  # the peak, bottom-right, is the motorcycle's
    with pytest.raises(ValueError, match="hallucinated"):
        score_pair(weights, photo, Mention(1, "dog", frozenset({"dog"})))


@pytest.mark.parametrize("size", [(300, 200), (123, 321)])
def test_cells_land_where_the_encoder_transform_puts_the_photo(size: tuple[int, int]) -> None:
    """A white box on a black photo, through the encoder's own resize: the share of each cell's input pixels that
    are white matches `union_cover` of the box divided by the photo's size."""
    width, height = size
    box = (0.3 * width, 0.2 * height, 0.8 * width, 0.55 * height)
    photo = Image.new("RGB", size)
    ImageDraw.Draw(photo).rectangle([round(box[0]), round(box[1]), round(box[2]) - 1, round(box[3]) - 1], fill="white")
    rows, columns, stride = 7, 7, 32
    transform = ImageTransform(size=(rows * stride, columns * stride), mean=(0.0, 0.0, 0.0), std=(1.0, 1.0, 1.0))
    pixels = transform(photo)[0]  # (224, 224) in [0, 1]
    seen = pixels.reshape(rows, stride, columns, stride).mean(dim=(1, 3)).flatten()  # each cell's white share
    normalised = torch.tensor([[box[0] / width, box[1] / height, box[2] / width, box[3] / height]])
    torch.testing.assert_close(seen, union_cover(normalised, rows, columns), atol=0.04, rtol=0)


def test_object_words_read_phrases_first() -> None:
    words = ObjectWords.read(DEFAULT_WORDS)
    caption = "a man rides a bike past a hot dog stand while a dog watches".split()
    found = words.mentions(caption)
    assert [(m.position, m.phrase) for m in found] == [(1, "man"), (4, "bike"), (8, "hot dog"), (12, "dog")]
    assert found[0].classes == {"person"}
    assert found[1].classes == {"bicycle", "motorcycle"}
    assert found[2].classes == {"hot dog"} and found[3].classes == {"dog"}


def test_object_words_file_errors(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="nowhere.json"):
        ObjectWords.read(tmp_path / "nowhere.json")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"classes": {"dog": "dog"}}))
    with pytest.raises(DatasetFormatError, match=r"bad.json.*classes\['dog'\]"):
        ObjectWords.read(bad)


def test_read_boxes_both_layouts_agree(tmp_path: Path) -> None:
    own = tmp_path / "boxes.json"
    own.write_text(json.dumps({"images": {"a.jpg": {"size": [100, 50], "objects": [
        {"class": "diningtable", "coco_class": "dining table", "box": [10, 5, 60, 45]},
        {"class": "dog", "box": [0, 0, 100, 50]},
    ]}}}))
    coco = tmp_path / "instances.json"
    coco.write_text(json.dumps({
        "images": [{"id": 7, "file_name": "a.jpg", "width": 100, "height": 50}],
        "annotations": [
            {"id": 1, "image_id": 7, "category_id": 67, "bbox": [10, 5, 50, 40], "iscrowd": 0, "area": 2000},
            {"id": 2, "image_id": 7, "category_id": 18, "bbox": [0, 0, 100, 50], "iscrowd": 0, "area": 5000},
        ],
        "categories": [{"id": 67, "name": "dining table"}, {"id": 18, "name": "dog"}],
    }))
    photo = _photo((100, 50), ("dining table", (10.0, 5.0, 60.0, 45.0)), ("dog", (0.0, 0.0, 100.0, 50.0)))
    expected = [BoxedPhoto(file="a.jpg", size=(100, 50), objects=photo.objects)]
    assert read_boxes(own) == expected
    assert read_boxes(coco) == expected


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({"images": {"a.jpg": {"size": [10, 10], "objects": [{"class": "dog", "box": [0, 0, 20, 5]}]}}}, "inside the 10x10"),
        ({"images": {"a.jpg": {"size": [10, 10], "objects": [{"box": [0, 0, 5, 5]}]}}}, "no 'class'"),
        ({"images": {"a.jpg": {"size": "big", "objects": []}}}, "size must be"),
        ({"images": {"../a.jpg": {"size": [10, 10], "objects": []}}}, "not a file name"),
        ({"photos": []}, "expected either"),
    ],
)
def test_read_boxes_names_what_is_wrong(tmp_path: Path, document: dict, message: str) -> None:
    path = tmp_path / "boxes.json"
    path.write_text(json.dumps(document))
    with pytest.raises(DatasetFormatError, match=message) as raised:
        read_boxes(path)
    assert "boxes.json" in str(raised.value)


def test_each_group_tables_header_lines_up_with_its_columns() -> None:
    """The label "by box share of the photo" is longer than the other labels: its header and rows are widened alike,
    so every column title stands over its figures."""
    report = GroundingReport(model="m", grid=(1, 2), beam_size=3)
    report.pairs = [_pair("a", True, True), _pair("b", False, True)]
    lines = report.table().splitlines()
    for start in (i for i, line in enumerate(lines) if line.startswith("by ")):
        block = list(itertools.takewhile(bool, lines[start:]))
        assert len(block) > 1 and len({len(line) for line in block}) == 1, block
        header_ends = [block[0].index(title) + len(title) for title in ("pairs", "mass", "uniform", "pointing")]
        for row in block[1:]:
            ends_under = [row[end - 1] != " " and (end == len(row) or row[end] == " ") for end in header_ends]
            assert all(ends_under), (block[0], row)
