"""What VQA tells the shared core about its checkpoints (`core.training.checkpoint_kinds`), declared through an entry
point (pyproject.toml): what they are called and hold, how older ones map onto today's classes, and which settings
checkpoints of one model may differ in. The model files leave all three to this one."""

from core.training.checkpoint_kinds import CheckpointHistory, CheckpointKind

# What changed since older VQA checkpoints were saved, the bundled ones included (never saved again):
# `read_checkpoint` reads every checkpoint through it. A change that would break them adds an entry here.
HISTORY = CheckpointHistory(
    # the SAN's options, held at the top level before the SAN became a component (`model.san`)
    flat_components={
        "san": ("vqa.san.StackedAttention", (
            "attention_dim", "hops", "dropout", "score", "classifier_hidden", "feature_dropout",
            "coordinates", "separate_hops", "read_positions", "question_dropout", "fast_path",
        )),
    },  # fmt: skip
    removed_options={
        # they moved to `experiments.san_variants.StackedAttentionVariants`
        "vqa.san.StackedAttention": {"separate_hops": False, "read_positions": False, "question_dropout": 0.0},
    },
)

# Hyper-parameters that change how a model is trained, not what its weights mean, at any depth (the SAN's dropouts
# among them): checkpoints of one model may differ in these and still be averaged (`core.training.averaging`).
TRAINING_SETTINGS = frozenset({
    "learning_rate", "encoder_learning_rate", "lr_decay", "dropout", "feature_dropout", "targets", "entropy_weight",
})  # fmt: skip

CHECKPOINT_KIND = CheckpointKind(
    name="VQA",
    command="python -m vqa",
    required=("question_vocabulary", "answers"),
    history=HISTORY,
    training_settings=TRAINING_SETTINGS,
)
