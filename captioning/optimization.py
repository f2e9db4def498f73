"""The optimiser every model of the project uses: Adam with the encoder's trainable blocks (when fine-tuned)
as a group of their own at a lower learning rate, and an exponential decay after every epoch."""

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
) -> dict:
    """Lightning's `configure_optimizers` answer for the head's parameters and the encoder's trainable ones."""
    groups = [{"params": list(head), "lr": learning_rate}]
    trainable = [p for p in encoder.parameters() if p.requires_grad]
    if trainable:
        groups.append({"params": trainable, "lr": encoder_learning_rate})
    optimizer = torch.optim.Adam(groups)
    scheduler = torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma=lr_decay)
    return {"optimizer": optimizer, "lr_scheduler": scheduler}
