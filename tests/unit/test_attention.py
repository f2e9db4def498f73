"""Each score function against a hand computation; weights sum to 1; masked places get 0. The additive score's
fast path (`AdditiveScore(fast_path=True)`, `core.model.fast_path`) is held to the same hand computations."""

import math

import pytest
import torch

import core.model.fast_path
from core.model.attention import (
    AdditiveScore,
    Attention,
    CosineScore,
    DotScore,
    GeneralScore,
    KeyStrengthCosineScore,
    LocationScore,
    ScaledDotScore,
    Score,
)


def FastAdditiveScore(**shared) -> AdditiveScore:  # noqa: N802 (named as the class it stands for in the tables)
    """`AdditiveScore` on its fast path."""
    return AdditiveScore(**shared, fast_path=True)


S = torch.tensor([[1.0, 2.0]])  # (B=1, Q=2)
H = torch.tensor([[[3.0, 0.0], [1.0, 1.0], [0.0, -2.0]]])  # (B=1, L=3, D=2)


def build(cls: type[Score], key_dim: int = 2, query_dim: int = 2) -> Score:
    return cls(query_dim=query_dim, key_dim=key_dim, attention_dim=2, num_locations=3)


def scores(score: Score, s=S, h=H) -> list[float]:
    return score(s, score.project_keys(h))[0].tolist()


def test_dot_score_by_hand():
    assert scores(build(DotScore)) == pytest.approx([3.0, 3.0, -4.0])


def test_scaled_dot_score_by_hand():
    r = math.sqrt(2)
    assert scores(build(ScaledDotScore)) == pytest.approx([3 / r, 3 / r, -4 / r])


def test_cosine_score_by_hand():
    ns = math.sqrt(5)
    assert scores(build(CosineScore)) == pytest.approx([3 / (ns * 3), 3 / (ns * math.sqrt(2)), -4 / (ns * 2)])


def test_key_strength_cosine_score_by_hand():
    score = build(KeyStrengthCosineScore)
    with torch.no_grad():
        score.strength.weight.copy_(torch.tensor([[1.0, 0.0]]))  # w^T s = 1
        score.strength.bias.zero_()
    beta, ns = 1 + math.log(1 + math.e), math.sqrt(5)  # 1 + softplus(1)
    assert scores(score) == pytest.approx([beta * x for x in (3 / (ns * 3), 3 / (ns * math.sqrt(2)), -4 / (ns * 2))])


def test_general_score_by_hand():
    score = build(GeneralScore)
    with torch.no_grad():
        score.weight.weight.copy_(torch.tensor([[1.0, 2.0], [0.0, -1.0]]))  # W
    # W h = [3,0], [3,-1], [-4,2]; s^T W h = 3, 1, 0
    assert scores(score) == pytest.approx([3.0, 1.0, 0.0])


@pytest.mark.parametrize("cls", [AdditiveScore, FastAdditiveScore])
def test_additive_score_by_hand(cls):
    score = build(cls)
    with torch.no_grad():
        score.key_proj.weight.copy_(torch.eye(2))
        score.key_proj.bias.copy_(torch.tensor([0.5, 0.0]))
        score.query_proj.weight.copy_(torch.tensor([[0.0, 1.0], [1.0, 0.0]]))
        score.v.weight.copy_(torch.tensor([[2.0, -1.0]]))
    # W_s s = [2, 1]; v^T tanh(W_h h_i + b + W_s s)
    expected = [2 * math.tanh(3.5 + 2) - math.tanh(0 + 1), 2 * math.tanh(1.5 + 2) - math.tanh(2), 2 * math.tanh(2.5) - math.tanh(-1)]
    assert scores(score) == pytest.approx(expected)


def test_location_score_by_hand_ignores_the_image():
    score = build(LocationScore)
    with torch.no_grad():
        score.weight.weight.copy_(torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]))
        score.weight.bias.copy_(torch.tensor([0.0, 0.0, -1.0]))
    assert scores(score) == pytest.approx([1.0, 2.0, 2.0])
    assert scores(score, h=H * 100) == pytest.approx([1.0, 2.0, 2.0])


def test_location_score_rejects_other_grid_sizes():
    with pytest.raises(ValueError, match="3 locations"):
        build(LocationScore).project_keys(torch.zeros(1, 4, 2))


@pytest.mark.parametrize("cls", [DotScore, ScaledDotScore, CosineScore, KeyStrengthCosineScore])
def test_direct_scores_map_keys_into_query_space_when_sizes_differ(cls):
    score = build(cls, key_dim=5, query_dim=2)
    assert score.project_keys(torch.randn(4, 3, 5)).shape == (4, 3, 2)
    assert score(torch.randn(4, 2), score.project_keys(torch.randn(4, 3, 5))).shape == (4, 3)


ALL_SCORES = [
    AdditiveScore,
    FastAdditiveScore,
    DotScore,
    ScaledDotScore,
    CosineScore,
    KeyStrengthCosineScore,
    GeneralScore,
    LocationScore,
]


@pytest.mark.parametrize("cls", ALL_SCORES)
def test_weights_sum_to_one_and_masked_places_get_zero(cls):
    torch.manual_seed(0)
    attention = Attention(score=cls(query_dim=4, key_dim=6, attention_dim=5, num_locations=7))
    keys = torch.randn(3, 7, 6)
    query = torch.randn(3, 4)
    mask = torch.ones(3, 7, dtype=torch.bool)
    mask[0, 2:] = False
    mask[2, ::2] = False
    context, weights = attention(query, keys, attention.prepare(keys), mask)
    assert torch.allclose(weights.sum(-1), torch.ones(3))
    assert torch.all(weights[~mask] == 0)
    assert torch.all(weights[mask] > 0)
    assert torch.allclose(context, torch.einsum("bl,bld->bd", weights, keys), atol=1e-6)


def test_softmax_of_hand_scores():
    attention = Attention(score=build(DotScore))
    _, weights = attention(S, H, attention.prepare(H))
    e = torch.tensor([3.0, 3.0, -4.0]).exp()
    assert torch.allclose(weights[0], e / e.sum())


@pytest.mark.parametrize("cls", ALL_SCORES)
def test_beams_of_an_image_meet_its_one_copy_of_the_keys(cls, monkeypatch):
    """K queries per image against (B, L, .) keys score as each query against its own copy of its image's keys
    (what beam search did with copied grids), blocked or not."""
    torch.manual_seed(0)
    score = cls(query_dim=4, key_dim=6, attention_dim=5, num_locations=3)
    queries, keys = torch.randn(2 * 4, 4), torch.randn(2, 3, 6)  # B=2 images, K=4 queries each
    projected = score.project_keys(keys)
    copied = score(queries, score.project_keys(keys.repeat_interleave(4, 0)))  # (8, 3)
    with torch.no_grad():
        assert torch.allclose(score(queries, projected), copied, atol=1e-6)
        monkeypatch.setattr(core.model.fast_path, "BLOCK_ELEMENTS", 1)  # one image per block
        assert torch.allclose(score(queries, projected), copied, atol=1e-6)


# -- every size different: a scale, a projection or a grouping by the wrong size cannot pass ---------------

Q, D, A, NUM_LOCATIONS = 6, 10, 4, 9  # query_dim, key_dim, attention_dim, num_locations: no two alike
IMAGES, PER_IMAGE = 2, 3  # query n belongs to image n // PER_IMAGE (the rows of a beam search)


def distinct_sizes(cls: type[Score]) -> tuple[Score, torch.Tensor, torch.Tensor]:
    """A score with every size different, in float64 so that the formulas below match to rounding, and its
    queries (N, Q) and keys (B, L, D)."""
    torch.manual_seed(0)
    score = cls(query_dim=Q, key_dim=D, attention_dim=A, num_locations=NUM_LOCATIONS).double()
    with torch.no_grad():
        for parameter in score.parameters():
            parameter.normal_()  # weights of order 1, so that tanh is far from linear
    queries = torch.randn(IMAGES * PER_IMAGE, Q, dtype=torch.float64)
    keys = torch.randn(IMAGES, NUM_LOCATIONS, D, dtype=torch.float64)
    return score, queries, keys


# the key side of each score, h (D,) -> its projection, from the layer's weights
KEY_FORMULAS = {
    AdditiveScore: lambda m, h: m.key_proj.weight @ h + m.key_proj.bias,  # W_h h + b
    FastAdditiveScore: lambda m, h: 2 * (m.key_proj.weight @ h + m.key_proj.bias),  # 2 (W_h h + b), doubled once
    DotScore: lambda m, h: m.key_map.weight @ h,  # W_k h (D != Q)
    ScaledDotScore: lambda m, h: m.key_map.weight @ h,
    CosineScore: lambda m, h: m.key_map.weight @ h / (m.key_map.weight @ h).norm(),  # W_k h / |W_k h|
    KeyStrengthCosineScore: lambda m, h: m.key_map.weight @ h / (m.key_map.weight @ h).norm(),  # as cosine
    GeneralScore: lambda m, h: m.weight.weight @ h,  # W h
    LocationScore: lambda m, h: h[:0],  # nothing: the image is not read
}


def _additive(m: Score, s: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
    # v^T tanh(W_h h + b + W_s s)
    return m.v.weight[0] @ torch.tanh(m.key_proj.weight @ h + m.key_proj.bias + m.query_proj.weight @ s)


def _cosine(m: Score, s: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
    # cos(s, W_k h)
    return s @ (m.key_map.weight @ h) / (s.norm() * (m.key_map.weight @ h).norm())


# each score of query s (Q,) against annotation vector h (D,), from the layer's weights
SCORE_FORMULAS = {
    AdditiveScore: _additive,
    FastAdditiveScore: _additive,  # the same function
    DotScore: lambda m, s, h: s @ (m.key_map.weight @ h),  # s^T W_k h
    # s^T W_k h / sqrt(Q): the scale is the size of the two vectors multiplied, s and W_k h, both of size Q
    ScaledDotScore: lambda m, s, h: s @ (m.key_map.weight @ h) / math.sqrt(Q),
    CosineScore: _cosine,
    # (1 + softplus(w^T s + b)) cos(s, W_k h)
    KeyStrengthCosineScore: lambda m, s, h: (1 + torch.log1p(torch.exp(m.strength.weight[0] @ s + m.strength.bias[0])))
    * _cosine(m, s, h),
    GeneralScore: lambda m, s, h: s @ (m.weight.weight @ h),  # s^T W h
}


@pytest.mark.parametrize("cls", ALL_SCORES)
def test_project_keys_equals_the_formula_with_the_layers_weights(cls):
    score, _, keys = distinct_sizes(cls)
    projected = score.project_keys(keys)
    expected = torch.stack([torch.stack([KEY_FORMULAS[cls](score, h) for h in image]) for image in keys])
    assert projected.shape == expected.shape
    assert torch.allclose(projected, expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize("cls", list(SCORE_FORMULAS))
def test_scores_equal_their_formulas_when_every_size_differs(cls, monkeypatch):
    score, queries, keys = distinct_sizes(cls)
    expected = torch.tensor(
        [[SCORE_FORMULAS[cls](score, s, h).item() for h in keys[n // PER_IMAGE]] for n, s in enumerate(queries)],
        dtype=torch.float64,
    )
    with torch.no_grad():
        assert torch.allclose(score(queries, score.project_keys(keys)), expected, rtol=0, atol=1e-12)
        if cls is FastAdditiveScore:  # and in blocks of one image, as a search makes them
            monkeypatch.setattr(core.model.fast_path, "BLOCK_ELEMENTS", 1)
            assert torch.allclose(score(queries, score.project_keys(keys)), expected, rtol=0, atol=1e-12)


def test_location_score_equals_its_formula_when_every_size_differs():
    score, queries, keys = distinct_sizes(LocationScore)
    expected = torch.stack([score.weight.weight @ s + score.weight.bias for s in queries])  # W s + b, (N, L)
    assert torch.allclose(score(queries, score.project_keys(keys)), expected, rtol=0, atol=1e-12)


def test_scaled_dot_divides_the_dot_score_by_the_root_of_the_query_size():
    """Same weights: the ratio is sqrt(Q) = sqrt(6), not sqrt(D) = sqrt(10) nor sqrt(A) = 2."""
    scaled, queries, keys = distinct_sizes(ScaledDotScore)
    dot = DotScore(query_dim=Q, key_dim=D, attention_dim=A, num_locations=NUM_LOCATIONS).double()
    dot.load_state_dict(scaled.state_dict())
    ratio = dot(queries, dot.project_keys(keys)) / scaled(queries, scaled.project_keys(keys))
    assert torch.allclose(ratio, torch.full_like(ratio, math.sqrt(Q)), rtol=1e-12, atol=0)
