"""Fine-tune a captioner while keeping its attention maps near a teacher's: cross-entropy plus the KL divergence
from the teacher's map to the student's at every word.

Why: the bundled soft model, reading photos at 384 px (a 12x12 grid) without any training, points at the object a
word names more often than a fixed point at the photo's centre; one epoch of cross-entropy at 384 px wins its
captions back but moves its maps below the centre point (docs/experiments.md, "Flickr8k: where the maps land on
real photos"). Here the teacher is that untrained model: both read the same photo and the same ground-truth words
(teacher forcing), and the student pays `map_weight * KL(teacher's alpha_t || student's alpha_t)`, averaged over
the captions' real words, beside its cross-entropy. No boxes are used; only where the teacher looked.

    python experiments/map_distillation.py fit --config configs/captioning/flickr8k_soft.yaml \
        --model.encoder.init_args.image_size 384 --model.initial_weights captioning/bundled/flickr8k_soft.ckpt \
        --model.teacher captioning/bundled/flickr8k_soft.ckpt --model.map_weight 2 ...

The run's checkpoints are plain `CaptioningModule` checkpoints (the teacher is neither saved nor named in them):
test, export and ground them with `python -m captioning` and `python -m captioning.grounding` as any other. A
resumed run is given `--model.teacher` again. Figures in docs/experiments.md.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import Tensor

from captioning.cli import CaptioningCLI
from captioning.datamodule import CaptionDataModule
from captioning.decoder import EXPECTATION, ShowAttendTell
from captioning.module import CaptioningModule
from captioning.objectives import LossTerms
from core.training.checkpoints import CheckpointError
from data.vocabulary import Vocabulary

#: Hyper-parameters of this experiment only, left out of the checkpoints it writes.
OWN_OPTIONS = ("teacher", "map_weight")


def map_divergence(teacher: Tensor, student: Tensor, mask: Tensor) -> Tensor:
    """Mean over real words of KL(teacher || student) between attention maps.

    Args:
        teacher: (B, T, L) the teacher's alpha at every step.
        student: (B, T, L) the student's.
        mask: (B, T) true at the captions' real words.
    """
    kl = torch.where(teacher > 0, teacher * (teacher.log() - student.clamp_min(1e-12).log()), 0.0).sum(-1)  # (B, T)
    return (kl * mask).sum() / mask.sum().clamp_min(1)


class MapDistillation(CaptioningModule):
    """`CaptioningModule` whose teacher-forced loss adds `map_weight * map_divergence` to a frozen teacher's maps.

    The logged `train/loss` is the cross-entropy objective's, as in any run; `train/map_kl` is the divergence.

    Args:
        teacher: a captioning checkpoint with the same vocabulary (and grid) as the student; its decoder gives the maps.
        map_weight: the weight of the map divergence against the word cross-entropy.
        **kwargs: `CaptioningModule`'s own options.
    """

    def __init__(self, *, teacher: Path, map_weight: float = 1.0, **kwargs) -> None:
        super().__init__(**kwargs)
        if map_weight < 0:
            raise ValueError(f"map_weight must be at least 0, got {map_weight}")
        self.map_weight = map_weight
        self.teacher_path = Path(teacher)
        if not self.teacher_path.is_file():
            raise CheckpointError(
                f"teacher {teacher} is not a file: give --model.teacher a captioning checkpoint's path"
            )
        model = CaptioningModule.load(teacher)
        self.teacher_words = model.vocabulary.tokens
        # in a list: not a submodule, so neither trained nor saved
        self._teacher = [model.decoder.eval().requires_grad_(False)]
        if self.vocabulary is not None:
            self._check_teacher()

    def set_vocabulary(self, vocabulary: Vocabulary) -> None:
        super().set_vocabulary(vocabulary)
        if hasattr(self, "teacher_words"):  # set from the data after the teacher was loaded: check it now
            self._check_teacher()

    def _check_teacher(self) -> None:
        """CheckpointError (a ValueError), naming the teacher's file, when its words are not the student's (a word's
        map would be another word's)."""
        if self.teacher_words != self.vocabulary.tokens:
            raise CheckpointError(
                f"the teacher {self.teacher_path} has another vocabulary than the model being trained "
                f"({len(self.teacher_words)} words against {len(self.vocabulary.tokens)}): give a teacher trained on "
                "the same captions, such as the checkpoint the run starts from (--model.initial_weights)"
            )

    @property
    def teacher(self) -> ShowAttendTell:
        return self._teacher[0]

    def _teacher_forced_loss(self, batch: dict, stage: str) -> tuple[LossTerms, Tensor]:
        terms, weights = super()._teacher_forced_loss(batch, stage)
        if stage != "train":
            return terms, weights
        captions = batch["captions"]  # (B, T+1)
        self.teacher.to(weights.device)
        with torch.no_grad():
            target = self.teacher(self.features(batch["inputs"]), captions[:, :-1], EXPECTATION).weights  # (B, T, L)
        divergence = map_divergence(target, weights, captions[:, 1:] != self.vocabulary.pad_id)
        self.log("train/map_kl", divergence, batch_size=captions.shape[0])
        return LossTerms(terms.total + self.map_weight * divergence, {**terms.parts, "map_kl": divergence}), weights

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        super().on_save_checkpoint(checkpoint)
        for name in OWN_OPTIONS:
            checkpoint["hyper_parameters"].pop(name, None)


def main(args: list[str] | None = None) -> CaptioningCLI:
    return CaptioningCLI.main(MapDistillation, CaptionDataModule, args)


if __name__ == "__main__":
    main()
