"""The VQA model: the SAN equations by hand, the question models (LSTM and CNN), answer targets, odd questions."""

import functools
import math

import pytest
import torch

from core.maps.measures import mass_in_box, mass_in_boxes
from data.vocabulary import Vocabulary
from data.vqa import VqaSample
from vqa.answers import AnswerVocabulary, MajorityAnswer, SoftScores
from vqa.question_encoder import ConvQuestionEncoder, LstmQuestionEncoder
from vqa.questions import QuestionError, question_ids, user_question_ids
from vqa.san import StackedAttention


def test_stacked_attention_equals_its_equations_written_out():
    torch.manual_seed(0)
    san = StackedAttention(feature_dim=6, question_dim=5, attention_dim=4, grid_shape=(1, 3), num_answers=7, hops=2).eval()
    features, question = torch.randn(2, 3, 6), torch.randn(2, 5)
    out = san(features, question)
    assert out.logits.shape == (2, 7) and out.weights.shape == (2, 2, 3)
    v = torch.tanh(san.image_projection(features))  # v_I
    u = question  # u^0 = v_Q
    for k, hop in enumerate(san.hops):
        score = hop.score
        h_a = torch.tanh(score.key_proj(v) + score.query_proj(u).unsqueeze(1))  # W_IA v_I (+) (W_QA u + b_A)
        p = torch.softmax(score.v(h_a).squeeze(-1), dim=-1)  # p^k
        assert torch.allclose(out.weights[:, k], p, atol=1e-6)
        u = (p.unsqueeze(-1) * v).sum(1) + u  # u^k
    assert torch.allclose(out.logits, san.classifier(u), atol=1e-6)


def test_one_hop_is_the_ablation_and_zero_hops_is_refused():
    san = StackedAttention(feature_dim=6, question_dim=5, grid_shape=(1, 3), num_answers=7, hops=1)
    assert san(torch.randn(2, 3, 6), torch.randn(2, 5)).weights.shape == (2, 1, 3)
    with pytest.raises(ValueError, match="at least one hop"):
        StackedAttention(feature_dim=6, question_dim=5, grid_shape=(1, 3), num_answers=7, hops=0)


def test_question_vector_is_the_lstm_state_after_each_questions_last_word():
    torch.manual_seed(1)
    encoder = LstmQuestionEncoder(vocab_size=20, embed_dim=4, hidden_dim=6)
    words = torch.tensor([[5, 6, 7, 8], [9, 10, 0, 0]])
    vectors = encoder(words, torch.tensor([4, 2]))
    for b, n in enumerate([4, 2]):
        _, (h, _) = encoder.lstm(torch.tanh(encoder.embedding(words[b : b + 1, :n])))
        assert torch.allclose(vectors[b], h[-1, 0], atol=1e-6)  # padding never reaches the state
    with pytest.raises(ValueError, match="at least one word"):
        encoder(words, torch.tensor([4, 0]))


def test_cnn_question_vector_is_the_max_of_each_window_width_over_the_question():
    """v_Q = [max_t tanh(W_c x_{t:t+c-1} + b_c) for c = 1, 2, 3], written out word by word; windows reaching into
    padding are left out, and a one-word question is read as one window filled out with zeros."""
    torch.manual_seed(2)
    encoder = ConvQuestionEncoder(vocab_size=20, embed_dim=4, hidden_dim=10)
    assert [c.out_channels for c in encoder.convolutions] == [2, 4, 4]  # the paper's 128/256/256, scaled to 10
    words = torch.tensor([[5, 6, 7, 8, 0], [9, 0, 0, 0, 0]])
    vectors = encoder(words, torch.tensor([4, 1]))
    assert vectors.shape == (2, 10)

    def by_hand(ids: list[int]) -> torch.Tensor:
        x = encoder.embedding(torch.tensor(ids))  # (n, E)
        x = torch.cat([x, torch.zeros(3, x.shape[1])])  # zero embeddings after the question: the padding
        parts = []
        for c, conv in zip((1, 2, 3), encoder.convolutions):
            windows = range(max(len(ids) - c + 1, 1))
            h = [torch.tanh(sum(conv.weight[:, :, k] @ x[t + k] for k in range(c)) + conv.bias) for t in windows]
            parts.append(torch.stack(h).amax(dim=0))
        return torch.cat(parts)

    assert torch.allclose(vectors[0], by_hand([5, 6, 7, 8]), atol=1e-6)
    assert torch.allclose(vectors[1], by_hand([9]), atol=1e-6)
    alone = encoder(torch.tensor([[9]]), torch.tensor([1]))  # a batch narrower than the widest window
    assert torch.allclose(alone[0], vectors[1], atol=1e-6)
    with pytest.raises(ValueError, match="multiple of 5"):
        ConvQuestionEncoder(vocab_size=20, embed_dim=4, hidden_dim=512)
    with pytest.raises(ValueError, match="at least one word"):
        encoder(words, torch.tensor([4, 0]))


def sample(answers, answer, answer_type="yes/no") -> VqaSample:
    return VqaSample(1, "img", "is it?", tuple(answers), answer, answer_type, "is it")


def test_soft_scores_are_the_official_scores_of_the_human_answers():
    answers = AnswerVocabulary(["yes", "no", "2"])
    target = SoftScores().target(sample(["yes"] * 8 + ["no"] * 2, "yes"), answers)
    assert target.tolist() == pytest.approx([1.0, 0.6, 0.0])  # "no" from 2 of 10 humans scores 0.6
    logits = torch.tensor([[2.0, -1.0, 0.5]])
    expected = -sum(t * math.log(torch.sigmoid(torch.tensor(z))) + (1 - t) * math.log(1 - torch.sigmoid(torch.tensor(z)))
                    for t, z in zip([1.0, 0.6, 0.0], [2.0, -1.0, 0.5]))
    assert SoftScores().loss(logits, target.unsqueeze(0)).item() == pytest.approx(float(expected), rel=1e-5)


def test_majority_answer_is_one_hot_and_unknown_answers_are_left_out_of_the_loss():
    answers = AnswerVocabulary(["yes", "no"])
    targets = torch.stack(
        [MajorityAnswer().target(sample(["no"] * 10, "no"), answers),
         MajorityAnswer().target(sample(["3"] * 10, "3", "number"), answers)]
    )
    assert targets.tolist() == [[0.0, 1.0], [0.0, 0.0]]
    logits = torch.tensor([[0.3, 1.2], [5.0, -5.0]])
    expected = -torch.log_softmax(logits[0], -1)[1]  # the second question's answer is not a class
    assert MajorityAnswer().loss(logits, targets).item() == pytest.approx(expected.item())


def test_answer_vocabulary_keeps_the_most_frequent_answers():
    vocabulary = AnswerVocabulary.build(["b", "a", "c", "a", "b", "d", "a"], size=2)
    assert vocabulary.answers == ["a", "b"]
    assert vocabulary.index("c") is None and "a" in vocabulary
    assert AnswerVocabulary.build(["y", "x"], size=5).answers == ["x", "y"]  # ties: alphabetical


def test_odd_questions_get_a_defined_treatment():
    vocabulary = Vocabulary(["<pad>", "<start>", "<end>", "<unk>", "what", "colour", "is", "the", "circle"])
    assert question_ids(vocabulary, "What colour is the circle?", max_length=30) == [4, 5, 6, 7, 8]
    assert question_ids(vocabulary, "", max_length=30) == [vocabulary.unk_id]  # a dataset question: one <unk>
    assert len(question_ids(vocabulary, "what " * 500, max_length=30)) == 30  # long: the first 30 words
    assert user_question_ids(vocabulary, "what is zorblax", max_length=30) == [4, 6, vocabulary.unk_id]
    with pytest.raises(QuestionError, match="empty"):
        user_question_ids(vocabulary, "  ?! ", max_length=30)
    with pytest.raises(QuestionError, match="none of the words"):
        user_question_ids(vocabulary, "zorblax quux", max_length=30)


def test_mass_in_boxes_is_the_mass_in_their_union():
    torch.manual_seed(2)
    weights = torch.softmax(torch.randn(2, 16), -1)  # a 4 x 4 grid
    boxes = torch.tensor([[[0.0, 0.0, 0.5, 0.5], [0.5, 0.5, 1.0, 1.0], [0, 0, 0, 0]],
                          [[0.25, 0.25, 0.75, 0.5], [0.0, 0.0, 1.0, 1.0], [0, 0, 0, 0]]])
    valid = torch.tensor([[True, True, False], [True, False, False]])
    got = mass_in_boxes(weights, boxes, valid, 4, 4)
    first = mass_in_box(weights[:1], boxes[0, :1], 4, 4) + mass_in_box(weights[:1], boxes[0, 1:2], 4, 4)
    assert got[0].item() == pytest.approx(first.item())  # disjoint boxes: the masses add
    assert got[1].item() == pytest.approx(mass_in_box(weights[1:], boxes[1, :1], 4, 4).item())  # padding ignored


def test_optional_hidden_layer_before_the_answer_layer():
    torch.manual_seed(3)
    san = StackedAttention(feature_dim=6, question_dim=5, grid_shape=(1, 3), num_answers=7, classifier_hidden=9).eval()
    features, question = torch.randn(2, 3, 6), torch.randn(2, 5)
    out = san(features, question)
    _, hidden, _, _, answer = san.classifier
    v = torch.tanh(san.image_projection(features))
    u = question
    for hop in san.hops:
        context, _ = hop(u, v, hop.prepare(v))
        u = context + u
    assert torch.allclose(out.logits, answer(torch.relu(hidden(u))), atol=1e-6)


def test_feature_dropout_drops_region_values_in_training_only():
    torch.manual_seed(4)
    sizes = dict(feature_dim=6, question_dim=5, grid_shape=(1, 3), num_answers=7, dropout=0.0)
    san, plain = StackedAttention(**sizes, feature_dropout=0.5), StackedAttention(**sizes)
    plain.load_state_dict(san.state_dict())  # dropout has no weights: the same network
    features, question = torch.randn(2, 3, 6), torch.randn(2, 5)
    san.eval(), plain.eval()
    assert torch.equal(san(features, question).logits, plain(features, question).logits)  # a no-op at inference
    san.train(), plain.train()
    seen = []
    san.image_projection.register_forward_hook(lambda module, inputs, output: seen.append(inputs[0]))
    dropped = san(features, question).logits
    projected = seen[0]  # what the projection received: each value zeroed, or kept and scaled by 1 / (1 - 0.5)
    zeroed = projected == 0
    assert 0 < int(zeroed.sum()) < features.numel()
    assert torch.allclose(projected[~zeroed], features[~zeroed] / 0.5)
    assert torch.allclose(dropped, plain(projected, question).logits, atol=1e-6)  # the rest of the network as before


def test_checkpoints_saved_with_the_san_options_at_the_top_still_load(tmp_path):
    """Before the SAN was a component (`model.san`) its options stood beside the encoder's (the bundled checkpoints):
    they are read as the SAN's, and the weights land where they were."""
    from core.model.encoder import LocalCNN
    from vqa.module import VqaModule

    torch.manual_seed(0)
    model = VqaModule(
        encoder=LocalCNN(image_size=32, widths=(4,), feature_dim=4), question_vocabulary=[*Vocabulary.SPECIALS, "what"],
        answers=["red", "blue"], embed_dim=4, question_dim=6,
        san=functools.partial(StackedAttention, attention_dim=5, hops=1, classifier_hidden=3),
    )
    flat = {key: value for key, value in model.hparams.items() if key != "san"}
    flat.update(attention_dim=5, hops=1, classifier_hidden=3, score="captioning.attention.AdditiveScore")
    path = tmp_path / "old.ckpt"
    torch.save({"state_dict": model.state_dict(), "hyper_parameters": flat}, path)
    loaded = VqaModule.load(path)
    assert loaded.hparams["san"]["class_path"] == "vqa.san.StackedAttention"
    assert {k: loaded.hparams["san"]["init_args"][k] for k in ("attention_dim", "hops", "classifier_hidden")} == {
        "attention_dim": 5, "hops": 1, "classifier_hidden": 3
    }
    assert loaded.hparams["san"]["init_args"]["score"] == "core.model.attention.AdditiveScore"  # its path now
    assert len(loaded.san.hops) == 1
    for name, tensor in model.state_dict().items():
        torch.testing.assert_close(loaded.state_dict()[name], tensor)
