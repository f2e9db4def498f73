"""What `python -m captioning` says about itself (`core.training.command_help`); imports neither torch nor Lightning."""

from core.training.command_help import CommandHelp

HELP = CommandHelp(
    prog="python -m captioning",
    description=(
        "Train, score and run image captioners that show where they look: Show-Attend-Tell (a CNN's grid of image "
        "regions, an LSTM that attends to them word by word, soft or hard attention) or a Transformer decoder over the "
        "same grid (its cross-attention maps, `--model.decoder captioning.transformer.TransformerDecoder`), with the "
        "configs below or your own."
    ),
    task="captioning",
    # each overlay and the configs given before it, in order
    overlays={
        "coco_soft.yaml": ("flickr8k_soft.yaml",),
        "flickr8k_hard.yaml": ("flickr8k_soft.yaml",),
        "flickr8k_hard_scst.yaml": ("flickr8k_soft.yaml", "flickr8k_soft_scst.yaml"),
        "flickr8k_hard_scst_meteor.yaml": ("flickr8k_soft.yaml", "flickr8k_soft_scst.yaml"),
        "flickr8k_soft_scst.yaml": ("flickr8k_soft.yaml",),
        "flickr8k_soft_scst_meteor.yaml": ("flickr8k_soft.yaml", "flickr8k_soft_scst.yaml"),
        "flickr8k_transformer.yaml": ("flickr8k_soft.yaml",),
        "flickr8k_transformer_scst.yaml": ("flickr8k_soft.yaml", "flickr8k_transformer.yaml", "flickr8k_soft_scst.yaml"),
        "shapes_compare.yaml": ("shapes_soft.yaml",),
        "shapes_hard.yaml": ("shapes_soft.yaml",),
    },
)
