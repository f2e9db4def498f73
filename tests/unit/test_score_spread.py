"""`benchmarks/score_functions.py spread`, the measurement behind docs/attention.md's reading of the score functions,
against the formulas it illustrates: for query and key entries that are independent standard normals of size n,
the dot score s^T h has standard deviation sqrt(n), the scaled one 1, the cosine about 1/sqrt(n); and a softmax of
L normal scores of standard deviation sigma has entropy close to ln L - sigma^2 / 2 (when sigma is small enough
that no cell takes most of the weight), so only the scaled score keeps the same spread of attention at every size."""

from __future__ import annotations

import math

import pytest
import torch

from core.model.attention import Attention, CosineScore, KeyStrengthCosineScore
from tests.helpers import printed_approx


@pytest.fixture(scope="module")
def rows(score_functions) -> list[dict]:
    return score_functions.random_spread(draws=400)


def test_the_dot_scores_spread_grows_as_the_root_of_the_size_and_scaling_undoes_it(
    rows,
):
    assert [row["n"] for row in rows] == [16, 64, 128, 256, 512, 1024]
    for row in rows:
        n = row["n"]
        assert row["dot std"] == printed_approx(math.sqrt(n), 3, rel=0.03)
        assert row["scaled dot std"] == printed_approx(1.0, 3, rel=0.03)
        assert row["cosine std"] == printed_approx(1 / math.sqrt(n), 3, rel=0.06)


def test_only_the_scaled_score_keeps_the_softmax_equally_spread_at_every_size(rows):
    uniform = math.log(196)
    for row in rows:
        assert row["scaled dot entropy"] == printed_approx(uniform - 0.5, 3, abs=0.05)  # sigma = 1
        assert row["cosine entropy"] == printed_approx(uniform - 1 / (2 * row["n"]), 3, abs=0.05)  # nearly uniform
    dot = [row["dot entropy"] for row in rows]
    assert dot == sorted(dot, reverse=True) and dot[-1] < 0.25  # the larger n, the nearer one-hot


def best_case(cells: int, size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A query (1, n) and keys (1, L, n): the query equal to the first key and opposite to all the others."""
    query = torch.randn(1, size)
    return query, torch.cat([query, -query.expand(cells - 1, -1)]).unsqueeze(0)


def test_a_cosine_score_caps_the_weight_of_one_cell_whatever_the_vectors():
    """Cosine scores lie in [-1, 1], so the softmax gives one cell at most e / (e + (L - 1) / e): 3.65% of 196 cells,
    against 0.51% for uniform attention. The best case, the query equal to one key and opposite to all the others,
    reaches it exactly; no training can make the map sharper without a temperature."""
    cells, size = 196, 8
    query, keys = best_case(cells, size)
    attention = Attention(score=CosineScore(query_dim=size, key_dim=size, attention_dim=size, num_locations=cells))
    weights = attention.weights(query, attention.prepare(keys))  # (1, L)
    bound = math.e / (math.e + (cells - 1) / math.e)
    assert weights.max().item() == pytest.approx(bound, rel=1e-5) and bound == pytest.approx(0.0365, abs=1e-4)
    random_keys = torch.randn(1, cells, size)
    assert attention.weights(query, attention.prepare(random_keys)).max().item() <= bound


def test_the_key_strength_lifts_the_cosines_cap():
    """Graves' key strength beta multiplies the cosine, so the same best case gives the one cell
    e^beta / (e^beta + (L - 1) / e^beta): past the bare cosine's cap as soon as beta > 1."""
    cells, size = 196, 8
    query, keys = best_case(cells, size)
    score = KeyStrengthCosineScore(query_dim=size, key_dim=size, attention_dim=size, num_locations=cells)
    with torch.no_grad():
        score.strength.weight.zero_()
        score.strength.bias.fill_(math.log(math.e**4 - 1))  # softplus = 4: beta = 5
    attention = Attention(score=score)
    top = attention.weights(query, attention.prepare(keys)).max().item()
    assert top == pytest.approx(math.exp(5) / (math.exp(5) + (cells - 1) / math.exp(5)), rel=1e-5)
    assert top > 0.99  # against 0.0365 without it
