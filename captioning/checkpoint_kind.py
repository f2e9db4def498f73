"""What captioning tells the shared core about its checkpoints (`core.training.checkpoint_kinds`), declared through an
entry point (pyproject.toml): what they are called and hold, how older ones map onto today's classes, and which
settings checkpoints of one model may differ in. The model files leave all three to this one."""

from core.training.checkpoint_kinds import CheckpointHistory, CheckpointKind

# What changed since older captioning checkpoints were saved, the bundled ones included (never saved again):
# `read_checkpoint` reads every checkpoint through it. A change that would break them adds an entry here.
HISTORY = CheckpointHistory(
    # modules whose classes moved, when the shared core was split out of `captioning` and since
    moved_modules={
        "captioning.attention": "core.model.attention",
        "captioning.encoder": "core.model.encoder",
        "captioning.reading": "captioning.decoder",
        "captioning.hard_attention": "captioning.objectives",
        "captioning.losses": "captioning.objectives",
    },
    # the decoder's options, held at the top level before the decoder became a component (`model.decoder`)
    flat_components={
        "decoder": ("captioning.decoder.ShowAttendTell", (
            "embed_dim", "decoder_dim", "attention_dim", "dropout", "score",
            "state_from_image", "coordinates", "remember_content", "fast_path",
        )),
    },  # fmt: skip
    renamed_options={
        # hard attention's lambda_e is a bonus that spreads the maps, not soft attention's sharpening entropy_weight
        "captioning.objectives.HardAttention": {"entropy_weight": "entropy_bonus"},
    },
    removed_options={
        # remember_content=False is `experiments.decoder_variants.WhereNotWhatDecoder`
        "captioning.decoder.ShowAttendTell": {"remember_content": True},
    },
)

# Hyper-parameters that change how a model is trained or decodes, not what its weights mean; at any depth, so that
# the arguments of a component (the attention objective's penalty and entropy weights, its REINFORCE baseline, how it
# reads at inference) may differ while its class may not (`core.training.averaging`).
TRAINING_SETTINGS = frozenset({
    "learning_rate", "encoder_learning_rate", "lr_decay", "dropout", "label_smoothing", "self_critical",
    "initial_weights", "beam_size", "length_penalty", "max_length", "penalty_weight", "entropy_weight",
    "entropy_bonus", "reinforce_weight", "baseline_decay", "expectation_probability", "inference",
})  # fmt: skip

CHECKPOINT_KIND = CheckpointKind(
    name="captioning",
    command="python -m captioning",
    required=("vocabulary",),
    history=HISTORY,
    training_settings=TRAINING_SETTINGS,
)
