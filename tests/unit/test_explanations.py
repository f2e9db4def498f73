"""The gradient-based word maps against finite differences of the decoder's own log-probabilities."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F

from captioning import Captioner
from captioning.explanations import AttentionWeights, GradCAM, GradientTimesInput
from data.shapes_scene import generate_split_scene, render_scene


@pytest.fixture(scope="module")
def captioned():
    captioner = Captioner.from_pretrained("shapes-soft")
    photo = render_scene(generate_split_scene(0, "test", 3), 224)
    return captioner.model, photo, captioner.caption(photo, beam_size=2)


def _word_log_probs(model, decoder, features: torch.Tensor, words: list[int]) -> torch.Tensor:
    """(n,) log p of each word of the caption, teacher-forced, for annotation vectors (1, L, D)."""
    inputs = torch.tensor([[model.vocabulary.start_id, *words[:-1]]])
    logits = decoder(features, inputs, model.attention.inference_read()).logits[0]
    return F.log_softmax(logits, dim=-1)[torch.arange(len(words)), words]


def test_maps_match_finite_differences(captioned) -> None:
    model, photo, caption = captioned
    words = [model.vocabulary.index(word) for word in caption.words]
    decoder = copy.deepcopy(model.decoder).double()  # finite differences in float64, against float32 gradients
    with torch.no_grad():
        features = model.features(model.encoder.transform()(photo)[None]).double()  # (1, L, D)
        base = _word_log_probs(model, decoder, features, words)
        eps = 1e-6
        # gradient x input of cell i: d/de log p(a with cell i scaled by 1 + e) at e = 0
        scaled = []
        for cell in range(features.shape[1]):
            changed = features.clone()
            changed[0, cell] *= 1 + eps
            scaled.append((_word_log_probs(model, decoder, changed, words) - base) / eps)
        times_input = torch.stack(scaled, dim=1).clamp(min=0)  # (n, L)
        # Grad-CAM's channel weight d: the mean over cells of the gradient, d/de log p(a + e on channel d) / L
        channels = []
        for channel in range(features.shape[2]):
            changed = features.clone()
            changed[0, :, channel] += eps
            channels.append((_word_log_probs(model, decoder, changed, words) - base) / eps / features.shape[1])
        weights = torch.stack(channels, dim=1)  # (n, D)
        cam = (weights @ features[0].double().T).clamp(min=0)  # (n, L)
    expected = {GradientTimesInput: times_input, GradCAM: cam}
    for kind, reference in expected.items():
        maps = kind()(model, [photo], [caption])[0].flatten(1).double()  # (n, L), each summing to 1
        assert maps.shape == reference.shape
        torch.testing.assert_close(maps.sum(dim=1), torch.ones(len(words), dtype=torch.float64))
        reference = reference / reference.sum(dim=1, keepdim=True)
        torch.testing.assert_close(maps, reference, atol=2e-3, rtol=1e-2)  # float32 gradients


def test_attention_weights_are_the_captions_own(captioned) -> None:
    model, photo, caption = captioned
    assert AttentionWeights()(model, [photo], [caption])[0] is caption.attention
