"""The VQA part of what a run shows in TensorBoard (`core.training.tensorboard`): a few validation questions, each with the
predicted answer and where every attention hop looked."""

from __future__ import annotations

import lightning as L
import torch

from core.training.tensorboard import Sample, ValidationSamples
from vqa.answers import answer_words


class AnswerSamples(ValidationSamples):
    """At the end of every validation epoch, the first `count` validation questions in TensorBoard: the question,
    the predicted answer with its probability and the right one, and the photo with one attention overlay per
    hop, as `python -m vqa.export` draws its grid.png.

    Args:
        count: how many validation questions to show, from the start of the split (0 shows none).
    """

    def samples(self, trainer: L.Trainer, model: L.LightningModule, batch: dict) -> list[Sample]:
        data = trainer.datamodule
        questions = data.evaluated("val")
        out = model(batch["inputs"], batch["question"], batch["length"])
        best = torch.softmax(out.logits.float(), dim=-1).max(dim=-1)  # (B,) probabilities and answer classes
        samples = []
        for index, probability, answer, weights in zip(batch["index"].tolist(), best.values, best.indices, out.weights):
            question = questions[index]
            predicted = answer_words(model.answer_vocabulary.answers[answer])
            text = (
                f"**question:** {question.question}\n\n**predicted:** {predicted} ({float(probability):.0%})\n\n"
                f"**answer:** {answer_words(question.answer) if question.answer else '(unknown)'}"
            )
            titles = [f"hop {hop}" for hop in range(1, len(weights) + 1)]  # weights: (K, L)
            photo = data.dataset.load(question.image_id)
            samples.append(Sample(photo=photo, text=text, titles=titles, weights=weights, photo_title=predicted))
        return samples
