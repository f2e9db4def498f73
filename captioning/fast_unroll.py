"""The fast path of the Show-Attend-Tell decoder's teacher-forced unroll (`ShowAttendTell(fast_path=True)`, the
default): the same LSTM over products that suit a CPU, the same values up to float rounding, faster.
`captioning/decoder.py` branches here at the one line where the two paths differ (the LSTM step of `forward`),
and `tests/unit/test_fast_path.py` shows both give the same losses, gradients and captions. The tricks, and why each
pays:

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

**The LSTM written out over those products** (`UnrolledLSTM`). `nn.LSTMCell` makes its gate products
itself, so they cannot go through `UnrolledLinear`; the teacher-forced unroll writes its cell update out
(`lstm_cell`, the same equations in the same gate order) over gates summed from three parts: the words' share
W_ih[:, :E] E y_{t-1} with both biases, made for every step at once in one product since teacher forcing knows
all the words in advance, and the context's and the state's shares, one `UnrolledLinear` each.

**The image grid cast once to the autocast dtype** (`compute_dtype`, `to_compute_dtype`). Autocast casts a
parameter once per region but any other tensor at every use, which for an image grid read at every word was a
third of a 14x14 training step; the decoder casts the grid once per image instead.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.autograd import Function
from torch.autograd.function import FunctionCtx

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
# The LSTM written out over those products.


class UnrolledLSTM:
    """`nn.LSTMCell` stepped through one teacher-forced unroll: h_t, c_t = lstm([E y_{t-1}; z_t], (h_{t-1}, c_{t-1})),
    the same values as stepping `lstm` itself. Make a new one per unroll.

    Args:
        lstm: the decoder's cell; its input is [E y_{t-1}; z_t], or with a smaller input size [E y_{t-1}; the last
            entries of z_t] (`experiments.decoder_variants.WhereNotWhatDecoder`).
        embedded: (B, T, E) the embedded input words E y_{t-1} of every step, known in advance under teacher forcing.
    """

    def __init__(self, lstm: nn.LSTMCell, embedded: Tensor) -> None:
        words = embedded.shape[-1]
        from_words, from_context = lstm.weight_ih.split([words, lstm.input_size - words], dim=1)
        # W_ih [E y_{t-1}; z_t] + b_ih + W_hh h_{t-1} + b_hh: the word part and both biases for every step at once
        self._from_words = F.linear(embedded, from_words, lstm.bias_ih + lstm.bias_hh).unbind(1)  # T x (B, 4H)
        self._from_context = UnrolledLinear(from_context)
        self._from_state = UnrolledLinear(lstm.weight_hh)

    def step(self, t: int, remembered: Tensor, h: Tensor, c: Tensor) -> tuple[Tensor, Tensor]:
        """Step t: what the LSTM is given of z_t (B, D, or fewer entries), the state (B, H) each -> (h_t, c_t)."""
        gates = self._from_words[t] + self._from_context(remembered) + self._from_state(h)  # (B, 4H)
        return lstm_cell(gates, c)


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
