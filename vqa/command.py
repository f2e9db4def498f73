"""What `python -m vqa` says about itself (`core.training.command_help`); imports neither torch nor Lightning."""

from core.training.command_help import CommandHelp

HELP = CommandHelp(
    prog="python -m vqa",
    description=(
        "Train, score and run visual question answering models that show where they look: Stacked Attention Networks "
        "(a CNN's grid of image regions, a question encoder, attention hops over the regions), with the configs below "
        "or your own."
    ),
    task="vqa",
    overlays={"easyvqa_san.yaml": ("shapes_san.yaml",)},  # each overlay and the configs given before it, in order
)
