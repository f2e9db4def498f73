"""experiments.cell_colour_probe: cell labels counted by hand, and a probe that can and cannot read the labels."""

from __future__ import annotations

import torch

from experiments.cell_colour_probe import PALETTE, dominant_colours, probe

RED, BLUE, WHITE = (list(PALETTE).index(name) for name in ("red", "blue", "white"))


def test_each_cell_takes_the_colour_most_of_its_pixels_are_nearest_to():
    pixels = torch.zeros(4, 4, 3)  # 2 x 2 cells of 2 x 2 pixels
    pixels[:2, :2] = torch.tensor([210, 40, 20])  # near red
    pixels[:2, 2:] = torch.tensor([250, 250, 250])  # white
    pixels[2:, :2] = torch.tensor([20, 50, 190])  # blue, but one pixel white: 3 of 4
    pixels[2, 0] = torch.tensor([250, 250, 250])
    pixels[2, 2:], pixels[3, 2:] = torch.tensor([210, 40, 20]), torch.tensor([20, 50, 190])  # half red, half blue
    assert dominant_colours(pixels, (2, 2)).tolist() == [RED, WHITE, BLUE, -1]


def test_the_probe_reads_labels_the_features_hold_and_not_those_they_do_not():
    generator = torch.Generator().manual_seed(0)
    labels = torch.randint(0, 3, (600,), generator=generator)
    noise = torch.randn(600, 8, generator=generator)
    held = noise + 4 * torch.nn.functional.one_hot(labels, 8).float()
    accuracy, commonest = probe(held, labels)
    assert accuracy > 0.9 and commonest < 0.5
    accuracy, _ = probe(noise, labels)
    assert accuracy < 0.5


def test_the_command_skips_a_corrupt_photo_and_names_it_and_refuses_a_wrong_folder(tmp_path, capsys):
    from experiments.cell_colour_probe import main
    from tests.helpers import karpathy_file
    from vqa.caption_questions import main as make_questions

    assert make_questions([str(karpathy_file(tmp_path / "flickr8k")), str(tmp_path / "qa"), "--cap-share", "1"]) == 0
    (tmp_path / "flickr8k" / "images" / "photo_2.jpg").write_bytes(b"not a photo")  # val: photos 2 and 4
    assert main([str(tmp_path / "qa"), "--split", "val"]) == 0
    captured = capsys.readouterr()
    assert "images/2.jpg" in captured.err and "cells of 1 photos" in captured.out
    assert main([str(tmp_path / "nowhere")]) == 2
    assert "nowhere" in capsys.readouterr().err
