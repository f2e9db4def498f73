"""A Transformer caption decoder (Vaswani et al. 2017) over the same image grid as Show-Attend-Tell.

Where Show-Attend-Tell scores each grid cell with a small MLP of the LSTM state (additive attention) and reads one
context vector per word, the Transformer attends with scaled dot products, several heads at once:

    Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V                      one head; d_k = model_dim / heads
    MultiHead(X, Y)    = concat(head_1, ..., head_h) W_O,  head_i = Attention(X W_Qi, Y W_Ki, Y W_Vi)

A block, applied N times (pre-LayerNorm, as GPT-2 and nanoGPT):

    x = x + MultiHead(LN(x), LN(x))  with a causal mask     masked self-attention: word t sees words <= t only
    x = x + MultiHead(LN(x), M)                              cross-attention: every word looks at the grid cells M
    x = x + FFN(LN(x)),  FFN(x) = W_2 GELU(W_1 x)

The words enter as token embeddings plus a sinusoidal positional encoding; the grid cells M are the encoder's
annotation vectors projected to model_dim, plus a learned embedding of each cell's place in the grid (without it
every cell looks the same wherever it is). The next word is read from LN(x) through the token embedding's matrix
(weight tying). The cross-attention weights softmax(Q K^T / sqrt(d_k)) of each layer and head are the maps: which
of them a caption's overlays show is `map_layer` / `map_head`.

Beam search asks for one word at a time: each layer keeps the keys and values of the words so far (a key/value
cache, `Cache`), so a step computes only the new word's query, key and value. `fused` sends the self-attention to
`torch.nn.functional.scaled_dot_product_attention` (one fused kernel) instead of the three lines that write it out;
the cross-attention is always written out, since its weights are the maps.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from captioning.decoder import EXPECTATION, CaptionDecoder, Expectation, Read, StepOutput, TeacherForced
from core.model.options import OptionError


def sinusoidal_positions(length: int, dim: int) -> Tensor:
    """PE(pos, 2i) = sin(pos / 10000^(2i/dim)), PE(pos, 2i+1) = cos(pos / 10000^(2i/dim)) -> (length, dim)."""
    position = torch.arange(length, dtype=torch.float32).unsqueeze(1)  # (T, 1)
    frequency = torch.exp(torch.arange(0, dim, 2, dtype=torch.float32) * (-math.log(10000.0) / dim))  # (dim/2,)
    table = torch.zeros(length, dim)
    table[:, 0::2] = torch.sin(position * frequency)
    table[:, 1::2] = torch.cos(position * frequency)
    return table


def attention(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None, dropout: float = 0.0
) -> tuple[Tensor, Tensor]:
    """softmax(Q K^T / sqrt(d_k)) V for q (..., T, d_k), k and v (..., S, d_k); `mask` (T, S) True where a query
    may look; `dropout` drops weights before V is read (in training). -> (output (..., T, d_k), the weights
    (..., T, S) before dropout)."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., T, S)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return F.dropout(weights, dropout, training=dropout > 0) @ v, weights


def split_heads(x: Tensor, heads: int) -> Tensor:
    """(B, T, model_dim) -> (B, heads, T, d_k)."""
    return x.view(x.shape[0], x.shape[1], heads, -1).transpose(1, 2)


def merge_heads(x: Tensor) -> Tensor:
    """(B, heads, T, d_k) -> (B, T, model_dim)."""
    return x.transpose(1, 2).reshape(x.shape[0], x.shape[2], -1)


class SelfAttention(nn.Module):
    """Masked multi-head self-attention over the words so far; `past` keys and values (a step's cache) come before."""

    def __init__(self, *, model_dim: int, heads: int, dropout: float, fused: bool) -> None:
        super().__init__()
        self.heads, self.fused, self.dropout = heads, fused, dropout
        self.qkv = nn.Linear(model_dim, 3 * model_dim)  # W_Q, W_K, W_V of every head in one product
        self.out = nn.Linear(model_dim, model_dim)  # W_O

    def forward(self, x: Tensor, past: tuple[Tensor, Tensor] | None = None) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        """x (B, T, model_dim) -> (output (B, T, model_dim), this layer's keys and values (B, heads, S, d_k) each,
        S = the past's words + T)."""
        q, k, v = (split_heads(part, self.heads) for part in self.qkv(x).chunk(3, dim=-1))  # (B, h, T, d_k) each
        if past is not None:
            k, v = torch.cat([past[0], k], dim=2), torch.cat([past[1], v], dim=2)  # (B, h, S, d_k)
        seen = k.shape[2] - q.shape[2]  # words before this call's first one
        # query i (word seen + i) may look at keys 0 .. seen + i
        causal = torch.ones(q.shape[2], k.shape[2], dtype=torch.bool, device=x.device).tril(diagonal=seen)  # (T, S)
        dropout = self.dropout if self.training else 0.0
        if self.fused:
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=causal, dropout_p=dropout)
        else:
            out, _ = attention(q, k, v, causal, dropout)
        return self.out(merge_heads(out)), (k, v)


class CrossAttention(nn.Module):
    """Multi-head attention from the words to the L grid cells, its weights kept: they are the maps.

    The grid's keys and values are computed once per image (`keys_values`); a batch of N = B * K rows (K beams or
    samples of each image, in a row) reads its image's, which are not copied K times."""

    def __init__(self, *, model_dim: int, heads: int, dropout: float) -> None:
        super().__init__()
        self.heads = heads
        self.q = nn.Linear(model_dim, model_dim)
        self.kv = nn.Linear(model_dim, 2 * model_dim)
        self.out = nn.Linear(model_dim, model_dim)
        self.dropout = dropout

    def keys_values(self, cells: Tensor) -> tuple[Tensor, Tensor]:
        """Grid cells (B, L, model_dim) -> keys, values (B, heads, L, d_k)."""
        return tuple(split_heads(part, self.heads) for part in self.kv(cells).chunk(2, dim=-1))

    def forward(self, x: Tensor, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """x (N, T, model_dim), k and v (B, h, L, d_k) -> (output (N, T, model_dim), weights (N, h, T, L))."""
        n, t, _ = x.shape
        b, h, cells, _ = k.shape
        q = split_heads(self.q(x), h)  # (N, h, T, d_k)
        grouped = q.view(b, n // b, h, t, -1).transpose(1, 2).reshape(b, h, n // b * t, -1)  # (B, h, K*T, d_k)
        out, weights = attention(grouped, k, v, dropout=self.dropout if self.training else 0.0)  # (B, h, K*T, ·)
        out = out.view(b, h, n // b, t, -1).transpose(1, 2).reshape(n, h, t, -1)  # (N, h, T, d_k)
        weights = weights.view(b, h, n // b, t, cells).transpose(1, 2).reshape(n, h, t, cells)  # (N, h, T, L)
        return self.out(merge_heads(out)), weights


class Block(nn.Module):
    """x + SelfAttention(LN(x)), then + CrossAttention(LN(x), grid), then + FFN(LN(x))."""

    def __init__(self, *, model_dim: int, heads: int, feedforward_dim: int, dropout: float, fused: bool) -> None:
        super().__init__()
        self.ln_self, self.ln_cross, self.ln_ff = (nn.LayerNorm(model_dim) for _ in range(3))
        self.self_attention = SelfAttention(model_dim=model_dim, heads=heads, dropout=dropout, fused=fused)
        self.cross_attention = CrossAttention(model_dim=model_dim, heads=heads, dropout=dropout)
        self.feedforward = nn.Sequential(
            nn.Linear(model_dim, feedforward_dim), nn.GELU(), nn.Linear(feedforward_dim, model_dim), nn.Dropout(dropout)
        )
        self.dropout = nn.Dropout(dropout)

    def forward(
        self, x: Tensor, grid: tuple[Tensor, Tensor], past: tuple[Tensor, Tensor] | None = None
    ) -> tuple[Tensor, Tensor, tuple[Tensor, Tensor]]:
        """x (N, T, model_dim), the grid's keys and values -> (x, cross-attention weights (N, h, T, L), the self-
        attention's keys and values for the cache)."""
        attended, present = self.self_attention(self.ln_self(x), past)
        x = x + self.dropout(attended)
        read, weights = self.cross_attention(self.ln_cross(x), *grid)
        x = x + self.dropout(read)
        return x + self.feedforward(self.ln_ff(x)), weights, present


@dataclass
class GridMemory:
    """Each layer's keys and values of the image's grid cells, (B, heads, L, d_k) each, computed once per image."""

    layers: list[tuple[Tensor, Tensor]]


@dataclass
class Cache:
    """The key/value cache of N rows: each layer's self-attention keys and values of the words so far, (N, heads,
    t, d_k) each (None before the first word), and t."""

    layers: list[tuple[Tensor, Tensor] | None]
    length: int

    def select(self, index: Tensor) -> "Cache":
        return Cache([None if kv is None else (kv[0][index], kv[1][index]) for kv in self.layers], self.length)

    def repeat(self, times: int) -> "Cache":
        """Each row repeated `times` times in a row."""
        return Cache(
            [None if kv is None else tuple(part.repeat_interleave(times, 0) for part in kv) for kv in self.layers],
            self.length,
        )


class TransformerDecoder(CaptionDecoder):
    """The caption decoder of "Attention Is All You Need", cross-attending to the encoder's grid.

    Args:
        vocab_size: number of words, specials included.
        feature_dim: D, size of an annotation vector.
        grid_shape: (rows, columns) of the encoder's grid, L = rows * columns cells.
        model_dim: d_model, the size of every word's vector through the blocks.
        layers: N, the number of blocks.
        heads: h, attention heads per layer (d_k = model_dim / heads).
        feedforward_dim: the feed-forward layer's hidden size.
        dropout: dropout on the embeddings, attention weights and every residual branch.
        max_length: the longest input the positional table holds (words, <start> included).
        fused: compute the masked self-attention with `torch.nn.functional.scaled_dot_product_attention` (one fused
            kernel); false runs `attention` as written. The same values and parameters either way.
        map_layer: the layer whose cross-attention is a word's map (-1: the last).
        map_head: the head whose weights are the map; None averages the heads.
    """

    def __init__(
        self,
        vocab_size: int,
        feature_dim: int,
        grid_shape: tuple[int, int],
        *,
        model_dim: int = 512,
        layers: int = 3,
        heads: int = 8,
        feedforward_dim: int = 2048,
        dropout: float = 0.1,
        max_length: int = 64,
        fused: bool = True,
        map_layer: int = -1,
        map_head: int | None = None,
    ) -> None:
        super().__init__()
        if model_dim % heads:
            raise OptionError(f"model_dim {model_dim} does not split into {heads} heads: make it a multiple of heads")
        if not -layers <= map_layer < layers:
            raise OptionError(
                f"map_layer {map_layer} names no layer of {layers}: give one from {-layers} to {layers - 1}"
            )
        if map_head is not None and not 0 <= map_head < heads:
            raise OptionError(
                f"map_head {map_head} names no head of {heads}: give one from 0 to {heads - 1}, or none"
            )
        self.vocab_size, self.heads, self.max_length = vocab_size, heads, max_length
        self.map_layer, self.map_head = map_layer, map_head
        self.embedding = nn.Embedding(vocab_size, model_dim)
        self.register_buffer("positions", sinusoidal_positions(max_length, model_dim), persistent=False)  # (T, d)
        self.cells = nn.Linear(feature_dim, model_dim)  # the grid cells projected to model_dim
        self.cell_positions = nn.Parameter(torch.zeros(grid_shape[0] * grid_shape[1], model_dim))  # (L, d)
        self.ln_cells = nn.LayerNorm(model_dim)
        self.blocks = nn.ModuleList(
            Block(model_dim=model_dim, heads=heads, feedforward_dim=feedforward_dim, dropout=dropout, fused=fused)
            for _ in range(layers)
        )
        self.ln_out = nn.LayerNorm(model_dim)
        self.dropout = nn.Dropout(dropout)
        self.apply(self._initialise)

    @staticmethod
    def _initialise(module: nn.Module) -> None:
        """N(0, 0.02) weights and zero biases, as GPT-2."""
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def word_rows(self) -> list[nn.Parameter]:
        return [self.embedding.weight]  # the output layer is the same (tied) embedding

    def _map(self, weights: list[Tensor]) -> Tensor:
        """The map shown for each word from every layer's weights (N, h, T, L): -> (N, T, L)."""
        chosen = weights[self.map_layer]
        return chosen.mean(dim=1) if self.map_head is None else chosen[:, self.map_head]

    def _run(self, words: Tensor, memory: GridMemory, cache: Cache) -> tuple[Tensor, list[Tensor], Cache]:
        """Words (N, T) at positions cache.length.. -> (logits (N, T, V), every layer's cross-attention weights
        (N, h, T, L), the cache with these words added)."""
        start, end = cache.length, cache.length + words.shape[1]
        if end > self.max_length:
            raise ValueError(f"a caption of {end} words is longer than the decoder's max_length {self.max_length}")
        x = self.dropout(self.embedding(words) + self.positions[start:end])  # (N, T, d)
        maps, present = [], []
        for block, grid, past in zip(self.blocks, memory.layers, cache.layers):
            x, weights, kv = block(x, grid, past)
            maps.append(weights)
            present.append(kv)
        logits = self.ln_out(x) @ self.embedding.weight.T  # (N, T, V) through the tied embedding
        return logits, maps, Cache(present, end)

    def start(self, features: Tensor) -> tuple[GridMemory, Cache]:
        """Features (B, L, D) -> every layer's keys and values of the grid cells, and an empty cache."""
        cells = self.ln_cells(self.cells(features) + self.cell_positions)  # (B, L, d)
        layers = [block.cross_attention.keys_values(cells) for block in self.blocks]
        return GridMemory(layers), Cache([None] * len(self.blocks), 0)

    @staticmethod
    def _check_read(read: Read) -> None:
        if not isinstance(read, Expectation):
            raise ValueError(
                f"the Transformer's cross-attention reads the weighted mean of the grid, not {type(read).__name__}: "
                "hard attention (one sampled location) needs captioning.decoder.ShowAttendTell"
            )

    def step(self, words: Tensor, state: Cache, memory: GridMemory, read: Read = EXPECTATION) -> StepOutput:
        """Previous words (N,) -> next-word logits (N, V), the map (N, L), the cache with this word added."""
        self._check_read(read)
        logits, maps, cache = self._run(words.unsqueeze(1), memory, state)
        return StepOutput(logits[:, 0], self._map(maps)[:, 0], cache)

    def forward(self, features: Tensor, inputs: Tensor, read: Read = EXPECTATION) -> TeacherForced:
        """Teacher forcing: features (B, L, D), input words (B, T) starting with <start> -> logits (B, T, V), all
        positions at once under the causal mask."""
        self._check_read(read)
        memory, cache = self.start(features)
        logits, maps, _ = self._run(inputs, memory, cache)
        return TeacherForced(logits, self._map(maps), None)

    def all_maps(self, features: Tensor, inputs: Tensor) -> Tensor:
        """Every layer's and head's cross-attention for the words `inputs` (B, T) -> (B, T, layers, heads, L)."""
        memory, cache = self.start(features)
        _, maps, _ = self._run(inputs, memory, cache)
        return torch.stack(maps, dim=2).permute(0, 3, 2, 1, 4)  # (B, h, layers, T, L) -> (B, T, layers, h, L)
