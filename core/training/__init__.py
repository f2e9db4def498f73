"""The plumbing of training and evaluation runs, the same for both tasks.

The command line: `cli` (the LightningCLI both tasks build on), `command_help` (what `--help` says), `precision`
(bfloat16 where it is faster), `progress` (the progress bar and model summary). Data: `batches` (model inputs and
padding), `features` (the on-disk cache of a frozen encoder's grids). Training: `optimization` (Adam with the
encoder's group and epoch decay), `resume` (exact resumption mid-epoch), `gathering` (results of every DDP process).
Checkpoints: `checkpoints` (read as data, written atomically, loaded into a model), `checkpoint_kinds` (what each task
declares about its checkpoints, how its older ones are read now among it), `hparams` (hyper-parameters as plain data),
`bundle` (compact copies to ship), `averaging` (weight averages). Output: `results` (predict writers), `tensorboard`
(validation samples with their maps), `curves` (training curves), `wordnet` (offline WordNet for METEOR and WUPS).
"""
