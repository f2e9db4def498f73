"""`experiments.san_variants.StackedAttentionVariants`, the SAN with options the experiments tried: a read-out that keeps
the hops apart, positions kept apart from the content in every read, and dropout of the question where the classifier
reads it; all off, the paper's network."""

import torch

from core.model.attention import grid_positions
from experiments.san_variants import StackedAttentionVariants
from vqa.san import StackedAttention


def test_with_every_option_off_it_is_the_papers_network():
    torch.manual_seed(0)
    kwargs = dict(feature_dim=6, question_dim=5, attention_dim=4, grid_shape=(2, 3), num_answers=7, hops=2, dropout=0.0)
    variants = StackedAttentionVariants(coordinates=True, **kwargs).eval()
    plain = StackedAttention(coordinates=True, **kwargs).eval()
    plain.load_state_dict(variants.state_dict())  # the same parameters, by the same names
    features, question = torch.randn(3, 6, 6), torch.randn(3, 5)
    got, expected = variants(features, question), plain(features, question)
    torch.testing.assert_close(got.logits, expected.logits)
    torch.testing.assert_close(got.weights, expected.weights)



def test_separate_hops_give_the_classifier_each_hops_read_side_by_side():
    torch.manual_seed(0)
    san = StackedAttentionVariants(
        feature_dim=6, question_dim=5, attention_dim=4, grid_shape=(1, 3), num_answers=7, hops=2, separate_hops=True
    ).eval()
    features, question = torch.randn(2, 3, 6), torch.randn(2, 5)
    out = san(features, question)
    v = torch.tanh(san.image_projection(features))  # (2, 3, 5) v_I
    z1, z2 = [(out.weights[:, k].unsqueeze(-1) * v).sum(1) for k in range(2)]  # what each hop read, (2, 5) each
    torch.testing.assert_close(out.logits, san.classifier(torch.cat([question, z1, z2], dim=-1)))
    # the hops' queries are the paper's: the second hop attends with u^1 = u^0 + z^1
    score = san.hops[1].score
    h_a = torch.tanh(score.key_proj(v) + score.query_proj(question + z1).unsqueeze(1))  # (2, 3, 4)
    p2 = torch.softmax(score.v(h_a).squeeze(-1), dim=-1)
    torch.testing.assert_close(out.weights[:, 1], p2)
    # the sum u^2 cannot tell which hop read what; the side-by-side read-out can
    swapped = san.classifier(torch.cat([question, z2, z1], dim=-1))
    assert not torch.allclose(swapped, out.logits)


def test_question_dropout_acts_on_the_classifiers_question_only():
    torch.manual_seed(0)
    kwargs = dict(feature_dim=6, question_dim=5, attention_dim=4, grid_shape=(1, 3), num_answers=7, hops=2, dropout=0.0)
    san = StackedAttentionVariants(question_dropout=0.5, **kwargs)
    plain = StackedAttention(**kwargs)
    plain.load_state_dict(san.state_dict())  # no parameters of its own
    features, question = torch.randn(4, 3, 6), torch.randn(4, 5)
    # evaluation: no dropout, the paper's SAN exactly
    torch.testing.assert_close(san.eval()(features, question).logits, plain.eval()(features, question).logits)
    # training: the hops attend with the whole question, the classifier reads u^K with u^0 dropped out
    san.train()
    torch.manual_seed(1)
    out = san(features, question)
    torch.manual_seed(1)
    kept = torch.nn.functional.dropout(question, 0.5)  # the same mask: the first random draw of the forward pass
    assert (kept == 0).any() and (kept != 0).any()
    torch.testing.assert_close(out.weights, plain(features, question).weights)
    v = torch.tanh(san.image_projection(features))  # (4, 3, 5) v_I
    z1, z2 = [(out.weights[:, k].unsqueeze(-1) * v).sum(1) for k in range(2)]
    torch.testing.assert_close(out.logits, san.classifier(kept + z1 + z2))


def test_read_positions_end_every_read_with_the_place_it_looked():
    torch.manual_seed(0)
    san = StackedAttentionVariants(
        feature_dim=6, question_dim=5, attention_dim=4, grid_shape=(3, 3), num_answers=7, hops=2, separate_hops=True,
        read_positions=True,
    ).eval()
    features, question = torch.randn(2, 9, 6), torch.randn(2, 5)
    out = san(features, question)
    xy = grid_positions(3, 3)  # (9, 2)
    v = torch.cat([torch.tanh(san.image_projection(features)), xy.expand(2, -1, -1)], dim=-1)  # (2, 9, 7) [v_i; x_i; y_i]
    z1, z2 = [(out.weights[:, k].unsqueeze(-1) * v).sum(1) for k in range(2)]  # (2, 7) each
    # the last two numbers of a read are the attention-weighted grid position, by hand for hop 1 of question 0
    p = out.weights[0, 0]
    torch.testing.assert_close(z1[0, -2:], torch.stack([(p * xy[:, 0]).sum(), (p * xy[:, 1]).sum()]))
    u0 = torch.cat([question, torch.zeros(2, 2)], dim=-1)  # [v_Q; 0; 0]
    torch.testing.assert_close(out.logits, san.classifier(torch.cat([u0, z1, z2], dim=-1)))
    # the second hop's query carries hop 1's place unmixed: u^1 = u^0 + z^1 ends in sum_i p_i (x_i, y_i)
    score = san.hops[1].score
    h_a = torch.tanh(score.key_proj(v) + score.query_proj(u0 + z1).unsqueeze(1))  # (2, 9, 4)
    torch.testing.assert_close(out.weights[:, 1], torch.softmax(score.v(h_a).squeeze(-1), dim=-1))
    # the same content in every cell: the positions alone tell the cells apart
    assert san(torch.ones(1, 9, 6), question[:1]).weights.std(dim=-1).min() > 0
