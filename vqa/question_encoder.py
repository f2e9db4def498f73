"""The question encoder of a Stacked Attention Network: word embeddings read by an LSTM, whose last hidden
state (at each question's own length, padding excluded) is the question vector v_Q."""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence


class QuestionEncoder(nn.Module):
    """Questions (B, T) of word ids with their lengths (B,) -> question vectors (B, H).

    Args:
        vocab_size: number of question words, specials included.
        embed_dim: word embedding size.
        hidden_dim: LSTM size, which is the question vector's size.
        pad_id: the padding id (its embedding stays zero).
    """

    def __init__(self, *, vocab_size: int, embed_dim: int = 300, hidden_dim: int = 512, pad_id: int = 0) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embed_dim, padding_idx=pad_id)
        self.lstm = nn.LSTM(embed_dim, hidden_dim, batch_first=True)

    def forward(self, words: Tensor, lengths: Tensor) -> Tensor:
        if bool((lengths < 1).any()):
            raise ValueError("every question needs at least one word")
        embedded = torch.tanh(self.embedding(words))  # (B, T, E)
        packed = pack_padded_sequence(embedded, lengths.cpu(), batch_first=True, enforce_sorted=False)
        _, (h, _) = self.lstm(packed)  # h: (1, B, H), each question's state after its last real word
        return h[-1]
