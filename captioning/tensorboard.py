"""The captioning part of what a run shows in TensorBoard (`core.training.tensorboard`): a few validation images, each with
the caption the model generates and where it looked at every word."""

from __future__ import annotations

import lightning as L

from core.training.tensorboard import Sample, ValidationSamples


class CaptionSamples(ValidationSamples):
    """At the end of every validation epoch, the first `count` validation images in TensorBoard: the caption
    beam search generates (the model's decoding settings, as in validation) beside the first reference, and the
    photo with one attention overlay per word, as `python -m captioning.export` draws its grid.png.

    Args:
        count: how many validation images to show, from the start of the split (0 shows none).
    """

    def samples(self, trainer: L.Trainer, model: L.LightningModule, batch: dict) -> list[Sample]:
        data = trainer.datamodule
        split = data.samples(data.split_names["val"])
        generated = model.generate(batch["inputs"])
        samples = []
        for index, tokens, weights in zip(batch["index"].tolist(), generated.tokens, generated.weights):
            words, rows = model.caption_words(tokens, weights)  # (n_words, L)
            text = f"**generated:** {' '.join(words)}\n\n**reference:** {split[index].captions[0]}"
            samples.append(Sample(photo=data.dataset.load(split[index]), text=text, titles=words, weights=rows))
        return samples
