"""CPU speed-ups of the models' readable code: each computes the same function (up to float rounding) faster.

The model files (`core.attention`, `captioning.decoder`, `vqa.san`) state the computation as the papers write it.
A model built with `fast_path=True` (the default) runs the versions here instead, and `tests/unit/test_fast_path.py`
shows that both paths give the same losses, gradients and captions. The tricks, and why each pays:

**The additive score's tanh through a sigmoid, in cache-sized blocks** (`FastAdditiveScore`). The (B, L, A)
intermediate of v^T tanh(W_h h_i + b + W_s s) is the costly part of a decoder step (its elementwise work grows
with L). tanh u = 2 sigmoid(2u) - 1, so the score is 2 v^T sigmoid(2 (q + k_i)) - sum(v), the same function at a
fraction of the cost: torch's CPU tanh costs about 6 times its sigmoid, and was the dearest op of a 14x14 step.
Both sides come doubled, the keys once per image and the queries at their (N, A) size, so that nothing scales
the (b, K, L, A) sum or, in training, its gradient. The squashing runs in place, and when no gradient is
recorded (search) the intermediate is made `BLOCK_ELEMENTS` at a time, a few images in turn, so that it stays in
cache instead of being a fresh allocation of hundreds of MB (page faults included) at every word of a wide beam.
Blocks change only the float rounding of v^T (the product's summation order); training keeps one block, whose
backward is much cheaper than many.

**The recurrent products' weight gradients in one product** (`UnrolledLinear`). Autograd treats each step's
`x_t @ W^T` on its own: its backward makes the step's weight gradient g_t^T x_t, a (out, B) @ (B, in) product
with only B (the batch, 32) to sum over that writes a whole (out, in) matrix, and then adds it to the running
total. For the LSTM's 2048 x 1792 input weights that is about 15 MB written twice per word, memory-bound work
that cost more than the forward and input-gradient products together (a training step's profile,
`docs/performance.md`). `UnrolledLinear` keeps every step's input x_t and output gradient g_t instead, and once
autograd is done with all the steps it makes sum_t g_t^T x_t as one (out, T*B) @ (T*B, in) product, which runs
near the machine's matmul rate. Values and gradients are those of `x_t @ W^T` (up to the float rounding of the
summation order). Under CPU autocast the weight is cast to the autocast dtype once per unroll rather than at
every step.

**The LSTM written out over those products** (`teacher_forced_unroll`). `nn.LSTMCell` makes its gate products
itself, so they cannot go through `UnrolledLinear`; the teacher-forced unroll writes its cell update out
(`lstm_cell`, the same equations in the same gate order) over gates summed from three parts: the words' share
W_ih[:, :E] E y_{t-1} with both biases, made for every step at once in one product since teacher forcing knows
all the words in advance, and the context's and the state's shares, one `UnrolledLinear` each. Only the
recurrence runs word by word; the caller's output layer then runs once over all steps.

**The image grid cast once to the autocast dtype** (`compute_dtype`, `to_compute_dtype`). Autocast casts a
parameter once per region but any other tensor at every use, which for an image grid read at every word was a
third of a 14x14 training step; the decoder casts the grid once per image instead.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.autograd import Function
from torch.autograd.function import FunctionCtx

from core.attention import AdditiveScore, Score, per_image

# ----------------------------------------------------------------------------------------------------
# The additive score's tanh through a sigmoid, in cache-sized blocks.


class FastAdditiveScore(AdditiveScore):
    """`AdditiveScore`'s function and parameters (state_dicts are interchangeable), computed as
    2 v^T sigmoid(2 (W_h h_i + b + W_s s)) - sum(v), in cache-sized blocks when no gradient is recorded."""

    BLOCK_ELEMENTS = 1 << 21  # 8 MiB of float32: within the L3 cache; larger blocks mean fewer op calls

    def project_keys(self, keys: Tensor) -> Tensor:
        return super().project_keys(keys).mul(2.0)  # (B, L, A) 2 (W_h h_i + b): the doubling `_scores` needs, done once

    def forward(self, query: Tensor, projected_keys: Tensor) -> Tensor:
        queries = per_image(self.query_proj(query).mul(2.0), projected_keys).unsqueeze(2)  # (B, K, 1, A) 2 W_s s
        keys = projected_keys.unsqueeze(1)  # (B, 1, L, A)
        rows = max(1, self.BLOCK_ELEMENTS // max(1, queries.shape[1] * keys.shape[2] * keys.shape[3]))
        recording = torch.is_grad_enabled() and (queries.requires_grad or keys.requires_grad)
        if recording or rows >= len(keys):
            return self._scores(queries, keys).view(len(query), -1)
        blocks = [self._scores(queries[i : i + rows], keys[i : i + rows]) for i in range(0, len(keys), rows)]
        return torch.cat(blocks).view(len(query), -1)  # (N, L)

    def _scores(self, query: Tensor, projected_keys: Tensor) -> Tensor:
        """v^T tanh(q + k_i) for projected queries (b, K, 1, A) and keys (b, 1, L, A), both doubled -> (b, K, L),
        made as 2 v^T sigmoid(2 (q + k_i)) - sum(v)."""
        hidden = torch.sigmoid_(projected_keys + query)  # (b, K, L, A) 2 (k_i + q), squashed in place
        return self.v(hidden).squeeze(-1).mul(2.0) - self.v.weight.sum()


FAST_SCORES: dict[type[Score], type[Score]] = {AdditiveScore: FastAdditiveScore}


def fast_score(score: type[Score]) -> type[Score]:
    """The fast version of a score class, or the class itself when it has none."""
    return FAST_SCORES.get(score, score)


# ----------------------------------------------------------------------------------------------------
# The recurrent products' weight gradients in one product.


class UnrolledLinear:
    """`x_t -> x_t @ weight^T` for the steps of one unroll; make a new one per unroll (it holds that unroll's
    inputs and gradients until backward).

    Args:
        weight: (out, in), usually a parameter.
    """

    def __init__(self, weight: Tensor) -> None:
        self._steps: list[tuple[Tensor, Tensor]] = []  # (x_t (B, in), g_t (B, out)) as backward meets them
        # (out, in) in the compute dtype
        self.weight = _GatherGradients.apply(weight, compute_dtype(weight.dtype), self._steps)

    def __call__(self, inputs: Tensor) -> Tensor:
        """inputs (B, in) -> (B, out)."""
        return _Step.apply(inputs, self.weight, self._steps)


class _GatherGradients(Function):
    """Identity (with a cast) on the weight; its backward runs after every step's, and sums their products."""

    @staticmethod
    def forward(ctx: FunctionCtx, weight: Tensor, dtype: torch.dtype, steps: list) -> Tensor:
        ctx.steps = steps
        ctx.set_materialize_grads(False)  # the steps hand back no weight gradient of their own
        return weight.to(dtype) if weight.dtype != dtype else weight.view_as(weight)

    @staticmethod
    def backward(ctx: FunctionCtx, _unused: Tensor | None) -> tuple[Tensor | None, None, None]:
        if not ctx.steps:
            return None, None, None
        inputs, gradients = zip(*ctx.steps)
        ctx.steps.clear()
        grad = torch.cat(gradients).t() @ torch.cat(inputs)  # (out, T*B) @ (T*B, in) -> (out, in)
        return grad, None, None


class _Step(Function):
    """One step's `x @ W^T`: backward gives x its gradient now and leaves (x, g) for `_GatherGradients`."""

    @staticmethod
    def forward(ctx: FunctionCtx, inputs: Tensor, weight: Tensor, steps: list) -> Tensor:
        inputs = inputs.to(weight.dtype)
        ctx.steps = steps
        ctx.save_for_backward(inputs, weight)
        return inputs @ weight.t()  # (B, out)

    @staticmethod
    def backward(ctx: FunctionCtx, grad: Tensor) -> tuple[Tensor | None, None, None]:
        inputs, weight = ctx.saved_tensors
        grad = grad.to(weight.dtype)
        if ctx.needs_input_grad[1]:
            ctx.steps.append((inputs, grad))
        return (grad @ weight if ctx.needs_input_grad[0] else None), None, None


# ----------------------------------------------------------------------------------------------------
# The LSTM written out over those products: the teacher-forced unroll of Show-Attend-Tell.


def teacher_forced_unroll(
    lstm: nn.LSTMCell,
    embedded: Tensor,
    h: Tensor,
    c: Tensor,
    attend: Callable[[Tensor], tuple[Tensor, Tensor, Tensor | None]],
) -> tuple[Tensor, Tensor, Tensor, Tensor | None]:
    """The recurrence of `ShowAttendTell.forward`: h_t, c_t = lstm([E y_{t-1}; z_t], (h_{t-1}, c_{t-1})).

    Args:
        lstm: the decoder's cell; its input is [E y_{t-1}; z_t], or with a smaller input size [E y_{t-1}; the
            last entries of z_t] (`ShowAttendTell(remember_content=False)`).
        embedded: (B, T, E) the embedded input words E y_{t-1} of every step.
        h, c: (B, H) the initial state.
        attend: h_{t-1} (B, H) -> (alpha_t (B, L), gated context z_t (B, D), locations read (B,) or None).

    Returns (alpha (B, T, L), h (B, T, H), z (B, T, D), locations (B, T) or None), the values of stepping
    `lstm` itself.
    """
    from_words, from_context = lstm.weight_ih.split([embedded.shape[-1], lstm.input_size - embedded.shape[-1]], dim=1)
    # W_ih [E y_{t-1}; z_t] + b_ih + W_hh h_{t-1} + b_hh with its word part and both biases for every step at once
    gates_from_words = F.linear(embedded, from_words, lstm.bias_ih + lstm.bias_hh)  # (B, T, 4H)
    gates_from_context, gates_from_state = UnrolledLinear(from_context), UnrolledLinear(lstm.weight_hh)
    weights, hidden, context, locations = [], [], [], []
    for from_word in gates_from_words.unbind(1):  # (B, 4H) per step; one backward node for all of them
        alpha, z, located = attend(h)
        remembered = z[..., z.shape[-1] - from_context.shape[1] :]  # z_t, or the part the LSTM is given
        gates = from_word + gates_from_context(remembered) + gates_from_state(h)  # (B, 4H)
        h, c = lstm_cell(gates, c)
        weights.append(alpha)
        hidden.append(h)
        context.append(z)
        locations.append(located)
    read_locations = torch.stack(locations, 1) if locations and locations[0] is not None else None  # (B, T)
    return torch.stack(weights, 1), torch.stack(hidden, 1), torch.stack(context, 1), read_locations


def lstm_cell(gates: Tensor, c: Tensor) -> tuple[Tensor, Tensor]:
    """`nn.LSTMCell`'s update from its summed gate pre-activations (B, 4H), in its order (input, forget, cell,
    output), and the previous cell state (B, H) -> (h, c) (B, H) each."""
    i, f, g, o = gates.chunk(4, dim=-1)
    c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
    return torch.sigmoid(o) * torch.tanh(c), c


# ----------------------------------------------------------------------------------------------------
# The image grid cast once to the autocast dtype.


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype a matrix product of a `dtype` tensor runs in here: the autocast dtype inside CPU autocast (as
    Lightning's `precision="bf16-mixed"` sets), else `dtype` itself. Autocast casts a parameter once per region
    but any other tensor at every use, which for an image grid read at every word was a third of a 14x14 training
    step."""
    if torch.is_autocast_enabled("cpu") and dtype.is_floating_point:
        return torch.get_autocast_dtype("cpu")
    return dtype


def to_compute_dtype(tensor: Tensor) -> Tensor:
    """`tensor` in the dtype its matrix products run in (`compute_dtype`), for a tensor read at every step."""
    return tensor.to(compute_dtype(tensor.dtype))
