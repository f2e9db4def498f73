"""A linear map applied at every step of an unrolled recurrence, with its weight gradient made in one product.

Autograd treats each step's `x_t @ W^T` on its own: its backward makes the step's weight gradient g_t^T x_t, a
(out, B) @ (B, in) product with only B (the batch, 32) to sum over that writes a whole (out, in) matrix, and then
adds it to the running total. For the LSTM's 2048 x 1792 input weights that is about 15 MB written twice per word,
memory-bound work that cost more than the forward and input-gradient products together (a training step's
profile, `benchmarks/README.md`). `UnrolledLinear` keeps every step's input x_t and output gradient g_t instead,
and once autograd is done with all the steps it makes sum_t g_t^T x_t as one (out, T*B) @ (T*B, in) product,
which runs near the machine's matmul rate. Values and gradients are those of `x_t @ W^T` (up to the float
rounding of the summation order).

Under CPU autocast the weight is cast to the autocast dtype once per unroll rather than at every step.
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.autograd import Function
from torch.autograd.function import FunctionCtx


class UnrolledLinear:
    """`x_t -> x_t @ weight^T` for the steps of one unroll; make a new one per unroll (it holds that unroll's
    inputs and gradients until backward).

    Args:
        weight: (out, in), usually a parameter.
    """

    def __init__(self, weight: Tensor) -> None:
        self._steps: list[tuple[Tensor, Tensor]] = []  # (x_t (B, in), g_t (B, out)) as backward meets them
        self.weight = _GatherGradients.apply(weight, compute_dtype(weight.dtype), self._steps)  # (out, in) in the compute dtype

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
# The dtype that matrix products run in under CPU autocast, so that tensors used at every step are cast once.



def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype a matrix product of a `dtype` tensor runs in here: the autocast dtype inside CPU autocast (as
    Lightning's `precision="bf16-mixed"` sets), else `dtype` itself. Autocast casts a parameter once per region
    but any other tensor at every use, which for an image grid read at every word was a third of a 14x14 training
    step."""
    if torch.is_autocast_enabled("cpu") and dtype.is_floating_point:
        return torch.get_autocast_dtype("cpu")
    return dtype
