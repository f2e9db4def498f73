"""What captioning and VQA share, knowing neither: the parts of an attention model and of its training that are not
one task's, in three sub-packages.

`core.model`: the attention (score functions, softmax, context), the CNN encoder and the additive score's fast path.
`core.maps`: attention maps drawn over the photo, and their measures (spread, and where they land against boxes).
`core.training`: the command line, checkpoints, data plumbing, resumption, DDP gathering and the training outputs.

What is a task's own (its kind of checkpoint, the modules it moved, its bundle settings) the task declares: entry
points in pyproject.toml, `core.training.bundle.Setting`.
"""
