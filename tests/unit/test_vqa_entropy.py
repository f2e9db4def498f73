"""The SAN's attention entropy term: the training loss is the answer loss plus the weight times the hops' mean
map entropy, computed here by hand."""

import functools

import pytest
import torch

from core.model.encoder import EfficientNetLite
from data.vocabulary import Vocabulary
from vqa.answers import AnswerVocabulary
from vqa.module import VqaModule
from vqa.san import StackedAttention


def _module(entropy_weight: float) -> VqaModule:
    model = VqaModule(
        encoder=EfficientNetLite(variant=0, image_size=64), embed_dim=8, question_dim=6,
        san=functools.partial(StackedAttention, attention_dim=5),
        entropy_weight=entropy_weight,
    )
    model.set_vocabularies(Vocabulary([*Vocabulary.SPECIALS, "what", "colour"]), AnswerVocabulary(["red", "blue", "yes"]))
    return model.eval()  # no dropout: both losses see the same forward pass


def test_entropy_weight_adds_the_hops_mean_entropy_to_the_loss():
    torch.manual_seed(0)
    plain, sharpened = _module(0.0), _module(0.3)
    sharpened.load_state_dict(plain.state_dict())  # the term has no parameters of its own
    grids = torch.randn(3, plain.encoder.num_locations, plain.encoder.feature_dim)  # cached (B, L, D)
    batch = {
        "inputs": grids, "question": torch.tensor([[4, 5], [5, 4], [4, 0]]), "length": torch.tensor([2, 2, 1]),
        "targets": torch.tensor([[1.0, 0.0, 0.0], [0.0, 0.3, 0.0], [0.0, 0.0, 1.0]]),
    }
    answer_loss, out = plain._step(batch, "val")
    total, _ = sharpened._step(batch, "val")
    p = out.weights.double()  # (3, 2, L) every hop's map
    entropy = -(p * p.log()).sum(-1).mean()  # nats, over questions and hops
    assert entropy > 0.1  # a term that is not negligible here
    torch.testing.assert_close(total.double(), answer_loss.double() + 0.3 * entropy, rtol=1e-5, atol=1e-6)


def test_entropy_weight_must_not_be_negative():
    with pytest.raises(ValueError, match="entropy_weight must be at least 0"):
        VqaModule(encoder=EfficientNetLite(variant=0, image_size=64), entropy_weight=-0.1)
