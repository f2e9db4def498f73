"""What captioning and VQA share: the parts of an attention model and of its training that are not one task's.

Models: `encoder` (a pretrained CNN -> a grid of annotation vectors, with the transform its weights expect),
`features` (the on-disk cache of a frozen encoder's output), `attention` (the six score functions and
`Attention`), `fast_path` (the additive score's CPU speed-up, the same function, taken at a flag), `attention_correctness`
(how much attention falls inside a ground-truth box).
Checkpoints: `checkpoints` (read as data, written atomically, loaded into a model), `hparams` (hyper-parameters
as plain data), `bundle` (compact copies to ship), `averaging` (weight averages).
Training: `batches` (model inputs and padding), `resume` (exact resumption mid-epoch), `gathering` (results of
every DDP process), `optimization` (Adam with the encoder's group and epoch decay), `cli` (the LightningCLI both
tasks build on), `results` (predict writers).
Output: `overlays` (attention drawn over the photo), `curves` (training curves), `wordnet` (offline WordNet
for METEOR and WUPS).
Use from Python: `pretrained` (the record of a bundled model, which the tasks' registries hold, and the photo a
user hands `Captioner` or `Answerer`).
"""
