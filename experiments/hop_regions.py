"""Where each hop of a ShapesWorld-VQA model looks, per question family: every hop's attention mass inside each
of the question's ground-truth regions, taken one at a time.

`python -m vqa test` reports one attention correctness per hop: the mass inside the union of all the question's
regions. For the questions that need two looks that hides which object a hop found. A two-step question ("what
colour is the object to the left of the square?") has the reference (the square) as its region 0 and the target
as its region 1; a relation question ("is the square to the left of the red circle?") has the reference, then
the subject. A SAN that reads these questions the way they are built puts hop 1 on region 0 and hop 2 on
region 1. For each family this prints the accuracy and, for every hop k and region r, the mean mass of hop k
inside region r (`hop1 on region0`, ...), over the questions that have region r.

    python experiments/hop_regions.py --ckpt vqa/bundled/shapes_san.ckpt --split test [--questions N]
    python experiments/hop_regions.py --ckpt ... --families two-step  # a model trained on two-step questions only

Prints one JSON object (percentages). Needs no feature cache: ShapesWorld-VQA is generated (each split's scenes
and questions depend on the seed and the split only, so these are the ones `python -m vqa test` scores), and
its images are rendered and encoded here.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from collections.abc import Sequence

import torch

from core.maps.measures import mass_in_boxes
from core.training.checkpoints import CheckpointError
from data.shapes_vqa import ShapesWorldVqa
from vqa.module import VqaModule
from vqa.questions import user_question_ids


@torch.no_grad()
def measure(model: VqaModule, dataset: ShapesWorldVqa, split: str, limit: int | None = None) -> dict[str, float]:
    """Percentages per family over the split's questions (its first `limit` of them, when given)."""
    transform, grid = model.encoder.transform(), model.encoder.grid_shape
    found: dict[str, list[float]] = defaultdict(list)
    annotations: dict[str, torch.Tensor] = {}
    for question in dataset.questions(split)[:limit]:
        if question.image_id not in annotations:
            annotations[question.image_id] = model.encoder(transform(dataset.load(question.image_id)).unsqueeze(0))
        ids = user_question_ids(model.question_vocabulary, question.question, max_length=model.hparams.max_question_length)
        out = model.san(annotations[question.image_id], model.question_encoder(torch.tensor([ids]), torch.tensor([len(ids)])))
        family = question.question_type
        answer = model.answer_vocabulary.answers[int(out.logits.argmax())]
        found[f"{family} accuracy"].append(float(answer == question.answer))
        for r, box in enumerate(question.regions[:2]):
            region = torch.tensor([[[box.x0, box.y0, box.x1, box.y1]]])  # (1, 1, 4)
            for k in range(out.weights.shape[1]):
                mass = mass_in_boxes(out.weights[:, k].float(), region, torch.ones(1, 1, dtype=torch.bool), *grid)
                found[f"{family} hop{k + 1} on region{r}"].append(float(mass))
    return {name: round(100 * sum(values) / len(values), 2) for name, values in sorted(found.items())}


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python experiments/hop_regions.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--ckpt", required=True, help="a ShapesWorld-VQA checkpoint (python -m vqa fit's best.ckpt)")
    parser.add_argument("--split", default="test", choices=("val", "test"))
    parser.add_argument("--families", nargs="+", help="the families the model was trained on, when not all (as the dataset's option)")
    parser.add_argument("--questions", type=int, help="measure the split's first N questions only (default: all)")
    args = parser.parse_args(argv)
    if args.questions is not None and args.questions < 1:
        parser.error(f"--questions must be at least 1, got {args.questions}")
    try:
        model = VqaModule.load(args.ckpt).eval()
    except (FileNotFoundError, CheckpointError) as error:
        parser.error(str(error))
    print(json.dumps(measure(model, ShapesWorldVqa(families=tuple(args.families) if args.families else None), args.split, args.questions)))


if __name__ == "__main__":
    main()
