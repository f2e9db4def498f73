"""Attention correctness: box coverage of grid cells, and the attention mass inside boxes."""

from __future__ import annotations

import pytest
import torch

from core.attention_correctness import box_mask, box_masks, mass_in_box


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
