"""The Transformer decoder (`captioning.transformer`): its attention against a hand computation, the fused and the
written-out self-attention, the key/value cache against recomputing the prefix, the causal mask, its maps, and
the decoder as a component of `CaptioningModule` (checkpoints of both decoders, bad configurations)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial

import pytest
import torch
from PIL import Image

from captioning.decoder import ArgMax, ShowAttendTell, StepOutput
from captioning.module import CaptioningModule
from captioning.search import beam_search, greedy_search
from captioning.transformer import TransformerDecoder, attention, sinusoidal_positions
from core.model.encoder import LocalCNN
from core.training.checkpoints import CheckpointError
from tests.helpers import always_speaking

VOCAB, FEATURES, GRID = 23, 12, (2, 3)
SMALL = dict(model_dim=16, layers=2, heads=4, feedforward_dim=24)


def decoder(*, fused: bool = True, dropout: float = 0.0, **kwargs) -> TransformerDecoder:
    torch.manual_seed(0)
    return TransformerDecoder(VOCAB, FEATURES, GRID, **{**SMALL, **kwargs}, dropout=dropout, fused=fused)


def batch(images: int = 3, words: int = 6) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    features = torch.randn(images, GRID[0] * GRID[1], FEATURES, generator=generator)
    inputs = torch.randint(0, VOCAB, (images, words), generator=generator)
    return features, inputs


def test_attention_is_softmax_of_scaled_dot_products_times_values():
    q = torch.tensor([[1.0, 0.0]])  # one query, d_k = 2
    k = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    v = torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    out, weights = attention(q, k, v)
    scores = [1 / math.sqrt(2), 0.0, 1 / math.sqrt(2)]  # q.k / sqrt(2)
    expected = torch.softmax(torch.tensor(scores), 0)
    torch.testing.assert_close(weights[0], expected)
    torch.testing.assert_close(out[0], expected @ v)
    _, masked = attention(q, k, v, torch.tensor([[True, True, False]]))
    torch.testing.assert_close(masked[0], torch.cat([torch.softmax(torch.tensor(scores[:2]), 0), torch.zeros(1)]))


def test_the_positional_encoding_is_the_papers():
    table = sinusoidal_positions(5, 4)
    torch.testing.assert_close(table[3, 0], torch.tensor(math.sin(3.0)))
    torch.testing.assert_close(table[3, 1], torch.tensor(math.cos(3.0)))
    torch.testing.assert_close(table[3, 2], torch.tensor(math.sin(3 / 10000 ** (2 / 4))))
    torch.testing.assert_close(table[3, 3], torch.tensor(math.cos(3 / 10000 ** (2 / 4))))


def test_fused_and_written_out_self_attention_give_the_same_outputs_and_gradients():
    features, inputs = batch()
    outputs, gradients = [], []
    for fused in (False, True):
        model = decoder(fused=fused).train()  # the same weights: the same seed
        out = model(features, inputs)
        (out.logits.square().mean() + out.weights.square().mean()).backward()
        outputs.append(out)
        gradients.append({name: p.grad for name, p in model.named_parameters()})
    torch.testing.assert_close(outputs[0].logits, outputs[1].logits)
    torch.testing.assert_close(outputs[0].weights, outputs[1].weights)
    assert gradients[0].keys() == gradients[1].keys()
    for name, gradient in gradients[0].items():
        torch.testing.assert_close(gradient, gradients[1][name], msg=name)


@pytest.mark.parametrize("fused", [False, True], ids=["written-out", "fused"])
def test_no_word_sees_a_later_one(fused):
    """Changing the word at position 4 changes no output before it, and does change the outputs from it on."""
    features, inputs = batch()
    model = decoder(fused=fused).eval()
    changed = inputs.clone()
    changed[:, 4] = (changed[:, 4] + 1) % VOCAB
    before, after = model(features, inputs), model(features, changed)
    torch.testing.assert_close(before.logits[:, :4], after.logits[:, :4])
    torch.testing.assert_close(before.weights[:, :4], after.weights[:, :4])
    assert not torch.allclose(before.logits[:, 4:], after.logits[:, 4:])


def test_one_word_at_a_time_with_the_cache_equals_all_words_at_once():
    features, inputs = batch()
    model = decoder().eval()
    whole = model(features, inputs)
    memory, cache = model.start(features)
    for t in range(inputs.shape[1]):
        out = model.step(inputs[:, t], cache, memory)
        cache = out.state
        torch.testing.assert_close(out.logits, whole.logits[:, t])
        torch.testing.assert_close(out.weights, whole.weights[:, t])
    assert cache.length == inputs.shape[1]


@dataclass
class Prefix:
    """The words so far (N, t): the state of a decoder that recomputes the whole prefix at every step."""

    words: torch.Tensor

    def select(self, index: torch.Tensor) -> "Prefix":
        return Prefix(self.words[index])

    def repeat(self, times: int) -> "Prefix":
        return Prefix(self.words.repeat_interleave(times, 0))


class Uncached:
    """The same decoder without a cache: every step runs the teacher-forced pass over the whole prefix."""

    def __init__(self, model: TransformerDecoder) -> None:
        self.model = model

    def start(self, features):
        return features, Prefix(features.new_zeros((len(features), 0), dtype=torch.long))

    def step(self, words, state, features, read=None):
        prefix = torch.cat([state.words, words.unsqueeze(1)], 1)  # (N, t + 1)
        rows = features.repeat_interleave(len(words) // len(features), 0)  # (N, L, D): each row's image
        out = self.model(rows, prefix)
        return StepOutput(out.logits[:, -1], out.weights[:, -1], Prefix(prefix))


def test_cached_and_uncached_beam_search_give_the_same_captions_and_maps():
    features, _ = batch(images=4)
    model = decoder().eval()
    options = dict(start_id=1, end_id=2, max_length=7, beam_size=3, no_repeat_ngram_size=2)
    cached = beam_search(model, features, **options)
    uncached = beam_search(Uncached(model), features, **options)
    assert cached.tokens == uncached.tokens
    assert any(len(tokens) > 1 for tokens in cached.tokens)
    for ours, theirs in zip(cached.weights, uncached.weights):
        torch.testing.assert_close(ours, theirs)
    torch.testing.assert_close(cached.log_probs, uncached.log_probs)


def test_the_map_is_the_chosen_layer_and_head_of_the_cross_attention():
    features, inputs = batch()
    model = decoder().eval()
    every = model.all_maps(features, inputs)  # (B, T, layers, heads, L)
    assert every.shape == (3, 6, 2, 4, GRID[0] * GRID[1])
    torch.testing.assert_close(every.sum(-1), torch.ones(every.shape[:-1]))
    torch.testing.assert_close(model(features, inputs).weights, every[:, :, -1].mean(2))  # last layer, heads averaged
    model.map_layer, model.map_head = 0, 2
    torch.testing.assert_close(model(features, inputs).weights, every[:, :, 0, 2])


def test_hard_attention_reads_are_refused_by_name():
    features, inputs = batch()
    with pytest.raises(ValueError, match="not ArgMax: hard attention .* needs captioning.decoder.ShowAttendTell"):
        decoder()(features, inputs, ArgMax())


def test_sizes_that_do_not_split_into_heads_are_refused_by_name():
    with pytest.raises(ValueError, match="model_dim 18 does not split into 4 heads"):
        decoder(model_dim=18)


def test_a_caption_longer_than_the_positional_table_is_refused_by_name():
    features, _ = batch()
    model = decoder(max_length=5).eval()
    with pytest.raises(ValueError, match="longer than the decoder's max_length 5"):
        greedy_search(model, features, start_id=1, end_id=99, max_length=8)


WORDS = ["<pad>", "<start>", "<end>", "<unk>", "a", "red", "blue", "circle", "square"]
ENCODER = dict(widths=(8, 8, 8), coordinates=False)
TINY_TRANSFORMER = partial(TransformerDecoder, model_dim=8, layers=1, heads=2, feedforward_dim=8)
TINY_SAT = partial(ShowAttendTell, embed_dim=8, decoder_dim=8, attention_dim=8)


@pytest.mark.parametrize("make_decoder", [TINY_SAT, TINY_TRANSFORMER], ids=["show-attend-tell", "transformer"])
def test_a_checkpoint_of_each_decoder_loads_and_captions(tmp_path, make_decoder):
    torch.manual_seed(0)
    model = CaptioningModule(encoder=LocalCNN(**ENCODER), decoder=make_decoder, vocabulary=WORDS, max_length=4).eval()
    assert model.hparams["decoder"]["class_path"] == f"{make_decoder.func.__module__}.{make_decoder.func.__name__}"
    assert model.hparams["decoder"]["init_args"]["dropout"] == 0.5 if make_decoder is TINY_SAT else 0.1
    path = tmp_path / "model.ckpt"
    torch.save({"state_dict": model.state_dict(), "hyper_parameters": dict(model.hparams)}, path)
    loaded = CaptioningModule.load(path)
    assert type(loaded.decoder) is make_decoder.func
    images = torch.rand(2, 3, 112, 112)
    generated, reloaded = model.generate(images), loaded.generate(images)
    assert generated.tokens == reloaded.tokens
    for ours, theirs in zip(generated.weights, reloaded.weights):
        torch.testing.assert_close(ours, theirs)
        assert ours.shape[1] == model.encoder.num_locations


def test_starting_from_another_decoders_checkpoint_is_refused_by_name(tmp_path):
    sat = CaptioningModule(encoder=LocalCNN(**ENCODER), decoder=TINY_SAT, vocabulary=WORDS)
    path = tmp_path / "sat.ckpt"
    torch.save({"state_dict": sat.state_dict(), "hyper_parameters": dict(sat.hparams)}, path)
    with pytest.raises(CheckpointError, match=r"sat.ckpt was trained with another decoder \(captioning.decoder.ShowAttendTell\)"):
        CaptioningModule(encoder=LocalCNN(**ENCODER), decoder=TINY_TRANSFORMER, initial_weights=path)


def test_a_transformer_checkpoint_read_on_another_grid_is_refused_by_name(tmp_path):
    """The cells' learned positions are made for one grid: a larger image size does not fit them."""
    model = CaptioningModule(encoder=LocalCNN(**ENCODER), decoder=TINY_TRANSFORMER, vocabulary=WORDS)
    path = tmp_path / "tf.ckpt"
    torch.save({"state_dict": model.state_dict(), "hyper_parameters": dict(model.hparams)}, path)
    with pytest.raises(CheckpointError, match=r"tf.ckpt has weights of other sizes .*decoder.cell_positions is \(196, 8\)"):
        CaptioningModule(encoder=LocalCNN(**ENCODER, image_size=224), decoder=TINY_TRANSFORMER, initial_weights=path)


def test_checkpoints_saved_with_the_decoder_options_at_the_top_still_load(tmp_path):
    """Before the decoder was a component its options stood beside the encoder's (the bundled checkpoints)."""
    model = CaptioningModule(encoder=LocalCNN(**ENCODER), decoder=TINY_SAT, vocabulary=WORDS)
    flat = {key: value for key, value in model.hparams.items() if key != "decoder"}
    flat.update(embed_dim=8, decoder_dim=8, attention_dim=8, score="captioning.attention.AdditiveScore")
    path = tmp_path / "old.ckpt"
    torch.save({"state_dict": model.state_dict(), "hyper_parameters": flat}, path)
    loaded = CaptioningModule.load(path)
    assert loaded.hparams["decoder"]["init_args"]["decoder_dim"] == 8
    assert loaded.hparams["decoder"]["init_args"]["score"] == "core.model.attention.AdditiveScore"
    for name, tensor in model.state_dict().items():
        torch.testing.assert_close(loaded.state_dict()[name], tensor)


def speaking_transformer() -> CaptioningModule:
    """A tiny untrained Transformer captioner that says 4 real words (`tests.helpers.always_speaking`)."""
    torch.manual_seed(0)
    return always_speaking(
        CaptioningModule(encoder=LocalCNN(**ENCODER), decoder=TINY_TRANSFORMER, vocabulary=WORDS, max_length=4)
    )


def test_the_export_writes_every_layer_and_head_of_a_transformer(tmp_path):
    from captioning.pretrained import Captioner

    model = speaking_transformer()
    record = Captioner(model=model).caption(Image.new("RGB", (120, 90), (200, 30, 30)), beam_size=3).save(tmp_path)
    heads = torch.tensor(record["heads"])  # (words, layers, heads, L)
    assert heads.shape == (len(record["words"]), 1, 2, model.encoder.num_locations) and len(record["words"]) == 4
    torch.testing.assert_close(heads.sum(-1), torch.ones(heads.shape[:-1]))
    torch.testing.assert_close(torch.tensor(record["weights"]), heads[:, -1].mean(1))  # the default map: their mean


def test_cross_attention_head_maps_are_the_decoders_own_at_that_layer_and_head():
    """`captioning.explanations.CrossAttentionHead` (for `python -m captioning.grounding --maps`) gives, for the
    default layer and head, the maps the caption was generated with, and any other layer's and head's."""
    from captioning.explanations import CrossAttentionHead
    from captioning.pretrained import Captioner

    model = speaking_transformer()
    captioner = Captioner(model=model)
    photos = [Image.new("RGB", (112, 112), (200, 30, 30)), Image.new("RGB", (90, 120), (30, 30, 200))]
    captions = captioner.caption(photos)
    assert all(len(caption.words) == 4 for caption in captions)
    for ours, caption in zip(CrossAttentionHead()(model, photos, captions), captions):
        torch.testing.assert_close(ours, caption.attention)
    model.decoder.map_head = 1
    second = captioner.caption(photos)
    assert [caption.words for caption in second] == [caption.words for caption in captions]  # the maps only differ
    for ours, caption in zip(CrossAttentionHead(head=1)(model, photos, captions), second):
        torch.testing.assert_close(ours, caption.attention)


def test_cross_attention_head_maps_of_another_decoder_are_refused_by_name():
    from captioning.explanations import CrossAttentionHead

    model = CaptioningModule(encoder=LocalCNN(**ENCODER), decoder=TINY_SAT, vocabulary=WORDS)
    with pytest.raises(ValueError, match="this model's decoder is a ShowAttendTell"):
        CrossAttentionHead()(model, [], [])
