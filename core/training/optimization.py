"""The optimiser every model of the project uses: Adam with the encoder's trainable blocks (when fine-tuned)
as a group of their own at a lower learning rate, and an exponential decay after every epoch; Adam's fused
kernel where it can run, with the gradient clipping that goes with it (`FusedAdamClipping`)."""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import nn


def adam_with_epoch_decay(
    head: Iterable[nn.Parameter],
    encoder: nn.Module,
    *,
    learning_rate: float,
    encoder_learning_rate: float,
    lr_decay: float,
    fused: bool = False,
) -> dict:
    """Lightning's `configure_optimizers` answer for the head's parameters and the encoder's trainable ones.
    `fused` runs torch's one-kernel Adam (the same update, one pass over each parameter)."""
    groups = [{"params": list(head), "lr": learning_rate}]
    trainable = [p for p in encoder.parameters() if p.requires_grad]
    if trainable:
        groups.append({"params": trainable, "lr": encoder_learning_rate})
    optimizer = torch.optim.Adam(groups, fused=fused)
    scheduler = torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma=lr_decay)
    return {"optimizer": optimizer, "lr_scheduler": scheduler}


class FusedAdamClipping:
    """Mixin for the project's LightningModules: fused Adam where it is safe, and gradient clipping that works
    with it.

    torch's fused Adam makes the whole update in one pass over each parameter, about 4 times faster than its
    default on the CPU, where the default's update was a tenth of a training step (`docs/performance.md`).
    Lightning's mixed-precision plugin refuses to clip the gradients of a fused optimiser because, with float16's
    loss scaler, they are still scaled when clipping happens. Without a scaler (float32 and bfloat16, the
    project's settings) they are the true gradients, so the module clips them itself; with a scaler it does not
    fuse and Lightning clips as usual.
    """

    def fused_adam(self) -> bool:
        """Whether `configure_optimizers` may fuse Adam: no loss scaler, and parameters on the CPU or a GPU."""
        trainer = getattr(self, "_trainer", None)
        scaler = getattr(trainer.precision_plugin, "scaler", None) if trainer is not None else None
        return scaler is None and all(p.device.type in ("cpu", "cuda") for p in self.parameters())

    def configure_gradient_clipping(
        self, optimizer: torch.optim.Optimizer, gradient_clip_val: float | None = None, gradient_clip_algorithm=None
    ) -> None:
        if not gradient_clip_val or not any(group.get("fused") for group in optimizer.param_groups):
            return super().configure_gradient_clipping(optimizer, gradient_clip_val, gradient_clip_algorithm)
        parameters = [p for group in optimizer.param_groups for p in group["params"]]
        if gradient_clip_algorithm == "value":
            nn.utils.clip_grad_value_(parameters, gradient_clip_val)
        else:  # Lightning's default, "norm"
            nn.utils.clip_grad_norm_(parameters, gradient_clip_val)
