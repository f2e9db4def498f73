"""Image captioning with Show, Attend and Tell (soft and hard attention).

From Python, `from captioning import Captioner` (`captioning.pretrained`): a bundled or trained model that captions
photos and shows where it looked. Training and testing are `python -m captioning` (`captioning.cli`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from captioning.pretrained import Captioner

__all__ = ["Captioner"]


def __getattr__(name: str) -> Any:
    """`captioning.Captioner`, imported on first use: `import captioning` (which every `python -m captioning...`
    command does first) then does not load torch and Lightning unless it needs them."""
    if name == "Captioner":
        from captioning.pretrained import Captioner

        return Captioner
    raise AttributeError(f"module 'captioning' has no attribute {name!r}")
