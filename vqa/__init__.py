"""Visual question answering with Stacked Attention Networks.

From Python, `from vqa import Answerer` (`vqa.pretrained`): a bundled or trained model that answers a question
about a photo and shows where each attention hop looked. Training and testing are `python -m vqa` (`vqa.cli`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vqa.pretrained import Answerer

__all__ = ["Answerer"]


def __getattr__(name: str) -> Any:
    """`vqa.Answerer`, imported on first use: `import vqa` (which every `python -m vqa...` command does first)
    then does not load torch and Lightning unless it needs them."""
    if name == "Answerer":
        from vqa.pretrained import Answerer

        return Answerer
    raise AttributeError(f"module 'vqa' has no attribute {name!r}")
