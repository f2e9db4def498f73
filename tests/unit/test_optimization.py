"""Fused Adam in the modules, and the gradient clipping that goes with it, against torch's own clipping."""

from types import SimpleNamespace

import lightning as L
import pytest
import torch
from torch import nn

from core.training.optimization import FusedAdamClipping, adam_with_epoch_decay


class Tiny(FusedAdamClipping, L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.layer = nn.Linear(4, 3)

    def training_step(self, batch, batch_index):
        return (self.layer(batch[0]) * 100).pow(2).mean()  # large gradients: clipping has work to do

    def configure_optimizers(self):
        return adam_with_epoch_decay(
            self.layer.parameters(), nn.Module(), learning_rate=0.1, encoder_learning_rate=0.0, lr_decay=1.0,
            fused=self.fused_adam(),
        )


def gradients_after_clipping(algorithm: str | None, clip: float) -> list[torch.Tensor]:
    module = Tiny()
    optimizer = adam_with_epoch_decay(
        module.parameters(), nn.Module(), learning_rate=0.1, encoder_learning_rate=0.0, lr_decay=1.0, fused=True
    )["optimizer"]
    for p in module.parameters():
        p.grad = torch.full_like(p, 3.0)
    module.configure_gradient_clipping(optimizer, clip, algorithm)
    return [p.grad for p in module.parameters()]


def test_a_fused_optimisers_gradients_are_clipped_by_norm_and_by_value():
    clipped = gradients_after_clipping(None, 0.5)  # Lightning's default algorithm: the norm
    assert torch.linalg.vector_norm(torch.cat([g.flatten() for g in clipped])).item() == pytest.approx(0.5, rel=1e-5)
    assert all(torch.all(g == g.flatten()[0]) for g in clipped)  # scaled, not clamped
    by_value = gradients_after_clipping("value", 0.5)
    assert all(torch.all(g == 0.5) for g in by_value)


def test_fused_only_without_a_loss_scaler():
    module = Tiny()
    assert module.fused_adam()  # no trainer: no scaler
    module._trainer = SimpleNamespace(precision_plugin=SimpleNamespace(scaler=torch.amp.GradScaler("cpu")))
    assert not module.fused_adam()


@pytest.mark.parametrize("precision", ["32-true", "bf16-mixed"])
def test_training_with_clipping_runs_fused(precision):
    """Lightning alone refuses to clip a fused optimiser's gradients under mixed precision; the module does it."""
    torch.manual_seed(0)
    data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(8, 4)), batch_size=4)
    module = Tiny()
    before = module.layer.weight.detach().clone()
    trainer = L.Trainer(
        max_steps=2, precision=precision, gradient_clip_val=0.01, logger=False, enable_checkpointing=False,
        enable_progress_bar=False, enable_model_summary=False,
    )
    trainer.fit(module, data)
    assert trainer.optimizers[0].param_groups[0]["fused"]
    assert not torch.equal(module.layer.weight, before)
