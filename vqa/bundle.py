"""`python -m vqa.bundle IN.ckpt OUT.ckpt`: a compact copy of a trained VQA checkpoint, small enough to
ship (float16 weights, without a frozen encoder's). See `core.training.bundle`."""

import sys

from core.training.bundle import main
from vqa.module import VqaModule

if __name__ == "__main__":
    sys.exit(main(model_class=VqaModule, prog="python -m vqa.bundle"))
