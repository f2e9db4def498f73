"""UnrolledLinear against autograd's own per-step products: the same values and gradients, one weight product."""

import pytest
import torch

from captioning.fast_unroll import UnrolledLinear

STEPS, BATCH, SIZE = 5, 3, 4


def unroll(weight: torch.Tensor, inputs: torch.Tensor, linear) -> torch.Tensor:
    """h_{t+1} = tanh(W h_t + x_t) over the steps of inputs (T, B, H), a loss from every step's state."""
    h, loss = torch.zeros(BATCH, SIZE), 0.0
    for x in inputs:
        h = torch.tanh(linear(h) + x)
        loss = loss + (h * torch.arange(1.0, SIZE + 1)).sum()
    return loss


def gradients(use_unrolled: bool, weight_grad: bool = True) -> tuple[torch.Tensor, ...]:
    torch.manual_seed(0)
    weight = torch.randn(SIZE, SIZE, requires_grad=weight_grad)
    inputs = torch.randn(STEPS, BATCH, SIZE, requires_grad=True)
    linear = UnrolledLinear(weight) if use_unrolled else (lambda h: h @ weight.t())
    loss = unroll(weight, inputs, linear)
    loss.backward()
    return loss.detach(), weight.grad, inputs.grad


def test_values_and_gradients_equal_autograds_per_step_products():
    loss, weight_grad, input_grad = gradients(use_unrolled=True)
    ref_loss, ref_weight_grad, ref_input_grad = gradients(use_unrolled=False)
    assert torch.allclose(loss, ref_loss)
    assert torch.allclose(weight_grad, ref_weight_grad, atol=1e-5)
    assert torch.allclose(input_grad, ref_input_grad, atol=1e-6)
    # and the weight gradient by its formula: sum over steps of g_t^T x_t, here checked on one step by hand
    weight = torch.randn(2, 3, requires_grad=True)
    x = torch.randn(4, 3)
    g = torch.randn(4, 2)
    (UnrolledLinear(weight)(x) * g).sum().backward()
    assert torch.allclose(weight.grad, g.t() @ x, atol=1e-6)


def test_a_frozen_weight_gets_no_gradient_and_the_inputs_still_do():
    _, weight_grad, input_grad = gradients(use_unrolled=True, weight_grad=False)
    _, _, ref_input_grad = gradients(use_unrolled=False, weight_grad=False)
    assert weight_grad is None
    assert torch.allclose(input_grad, ref_input_grad, atol=1e-6)


def test_under_autocast_it_computes_in_bfloat16_and_the_weight_gradient_stays_float32():
    torch.manual_seed(0)
    weight = torch.randn(SIZE, SIZE, requires_grad=True)
    inputs = torch.randn(STEPS, BATCH, SIZE)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        linear = UnrolledLinear(weight)
        assert linear(inputs[0]).dtype == torch.bfloat16
        loss = unroll(weight, inputs, linear)
    loss.float().backward()
    assert weight.grad.dtype == torch.float32
    _, ref_weight_grad, _ = gradients(use_unrolled=False)
    assert torch.allclose(weight.grad, ref_weight_grad, rtol=0.05, atol=0.05 * ref_weight_grad.abs().max().item())


@pytest.mark.parametrize("steps", [1, 7])
def test_a_second_unroll_starts_afresh(steps):
    torch.manual_seed(steps)
    weight = (torch.randn(SIZE, SIZE) / SIZE).requires_grad_()
    for _ in range(2):  # the gradients of two unrolls add up as autograd's would
        linear = UnrolledLinear(weight)
        h = torch.ones(BATCH, SIZE)
        for _ in range(steps):
            h = linear(h)
        h.sum().backward()
    expected = weight.detach().clone().requires_grad_()
    for _ in range(2):
        h = torch.ones(BATCH, SIZE)
        for _ in range(steps):
            h = h @ expected.t()
        h.sum().backward()
    assert torch.allclose(weight.grad, expected.grad, rtol=1e-5, atol=1e-6)
