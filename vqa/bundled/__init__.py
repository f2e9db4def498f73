"""VQA models that ship with the package: Stacked Attention Networks (2 hops).

* DAQUAR (`DAQUAR_SAN`): trained on DAQUAR's 6795 training questions about NYU-Depth-V2 indoor photos
  ("what is on the desk?", "how many chairs are there?"); it answers with DAQUAR's objects, colours and counts.
  The model card (`docs/model-card.md`) gives its data, scores and limitations.
* ShapesWorld (`SHAPES_SAN`): trained on ShapesWorld-VQA, questions about the built-in synthetic scenes ("what
  colour is the circle?", "how many objects are there?", "what shape is the large object?"). It knows only
  ShapesWorld's question words and 18 answers (yes/no, counts 0-4, shapes, colours, sizes).

Compact checkpoints made by `python -m vqa.bundle`; load them with `VqaModule.load`.
"""

from __future__ import annotations

from pathlib import Path

_HERE = Path(__file__).resolve().parent

DAQUAR_SAN: Path = _HERE / "daquar_san.ckpt"
"""SAN with 2 attention hops, `configs/vqa/daquar_san.yaml`, its weights averaged over epochs 5-15
(`docs/results.md`)."""

SHAPES_SAN: Path = _HERE / "shapes_san.ckpt"
"""SAN with 2 attention hops, `configs/vqa/shapes_san.yaml`."""

VQA_CHECKPOINTS: dict[str, Path] = {"DAQUAR": DAQUAR_SAN, "ShapesWorld": SHAPES_SAN}
"""The bundled VQA models by the name the demo app shows, the real-photo one first."""
