"""`python -m captioning.export MODEL IMAGE_OR_FOLDER... --output DIR [--beam-size 3] [--stretch] [--name-objects false]`:
caption photos and write where the model looked at every word. MODEL is a bundled model's name (flickr8k-soft) or a
checkpoint's path; a model with an ImageNet head names the objects it sees (`captioning.naming`) unless told not to.

For each image, `DIR/<image stem>/` receives:

* `word_01_<word>.png`, ... one overlay per generated word, numbered from 1 in caption order;
* `grid.png`: the photo, then every word's overlay with the word as its title, and the colour bar;
* `attention.gif`: one frame per word;
* `caption.json`: {"image", "caption", "words", "grid_size": [rows, columns], "image_size": [width, height],
  "weights": one row of rows x columns raw attention weights per word (row-major grid locations),
  "scale": the scale the pictures are drawn on (`DisplayScale.describe`), "concentration": per word, the share
  of its attention on the most attended 5% of the photo (`core.maps.measures`)}; for a Transformer decoder also
  "heads": every layer's and head's cross-attention per word, [word][layer][head][location] (`every_head`), of
  which "weights" is the layer and head its `map_layer` and `map_head` choose; when objects were named, "tags": the
  words the encoder's ImageNet head found, [{"word", "probability", "classes"}], most probable first.

The pictures use one fixed scale for every word (`core.maps.overlays.FixedScale`: 1 = uniform attention); `--stretch`
draws each word's map up to its own maximum instead (`PerMapStretch`).

An image that cannot be read is reported on stderr and skipped; the exit status is non-zero only when no
image could be exported. The command captions with `captioning.Captioner` and writes each result with
`Caption.save` (drawn by `captioning.overlays`), as a Python user and the app do; so does the `predict` callback
`OverlayWriter`, with the captions the trainer predicted.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from typing import Any, Optional, Sequence

import lightning as L
from jsonargparse import ArgumentParser, Namespace
from jsonargparse.typing import PositiveInt
from lightning.pytorch.callbacks import BasePredictionWriter

from captioning.datamodule import IMAGE_SUFFIXES
from captioning.pretrained import Caption, Captioner
from core.maps.overlays import add_scale_flag, chosen_scale
from data.images import ImageLoadError, load_image


def output_folder(root: Path, image_path: Path, taken: set[str]) -> Path:
    """`root/<image stem>`, with `_2`, `_3`, ... added when an earlier image of this run had the same stem
    (a.jpg and a.png, or two folders with an a.jpg), so no export overwrites another."""
    name, count = image_path.stem, 1
    while name in taken:
        count += 1
        name = f"{image_path.stem}_{count}"
    taken.add(name)
    return Path(root) / name


def image_paths(inputs: Sequence[Path]) -> list[Path]:
    """The image files named or inside the named folders (sorted), in order; a folder without images is
    reported on stderr. Named files are kept whatever their suffix (a missing one is reported when loaded)."""
    paths: list[Path] = []
    for given in inputs:
        if given.is_dir():
            found = sorted(p for p in given.iterdir() if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES)
            if not found:
                print(f"skipped {given}: no image files ({', '.join(sorted(IMAGE_SUFFIXES))}) in it", file=sys.stderr)
            paths.extend(found)
        else:
            paths.append(given)
    return paths


def parse_arguments(argv: Sequence[str] | None) -> Namespace:
    parser = ArgumentParser(
        prog="python -m captioning.export",
        description="Caption images and write per-word attention overlays, a grid, a GIF and the weights as JSON.",
    )
    parser.add_argument("model", help="a bundled captioning model's name (flickr8k-soft, ...) or a checkpoint's path")
    parser.add_argument("images", type=Path, nargs="+", metavar="IMAGE_OR_FOLDER", help="image files or folders of images")
    parser.add_argument("--output", type=Path, required=True, help="folder that receives one subfolder per image")
    parser.add_argument("--beam-size", type=PositiveInt, default=3, help="beam width")
    add_scale_flag(parser, unit="word")
    parser.add_argument(
        "--name-objects",
        type=Optional[bool],
        default=None,
        help="true or false: name what the encoder's ImageNet head sees, words the captions never had included "
        "(captioning.naming); default: on for models with an EfficientNet-Lite encoder",
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_arguments(argv)
    try:
        captioner = Captioner.load(args.model)
        if args.name_objects and not captioner.can_name_objects:
            raise ValueError(
                f"{args.model} has no ImageNet head to name objects with ({type(captioner.model.encoder).__name__} "
                "encoder): leave out --name-objects"
            )
    except (FileNotFoundError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    scale = chosen_scale(args)
    taken: set[str] = set()
    exported = 0
    for path in image_paths(args.images):
        try:
            image = load_image(path)
        except ImageLoadError as error:
            print(f"skipped: {error}", file=sys.stderr)
            continue
        folder = output_folder(args.output, path, taken)
        result = captioner.caption(image, beam_size=args.beam_size, name_objects=args.name_objects)
        record = replace(result, source=str(path)).save(folder, scale=scale)
        tags = f" (tags: {', '.join(map(str, result.tags))})" if result.tags else ""
        print(f"{path}: {record['caption']!r}{tags} -> {folder}")
        exported += 1
    if not exported:
        print("error: no image could be exported", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())


# ----------------------------------------------------------------------------------------------------
# Attention overlays from `python -m captioning predict`, as a prediction callback:
#
#     python -m captioning predict --ckpt_path best.ckpt --data.predict_path photos/ \
#         --trainer.callbacks+=captioning.export.OverlayWriter --trainer.callbacks.init_args.output_dir overlays/
#
# writes for every photo the same folder as `python -m captioning.export` (see `captioning.export`), batch by
# batch, next to the captions JSON of `CaptionResultsWriter`.
#


class OverlayWriter(BasePredictionWriter):
    """Writes each predicted caption's overlays, grid, GIF and caption.json into `output_dir/<image stem>/`.

    The data module hands the model tensors resized to the encoder's input, so the original photo is read again
    from the item's path to draw on it at its own size.

    Args:
        output_dir: the folder that receives one subfolder per image.
    """

    def __init__(self, *, output_dir: Path) -> None:
        super().__init__(write_interval="batch")
        self.output_dir = Path(output_dir)
        self._taken: set[str] = set()

    def on_predict_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._taken = set()

    def write_on_batch_end(
        self,
        trainer: L.Trainer,
        pl_module: L.LightningModule,
        prediction: Any,
        batch_indices: Sequence[int] | None,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int,
    ) -> None:
        for item in prediction:
            try:
                image = load_image(item["path"])
            except ImageLoadError as error:  # changed or removed since the data module read it
                pl_module.print(f"no overlays for {item['path']}: {error}")
                continue
            folder = output_folder(self.output_dir, Path(item["path"]), self._taken)
            attention = item["weights"].float().cpu().reshape(len(item["words"]), *pl_module.encoder.grid_shape)
            Caption(words=item["words"], attention=attention, source=item["path"], given=image).save(folder)
