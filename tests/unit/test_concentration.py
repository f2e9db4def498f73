"""How concentrated an attention map is (`core.concentration`): the share of the attention on the most attended
5% of the photo, checked against hand computations."""

import pytest
import torch

from core.concentration import describe_share, short_share, top_area_share


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
