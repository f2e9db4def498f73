"""`experiments.decoder_variants.WhereNotWhatDecoder`: its LSTM remembers where each step looked, never what it read
(its fast path agrees with its readable path in tests/unit/test_fast_path.py)."""

import torch

from captioning.decoder import ShowAttendTell
from core.model.attention import DotScore
from experiments.decoder_variants import WhereNotWhatDecoder
from tests.unit.test_fast_path import batch

SIZES = dict(vocab_size=11, feature_dim=6, grid_shape=(2, 2), embed_dim=5, decoder_dim=7, attention_dim=8, dropout=0.0)


def test_the_state_never_sees_what_was_read():
    """Without coordinates, the LSTM's states depend on the words and the start only: two images with the same
    mean give the same states (and so the same attention queries), while the paper's decoder's states differ."""
    features, captions = batch()
    noise = torch.randn_like(features)
    same_mean = features + noise - noise.mean(1, keepdim=True)  # another image with the same mean annotation vector
    for cls, remembers_content in ((ShowAttendTell, True), (WhereNotWhatDecoder, False)):
        model = cls(score=DotScore, **SIZES)
        states = []
        for grid in (features, same_mean):
            memory, state = model.start(grid)
            out = model.step(captions[:, 0], state, memory)
            states.append(model.step(captions[:, 1], out.state, memory).state.h)
        assert torch.allclose(states[0], states[1]) is not remembers_content


def test_with_coordinates_the_lstm_is_given_the_position_read():
    model = WhereNotWhatDecoder(coordinates=True, **SIZES)
    assert model.lstm.input_size == 5 + 2  # the word's embedding, then x and y
    z = torch.arange(16.0).view(2, 8)  # (B, D + 2) a context: 6 content entries, then the position
    torch.testing.assert_close(model._remembered(z), z[:, -2:])
