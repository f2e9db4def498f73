"""experiments/ground_truth_hops.py: each hop reads the map of its ground-truth region, computed by hand here, and
the rest of the network is the model's own."""

from types import SimpleNamespace

import torch

from experiments.ground_truth_hops import GroundTruthHops, ground_truth_maps
from experiments.san_variants import StackedAttentionVariants
from vqa.san import StackedAttention


def test_hop_k_spreads_over_region_k_or_the_last_one_and_reads_uniformly_without_regions():
    regions = torch.tensor([
        [[0.0, 0.0, 0.5, 1.0], [0.5, 0.0, 1.0, 0.5]],  # the left half, then the top-right quarter
        [[0.5, 0.5, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0]],  # one region: the bottom-right quarter (the second is padding)
        [[0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]],  # none
    ])
    maps = ground_truth_maps(regions, torch.tensor([2, 1, 0]), grid=(2, 2), hops=2)  # a 2x2 grid, cells row-major
    expected = torch.tensor([
        [[0.5, 0.0, 0.5, 0.0], [0.0, 1.0, 0.0, 0.0]],
        [[0.0, 0.0, 0.0, 1.0], [0.0, 0.0, 0.0, 1.0]],
        [[0.25] * 4, [0.25] * 4],
    ])
    torch.testing.assert_close(maps, expected)


def test_every_stage_reads_the_given_maps_through_the_models_own_classifier():
    torch.manual_seed(0)
    san = StackedAttentionVariants(
        feature_dim=6, question_dim=5, attention_dim=4, grid_shape=(2, 2), num_answers=3, hops=2, separate_hops=True
    ).eval()
    pl_module = SimpleNamespace(san=san, encoder=SimpleNamespace(grid_shape=(2, 2)))
    regions = torch.tensor([[[0.0, 0.0, 0.5, 1.0], [0.5, 0.0, 1.0, 0.5]]])
    features, question = torch.randn(1, 4, 6), torch.randn(1, 5)
    callback = GroundTruthHops()
    hooks = [
        callback.on_train_batch_start, callback.on_validation_batch_start,
        callback.on_test_batch_start, callback.on_predict_batch_start,
    ]
    for hook in hooks:
        hook(None, pl_module, {"regions": regions, "region_count": torch.tensor([2])}, 0)
        out = san(features, question)
        maps = torch.tensor([[[0.5, 0.0, 0.5, 0.0], [0.0, 1.0, 0.0, 0.0]]])
        torch.testing.assert_close(out.weights, maps)
        v = torch.tanh(san.image_projection(features))[0]  # (4, 5) v_I
        z1, z2 = (v[0] + v[2]) / 2, v[1]  # what the two hops read: the left half's mean, then the top-right cell
        torch.testing.assert_close(out.logits[0], san.classifier(torch.cat([question[0], z1, z2])))
    assert set(dict(san.state_dict())) == set(dict(StackedAttentionVariants(
        feature_dim=6, question_dim=5, attention_dim=4, grid_shape=(2, 2), num_answers=3, hops=2, separate_hops=True
    ).state_dict()))  # the hops keep their parameters: a checkpoint loads either way


def test_given_one_sets_the_first_hop_and_the_second_computes_its_own():
    torch.manual_seed(0)
    kwargs = {"feature_dim": 6, "question_dim": 5, "attention_dim": 4, "grid_shape": (2, 2), "num_answers": 3, "hops": 2}
    san, plain = StackedAttention(**kwargs).eval(), StackedAttention(**kwargs).eval()
    plain.load_state_dict(san.state_dict())
    pl_module = SimpleNamespace(san=san, encoder=SimpleNamespace(grid_shape=(2, 2)))
    regions = torch.tensor([[[0.0, 0.0, 0.5, 1.0], [0.5, 0.0, 1.0, 0.5]]])
    GroundTruthHops(given=1).on_train_batch_start(None, pl_module, {"regions": regions, "region_count": torch.tensor([2])}, 0)
    features, question = torch.randn(1, 4, 6), torch.randn(1, 5)
    out = san(features, question)
    torch.testing.assert_close(out.weights[0, 0], torch.tensor([0.5, 0.0, 0.5, 0.0]))  # hop 1: the left half
    # hop 2: the model's own score, queried with u^1 = u^0 + the left half's mean
    v = torch.tanh(san.image_projection(features))  # (1, 4, 5)
    z1 = (v[:, 0] + v[:, 2]) / 2
    expected = plain.hops[1].weights(question + z1, plain.hops[1].prepare(v))  # (1, 4)
    torch.testing.assert_close(out.weights[:, 1], expected)
    assert not torch.allclose(expected, torch.tensor([[0.0, 1.0, 0.0, 0.0]]))  # not the second region's map


def test_after_each_step_the_hops_compute_their_own_maps_again():
    torch.manual_seed(0)
    kwargs = {"feature_dim": 6, "question_dim": 5, "attention_dim": 4, "grid_shape": (2, 2), "num_answers": 3, "hops": 2}
    san, plain = StackedAttention(**kwargs).eval(), StackedAttention(**kwargs).eval()
    plain.load_state_dict(san.state_dict())
    pl_module = SimpleNamespace(san=san, encoder=SimpleNamespace(grid_shape=(2, 2)))
    batch = {"regions": torch.tensor([[[0.0, 0.0, 0.5, 1.0], [0.5, 0.0, 1.0, 0.5]]]), "region_count": torch.tensor([2])}
    callback = GroundTruthHops()
    stages = [
        (callback.on_train_batch_start, callback.on_train_batch_end),
        (callback.on_validation_batch_start, callback.on_validation_batch_end),
        (callback.on_test_batch_start, callback.on_test_batch_end),
        (callback.on_predict_batch_start, callback.on_predict_batch_end),
    ]
    for start, end in stages:
        start(None, pl_module, batch, 0)
        end(None, pl_module, None, batch, 0)
        # three questions, where the step had one: the TensorBoard samples at the end of validation
        features, question = torch.randn(3, 4, 6), torch.randn(3, 5)
        out, expected = san(features, question), plain(features, question)
        torch.testing.assert_close(out.weights, expected.weights)
        torch.testing.assert_close(out.logits, expected.logits)
