"""Self-critical sequence training: CIDEr-D against coco-caption's own scorer, sampled log-probabilities against
a teacher-forced pass over the same words, the leave-one-out baseline by hand, a toy problem it must learn,
the configs, and the CLI runs that fine-tune a model the way a user would."""

from __future__ import annotations

import csv
import shutil
from functools import partial

import pytest
import torch
import torch.nn.functional as F
from pycocoevalcap.cider.cider import Cider
from pycocoevalcap.meteor.meteor import Meteor

from captioning.decoder import Expectation, ShowAttendTell
from captioning.module import CaptioningModule
from captioning.objectives import HardAttention, SoftAttention
from captioning.self_critical import (
    CiderD,
    MeteorReward,
    SampledCaptions,
    SelfCritical,
    leave_one_out_advantages,
    sample_captions,
)
from core.model.encoder import EfficientNetLite, LocalCNN
from core.training.checkpoints import CheckpointError
from tests.helpers import CAPTIONING_CONFIGS as CONFIGS
from tests.helpers import CSV_LOGGER, REPO, SMALL_SHAPES, printed_config, run_cli

REFERENCES = {
    "0": ["a dog runs on the grass", "a brown dog is running", "the dog runs across a field"],
    "1": ["two children play in the water", "kids splash in a pool", "two kids are playing in water"],
    "2": ["a man rides a bike down the street", "a cyclist on a city street", "a man on a bicycle"],
    "3": ["a dog plays with a ball", "a black dog catches a ball on the grass", "the dog has a red ball"],
}
CANDIDATES = {
    "0": "a dog runs on the grass",
    "1": "two kids play in a pool of water",
    "2": "a dog runs",
    "3": "a black dog with a ball on the grass",
}


def encoded_references() -> tuple[dict[str, int], list[list[list[int]]]]:
    words = sorted({w for text in [*CANDIDATES.values(), *(c for r in REFERENCES.values() for c in r)] for w in text.split()})
    ids = {word: i + 3 for i, word in enumerate(words)}  # 2 is <end>
    return ids, [[[ids[w] for w in c.split()] for c in REFERENCES[i]] for i in sorted(REFERENCES)]


def test_cider_d_equals_coco_captions_scorer():
    """With the document frequencies of the same references, the scores are coco-caption's `Cider` ones."""
    ids, references = encoded_references()
    images = sorted(REFERENCES)
    ours = CiderD(references).scores([[ids[w] for w in CANDIDATES[i].split()] for i in images], range(len(images)))
    _, theirs = Cider().compute_score(REFERENCES, {i: [CANDIDATES[i]] for i in images})
    assert ours == pytest.approx(list(theirs), rel=1e-12)
    assert ours[0] > ours[3] > ours[1] > ours[2] == 0  # a reference itself scores highest; no shared n-gram, 0


def test_the_end_token_is_scored_as_a_word_of_every_caption():
    """With `score_end` the reward is coco-caption's CIDEr-D of the texts with an end word appended to the
    candidate and to every reference; a caption that stops mid-phrase then loses more against a finished one."""
    ids, references = encoded_references()
    objective = SelfCritical(score_end=True)
    objective.prepare(references, end_id=2)
    images = sorted(REFERENCES)
    ours = objective.reward.scores([[ids[w] for w in CANDIDATES[i].split()] + [2] for i in images], range(4))
    _, theirs = Cider().compute_score(
        {i: [f"{c} endword" for c in REFERENCES[i]] for i in images}, {i: [f"{CANDIDATES[i]} endword"] for i in images}
    )
    assert ours == pytest.approx(list(theirs), rel=1e-12)

    def shortfall(score_end: bool) -> float:
        """How much less "a dog runs on the" earns than "a dog runs on the grass", as a fraction."""
        objective = SelfCritical(score_end=score_end)
        objective.prepare(references, end_id=2)
        ending = [2] if score_end else []
        finished, cut = ([ids[w] for w in text.split()] + ending for text in ("a dog runs on the grass", "a dog runs on the"))
        return 1 - objective.reward.score(cut, 0) / objective.reward.score(finished, 0)

    assert shortfall(True) > 2 * shortfall(False) > 0  # 0.18 against 0.07


def test_a_sampled_caption_keeps_its_end_only_if_it_ended():
    tokens = torch.tensor([[5, 6, 2, 2], [5, 6, 7, 8]])  # the second was cut off by the length limit
    mask = torch.tensor([[True, True, True, False], [True, True, True, True]])
    sampled = SampledCaptions(tokens, torch.zeros(2, 4), mask, torch.full((2, 4, 3), 1 / 3))
    assert sampled.captions(2) == [[5, 6], [5, 6, 7, 8]]
    assert sampled.captions(2, with_end=True) == [[5, 6, 2], [5, 6, 7, 8]]


@pytest.mark.skipif(shutil.which("java") is None, reason="the METEOR jar needs Java")
@pytest.mark.slow
def test_meteor_reward_equals_coco_captions_meteor_caption_by_caption():
    """Each caption is scored against its own image's references, as pycocoevalcap's `Meteor.compute_score`
    scores it when called directly (on the same jar process, to start Java once)."""
    images = sorted(REFERENCES)
    captions = [CANDIDATES[i] for i in images] + ["", "a dog"]  # an empty caption scores 0
    rows = [*range(4), 0, 2]
    reward = MeteorReward([REFERENCES[i] for i in images])
    try:
        ours = reward.scores(captions, rows)
        nonempty = [r for r, c in enumerate(captions) if c]
        _, theirs = reward._meteor.compute_score(
            {r: REFERENCES[images[rows[r]]] for r in nonempty}, {r: [captions[r]] for r in nonempty}
        )
    finally:
        reward.close()
    assert isinstance(reward._meteor, Meteor)
    assert ours[4] == 0.0
    assert [ours[r] for r in nonempty] == pytest.approx(list(theirs), abs=1e-12)
    assert ours[0] == pytest.approx(1.0, abs=0.01) and 0 < ours[5] < ours[0]  # caption 0 is a reference


def test_meteor_reward_without_java_says_what_to_do(monkeypatch):
    monkeypatch.setattr("captioning.self_critical.shutil.which", lambda name: None)
    with pytest.raises(RuntimeError, match="needs Java.*meteor_weight 0"):
        MeteorReward([["a dog"]])


def test_the_reward_is_cider_d_plus_the_weighted_meteor():
    """The advantages that weight the sampled log-probabilities come from CIDEr-D + w x METEOR."""

    class FixedScores:
        def __init__(self, values):
            self.values = values

        def scores(self, captions, images):
            return self.values[: len(captions)]

    objective = SelfCritical(samples=2, meteor_weight=5.0)
    objective.reward, objective.meteor, objective.words = FixedScores([1.0, 0.5]), FixedScores([0.2, 0.4]), ["w"] * 9
    decoder = small_decoder()
    torch.manual_seed(0)
    terms = objective.loss(decoder, torch.rand(1, 4, 6), [0], start_id=1, end_id=2, max_length=5, read=Expectation())
    # rewards 1 + 5 x 0.2 = 2.0 and 0.5 + 5 x 0.4 = 2.5: advantages -0.5 and +0.5
    torch.manual_seed(0)
    sampled = sample_captions(decoder, torch.rand(1, 4, 6), samples=2, start_id=1, end_id=2, max_length=5, read=Expectation())
    mask = sampled.mask.float()
    expected = -(torch.tensor([[-0.5], [0.5]]) * sampled.log_probs * mask).sum() / mask.sum()
    torch.testing.assert_close(terms.total, expected)
    assert terms.parts["METEOR_sampled"].item() == pytest.approx(0.3)


def test_the_entropy_term_adds_the_weighted_mean_entropy_of_the_sampled_words():
    """total = REINFORCE term + w x the mean attention entropy over the sampled words (their <end> included)."""

    class FixedScores:
        def scores(self, captions, images):
            return [1.0, 0.0][: len(captions)]

    decoder = small_decoder()
    features = torch.rand(1, 4, 6)
    totals = {}
    for weight in (0.0, 0.5):
        objective = SelfCritical(samples=2, entropy_weight=weight)
        objective.reward = FixedScores()
        torch.manual_seed(0)
        totals[weight] = objective.loss(decoder, features, [0], start_id=1, end_id=2, max_length=5, read=Expectation())
    torch.manual_seed(0)
    sampled = sample_captions(decoder, features, samples=2, start_id=1, end_id=2, max_length=5, read=Expectation())
    alpha = sampled.weights[sampled.mask]  # (words, L)
    entropy = -(alpha * alpha.log()).sum(-1).mean()
    torch.testing.assert_close(totals[0.5].parts["attention_entropy"], entropy)
    torch.testing.assert_close(totals[0.5].total, totals[0.0].total + 0.5 * entropy)
    with pytest.raises(ValueError, match="entropy_weight"):
        SelfCritical(entropy_weight=-1.0)


def test_a_meteor_reward_needs_the_vocabulary():
    with pytest.raises(ValueError, match="vocabulary's words"):
        SelfCritical(meteor_weight=1.0).prepare([[[4, 5]]], end_id=2)


def test_leave_one_out_baseline_by_hand():
    rewards = torch.tensor([1.0, 2.0, 3.0, 4.0, 4.0, 4.0])
    advantages = leave_one_out_advantages(rewards, samples=3)
    assert advantages.tolist() == pytest.approx([1 - 2.5, 2 - 2.0, 3 - 1.5, 0.0, 0.0, 0.0])


def small_decoder(vocab_size: int = 9, seed: int = 0) -> ShowAttendTell:
    torch.manual_seed(seed)
    return ShowAttendTell(
        vocab_size=vocab_size, feature_dim=6, grid_shape=(2, 2), embed_dim=8, decoder_dim=16, attention_dim=8, dropout=0.0
    )


def test_sampled_log_probabilities_are_the_teacher_forced_ones():
    decoder = small_decoder().eval()
    features = torch.rand(3, 4, 6)
    start, end, banned = 1, 2, (0, 3)
    torch.manual_seed(1)
    sampled = sample_captions(
        decoder, features, samples=4, start_id=start, end_id=end, max_length=7, read=Expectation(), banned=banned
    )
    n, t = sampled.tokens.shape
    assert n == 12 and t <= 7
    assert not torch.isin(sampled.tokens[sampled.mask], torch.tensor(banned)).any()
    # the same words fed back teacher-forced, each row with its own image's grid
    inputs = torch.cat([torch.full((n, 1), start), sampled.tokens[:, :-1]], 1)
    forced = decoder(features.repeat_interleave(4, 0), inputs)
    torch.testing.assert_close(sampled.weights, forced.weights, rtol=1e-5, atol=1e-6)  # alpha of every sampled word
    logits = forced.logits.clone()  # (N, T, V)
    logits[..., list(banned)] = float("-inf")
    expected = F.log_softmax(logits, -1).gather(2, sampled.tokens.unsqueeze(2)).squeeze(2)
    torch.testing.assert_close(sampled.log_probs, torch.where(sampled.mask, expected, 0.0), rtol=1e-5, atol=1e-5)
    # each caption stops at its first <end>; the mask covers its words and that <end>
    for row, mask in zip(sampled.tokens.tolist(), sampled.mask.tolist()):
        length = row.index(end) + 1 if end in row else len(row)
        assert mask == [True] * length + [False] * (len(row) - length)
    assert sampled.log_probs.requires_grad


@pytest.mark.slow
def test_self_critical_training_learns_a_toy_reward():
    """One image whose only reference is "4 5 6 7" among 26 words: sampled captions start random and must come
    to score high."""
    decoder = small_decoder(vocab_size=30, seed=2).train()
    objective = SelfCritical(samples=8)
    objective.prepare([[[4, 5, 6, 7]], [[8, 9]]], end_id=2)  # a second image, so that n-grams have an idf
    optimizer = torch.optim.Adam(decoder.parameters(), lr=0.03)
    features = torch.rand(2, 4, 6)
    torch.manual_seed(3)
    rewards = []
    for _ in range(120):
        terms = objective.loss(decoder, features[:1], [0], start_id=1, end_id=2, max_length=6, read=Expectation(), banned=(0, 3))
        optimizer.zero_grad()
        terms.total.backward()
        optimizer.step()
        rewards.append(terms.parts["CIDEr_sampled"].item())
    assert sum(rewards[:10]) / 10 < 1.0
    assert sum(rewards[-10:]) / 10 > 5.0  # 10 is the reference itself


def test_at_least_two_samples_are_needed():
    with pytest.raises(ValueError, match="at least 2 samples"):
        SelfCritical(samples=1)


SHAPES_DECODER = partial(ShowAttendTell, embed_dim=256, attention_dim=256, coordinates=True)  # shapes_soft.yaml's


def shapes_model(**kwargs) -> CaptioningModule:
    """A model shaped as the bundled ShapesWorld soft model (`shapes_soft.yaml`)."""
    encoder = LocalCNN(coordinates=False)
    return CaptioningModule(encoder=encoder, decoder=SHAPES_DECODER, **kwargs)


@pytest.mark.parametrize("attention", [SoftAttention(), HardAttention()], ids=["soft", "hard"])
def test_initial_weights_bring_their_vocabulary_and_weights(attention):
    """Self-critical fine-tuning starts from the bundled soft model, and so can hard attention, whose REINFORCE
    baseline the soft checkpoint does not have: it starts at 0."""
    bundled = REPO / "captioning" / "bundled" / "shapes_soft.ckpt"
    model = shapes_model(initial_weights=bundled, self_critical=SelfCritical(), attention=attention)
    reference = CaptioningModule.load(bundled)
    assert model.vocabulary == reference.vocabulary
    for name, tensor in reference.decoder.state_dict().items():
        torch.testing.assert_close(model.decoder.state_dict()[name], tensor)
    for name, tensor in reference.encoder.state_dict().items():
        torch.testing.assert_close(model.encoder.state_dict()[name], tensor)
    if isinstance(attention, HardAttention):
        assert model.attention.baseline.item() == 0.0
    assert model.hparams.initial_weights is None  # the model's own checkpoints hold the weights from now on


def test_initial_weights_read_larger_images_onto_a_finer_grid():
    """The same encoder at twice the image size starts from the same weights: the grid is 4 times finer and every
    word's attention spreads over its cells (the 14x14 Flickr8k rows of docs/experiments.md start this way)."""
    bundled = REPO / "captioning" / "bundled" / "shapes_soft.ckpt"
    model = CaptioningModule(
        encoder=LocalCNN(image_size=224, coordinates=False), decoder=SHAPES_DECODER,
        initial_weights=bundled,
    ).eval()
    reference = CaptioningModule.load(bundled)
    for name, tensor in reference.state_dict().items():
        torch.testing.assert_close(model.state_dict()[name], tensor)
    generated = model.generate(torch.rand(2, 3, 224, 224))
    assert reference.encoder.num_locations == 14 * 14 and model.encoder.num_locations == 28 * 28
    for weights in generated.weights:  # (words, 784)
        assert weights.shape[1] == 28 * 28
        torch.testing.assert_close(weights.sum(1), torch.ones(len(weights)))


def test_initial_weights_of_another_encoder_setting_are_refused_by_name():
    bundled = REPO / "captioning" / "bundled" / "shapes_soft.ckpt"
    refused = r"another encoder \(core.model.encoder.LocalCNN: widths=\(32, 64, 128\) there"
    with pytest.raises(CheckpointError, match=refused):
        CaptioningModule(encoder=LocalCNN(widths=(16, 32, 64), coordinates=False), initial_weights=bundled)


def test_initial_weights_from_another_encoder_are_refused_by_name():
    bundled = REPO / "captioning" / "bundled" / "shapes_soft.ckpt"
    with pytest.raises(CheckpointError, match="shapes_soft.ckpt was trained with another encoder.*LocalCNN.*image_size"):
        CaptioningModule(encoder=EfficientNetLite(variant=0, image_size=224), initial_weights=bundled)


def test_missing_initial_weights_are_refused_by_name(tmp_path):
    with pytest.raises(CheckpointError, match=r"initial_weights .*missing\.ckpt is not a file: .*repository root"):
        CaptioningModule(initial_weights=tmp_path / "missing.ckpt")


def test_initial_weights_of_a_vqa_model_are_refused_by_name():
    vqa = REPO / "vqa" / "bundled" / "daquar_san.ckpt"
    with pytest.raises(CheckpointError, match="daquar_san.ckpt is not a captioning checkpoint"):
        CaptioningModule(initial_weights=vqa)


@pytest.mark.slow
def test_cli_fine_tunes_a_bundled_model_self_critically_and_resumes(tmp_path):
    """fit from the bundled ShapesWorld model with `--model.self_critical`, load its checkpoint alone, and resume
    the run for a second epoch with the same command."""
    run = tmp_path / "run"
    bundled = REPO / "captioning" / "bundled" / "shapes_soft.ckpt"
    fit = [
        "fit", "--config", str(CONFIGS / "shapes_soft.yaml"), *SMALL_SHAPES,
        f"--model.initial_weights={bundled}", "--model.self_critical=captioning.self_critical.SelfCritical",
        "--model.learning_rate=1e-5", "--trainer.limit_train_batches=2", "--trainer.log_every_n_steps=1",
        "--trainer.limit_val_batches=0",
        f"--trainer.default_root_dir={run}", CSV_LOGGER, f"--trainer.logger.init_args.save_dir={run}",
        f"--data.cache_dir={tmp_path / 'cache'}",
    ]  # fmt: skip
    run_cli(*fit, "--trainer.max_epochs=1", cwd=tmp_path)
    checkpoint = next(run.rglob("last.ckpt"))
    model = CaptioningModule.load(checkpoint)
    assert model.hparams.initial_weights is None and isinstance(model.self_critical, SelfCritical)
    run_cli(*fit, "--trainer.max_epochs=2", f"--ckpt_path={checkpoint}", cwd=tmp_path)

    rows = [row for path in run.rglob("metrics.csv") for row in csv.DictReader(path.open())]
    sampled = [(r["epoch"], float(r["train/CIDEr_sampled"])) for r in rows if r.get("train/CIDEr_sampled")]
    assert len(sampled) == 4 and all(value > 0 for _, value in sampled)  # 2 steps a run; the bundled model is sensible
    assert [epoch for epoch, _ in sampled] == ["0", "0", "1", "1"]  # the second run went on from the first


@pytest.mark.parametrize(
    "start, config",
    [("soft", "soft_scst"), ("hard", "hard_scst"), ("soft_scst", "soft_scst_meteor"), ("hard_scst", "hard_scst_meteor")],
)
def test_flickr8k_scst_configs_keep_the_model_of_the_run_they_start_from(start, config):
    """Only the self-critical settings differ from the model of the config whose run they start from, and the
    start is where that run writes its best checkpoint: the weights always fit. Each config is read whole, as
    `--print_config` shows it given after its base and overlays. (The CLI run above goes the same way with a
    ShapesWorld config.)"""
    base = printed_config(CONFIGS / f"flickr8k_{start}.yaml")
    scst = printed_config(CONFIGS / f"flickr8k_{config}.yaml")
    changed = {"self_critical", "initial_weights", "learning_rate", "lr_decay"}
    assert {k: v for k, v in scst["model"].items() if k not in changed} == {
        k: v for k, v in base["model"].items() if k not in changed
    }
    assert scst["data"] == base["data"]
    assert scst["model"]["initial_weights"] == f"{base['trainer']['default_root_dir']}/best.ckpt"
    assert scst["model"]["self_critical"]["class_path"] == "captioning.self_critical.SelfCritical"
    assert scst["trainer"]["default_root_dir"] != base["trainer"]["default_root_dir"]
