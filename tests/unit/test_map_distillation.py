"""`experiments.map_distillation`: the divergence against a hand computation, and a teacher with other words refused
(the fine-tuning itself runs end to end in tests/cli/test_attention_benchmarks.py)."""

import math

import pytest
import torch

from experiments.map_distillation import MapDistillation, map_divergence
from captioning.bundled import FLICKR8K_SOFT, SHAPES_SOFT


def test_map_divergence_is_the_kl_from_the_teachers_map_over_real_words() -> None:
    teacher = torch.tensor([[[0.5, 0.5, 0.0], [1.0, 0.0, 0.0]]])  # (B=1, T=2, L=3)
    student = torch.tensor([[[0.25, 0.75, 0.0], [0.2, 0.3, 0.5]]])
    # word 1: 0.5 ln(0.5 / 0.25) + 0.5 ln(0.5 / 0.75) (the teacher's zero adds nothing); word 2 is padding
    expected = 0.5 * math.log(2) + 0.5 * math.log(2 / 3)
    assert map_divergence(teacher, student, torch.tensor([[True, False]])).item() == pytest.approx(expected)
    assert map_divergence(student, student, torch.tensor([[True, True]])).item() == pytest.approx(0, abs=1e-7)


def test_a_teacher_with_other_words_or_no_file_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"the teacher .*shapes_soft\.ckpt has another vocabulary"):
        MapDistillation(teacher=SHAPES_SOFT, initial_weights=FLICKR8K_SOFT)
    with pytest.raises(ValueError, match=r"teacher nope\.ckpt is not a file"):
        MapDistillation(teacher="nope.ckpt", initial_weights=FLICKR8K_SOFT)
