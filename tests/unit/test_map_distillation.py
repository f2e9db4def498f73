"""`benchmarks.map_distillation.map_divergence` against a hand computation (the fine-tuning itself runs end to end in
tests/cli/test_attention_benchmarks.py)."""

import math

import pytest
import torch

from benchmarks.map_distillation import map_divergence


def test_map_divergence_is_the_kl_from_the_teachers_map_over_real_words() -> None:
    teacher = torch.tensor([[[0.5, 0.5, 0.0], [1.0, 0.0, 0.0]]])  # (B=1, T=2, L=3)
    student = torch.tensor([[[0.25, 0.75, 0.0], [0.2, 0.3, 0.5]]])
    # word 1: 0.5 ln(0.5 / 0.25) + 0.5 ln(0.5 / 0.75) (the teacher's zero adds nothing); word 2 is padding
    expected = 0.5 * math.log(2) + 0.5 * math.log(2 / 3)
    assert map_divergence(teacher, student, torch.tensor([[True, False]])).item() == pytest.approx(expected)
    assert map_divergence(student, student, torch.tensor([[True, True]])).item() == pytest.approx(0, abs=1e-7)

