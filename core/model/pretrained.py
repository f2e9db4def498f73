"""What the project says about each model it ships: one `PretrainedModel` record per bundled checkpoint.

The records live in the task packages' registries (`captioning.bundled.MODELS`, `vqa.bundled.MODELS`), in the
spirit of torchvision's `Weights` and their `meta`: the name a Python user asks for, the file, the data it
learned from, its test scores, the commands that trained it, the licence terms it carries, and the encoder and
grid it looks through. Everything else that names or describes the bundled models is derived from them: the
demo app's model choices, `Captioner.from_pretrained` / `Answerer.from_pretrained`, `available()`, and the
figures of the model card (`metrics_table`, which a test holds the card and the README to).

`as_photo` is what `Captioner` and `Answerer` share besides: a photo given as a path or as a PIL image, made RGB.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from PIL import Image

from data.images import load_image

ImageInput = str | Path | Image.Image
"""A photo given from Python: the path of an image file (any format `load_image` reads) or a PIL image."""


class UnknownModelError(ValueError):
    """A pretrained model was asked for by a name the registry does not hold; the message lists the names it does."""


@dataclass(frozen=True)
class PretrainedModel:
    """One bundled model, as the project describes it.

    Args:
        name: what a Python user asks for ("flickr8k-soft"), lower case with dashes.
        title: what the demo app calls it ("Flickr8k soft").
        file: the compact checkpoint that ships in the package.
        data: what it was trained on, in a phrase.
        metrics: its test scores (x100) by metric name, as the CLI's `test` command printed them.
        evaluated_on: where and how `metrics` were measured (split, protocol, decoding).
        commands: the commands that trained (and bundled) it, in order, as `docs/results.md` gives them.
        licence: the terms the weights carry, from their data and from the encoder's ImageNet weights.
        encoder: the image encoder and its input size ("EfficientNet-Lite0, 224 px").
        grid: the side of the encoder's square grid of annotation vectors (attention maps are grid x grid).
    """

    name: str
    title: str
    file: Path
    data: str
    metrics: Mapping[str, float]
    evaluated_on: str
    commands: tuple[str, ...]
    licence: str
    encoder: str
    grid: int


def find_model(registry: Mapping[str, PretrainedModel], name: str) -> PretrainedModel:
    """The registry's record called `name`.

    Raises:
        UnknownModelError: no model has that name (the message lists the names there are).
    """
    try:
        return registry[name]
    except KeyError:
        known = ", ".join(repr(known) for known in registry)
        raise UnknownModelError(f"no pretrained model called {name!r}; the bundled ones are {known}") from None


def bundled_name(registry: Mapping[str, PretrainedModel], model: str | Path) -> str | None:
    """How a command's or a Python user's `model` names a model: None for a checkpoint file, the name for a bundled
    model of `registry` (a file of that name wins).

    Raises:
        FileNotFoundError: neither a file nor a bundled model's name (the message lists the names).
    """
    if Path(model).is_file():
        return None
    if str(model) in registry:
        return str(model)
    raise FileNotFoundError(
        f"checkpoint not found: {str(model)!r} is neither a checkpoint file nor a bundled model ({', '.join(registry)})"
    )


def metrics_table(models: Sequence[PretrainedModel]) -> str:
    """The models' test scores as a Markdown table, one row per model, one column per metric any of them has
    (in order of first appearance; a model without that metric leaves its cell empty). The model card holds
    this table as it comes out, so that its figures are the registry's."""
    columns = list(dict.fromkeys(metric for model in models for metric in model.metrics))
    lines = [
        "| model | " + " | ".join(columns) + " | measured on |",
        "|---|" + "---|" * len(columns) + "---|",
    ]
    for model in models:
        cells = [f"{model.metrics[metric]:.2f}" if metric in model.metrics else "" for metric in columns]
        lines.append(f"| `{model.name}` | " + " | ".join(cells) + f" | {model.evaluated_on} |")
    return "\n".join(lines)


def as_photo(image: ImageInput) -> tuple[Image.Image, str]:
    """The photo as RGB and what the export files call it: read from its file (upright, `load_image`) and named
    by its path, or the PIL image given, converted, and named "".

    Raises:
        data.images.ImageLoadError: the path is missing or not a readable image (the message names it).
        TypeError: it is neither a path nor a PIL image.
    """
    if isinstance(image, Image.Image):
        return (image if image.mode == "RGB" else image.convert("RGB")), ""
    if isinstance(image, (str, Path)):
        return load_image(image), str(image)
    raise TypeError(f"an image is a path or a PIL image, not {type(image).__name__}")
