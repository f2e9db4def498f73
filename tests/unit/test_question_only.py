"""experiments/question_only.py: the callback that measures what the question alone earns blanks the photo at
every stage and leaves the question as it is."""

import torch

from experiments.question_only import WithoutThePhoto


def test_every_stage_sees_a_blank_photo_and_the_same_question():
    callback = WithoutThePhoto()
    hooks = [
        callback.on_train_batch_start, callback.on_validation_batch_start,
        callback.on_test_batch_start, callback.on_predict_batch_start,
    ]
    for hook in hooks:
        question = torch.tensor([[4, 7, 9], [5, 2, 0]])
        batch = {"inputs": torch.rand(2, 49, 16) + 0.1, "question": question.clone(), "length": torch.tensor([3, 2])}
        hook(None, None, batch, 0)
        assert batch["inputs"].shape == (2, 49, 16) and not batch["inputs"].any()
        assert torch.equal(batch["question"], question)
