"""The VQA model that ships with the package: a Stacked Attention Network (2 hops) trained on
ShapesWorld-VQA, questions about the built-in synthetic scenes ("what colour is the circle?", "how many
objects are there?", "what shape is the large object?").

It knows only ShapesWorld's question words and 18 answers (yes/no, counts 0-4, shapes, colours, sizes).
A compact checkpoint made by `python -m captioning.bundle`; load it with `VqaModule.load`.
"""

from __future__ import annotations

from pathlib import Path

SHAPES_SAN: Path = Path(__file__).resolve().parent / "shapes_san.ckpt"
"""SAN with 2 attention hops, `configs/vqa/shapes_san.yaml`."""
