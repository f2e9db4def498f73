"""The SAN's grid coordinates (not in the paper, set by the experiments' commands): every region's grid position
appended to its CNN vector before the projection."""

import torch

from core.model.attention import grid_positions
from vqa.san import StackedAttention


def test_coordinates_are_the_grid_positions_appended_to_every_region():
    torch.manual_seed(0)
    kwargs = dict(question_dim=8, attention_dim=6, grid_shape=(3, 3), num_answers=5, hops=2, dropout=0.0)
    with_xy = StackedAttention(feature_dim=4, coordinates=True, **kwargs).eval()
    plain = StackedAttention(feature_dim=6, **kwargs).eval()
    plain.load_state_dict(with_xy.state_dict())  # the same parameters: the projection reads D + 2 inputs
    features, question = torch.rand(3, 9, 4), torch.rand(3, 8)
    xy = grid_positions(3, 3).expand(3, -1, -1)  # (3, 9, 2): cell (r, c) at x = c - 1, y = r - 1 on a 3x3 grid
    expected = plain(torch.cat([features, xy], dim=-1), question)
    got = with_xy(features, question)
    torch.testing.assert_close(got.logits, expected.logits)
    torch.testing.assert_close(got.weights, expected.weights)
    # the same content in every cell: only the positions tell the cells apart, and the maps are not uniform
    flat = with_xy(torch.ones(1, 9, 4), question[:1]).weights
    assert flat.std(dim=-1).min() > 0
