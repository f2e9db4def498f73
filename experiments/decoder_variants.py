"""A Show-Attend-Tell decoder that the attention experiments trained, not in the paper: its LSTM remembers where each
step looked, not what it read.

`captioning.decoder.ShowAttendTell` is the paper's decoder; `WhereNotWhatDecoder` is chosen as the decoder's class:

    python -m captioning fit --config configs/captioning/shapes_soft.yaml \
        --model.decoder experiments.decoder_variants.WhereNotWhatDecoder

Its checkpoints record this class path, so they load as the runs of docs/experiments.md trained them ("ShapesWorld
captioning: what the first reference leaves open, and what the decoder does with its memory", and "Flickr8k: where
the maps land on real photos"). The bundled models and the configs use the paper's decoder.
"""

from __future__ import annotations

from typing import Any

from torch import Tensor, nn

from captioning.decoder import ShowAttendTell


class WhereNotWhatDecoder(ShowAttendTell):
    """`ShowAttendTell` (its arguments mean the same) whose LSTM is given only where each step looked: the last two
    entries of z_t, the attended grid position, with `coordinates`; nothing of z_t without them. z_t's content reaches
    the output layer alone, as in the spatial attention of Lu et al. (2017): the decoder remembers where it looked but
    not what it saw, so a word about an object must be read at its own step, and its map shows where it was read."""

    def __init__(self, vocab_size: int, feature_dim: int, grid_shape: tuple[int, int], **options: Any) -> None:
        """`options`: `ShowAttendTell`'s own (embed_dim, coordinates...), with the same defaults."""
        super().__init__(vocab_size, feature_dim, grid_shape, **options)
        remembered = 2 if self.coordinates else 0  # the grid position read, or nothing
        word_dim, decoder_dim = self.embedding.embedding_dim, self.lstm.hidden_size
        self.lstm = nn.LSTMCell(word_dim + remembered, decoder_dim)  # [E y_{t-1}; the position read]

    def _remembered(self, z: Tensor) -> Tensor:
        """The position read, z_t's last two entries (..., 2), with coordinates; nothing (..., 0) without."""
        size = self.lstm.input_size - self.embedding.embedding_dim  # 2 or 0
        return z[..., z.shape[-1] - size :]
