"""The fast path of the additive score (`AdditiveScore(fast_path=True)`, what the models build by default): the same
function as `core.model.attention.AdditiveScore`'s readable code, up to float rounding, faster on a CPU.
`AdditiveScore` branches here at the two lines where the paths differ (its key projection and its score), and
`tests/unit/test_fast_path.py` shows both give the same losses, gradients and captions.

**The tanh through a sigmoid, in cache-sized blocks.** The (B, L, A) intermediate of v^T tanh(W_h h_i + b + W_s s)
is the costly part of a decoder step (its elementwise work grows with L). tanh u = 2 sigmoid(2u) - 1, so the score
is 2 v^T sigmoid(2 (q + k_i)) - sum(v), the same function at a fraction of the cost: torch's CPU tanh costs about 6
times its sigmoid, and was the dearest op of a 14x14 step. Both sides come doubled, the keys once per image
(`double_keys`) and the queries at their (N, A) size, so that nothing scales the (b, K, L, A) sum or, in training,
its gradient. The squashing runs in place, and when no gradient is recorded (search) the intermediate is made
`BLOCK_ELEMENTS` at a time, a few images in turn, so that it stays in cache instead of being a fresh allocation of
hundreds of MB (page faults included) at every word of a wide beam. Blocks change only the float rounding of v^T
(the product's summation order); training keeps one block, whose backward is much cheaper than many.

**The encoder's convolutions in channels-last layout** (`EfficientNetLite(fast_path=True)`, the default). A tensor
(B, C, H, W) can store its channels last in memory (NHWC) without changing its shape or values; EfficientNet's
depthwise and 1x1 convolutions run faster on that layout on a CPU (oneDNN's NHWC kernels). The encoder stores its
weights so at construction and lays out its input so in `trunk_map`, at one visible branch each; everything after
the CNN sees the same (B, L, D) annotations, equal up to float rounding, so feature caches are shared by both paths.
Measured by `python benchmarks/encoder_layout.py` (EfficientNet-Lite0, 2-core AMD EPYC, float32, medians of 10
passes; ms per batch, default layout -> channels-last). A batch of 32 photos, as the feature cache encodes them:
2195 -> 1506 at 224 px and 7555 -> 4882 at 384 px on two threads, 2423 -> 1823 and 11804 -> 6966 on one. One photo,
as the app encodes it, on two threads: 23 -> 21 at 224 px, 71 -> 55 at 384 px; on one thread about even (0.8-1.2x
over three runs). So the gain is in batches and in the app's two threads.
`tests/unit/test_fast_path.py` checks both layouts give the same features and gradients.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

BLOCK_ELEMENTS = 1 << 21  # 8 MiB of float32: within the L3 cache; larger blocks mean fewer op calls


def double_keys(projected_keys: Tensor) -> Tensor:
    """2 (W_h h_i + b) (B, L, A), once per image: the keys as `additive_scores` takes them."""
    return projected_keys.mul(2.0)


def additive_scores(queries: Tensor, doubled_keys: Tensor, v: nn.Linear) -> Tensor:
    """v^T tanh(W_h h_i + b + W_s s) -> (N, L), N = B * K, for queries W_s s grouped by image (B, K, A) (K = 1, or
    the beams of a search) and keys from `double_keys` (B, L, A)."""
    queries = queries.mul(2.0).unsqueeze(2)  # (B, K, 1, A) 2 W_s s
    keys = doubled_keys.unsqueeze(1)  # (B, 1, L, A)
    rows = max(1, BLOCK_ELEMENTS // max(1, queries.shape[1] * keys.shape[2] * keys.shape[3]))
    recording = torch.is_grad_enabled() and (queries.requires_grad or keys.requires_grad)
    if recording or rows >= len(keys):
        scores = _scores(queries, keys, v)
    else:
        scores = torch.cat([_scores(queries[i : i + rows], keys[i : i + rows], v) for i in range(0, len(keys), rows)])
    return scores.view(-1, keys.shape[2])  # (N, L)


def _scores(queries: Tensor, keys: Tensor, v: nn.Linear) -> Tensor:
    """(b, K, L) scores for doubled queries (b, K, 1, A) and keys (b, 1, L, A): 2 v^T sigmoid(2 (q + k_i)) - sum(v)."""
    hidden = torch.sigmoid_(keys + queries)  # (b, K, L, A) 2 (k_i + q), squashed in place
    return v(hidden).squeeze(-1).mul(2.0) - v.weight.sum()
