"""`python -m captioning.bundle IN.ckpt OUT.ckpt`: a compact copy of a trained captioning checkpoint, small enough to
ship (float16 weights, without a frozen encoder's). See `core.bundle`."""

import sys

from captioning.module import CaptioningModule
from core.bundle import main

if __name__ == "__main__":
    sys.exit(main(model_class=CaptioningModule, prog="python -m captioning.bundle"))
