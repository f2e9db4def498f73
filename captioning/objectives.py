"""The attention mode of a captioning model: how it reads the image in training and at inference, and the
loss it is trained with. Soft and hard attention are two classes, chosen in YAML like any other class:

    model:
      attention:
        class_path: captioning.hard_attention.HardAttention
        init_args: {reinforce_weight: 0.1}

Both share the decoder, the encoder, the search and everything else; only these differ.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from torch import Tensor, nn

from captioning.decoder import TeacherForced
from captioning.losses import caption_loss
from captioning.reading import Expectation, Read


@dataclass
class LossTerms:
    """A training objective's value and its parts."""

    total: Tensor  # the scalar to minimise
    parts: dict[str, Tensor] = field(default_factory=dict)  # scalars to log, by name
    reward: Tensor | None = None  # (B,) log p(y|s,a) per caption for sampled paths, when there were any


class AttentionObjective(nn.Module):
    """Base class of the attention modes.

    Args:
        inference: how the trained model reads at evaluation and prediction: `Expectation` (default),
            `ArgMax` or `Sample` from `captioning.reading`.
    """

    def __init__(self, *, inference: type[Read] = Expectation) -> None:
        super().__init__()
        self.inference = inference

    def training_read(self) -> Read:
        """How the decoder reads the image for the next training minibatch."""
        raise NotImplementedError

    def inference_read(self) -> Read:
        """How the decoder reads the image at evaluation and prediction."""
        return self.inference()

    def loss(self, out: TeacherForced, targets: Tensor, *, pad_id: int, label_smoothing: float) -> LossTerms:
        """The objective for a teacher-forced unroll `out` of the next words `targets` (B, T)."""
        raise NotImplementedError

    def observe(self, terms: LossTerms, mean_over_processes: Callable[[Tensor], Tensor]) -> dict[str, Tensor]:
        """Called after every training minibatch with its terms, to update state such as a baseline;
        returns that state's values to log, by name. `mean_over_processes` averages a scalar over the
        processes of a distributed run, so every process keeps the same state."""
        return {}


class SoftAttention(AttentionObjective):
    """Deterministic soft attention (Xu et al. section 4.2): the expectation of the context, trained by
    backpropagation on the word cross-entropy plus the doubly stochastic penalty.

    Args:
        penalty_weight: lambda of the doubly stochastic penalty (the paper's 1.0 by default).
        entropy_weight: weight of the mean attention entropy added to the loss, a sharpness regulariser
            (0, the paper's loss, by default; positive values make each word look at fewer places).
        inference: how the model reads at evaluation and prediction (the expectation, as trained, by default).
    """

    def __init__(
        self, *, penalty_weight: float = 1.0, entropy_weight: float = 0.0, inference: type[Read] = Expectation
    ) -> None:
        super().__init__(inference=inference)
        self.penalty_weight = penalty_weight
        self.entropy_weight = entropy_weight

    def training_read(self) -> Read:
        return Expectation()

    def loss(self, out: TeacherForced, targets: Tensor, *, pad_id: int, label_smoothing: float) -> LossTerms:
        loss = caption_loss(
            out.logits,
            targets,
            out.weights,
            pad_id=pad_id,
            penalty_weight=self.penalty_weight,
            label_smoothing=label_smoothing,
            entropy_weight=self.entropy_weight,
        )
        parts = {"cross_entropy": loss.cross_entropy, "penalty": loss.penalty, "attention_entropy": loss.entropy}
        return LossTerms(loss.total, parts)
