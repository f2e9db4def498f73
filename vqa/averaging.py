"""`python -m vqa.averaging OUT.ckpt A.ckpt B.ckpt ... [--weights WA WB ...]`: the weighted average of
checkpoints of one VQA model. See `core.training.averaging`."""

import sys

from core.training.averaging import main
from vqa.module import VqaModule

if __name__ == "__main__":
    sys.exit(main(model_class=VqaModule, prog="python -m vqa.averaging"))
