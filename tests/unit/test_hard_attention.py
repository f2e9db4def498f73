"""Hard attention: the reads, the REINFORCE estimator against the exact gradient of L_s, the baseline."""

import itertools
import math

import pytest
import torch

from captioning.decoder import ArgMax, Expectation, Replay, Sample, ShowAttendTell
from captioning.objectives import (
    HardAttention,
    LossTerms,
    SoftAttention,
    caption_log_likelihood,
    path_log_probability,
)

PAD, START, END = 0, 1, 2
L = 3  # locations


def tiny_decoder(seed: int = 0, fast_path: bool = True) -> ShowAttendTell:
    torch.manual_seed(seed)
    return ShowAttendTell(
        vocab_size=5, feature_dim=4, grid_shape=(1, L), embed_dim=4, decoder_dim=6, attention_dim=5, dropout=0.0,
        fast_path=fast_path,
    )


# -- the reads -------------------------------------------------------------------------------------------


def test_expectation_reads_the_weighted_mean():
    weights = torch.softmax(torch.randn(2, L), -1)
    features = torch.randn(2, L, 4)
    reading = Expectation()(weights, features)
    assert torch.allclose(reading.context, (weights.unsqueeze(-1) * features).sum(1))
    assert reading.used is weights and reading.locations is None


def test_argmax_reads_the_most_likely_location_and_reports_it_one_hot():
    weights = torch.tensor([[0.1, 0.7, 0.2], [0.5, 0.2, 0.3]])
    features = torch.randn(2, L, 4)
    reading = ArgMax()(weights, features)
    assert reading.locations.tolist() == [1, 0]
    assert torch.equal(reading.context, torch.stack([features[0, 1], features[1, 0]]))
    assert torch.equal(reading.used, torch.tensor([[0.0, 1, 0], [1, 0, 0]]))


def test_sample_draws_locations_with_the_attention_probabilities():
    torch.manual_seed(0)
    n = 20000
    probabilities = torch.tensor([0.6, 0.3, 0.1])
    reading = Sample()(probabilities.expand(n, L), torch.randn(1, L, 2).expand(n, L, 2))
    frequency = torch.bincount(reading.locations, minlength=L).float() / n
    standard_error = (probabilities * (1 - probabilities) / n).sqrt()
    assert torch.all((frequency - probabilities).abs() < 4 * standard_error)
    assert torch.equal(reading.used.sum(-1), torch.ones(n))


def test_replay_reads_one_column_per_call_and_refuses_more():
    replay = Replay(torch.tensor([[2, 0], [1, 1]]))
    weights, features = torch.full((2, L), 1 / 3), torch.randn(2, L, 4)
    assert replay(weights, features).locations.tolist() == [2, 1]
    assert replay(weights, features).locations.tolist() == [0, 1]
    with pytest.raises(IndexError, match="2 steps"):
        replay(weights, features)


@pytest.mark.parametrize("fast_path", [True, False])
def test_hard_decoder_step_reads_the_chosen_annotation_vector(fast_path):
    """The same unroll written out from the equations with z_t = beta_t a_{s_t}."""
    decoder = tiny_decoder(fast_path=fast_path).eval()
    features = torch.randn(2, L, 4)
    inputs = torch.tensor([[START, 3, 4], [START, 4, 3]])
    paths = torch.tensor([[2, 0, 1], [1, 1, 0]])
    out = decoder(features, inputs, Replay(paths))
    assert torch.equal(out.locations, paths)
    mean = features.mean(1)
    h, c = torch.tanh(decoder.init_h(mean)), torch.tanh(decoder.init_c(mean))
    for t in range(3):
        alpha = decoder.attention.weights(h, decoder.attention.prepare(features))
        z = torch.sigmoid(decoder.f_beta(h)) * features[torch.arange(2), paths[:, t]]
        y = decoder.embedding(inputs[:, t])
        h, c = decoder.lstm(torch.cat([y, z], 1), (h, c))
        assert torch.allclose(out.weights[:, t], alpha, atol=1e-6)
        assert torch.allclose(out.logits[:, t], decoder.out(y + decoder.out_h(h) + decoder.out_z(z)), atol=1e-5)


# -- the objective --------------------------------------------------------------------------------------


def test_hard_loss_equals_its_formula():
    torch.manual_seed(3)
    logits = torch.randn(2, 3, 5)
    weights = torch.softmax(torch.randn(2, 3, L), -1)
    locations = torch.tensor([[0, 2, 1], [1, 1, 1]])
    targets = torch.tensor([[3, 4, END], [4, END, PAD]])
    objective = HardAttention(reinforce_weight=0.1, entropy_bonus=0.002)
    objective.baseline.fill_(-1.2)
    from captioning.decoder import TeacherForced

    terms = objective.loss(TeacherForced(logits, weights, locations), targets, pad_id=PAD, label_smoothing=0.0)
    lp = torch.log_softmax(logits, -1)
    ll = torch.stack([(lp[0, 0, 3] + lp[0, 1, 4] + lp[0, 2, END]) / 3, (lp[1, 0, 4] + lp[1, 1, END]) / 2])
    log_path = torch.stack(
        [weights[0, 0, 0].log() + weights[0, 1, 2].log() + weights[0, 2, 1].log(), weights[1, 0, 1].log() + weights[1, 1, 1].log()]
    )
    entropy_words = [-(weights[b, t] * weights[b, t].log()).sum() for b, t in [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1)]]
    entropy = torch.stack(entropy_words).mean()
    expected = -ll.mean() - 0.1 * ((ll - (-1.2)) * log_path).mean() - 0.002 * entropy
    assert torch.allclose(terms.total, expected, atol=1e-6)
    assert torch.allclose(terms.reward, ll)
    assert torch.allclose(caption_log_likelihood(logits, targets, targets != PAD), ll)
    assert torch.allclose(path_log_probability(weights, locations, targets != PAD), log_path)
    # an expectation minibatch: no REINFORCE term, no reward for the baseline
    soft = objective.loss(TeacherForced(logits, weights, None), targets, pad_id=PAD, label_smoothing=0.0)
    assert soft.reward is None
    assert torch.allclose(soft.total, -ll.mean() - 0.002 * entropy, atol=1e-6)


def test_expectation_is_used_for_the_configured_share_of_minibatches():
    torch.manual_seed(0)
    share = sum(isinstance(HardAttention().training_read(), Expectation) for _ in range(4000)) / 4000
    assert abs(share - 0.5) < 4 * math.sqrt(0.25 / 4000)
    assert all(isinstance(HardAttention(expectation_probability=0.0).training_read(), Sample) for _ in range(50))
    assert all(isinstance(HardAttention(expectation_probability=1.0).training_read(), Expectation) for _ in range(50))
    assert isinstance(HardAttention(inference=ArgMax).inference_read(), ArgMax)
    assert isinstance(SoftAttention().training_read(), Expectation)


def test_baseline_follows_its_recursion():
    objective = HardAttention(baseline_decay=0.9)
    rewards = [-2.0, -1.5, -1.7, -0.9, -1.1]
    expected = 0.0
    for r in rewards:
        logged = objective.observe(LossTerms(torch.tensor(0.0), reward=torch.tensor([r - 0.1, r + 0.1])), lambda x: x)
        expected = 0.9 * expected + 0.1 * r
        assert objective.baseline.item() == pytest.approx(expected, abs=1e-6)
        assert logged["baseline"].item() == pytest.approx(expected, abs=1e-6)
    # an expectation minibatch (no sampled paths) leaves it where it was
    objective.observe(LossTerms(torch.tensor(0.0)), lambda x: x)
    assert objective.baseline.item() == pytest.approx(expected, abs=1e-6)


# -- the gradient estimator against the exact gradient, by enumerating every attention path ---------------

FEATURES_SEED = 5


def problem():
    """One image with L = 3 locations and a 2-word target (w=3, then <end>): 3^2 = 9 attention paths."""
    torch.manual_seed(FEATURES_SEED)
    features = torch.randn(1, L, 4)
    inputs = torch.tensor([[START, 3]])
    targets = torch.tensor([[3, END]])
    return features, inputs, targets


def flat_gradient(value: torch.Tensor, parameters: list[torch.Tensor]) -> torch.Tensor:
    grads = torch.autograd.grad(value, parameters, allow_unused=True)
    return torch.cat([(g if g is not None else torch.zeros_like(p)).flatten() for g, p in zip(grads, parameters)])


def every_path(decoder: ShowAttendTell) -> tuple[torch.Tensor, torch.Tensor]:
    """(log p(s|a), log p(y|s,a) per token) of each of the 9 paths s, run through the real decoder: (9,) each."""
    features, inputs, targets = problem()
    paths = torch.tensor(list(itertools.product(range(L), repeat=2)))  # (9, 2)
    n = len(paths)
    out = decoder(features.expand(n, -1, -1), inputs.expand(n, -1), Replay(paths))
    log_words = torch.log_softmax(out.logits, -1).gather(-1, targets.expand(n, -1).unsqueeze(-1)).squeeze(-1)
    log_likelihood = log_words.mean(1)  # (9,) per token
    log_path = out.weights.gather(-1, paths.unsqueeze(-1)).squeeze(-1).log().sum(1)  # (9,)
    assert log_path.exp().sum().item() == pytest.approx(1.0, abs=1e-5)  # the paths cover the distribution
    return log_path, log_likelihood


def exact_lower_bound_gradient(decoder: ShowAttendTell) -> tuple[torch.Tensor, torch.Tensor]:
    """dL_s/dW with L_s = sum_s p(s|a) log p(y|s,a) (per token), every path run through the real decoder."""
    log_path, log_likelihood = every_path(decoder)
    lower_bound = (log_path.exp() * log_likelihood).sum()
    return flat_gradient(lower_bound, list(decoder.parameters())), lower_bound.detach()


def estimates(decoder, objective, *, batches: int, per_batch: int, update_baseline: bool) -> torch.Tensor:
    """Minibatch means of the project's gradient estimate of dL_s/dW (the negative loss gradient): (batches, P)."""
    features, inputs, targets = problem()
    parameters = list(decoder.parameters())
    rows = []
    for _ in range(batches):
        out = decoder(features.expand(per_batch, -1, -1), inputs.expand(per_batch, -1), objective.training_read())
        terms = objective.loss(out, targets.expand(per_batch, -1), pad_id=PAD, label_smoothing=0.0)
        rows.append(flat_gradient(-terms.total, parameters))
        if update_baseline:
            objective.observe(terms, lambda x: x)
    return torch.stack(rows)


def mean_within(samples: torch.Tensor, exact: torch.Tensor, directions: torch.Tensor, sigmas: float) -> list[bool]:
    """Per direction: does the projected mean of the samples lie within `sigmas` standard errors of exact's?"""
    projected = samples @ directions.T  # (N, K)
    mean = projected.mean(0)
    standard_error = projected.std(0) / math.sqrt(len(samples))
    return ((mean - exact @ directions.T).abs() <= sigmas * standard_error).tolist()


@pytest.mark.slow
def test_reinforce_estimate_is_unbiased_for_the_exact_gradient_of_the_lower_bound():
    decoder = tiny_decoder(seed=1)
    exact, _ = exact_lower_bound_gradient(decoder)
    torch.manual_seed(11)
    directions = torch.cat([exact.unsqueeze(0), torch.randn(5, exact.numel())])
    directions = directions / directions.norm(dim=1, keepdim=True)  # the exact gradient's direction and 5 random

    unbiased = HardAttention(reinforce_weight=1.0, entropy_bonus=0.0, expectation_probability=0.0)
    samples = estimates(decoder, unbiased, batches=500, per_batch=40, update_baseline=True)
    assert all(mean_within(samples, exact, directions, sigmas=3.0))

    # the check has power: the gradient without the REINFORCE term (the pathwise part only) is caught
    torch.manual_seed(12)
    pathwise = HardAttention(reinforce_weight=0.0, entropy_bonus=0.0, expectation_probability=0.0)
    biased = estimates(decoder, pathwise, batches=500, per_batch=40, update_baseline=False)
    assert not all(mean_within(biased, exact, directions, sigmas=3.0))


@pytest.mark.slow
def test_the_baseline_lowers_the_estimators_variance():
    decoder = tiny_decoder(seed=2)
    torch.manual_seed(21)
    with_baseline = HardAttention(reinforce_weight=1.0, entropy_bonus=0.0, expectation_probability=0.0)
    estimates(decoder, with_baseline, batches=40, per_batch=10, update_baseline=True)  # let the average settle
    # b tracks E[log p(y|s,a)] = L_s, and its law is known exactly: the decoder does not change, so the 40
    # minibatch means r_k are independent, each the mean of 10 rewards drawn from the 9 paths' enumerated
    # distribution, and b_40 = sum_k 0.1 * 0.9^(40-k) r_k (b starts at 0) has mean (1 - 0.9^40) L_s and variance
    # 0.1^2 sum_j 0.9^(2j) Var(r) / 10. Four of its standard deviations are about 0.008, not a blanket 0.15.
    with torch.no_grad():
        log_path, log_likelihood = every_path(decoder)
        lower_bound = (log_path.exp() * log_likelihood).sum()
        reward_variance = (log_path.exp() * (log_likelihood - lower_bound) ** 2).sum()
    mean = (1 - 0.9**40) * lower_bound.item()
    standard_deviation = math.sqrt(0.1**2 * sum(0.9 ** (2 * j) for j in range(40)) * reward_variance.item() / 10)
    assert abs(with_baseline.baseline.item() - mean) <= 4 * standard_deviation  # about 0.008 here
    variance_with = estimates(decoder, with_baseline, batches=300, per_batch=10, update_baseline=True).var(0).sum()

    torch.manual_seed(21)
    without = HardAttention(reinforce_weight=1.0, entropy_bonus=0.0, expectation_probability=0.0)  # b stays 0
    variance_without = estimates(decoder, without, batches=300, per_batch=10, update_baseline=False).var(0).sum()
    print(f"gradient variance: {variance_with:.4g} with the baseline, {variance_without:.4g} without")
    assert variance_with < 0.5 * variance_without


@pytest.mark.parametrize("read", [Expectation(), ArgMax()])
def test_beams_of_an_image_read_its_one_grid(read):
    """Weights (B*K, L) over features (B, L, D) read as weights over each row's own copy of its image's grid."""
    torch.manual_seed(0)
    weights, features = torch.softmax(torch.randn(2 * 3, L), -1), torch.randn(2, L, 4)
    grouped, copied = read(weights, features), read(weights, features.repeat_interleave(3, 0))
    assert torch.allclose(grouped.context, copied.context, atol=1e-6)
    assert torch.equal(grouped.used, copied.used)


def test_soft_attention_logs_its_penalty_only_when_the_penalty_is_on():
    """A term that is off is not reported (a penalty of 0 weight would show as a large number beside the loss)."""
    from captioning.decoder import TeacherForced

    torch.manual_seed(4)
    out = TeacherForced(torch.randn(2, 3, 5), torch.softmax(torch.randn(2, 3, L), -1), None)
    targets = torch.tensor([[3, 4, END], [4, END, PAD]])
    on = SoftAttention(penalty_weight=1.0).loss(out, targets, pad_id=PAD, label_smoothing=0.0)
    off = SoftAttention(penalty_weight=0.0).loss(out, targets, pad_id=PAD, label_smoothing=0.0)
    assert set(on.parts) == {"cross_entropy", "penalty", "attention_entropy"}
    assert set(off.parts) == {"cross_entropy", "attention_entropy"}
    # the penalty, (1 - sum over words of each cell's weight)^2 summed over the cells, per caption (eq. 14)
    mask = (targets != PAD).unsqueeze(-1)
    expected = ((1 - (out.weights * mask).sum(dim=1)) ** 2).sum(dim=1).mean()
    assert torch.allclose(on.parts["penalty"], expected, atol=1e-6)
