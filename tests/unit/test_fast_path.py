"""The fast path (`core.model.fast_path`, `captioning.fast_unroll`) against the readable one: the same losses,
gradients, captions and answers.

Each pair of models is built once with `fast_path=False` (the plain code of the model files) and once with
`fast_path=True`, with the same weights (`load_state_dict`: the two paths share their parameters). The
`UnrolledLinear` products on their own are checked in `test_unrolled_linear.py`.
"""

import inspect

import pytest
import torch
from torch import nn

from captioning.decoder import EXPECTATION, ArgMax, Replay, Sample, ShowAttendTell
from captioning.objectives import HardAttention, SoftAttention
from captioning.search import beam_search, greedy_search
import core.model.fast_path
from core.model.attention import AdditiveScore, DotScore, GeneralScore
from experiments.decoder_variants import WhereNotWhatDecoder
from vqa.san import StackedAttention

PAD, START, END = 0, 1, 2
VOCAB, LOCATIONS, FEATURES = 11, 4, 6  # LOCATIONS: a 2 x 2 grid


def pair(build, **kwargs) -> tuple[nn.Module, nn.Module]:
    """(readable, fast) built by `build(fast_path=..., **kwargs)`, the fast one with the readable one's weights."""
    torch.manual_seed(0)
    readable = build(fast_path=False, **kwargs)
    fast = build(fast_path=True, **kwargs)
    fast.load_state_dict(readable.state_dict())
    return readable, fast


def decoder(*, fast_path: bool, **kwargs) -> ShowAttendTell:
    return ShowAttendTell(
        vocab_size=VOCAB, feature_dim=FEATURES, grid_shape=(2, 2), embed_dim=5, decoder_dim=7, attention_dim=8,
        dropout=0.0, fast_path=fast_path, **kwargs,
    )


def where_not_what(*, fast_path: bool, **kwargs) -> WhereNotWhatDecoder:
    """`decoder`'s sizes, as the experiments' decoder whose LSTM is given only where it looked."""
    return WhereNotWhatDecoder(
        vocab_size=VOCAB, feature_dim=FEATURES, grid_shape=(2, 2), embed_dim=5, decoder_dim=7, attention_dim=8,
        dropout=0.0, fast_path=fast_path, **kwargs,
    )


def batch(seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """Grids (3, L, D) and captions (3, T + 1), <start> first, the last one padded."""
    torch.manual_seed(seed)
    features = torch.rand(3, LOCATIONS, FEATURES) * 6
    captions = torch.tensor([[START, 4, 5, 6, 7, END], [START, 8, 3, 9, END, PAD], [START, 10, 4, END, PAD, PAD]])
    return features, captions


def loss_and_gradients(model: ShowAttendTell, objective, features, captions, read) -> tuple[torch.Tensor, dict]:
    model.zero_grad()
    out = model(features, captions[:, :-1], read)
    total = objective.loss(out, captions[:, 1:], pad_id=PAD, label_smoothing=0.0).total
    total.backward()
    return total.detach(), {name: p.grad.clone() for name, p in model.named_parameters()}, out


def assert_same_gradients(readable: dict, fast: dict) -> None:
    assert readable.keys() == fast.keys()
    for name, grad in readable.items():
        assert torch.allclose(fast[name], grad, rtol=1e-4, atol=1e-5), name


def test_the_paths_are_one_class_with_the_same_parameters_and_a_flag():
    readable, fast = pair(decoder)
    assert readable.state_dict().keys() == fast.state_dict().keys()
    assert type(readable.attention.score) is type(fast.attention.score) is AdditiveScore
    assert (readable.attention.score.fast_path, fast.attention.score.fast_path) == (False, True)
    readable_general, fast_general = pair(decoder, score=GeneralScore)
    assert type(readable_general.attention.score) is type(fast_general.attention.score) is GeneralScore


def test_soft_attention_same_loss_and_gradients():
    readable, fast = pair(decoder)
    features, captions = batch()
    objective = SoftAttention()
    loss, gradients, out = loss_and_gradients(readable.train(), objective, features, captions, EXPECTATION)
    fast_loss, fast_gradients, fast_out = loss_and_gradients(fast.train(), objective, features, captions, EXPECTATION)
    assert torch.allclose(fast_out.logits, out.logits, atol=1e-5) and torch.allclose(fast_out.weights, out.weights)
    assert torch.allclose(fast_loss, loss, atol=1e-6)
    assert_same_gradients(gradients, fast_gradients)


def test_soft_attention_same_loss_and_gradients_for_other_scores_and_coordinates():
    features, captions = batch()
    for build, kwargs in ((decoder, {"score": DotScore}), (decoder, {"coordinates": True}),
                          (decoder, {"state_from_image": False}), (where_not_what, {}),
                          (where_not_what, {"coordinates": True})):
        readable, fast = pair(build, **kwargs)
        loss, gradients, _ = loss_and_gradients(readable, SoftAttention(), features, captions, EXPECTATION)
        fast_loss, fast_gradients, _ = loss_and_gradients(fast, SoftAttention(), features, captions, EXPECTATION)
        assert torch.allclose(fast_loss, loss, atol=1e-6), kwargs
        assert_same_gradients(gradients, fast_gradients)


def test_hard_attention_same_locations_loss_and_gradients():
    """A seeded sample reads the same locations on both paths; replaying them gives the same REINFORCE loss."""
    readable, fast = pair(decoder)
    features, captions = batch()
    objective = HardAttention(reinforce_weight=0.1, entropy_bonus=0.002)
    objective.baseline.fill_(-1.5)
    torch.manual_seed(7)
    fast_loss, fast_gradients, fast_out = loss_and_gradients(fast.train(), objective, features, captions, Sample())
    torch.manual_seed(7)
    sampled = readable.train()(features, captions[:, :-1], Sample()).locations
    assert torch.equal(sampled, fast_out.locations)
    replay = Replay(fast_out.locations)
    loss, gradients, out = loss_and_gradients(readable, objective, features, captions, replay)
    assert torch.equal(out.locations, fast_out.locations)
    assert torch.allclose(fast_out.weights, out.weights, atol=1e-6)
    assert torch.allclose(fast_loss, loss, atol=1e-6)
    assert_same_gradients(gradients, fast_gradients)


@pytest.mark.parametrize("blocks", [False, True])
def test_searches_find_the_same_captions(blocks, monkeypatch):
    """Beam and greedy search through `start` / `step` on both paths, the fast score blocked or not."""
    if blocks:
        monkeypatch.setattr(core.model.fast_path, "BLOCK_ELEMENTS", 1)  # one image per block
    models = [model.eval() for model in pair(decoder)]
    torch.manual_seed(3)
    features = torch.rand(5, LOCATIONS, FEATURES) * 6
    for beam_size in (1, 3):
        readable, fast = (
            beam_search(model, features, start_id=START, end_id=END, beam_size=beam_size, max_length=6)
            for model in models
        )
        assert readable.tokens == fast.tokens
        assert torch.allclose(readable.log_probs, fast.log_probs, atol=1e-5)
        for weights, fast_weights in zip(readable.weights, fast.weights, strict=True):
            assert torch.allclose(weights, fast_weights, atol=1e-6)
    readable, fast = (
        greedy_search(model, features, start_id=START, end_id=END, max_length=6, read=ArgMax()) for model in models
    )
    assert readable.tokens == fast.tokens


def test_under_autocast_both_paths_run_in_bfloat16_and_agree_roughly():
    readable, fast = pair(decoder)
    features, captions = batch()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits = [m(features, captions[:, :-1]).logits for m in (readable, fast)]
    assert logits[0].dtype == logits[1].dtype == torch.bfloat16
    assert torch.allclose(logits[0].float(), logits[1].float(), atol=0.1)


def san(*, fast_path: bool) -> StackedAttention:
    return StackedAttention(
        feature_dim=FEATURES, question_dim=5, attention_dim=8, grid_shape=(2, 2), num_answers=7, hops=2,
        fast_path=fast_path,
    )


def test_san_same_answers_and_gradients():
    readable, fast = pair(san)
    assert type(readable.hops[0].score) is type(fast.hops[0].score) is AdditiveScore
    assert (readable.hops[0].score.fast_path, fast.hops[0].score.fast_path) == (False, True)
    torch.manual_seed(2)
    features, questions, targets = torch.rand(4, LOCATIONS, FEATURES) * 6, torch.randn(4, 5), torch.randn(4, 7)
    results = []
    for model in (readable.eval(), fast.eval()):
        model.zero_grad()
        out = model(features, questions)
        (out.logits * targets).sum().backward()
        results.append((out, {name: p.grad.clone() for name, p in model.named_parameters()}))
    (out, gradients), (fast_out, fast_gradients) = results
    assert torch.allclose(fast_out.logits, out.logits, atol=1e-5)
    assert torch.allclose(fast_out.weights, out.weights, atol=1e-6)
    assert_same_gradients(gradients, fast_gradients)


@pytest.mark.parametrize("module", [ShowAttendTell, StackedAttention])
def test_the_models_take_the_flag_on_by_default(module):
    """`--model.decoder.fast_path false` (captioning) and `--model.san.fast_path false` (VQA) on the command line;
    checkpoints saved before the flag existed load with it on."""
    parameter = inspect.signature(module).parameters["fast_path"]
    assert parameter.default is True and parameter.kind is inspect.Parameter.KEYWORD_ONLY
    assert parameter.annotation in (bool, "bool")


@pytest.mark.parametrize("trainable_blocks", [0, 1])
def test_the_encoders_channels_last_layout_gives_the_same_features_and_gradients(trainable_blocks):
    """EfficientNet-Lite with its convolutions on NHWC tensors (the default) against torch's default layout: the
    same annotations, from images and (fine-tuned) from a cached trunk, and the same gradients of the fine-tuned
    top; only the memory layout of the weights differs."""
    from core.model.encoder import EfficientNetLite

    readable, fast = (
        EfficientNetLite(image_size=96, trainable_blocks=trainable_blocks, fast_path=flag) for flag in (False, True)
    )
    assert fast.net._conv_stem.weight.is_contiguous(memory_format=torch.channels_last)
    assert readable.net._conv_stem.weight.is_contiguous() and readable.cache_key() == fast.cache_key()
    images = torch.randn(2, 3, 96, 96, generator=torch.Generator().manual_seed(0))
    features = [encoder(images) for encoder in (readable, fast)]  # (2, 9, 1280)
    assert torch.allclose(features[0], features[1], rtol=1e-4, atol=1e-4)
    trunks = [encoder.trunk(images) for encoder in (readable, fast)]
    assert torch.allclose(trunks[0], trunks[1], rtol=1e-4, atol=1e-4)
    if trainable_blocks:
        for encoder, trunk in zip((readable, fast), trunks):
            encoder.train()
            encoder.annotations(trunk).square().mean().backward()
        for (name, a), b in zip(readable.named_parameters(), fast.parameters()):
            if a.requires_grad:
                assert torch.allclose(a.grad, b.grad, rtol=1e-3, atol=1e-6), name
