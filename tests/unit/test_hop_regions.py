"""experiments/hop_regions.py: per family, each hop's mass in each ground-truth region, checked on a model whose
every hop attends uniformly, where the mass inside a box is the box's share of the image."""

import functools

import torch
from torch import nn

from experiments.hop_regions import measure
from core.model.encoder import EfficientNetLite
from data.shapes_vqa import ShapesWorldVqa
from data.vocabulary import Vocabulary
from vqa.answers import AnswerVocabulary
from vqa.module import VqaModule
from vqa.san import SanOutput, StackedAttention


class UniformHops(nn.Module):
    """Two hops that spread their attention evenly, and a classifier that always answers class 0."""

    def __init__(self, num_answers: int) -> None:
        super().__init__()
        self.num_answers = num_answers

    def forward(self, features, question):  # (B, L, D), (B, d)
        b, n = features.shape[:2]
        return SanOutput(torch.zeros(b, self.num_answers), torch.full((b, 2, n), 1.0 / n))


def test_uniform_hops_put_each_regions_area_in_it():
    dataset = ShapesWorldVqa(train_size=0, val_size=0, test_size=12, heldout_size=0)
    questions = dataset.questions("test")
    answers = sorted({q.answer for q in questions})
    model = VqaModule(encoder=EfficientNetLite(variant=0, image_size=64), embed_dim=8, question_dim=6,
                       san=functools.partial(StackedAttention, attention_dim=5))
    model.set_vocabularies(Vocabulary.build(q.question for q in questions), AnswerVocabulary(answers))
    model.san = UniformHops(len(answers))
    got = measure(model.eval(), dataset, "test")

    area = lambda box: (box.x1 - box.x0) * (box.y1 - box.y0)  # the share of the image a box covers
    for family in ("two-step", "relation"):
        asked = [q for q in questions if q.question_type == family]
        assert asked, family
        for r in (0, 1):
            expected = 100 * sum(area(q.regions[r]) for q in asked) / len(asked)
            for hop in (1, 2):
                assert abs(got[f"{family} hop{hop} on region{r}"] - expected) < 0.011  # rounded to 2 decimals
        expected_accuracy = 100 * sum(q.answer == answers[0] for q in asked) / len(asked)
        assert abs(got[f"{family} accuracy"] - expected_accuracy) < 0.011
