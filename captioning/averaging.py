"""`python -m captioning.averaging OUT.ckpt A.ckpt B.ckpt ... [--weights WA WB ...]`: the weighted average of
checkpoints of one captioning model. See `core.training.averaging`."""

import sys

from captioning.module import CaptioningModule
from core.training.averaging import main

if __name__ == "__main__":
    sys.exit(main(model_class=CaptioningModule, prog="python -m captioning.averaging"))
