"""The question models of a Stacked Attention Network (Yang et al. 2016, 3.2): word ids in, the question vector
v_Q out. The paper has two: an LSTM whose last hidden state is v_Q, and a CNN whose unigram, bigram and
trigram filters, max-pooled over the question, are concatenated into v_Q. `VqaModule(question_model=...)`
takes either class."""

from __future__ import annotations

import abc

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence

from core.model.options import OptionError


class QuestionEncoder(nn.Module, abc.ABC):
    """Questions (B, T) of word ids, padded with `pad_id`, with their lengths (B,) -> question vectors (B, H).

    Args:
        vocab_size: number of question words, specials included.
        embed_dim: word embedding size.
        hidden_dim: H, the question vector's size.
        pad_id: the padding id (its embedding stays zero).
    """

    def __init__(self, *, vocab_size: int, embed_dim: int = 300, hidden_dim: int = 512, pad_id: int = 0) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embed_dim, padding_idx=pad_id)

    def forward(self, words: Tensor, lengths: Tensor) -> Tensor:
        if bool((lengths < 1).any()):
            raise ValueError("every question needs at least one word")
        return self.encode(words, lengths.to(words.device))

    @abc.abstractmethod
    def encode(self, words: Tensor, lengths: Tensor) -> Tensor:
        """(B, T) word ids and (B,) lengths of at least 1 -> (B, H)."""


class LstmQuestionEncoder(QuestionEncoder):
    """The LSTM question model: v_Q is the LSTM's hidden state after each question's own last word (padding
    excluded), read from tanh-squashed word embeddings."""

    def __init__(self, *, vocab_size: int, embed_dim: int = 300, hidden_dim: int = 512, pad_id: int = 0) -> None:
        super().__init__(vocab_size=vocab_size, embed_dim=embed_dim, hidden_dim=hidden_dim, pad_id=pad_id)
        self.lstm = nn.LSTM(embed_dim, hidden_dim, batch_first=True)

    def encode(self, words: Tensor, lengths: Tensor) -> Tensor:
        embedded = torch.tanh(self.embedding(words))  # (B, T, E)
        packed = pack_padded_sequence(embedded, lengths.cpu(), batch_first=True, enforce_sorted=False)
        _, (h, _) = self.lstm(packed)  # h: (1, B, H), each question's state after its last real word
        return h[-1]


class ConvQuestionEncoder(QuestionEncoder):
    """The CNN question model: convolutions of width c = 1, 2, 3 over the word embeddings x_t,

        h_{c,t} = tanh(W_c x_{t:t+c-1} + b_c),   h~_c = max_t h_{c,t},   v_Q = [h~_1, h~_2, h~_3]

    The H filters are shared 1:2:2 between the widths: the paper's 128, 256 and 256 at H = 640. The max runs
    over the windows inside the question (none reaches into padding); a question shorter than a window is
    read as one window, filled out with zero (padding) embeddings.
    """

    WIDTHS = (1, 2, 3)
    SHARES = (1, 2, 2)

    def __init__(self, *, vocab_size: int, embed_dim: int = 300, hidden_dim: int = 640, pad_id: int = 0) -> None:
        super().__init__(vocab_size=vocab_size, embed_dim=embed_dim, hidden_dim=hidden_dim, pad_id=pad_id)
        unit, rest = divmod(hidden_dim, sum(self.SHARES))
        if rest or unit == 0:
            raise OptionError(
                f"the CNN question model shares its filters 1:2:2 between word windows of 1, 2 and 3, so its "
                f"size (question_dim) must be a positive multiple of 5, got {hidden_dim} (the paper's is 640)"
            )
        self.convolutions = nn.ModuleList(
            nn.Conv1d(embed_dim, share * unit, kernel_size=width) for width, share in zip(self.WIDTHS, self.SHARES)
        )

    def encode(self, words: Tensor, lengths: Tensor) -> Tensor:
        widest = max(self.WIDTHS)
        if words.shape[1] < widest:  # pad ids embed to zero
            words = nn.functional.pad(words, (0, widest - words.shape[1]), value=self.embedding.padding_idx)
        embedded = self.embedding(words).transpose(1, 2)  # (B, E, T)
        pooled = []
        for width, convolution in zip(self.WIDTHS, self.convolutions):
            h = torch.tanh(convolution(embedded))  # (B, F_c, T - c + 1), window t covers words t .. t + c - 1
            starts = torch.arange(h.shape[-1], device=h.device)  # (T - c + 1,)
            inside = starts + width <= lengths.clamp(min=width)[:, None]  # (B, T - c + 1)
            pooled.append(h.masked_fill(~inside[:, None, :], float("-inf")).amax(dim=-1))  # (B, F_c)
        return torch.cat(pooled, dim=-1)  # (B, H)
