"""The display scales of the overlays (`core.maps.overlays.FixedScale`, `PerMapStretch`) and the colour bar that
explains them, on small hand-made maps whose values can be worked out by hand."""

import numpy as np
import pytest
import torch
from PIL import Image

from core.maps.overlays import DEFAULT_TOP, FixedScale, PerMapStretch, colorize, colour_bar, heat_maps, word_grid


def test_the_fixed_scale_draws_uniform_attention_at_one_over_top():
    uniform = torch.full((2, 4), 0.25)  # a 2x2 grid, every cell 1/L: 1x uniform
    assert torch.allclose(FixedScale().values(uniform), torch.full((2, 4), 1 / 8))
    assert torch.allclose(FixedScale(top=4.0).values(torch.full((1, 49), 1 / 49)), torch.full((1, 49), 0.25))
    # hand values on top 2: 0.5 * 4 cells = 2x uniform (the top), 0.25 * 4 = 1x (half way), 0 stays 0
    assert FixedScale(top=2.0).values(torch.tensor([[0.5, 0.25, 0.25, 0.0]])).tolist() == [[1.0, 0.5, 0.5, 0.0]]


def test_the_fixed_scale_saturates_a_one_hot_map_and_is_the_same_for_every_map():
    one_hot = torch.eye(49)[:1]  # all on one cell: 49x uniform, over the top of 8
    values = FixedScale().values(one_hot)
    assert values[0, 0] == 1.0 and values[0, 1:].abs().max() == 0.0
    half = torch.tensor([[0.5, 0.5, 0.0, 0.0], [0.1, 0.1, 0.1, 0.7]])  # 2x, 2x ; 0.4x, 0.4x, 0.4x, 2.8x uniform
    expected = torch.tensor([[0.25, 0.25, 0.0, 0.0], [0.05, 0.05, 0.05, 0.35]])
    assert torch.allclose(FixedScale().values(half), expected)  # not each row's own maximum
    assert DEFAULT_TOP == FixedScale().top == 8.0
    with pytest.raises(ValueError, match="above 1"):
        FixedScale(top=1.0)


def test_the_stretch_divides_each_map_by_its_maximum():
    weights = torch.tensor([[0.5, 0.25, 0.25, 0.0], [0.25, 0.25, 0.25, 0.25], [0.0, 0.0, 0.0, 0.0]])
    values = PerMapStretch().values(weights)
    assert values.tolist() == [[1.0, 0.5, 0.5, 0.0], [1.0, 1.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0]]  # flat = all bright


def test_a_flat_map_stays_flat_over_the_photo():
    """Bilinear interpolation keeps the cells' scale: uniform attention is 1/top at every pixel, not 1."""
    uniform = torch.full((1, 49), 1 / 49)
    (fixed,) = heat_maps(uniform, (7, 7), (90, 60))
    assert fixed.shape == (60, 90) and np.allclose(fixed, 1 / 8)
    (stretched,) = heat_maps(uniform, (7, 7), (90, 60), PerMapStretch())
    assert np.allclose(stretched, 1.0)


def test_the_scales_say_what_their_colour_bars_and_json_show():
    assert FixedScale().ticks() == [(0.0, "0"), (0.125, "1 = uniform"), (1.0, "8x uniform or more")]
    assert PerMapStretch().ticks() == [(0.0, "0"), (1.0, "each map's maximum")]
    assert FixedScale(top=8.0).describe()["kind"] == "fixed" and FixedScale(top=8.0).describe()["top"] == 8.0
    assert PerMapStretch().describe()["kind"] == "stretch"


def test_the_colour_bar_goes_under_the_tiles_in_infernos_colours():
    photo = Image.new("RGB", (100, 50), "gray")
    maps = heat_maps(torch.full((3, 49), 1 / 49), (7, 7), photo.size)
    tiles = word_grid(photo, ["a", "b", "c"], maps)
    with_bar = word_grid(photo, ["a", "b", "c"], maps, scale=FixedScale())
    assert with_bar.width == tiles.width and with_bar.height > tiles.height
    assert with_bar.crop((0, 0, *tiles.size)).tobytes() == tiles.tobytes()  # the tiles themselves are unchanged
    bar = np.asarray(with_bar)[tiles.height :].reshape(-1, 3)
    colours = {tuple(c) for c in bar.tolist()}
    darkest, brightest = (tuple(c) for c in colorize(np.array([[0.0, 1.0]]))[0].tolist())
    assert darkest in colours and brightest in colours
    alone = word_grid(Image.new("RGB", (40, 80), "gray"), [], [], scale=PerMapStretch())  # one narrow tile
    assert alone.width >= 300  # widened so the bar's words fit


def test_the_colour_bar_runs_from_dark_to_bright():
    bar = np.asarray(colour_bar(FixedScale(), 400))
    row = bar[10, 6:-6]  # a row through the colours, inside the 6-pixel margins
    assert np.array_equal(row, colorize(np.linspace(0.0, 1.0, 388, dtype=np.float32)[None, :])[0])
    assert row[0].sum() < 30 and row[-1].sum() > 600  # black to pale yellow
