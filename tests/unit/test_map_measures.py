"""The measures of an attention map (`core.maps.measures`), each against hand computations: its entropy, its
concentration on the most attended 5% of the photo, and attention correctness (box coverage of grid cells, the
attention mass inside boxes)."""

from __future__ import annotations

import math

import pytest
import torch

from core.maps.measures import (
    box_mask,
    box_masks,
    describe_share,
    map_entropy,
    mass_in_box,
    short_share,
    top_area_share,
)

# -- entropy


def test_map_entropy_by_hand():
    weights = torch.tensor([[0.25, 0.25, 0.25, 0.25], [1.0, 0.0, 0.0, 0.0], [0.5, 0.5, 0.0, 0.0]])
    expected = torch.tensor([math.log(4), 0.0, math.log(2)])  # uniform: ln L; one cell: 0; two cells: ln 2
    torch.testing.assert_close(map_entropy(weights), expected)


def test_map_entropy_of_bfloat16_maps_is_computed_in_float32():
    """A model under bfloat16 autocast hands over bfloat16 maps; their entropy must not be rounded to bfloat16's
    3 digits (near-uniform maps over 49 cells would all read 3.890625, and so would their mean)."""
    torch.manual_seed(0)
    weights = torch.softmax(0.05 * torch.randn(64, 49), dim=-1).bfloat16()  # (64, 49) near uniform
    entropy = map_entropy(weights)
    assert entropy.dtype == torch.float32
    exact = -(weights.double() * weights.double().log()).sum(-1)
    torch.testing.assert_close(entropy.double(), exact, rtol=0, atol=1e-5)
    assert len(set(entropy.tolist())) > 1  # in bfloat16 every one of them is 3.890625


# -- concentration


def test_uniform_attention_puts_five_percent_on_five_percent_of_the_photo():
    for cells in (4, 49, 196):
        assert top_area_share(torch.full((cells,), 1 / cells)).item() == pytest.approx(0.05, abs=1e-12)


def test_all_attention_on_one_cell_of_49_is_all_on_the_top_five_percent():
    assert top_area_share(torch.eye(49)[17]).item() == pytest.approx(1.0)  # 2.45 cells cover the one cell


def test_the_last_cell_counts_in_part():
    # 7x7: 5% of 49 cells = 2.45 cells, the two largest (0.3, 0.2) and 45% of the third (0.1)
    weights = torch.full((49,), 0.4 / 46, dtype=torch.float64)
    weights[[5, 30, 12]] = torch.tensor([0.2, 0.3, 0.1], dtype=torch.float64)
    assert top_area_share(weights).item() == pytest.approx(0.3 + 0.2 + 0.45 * 0.1)
    # 2x2: 5% of 4 cells = 0.2 cell, a fifth of the largest (0.7)
    two_by_two = torch.tensor([0.1, 0.7, 0.2, 0.0], dtype=torch.float64)
    assert top_area_share(two_by_two).item() == pytest.approx(0.2 * 0.7)
    assert top_area_share(two_by_two, area=0.25).item() == pytest.approx(0.7)  # exactly one cell
    assert top_area_share(two_by_two, area=0.6).item() == pytest.approx(0.7 + 0.2 + 0.4 * 0.1)  # 2.4 cells


def test_each_map_of_a_batch_gets_its_share_of_its_own_total():
    weights = torch.tensor([[0.0, 2.0, 0.0, 2.0], [0.0, 0.0, 0.0, 0.0]])  # sums to 4: the top 0.2 cell holds 2 / 4
    assert top_area_share(weights).tolist() == pytest.approx([0.2 * 0.5, 0.0])  # a map of zeros: 0
    with pytest.raises(ValueError):
        top_area_share(weights, area=0.0)


def test_the_share_in_words():
    assert describe_share(0.62) == "62% of the attention on the most attended 5% of the photo (uniform: 5%)"
    assert short_share(0.62) == "62% on top 5%"
    assert short_share(0.05) == "5% on top 5%"


# -- attention correctness


def test_box_covering_one_cell_with_all_weight_scores_one() -> None:
    # Row 1, column 2 of a 3x4 grid: x in [2/4, 3/4], y in [1/3, 2/3]; row-major index 1 * 4 + 2 = 6.
    weights = torch.zeros(1, 12)
    weights[0, 6] = 1.0
    box = torch.tensor([[2 / 4, 1 / 3, 3 / 4, 2 / 3]])
    assert mass_in_box(weights, box, 3, 4).item() == pytest.approx(1.0)
    expected = torch.zeros(12)
    expected[6] = 1.0
    torch.testing.assert_close(box_mask(box[0].tolist(), 3, 4), expected)


@pytest.mark.parametrize("grid", [(7, 7), (2, 3), (5, 1)])
@pytest.mark.parametrize("box", [(0.0, 0.0, 1.0, 1.0), (0.1, 0.2, 0.55, 0.9), (0.33, 0.0, 0.34, 0.01)])
def test_uniform_attention_scores_the_box_area(grid: tuple[int, int], box: tuple[float, ...]) -> None:
    h, w = grid
    weights = torch.full((1, h * w), 1.0 / (h * w), dtype=torch.float64)
    area = (box[2] - box[0]) * (box[3] - box[1])
    score = mass_in_box(weights, torch.tensor([box], dtype=torch.float64), h, w)
    assert score.item() == pytest.approx(area, rel=1e-9)


def test_half_cell_overlaps_by_hand() -> None:
    # 2x2 grid, box x in [0.25, 1.0], y in [0.0, 0.75]:
    # cell (0,0): half its width, all its height -> 0.5; cell (0,1): 1.0;
    # cell (1,0): half width, half height -> 0.25;     cell (1,1): half height -> 0.5.
    mask = box_mask((0.25, 0.0, 1.0, 0.75), 2, 2)
    torch.testing.assert_close(mask, torch.tensor([0.5, 1.0, 0.25, 0.5]))
    weights = torch.tensor([[0.1, 0.2, 0.3, 0.4]])
    expected = 0.1 * 0.5 + 0.2 * 1.0 + 0.3 * 0.25 + 0.4 * 0.5
    assert mass_in_box(weights, torch.tensor([[0.25, 0.0, 1.0, 0.75]]), 2, 2).item() == pytest.approx(expected)


def test_non_square_grid_is_row_major() -> None:
    # 2 rows x 3 columns. The box over the bottom-right cell (row 1, col 2) lights index 1 * 3 + 2 = 5;
    # a box over the top-right cell (row 0, col 2) lights index 2, not the column-major index 4.
    bottom_right = box_mask((2 / 3, 0.5, 1.0, 1.0), 2, 3)
    top_right = box_mask((2 / 3, 0.0, 1.0, 0.5), 2, 3)
    torch.testing.assert_close(bottom_right, torch.tensor([0.0, 0.0, 0.0, 0.0, 0.0, 1.0]))
    torch.testing.assert_close(top_right, torch.tensor([0.0, 0.0, 1.0, 0.0, 0.0, 0.0]))
    # Matches how a (B, D, H, W) feature map flattens to (B, H*W, D).
    grid = torch.zeros(1, 1, 2, 3)
    grid[0, 0, 0, 2] = 1.0
    flat = grid.flatten(2).transpose(1, 2)[0, :, 0]
    torch.testing.assert_close(flat, top_right)


def test_batch_of_boxes_scores_each_row() -> None:
    weights = torch.tensor([[1.0, 0.0, 0.0, 0.0], [0.25, 0.25, 0.25, 0.25]])
    boxes = torch.tensor([[0.0, 0.0, 0.5, 0.5], [0.5, 0.5, 1.0, 1.0]])
    torch.testing.assert_close(mass_in_box(weights, boxes, 2, 2), torch.tensor([1.0, 0.25]))
    assert box_masks(boxes, 2, 2).shape == (2, 4)


@pytest.mark.parametrize(
    ("weights", "boxes"),
    [
        (torch.ones(1, 5), torch.tensor([[0.0, 0.0, 1.0, 1.0]])),  # wrong number of locations
        (torch.ones(2, 4), torch.tensor([[0.0, 0.0, 1.0, 1.0]])),  # rows and boxes disagree
        (torch.ones(1, 4), torch.tensor([[0.5, 0.0, 0.2, 1.0]])),  # x0 > x1
        (torch.ones(1, 4), torch.tensor([[0.0, 0.0, 1.5, 1.0]])),  # outside the image
    ],
)
def test_invalid_inputs_raise(weights: torch.Tensor, boxes: torch.Tensor) -> None:
    with pytest.raises(ValueError):
        mass_in_box(weights, boxes, 2, 2)
