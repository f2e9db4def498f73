"""`python -m captioning.bundle IN.ckpt OUT.ckpt`: a compact copy of a trained captioning checkpoint, small enough to
ship (float16 weights, without a frozen encoder's). See `core.training.bundle`. The copy may carry other beam-search
settings than the run's (`--beam-size`, `--length-penalty`, `--no-repeat-ngram-size`, `--complete-phrases`, e.g.
those chosen on the validation split), so that the model decodes with them wherever it is loaded, and a Transformer's
copy may draw another layer's map (`--map-layer`, e.g. the one chosen on photos with boxes)."""

import sys

from jsonargparse.typing import NonNegativeInt, PositiveInt

from captioning.module import CaptioningModule
from core.training.bundle import Setting, main

#: The beam search's settings, `CaptioningModule`'s arguments of those names, and the Transformer's map layer.
DECODING = (
    Setting("beam_size", PositiveInt, "the copy's beam width (default: the run's)"),
    Setting("length_penalty", float, "the copy's length penalty (default: the run's)"),
    Setting("no_repeat_ngram_size", NonNegativeInt, "the copy's n-gram size never written twice (default: the run's)"),
    Setting(
        "complete_phrases", bool,
        "whether the copy never ends a caption on an article, preposition or conjunction: true or false "
        "(default: the run's)",
    ),
    Setting(
        "map_layer", int,
        "for a Transformer decoder, the layer whose cross-attention (heads averaged) is each word's map in the copy, "
        "counted from 0, -1 the last (default: the run's)",
        key="decoder.init_args.map_layer",
    ),
)  # fmt: skip

if __name__ == "__main__":
    sys.exit(main(model_class=CaptioningModule, prog="python -m captioning.bundle", settings=DECODING))
