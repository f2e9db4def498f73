"""The decoder's teacher-forced unroll, the doubly stochastic penalty, greedy and beam search."""

import itertools
import math

import pytest
import torch

from captioning.decoder import ShowAttendTell
from core.model.attention import grid_positions
from captioning.objectives import caption_loss, doubly_stochastic_penalty
from captioning.search import ban_repeated_ngrams, beam_search, greedy_search
from core.model.attention import DotScore, GeneralScore

PAD, START, END = 0, 1, 2


def make_decoder(vocab=12, seed=0, **kwargs) -> ShowAttendTell:
    torch.manual_seed(seed)
    decoder = ShowAttendTell(
        vocab_size=vocab, feature_dim=6, grid_shape=(1, 5), embed_dim=8, decoder_dim=10, attention_dim=7, **kwargs
    )
    return decoder.eval()


@pytest.mark.parametrize("fast_path", [True, False])
def test_teacher_forcing_equals_stepping_by_hand(fast_path):
    decoder = make_decoder(fast_path=fast_path)
    features = torch.randn(3, 5, 6)
    inputs = torch.tensor([[START, 4, 5, 6], [START, 7, 3, PAD], [START, 9, PAD, PAD]])
    out = decoder(features, inputs)
    assert out.logits.shape == (3, 4, 12) and out.weights.shape == (3, 4, 5)
    assert torch.allclose(out.weights.sum(-1), torch.ones(3, 4))
    # the same step by hand, written out from the equations
    mean = features.mean(1)
    h, c = torch.tanh(decoder.init_h(mean)), torch.tanh(decoder.init_c(mean))
    keys = decoder.attention.score.key_proj(features)
    for t in range(4):
        e = decoder.attention.score.v(torch.tanh(keys + decoder.attention.score.query_proj(h).unsqueeze(1))).squeeze(-1)
        alpha = torch.softmax(e, -1)
        z = torch.sigmoid(decoder.f_beta(h)) * (alpha.unsqueeze(-1) * features).sum(1)
        y = decoder.embedding(inputs[:, t])
        h, c = decoder.lstm(torch.cat([y, z], 1), (h, c))
        logits = decoder.out(y + decoder.out_h(h) + decoder.out_z(z))
        assert torch.allclose(out.weights[:, t], alpha, atol=1e-6)
        assert torch.allclose(out.logits[:, t], logits, atol=1e-5)


@pytest.mark.parametrize("fast_path", [True, False])
def test_teacher_forcing_gradients_equal_those_of_stepping(fast_path):
    """The unroll (on the fast path: its written-out LSTM cell and one-product weight gradients, `UnrolledLinear`)
    against `step`, which runs torch's own `nn.LSTMCell`: the same gradient for every parameter."""
    decoder = make_decoder(dropout=0.0, fast_path=fast_path).train()
    features = torch.randn(3, 5, 6)
    inputs = torch.tensor([[START, 4, 5, 6], [START, 7, 3, 5], [START, 9, 8, 4]])
    targets = torch.randn(3, 4, 12)

    def gradients(logits: torch.Tensor) -> dict[str, torch.Tensor]:
        decoder.zero_grad()
        (logits * targets).sum().backward()
        return {name: p.grad.clone() for name, p in decoder.named_parameters()}

    unrolled = gradients(decoder(features, inputs).logits)
    memory, state = decoder.start(features)
    stepped = []
    for t in range(4):
        out = decoder.step(inputs[:, t], state, memory)
        stepped.append(out.logits)
        state = out.state
    by_step = gradients(torch.stack(stepped, 1))
    for name, grad in by_step.items():
        assert torch.allclose(unrolled[name], grad, atol=1e-5), name


def test_under_autocast_the_grid_is_cast_once_per_image():
    decoder = make_decoder()
    features = torch.randn(2, 5, 6)
    assert decoder.start(features)[0].features.dtype == torch.float32
    with torch.autocast("cpu", dtype=torch.bfloat16):
        memory, _ = decoder.start(features)
        assert memory.features.dtype == torch.bfloat16  # not cast again at every word's read
        assert decoder(features, torch.tensor([[START, 4], [START, 5]])).logits.dtype == torch.bfloat16


def test_grid_positions_follow_the_encoders_row_major_cells():
    positions = grid_positions(3, 3)  # a 3x3 grid: location r * 3 + c is row r, column c
    assert positions.tolist() == [[x, y] for y in (-1.0, 0.0, 1.0) for x in (-1.0, 0.0, 1.0)]
    assert grid_positions(1, 1).tolist() == [[0.0, 0.0]]
    # 2 rows of 3: x runs over the columns, y over the rows, each from -1 to 1
    assert grid_positions(2, 3).tolist() == [[x, y] for y in (-1.0, 1.0) for x in (-1.0, 0.0, 1.0)]


def test_coordinates_are_appended_to_every_annotation_and_read_with_it():
    torch.manual_seed(0)
    decoder = ShowAttendTell(
        vocab_size=12, feature_dim=6, grid_shape=(2, 2), embed_dim=8, decoder_dim=10, attention_dim=7, coordinates=True
    ).eval()
    features = torch.randn(2, 4, 6)
    memory, state = decoder.start(features)
    expected = torch.cat([features, torch.tensor([[-1.0, -1], [1, -1], [-1, 1], [1, 1]]).expand(2, 4, 2)], -1)
    assert torch.equal(memory.features, expected)  # (B, L, D + 2): x then y of each cell
    assert torch.allclose(state.h, torch.tanh(decoder.init_h(expected.mean(1))))
    out = decoder(features, torch.tensor([[START, 3, 4], [START, 5, PAD]]))
    step = decoder.step(torch.tensor([START, START]), state, memory)
    assert torch.allclose(out.logits[:, 0], step.logits, atol=1e-6) and torch.allclose(out.weights[:, 0], step.weights)
    # the LSTM and the deep output read the D + 2 wide context
    z = decoder.out_z.weight.shape[1]
    assert z == 8 and decoder.lstm.input_size == 8 + 8
    generated = beam_search(decoder, features, start_id=START, end_id=END, beam_size=2, max_length=4)
    assert len(generated.tokens) == 2


def test_score_class_is_pluggable():
    decoder = make_decoder(score=GeneralScore)
    assert isinstance(decoder.attention.score, GeneralScore)
    assert decoder(torch.randn(2, 5, 6), torch.tensor([[START, 3], [START, 4]])).logits.shape == (2, 2, 12)


def test_doubly_stochastic_penalty_equals_its_formula():
    weights = torch.tensor(
        [[[0.5, 0.25, 0.25], [0.1, 0.8, 0.1], [1.0, 0.0, 0.0]], [[0.2, 0.2, 0.6], [0.3, 0.3, 0.4], [0.9, 0.05, 0.05]]]
    )  # (B=2, T=3, L=3)
    mask = torch.tensor([[True, True, True], [True, True, False]])
    # caption 0: column sums 1.6, 1.05, 0.35 -> 0.36 + 0.0025 + 0.4225
    # caption 1 (third step is padding): 0.5, 0.5, 1.0 -> 0.25 + 0.25 + 0
    expected = torch.tensor([0.36 + 0.0025 + 0.4225, 0.5])
    assert torch.allclose(doubly_stochastic_penalty(weights, mask), expected)


def test_loss_masks_padding_from_both_terms():
    torch.manual_seed(1)
    logits = torch.randn(2, 3, 5)
    weights = torch.softmax(torch.randn(2, 3, 4), -1)
    targets = torch.tensor([[3, 4, END], [3, END, PAD]])
    loss = caption_loss(logits, targets, weights, pad_id=PAD, penalty_weight=2.0)
    real = targets != PAD
    ce = -torch.log_softmax(logits, -1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)[real].mean()
    pen = torch.stack([((1 - weights[0].sum(0)) ** 2).sum(), ((1 - weights[1, :2].sum(0)) ** 2).sum()]).mean()
    assert torch.allclose(loss.cross_entropy, ce)
    assert torch.allclose(loss.penalty, pen)
    # eq. 14 per caption, -sum_t log p(y_t) + lambda * penalty, summed over the captions and divided by their 5
    # real words: the penalty weighs against the caption's whole log-likelihood, not one word's
    nll = -torch.log_softmax(logits, -1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)  # (B, T)
    by_caption = torch.stack([nll[0].sum() + 2.0 * ((1 - weights[0].sum(0)) ** 2).sum(),
                              nll[1, :2].sum() + 2.0 * ((1 - weights[1, :2].sum(0)) ** 2).sum()])  # fmt: skip
    assert torch.allclose(loss.total, by_caption.sum() / 5)
    # changing the logits or weights at a padded place changes nothing
    logits2, weights2 = logits.clone(), weights.clone()
    logits2[1, 2] += 10
    weights2[1, 2] = torch.tensor([1.0, 0, 0, 0])
    assert torch.allclose(caption_loss(logits2, targets, weights2, pad_id=PAD, penalty_weight=2.0).total, loss.total)


def test_beam_one_equals_greedy():
    decoder = make_decoder(vocab=30, seed=3)
    features = torch.randn(6, 5, 6)
    greedy = greedy_search(decoder, features, start_id=START, end_id=END, max_length=7)
    beam = beam_search(decoder, features, start_id=START, end_id=END, max_length=7, beam_size=1)
    assert greedy.tokens == beam.tokens
    assert torch.allclose(greedy.log_probs, beam.log_probs, atol=1e-5)
    for g, b in zip(greedy.weights, beam.weights):
        assert torch.allclose(g, b, atol=1e-6)


@pytest.mark.parametrize("beam_size,length_penalty", [(3, 0.0), (5, 0.7)])
def test_batched_beam_search_equals_one_image_at_a_time(beam_size, length_penalty):
    decoder = make_decoder(vocab=20, seed=4, score=DotScore)
    features = torch.randn(5, 5, 6)
    kwargs = dict(start_id=START, end_id=END, max_length=9, beam_size=beam_size, length_penalty=length_penalty)
    batched = beam_search(decoder, features, **kwargs)
    for b in range(5):
        single = beam_search(decoder, features[b : b + 1], **kwargs)
        assert single.tokens[0] == batched.tokens[b]
        assert torch.allclose(single.log_probs[0], batched.log_probs[b], atol=1e-5)
        assert torch.allclose(single.weights[0], batched.weights[b], atol=1e-6)


def sequence_log_prob(decoder, features, words: list[int], ends: bool) -> float:
    """log p(words [, <end>]) by teacher forcing."""
    inputs = torch.tensor([[START] + words])
    targets = words + ([END] if ends else [])
    log_probs = torch.log_softmax(decoder(features, inputs).logits[0], -1)
    return float(sum(log_probs[t, w] for t, w in enumerate(targets)).detach())


def test_wide_beam_finds_the_exact_best_caption_by_enumeration():
    decoder = make_decoder(vocab=5, seed=7)
    features = torch.randn(1, 5, 6)
    best, best_words = -math.inf, None
    candidates = []
    for n in range(0, 4):
        for words in itertools.product([0, 1, 3, 4], repeat=n):
            candidates.append((list(words), True))
    candidates += [(list(w), False) for w in itertools.product([0, 1, 3, 4], repeat=3)]
    for words, ends in candidates:
        if len(words) == 3 and ends:
            continue  # with max_length 3, a third word is the last: no <end> step after it
        lp = sequence_log_prob(decoder, features, words, ends)
        if lp > best:
            best, best_words = lp, words
    found = beam_search(decoder, features, start_id=START, end_id=END, max_length=3, beam_size=125)
    assert found.tokens[0] == best_words
    assert found.log_probs[0].item() == pytest.approx(best, abs=1e-4)


def test_caption_that_never_ends_stops_at_max_length():
    decoder = make_decoder(vocab=6, seed=0)
    with torch.no_grad():
        decoder.out.bias.fill_(0)
        decoder.out.bias[END] = -1e4  # <end> is never the best word
    features = torch.randn(2, 5, 6)
    for search in (greedy_search, beam_search):
        out = search(decoder, features, start_id=START, end_id=END, max_length=4)
        assert [len(t) for t in out.tokens] == [4, 4]
        assert all(w.shape == (4, 5) for w in out.weights)


def test_length_penalty_prefers_longer_captions():
    decoder = make_decoder(vocab=15, seed=11)
    features = torch.randn(8, 5, 6)
    kwargs = dict(start_id=START, end_id=END, max_length=12, beam_size=4)
    plain = beam_search(decoder, features, **kwargs)
    normalised = beam_search(decoder, features, length_penalty=1.0, **kwargs)
    assert sum(map(len, normalised.tokens)) >= sum(map(len, plain.tokens))
    assert torch.all(normalised.log_probs <= plain.log_probs + 1e-5)


def test_attention_entropy_by_hand_and_in_the_loss():
    from captioning.objectives import attention_entropy

    weights = torch.tensor([[[0.5, 0.5, 0.0, 0.0], [0.25, 0.25, 0.25, 0.25], [1.0, 0, 0, 0]]])  # (1, 3, 4)
    mask = torch.tensor([[True, True, False]])
    assert attention_entropy(weights, mask).item() == pytest.approx((math.log(2) + math.log(4)) / 2)
    logits = torch.zeros(1, 3, 5)
    targets = torch.tensor([[3, END, PAD]])
    plain = caption_loss(logits, targets, weights, pad_id=PAD, penalty_weight=0.0)
    sharp = caption_loss(logits, targets, weights, pad_id=PAD, penalty_weight=0.0, entropy_weight=0.5)
    assert (sharp.total - plain.total).item() == pytest.approx(0.5 * (math.log(2) + math.log(4)) / 2)


def test_banned_words_are_never_emitted_and_the_rest_renormalised():
    decoder = make_decoder(vocab=6, seed=3)
    UNK = 3
    with torch.no_grad():
        decoder.out.bias.fill_(0)
        decoder.out.bias[UNK] = 50.0  # <unk> would win every step
    features = torch.randn(4, 5, 6)
    for search, extra in ((greedy_search, {}), (beam_search, {"beam_size": 3})):
        free = search(decoder, features, start_id=START, end_id=END, max_length=5, **extra)
        assert all(UNK in tokens for tokens in free.tokens)
        out = search(decoder, features, start_id=START, end_id=END, max_length=5, banned=(UNK, PAD, START), **extra)
        assert not any({UNK, PAD, START} & set(tokens) for tokens in out.tokens)
    # greedy's total is the sum of log-probabilities over the allowed words only, stepped by hand
    out = greedy_search(decoder, features[:1], start_id=START, end_id=END, max_length=5, banned=(UNK,))
    memory, state = decoder.start(features[:1])
    word, total = torch.tensor([START]), 0.0
    for expected in [*out.tokens[0], END][:5]:
        step = decoder.step(word, state, memory)
        logits = step.logits[0].clone()
        logits[UNK] = float("-inf")
        total += torch.log_softmax(logits, -1)[expected].item()
        assert int(logits.argmax()) == expected
        word, state = torch.tensor([expected]), step.state
    assert out.log_probs[0].item() == pytest.approx(total, abs=1e-4)


def bigram_decoder(table: dict[int, dict[int, float]], vocab: int = 5) -> ShowAttendTell:
    """A real decoder whose next-word distribution depends on the previous word only: p(next | prev) =
    table[prev][next]. The embedding is one-hot, the deep output's h and z terms are zeroed, and the output
    layer's column `prev` holds log p(. | prev), so its log_softmax gives those log-probabilities back. Words
    missing from a row get logit 0; the searches ban PAD and START, and END is never read after a caption ended."""
    decoder = ShowAttendTell(
        vocab_size=vocab, feature_dim=6, grid_shape=(1, 5), embed_dim=vocab, decoder_dim=10, attention_dim=7
    ).eval()
    with torch.no_grad():
        decoder.embedding.weight.copy_(torch.eye(vocab))
        decoder.out_h.weight.zero_()
        decoder.out_h.bias.zero_()
        decoder.out_z.weight.zero_()
        decoder.out.bias.zero_()
        decoder.out.weight.zero_()
        for prev, row in table.items():
            assert sum(row.values()) == pytest.approx(1.0)
            for word, p in row.items():
                decoder.out.weight[word, prev] = math.log(p)
    return decoder


def test_length_penalty_ranks_fixed_hypotheses_as_computed_by_hand():
    """Length counts the words and the <end>: a caption of n words that ended has length n + 1."""
    A, B = 3, 4
    decoder = bigram_decoder(
        {
            START: {A: 0.8, B: 0.1, END: 0.1},
            A: {END: 0.5, B: 0.4, A: 0.1},
            B: {END: 0.6, A: 0.25, B: 0.15},
        }
    )
    # With max_length 3 every caption is at most 3 words: 1 + 2 + 4 ended ones, 8 that ran out. Beam 15 holds them all.
    kwargs = dict(start_id=START, end_id=END, max_length=3, beam_size=15, banned=(PAD, START))
    features = torch.randn(1, 5, 6)
    # The contenders: (words, total log-probability, length with <end>)
    a_end = ([A], math.log(0.8 * 0.5), 2)  # "A <end>": p = 0.4
    ab_end = ([A, B], math.log(0.8 * 0.4 * 0.6), 3)  # "A B <end>": p = 0.192
    aba = ([A, B, A], math.log(0.8 * 0.4 * 0.25), 3)  # ran to max_length: p = 0.08, no <end>
    empty = ([], math.log(0.1), 1)  # "<end>" alone
    # Every other caption has p <= 0.06 ("B <end>") and length <= 3, so scores at most log(0.06) / 3^penalty:
    # below the winners' at penalty 1 (-0.938 < -0.458) and 2 (-0.313 < -0.183).
    for penalty, winner, score in ((1.0, a_end, -0.4581), (2.0, ab_end, -0.1834)):
        by_hand = {tuple(w): lp / n**penalty for w, lp, n in (a_end, ab_end, aba, empty)}
        # penalty 1: A <end> -0.916/2 = -0.458, A B <end> -1.650/3 = -0.550, A B A -2.526/3 = -0.842, <end> -2.303
        # penalty 2: A <end> -0.916/4 = -0.229, A B <end> -1.650/9 = -0.183, A B A -2.526/9 = -0.281, <end> -2.303
        assert max(by_hand, key=by_hand.get) == tuple(winner[0])
        assert by_hand[tuple(winner[0])] == pytest.approx(score, abs=1e-4)
        assert math.log(0.06) / 3**penalty < score
        found = beam_search(decoder, features, length_penalty=penalty, **kwargs)
        assert found.tokens[0] == winner[0], penalty
        assert found.log_probs[0].item() == pytest.approx(winner[1], abs=1e-5)
        assert found.weights[0].shape == (len(winner[0]), 5)
    # without a penalty the most probable caption wins: A <end>, p = 0.4
    plain = beam_search(decoder, features, **kwargs)
    assert plain.tokens[0] == [A] and plain.log_probs[0].item() == pytest.approx(math.log(0.4), abs=1e-5)


def banned_log_probs(decoder, features, inputs, banned) -> torch.Tensor:
    """(N, T, V) next-word log-probabilities by teacher forcing with the `banned` words removed."""
    logits = decoder(features.expand(len(inputs), -1, -1), inputs).logits
    logits[..., list(banned)] = float("-inf")
    return torch.log_softmax(logits, -1)


def has_repeated_ngram(words: list[int], n: int) -> bool:
    grams = [tuple(words[i : i + n]) for i in range(len(words) - n + 1)]
    return len(grams) != len(set(grams))


def dangling(words: list[int], no_end_after: tuple[int, ...], modifiers: tuple[int, ...], determiners: tuple[int, ...]) -> bool:
    """The documented ending rules: the last word is one of no_end_after, or a modifier after a determiner or
    modifier."""
    if not words:
        return False
    after_opener = len(words) > 1 and words[-2] in determiners + modifiers
    return words[-1] in no_end_after or (words[-1] in modifiers and after_opener)


@pytest.mark.parametrize(
    "seed,length_penalty,no_repeat,no_end_after,modifiers,determiners",
    [(5, 0.6, 0, (), (), ()), (9, 0.6, 0, (), (), ()), (3, 1.0, 0, (), (), ()), (1, 2.0, 0, (), (), ()),
     (11, 1.0, 2, (), (), ()), (11, 2.0, 2, (), (), ()), (5, 0.6, 0, (4,), (), ()), (9, 1.0, 0, (3, 5), (), ()),
     (2, 0.6, 0, (), (3,), (4,)), (6, 1.0, 0, (), (5,), (3,)), (5, 1.0, 0, (4,), (5,), (3,))],
)  # fmt: skip
def test_wide_beam_finds_the_best_length_penalised_caption_by_enumeration(
    seed, length_penalty, no_repeat, no_end_after, modifiers, determiners
):
    """Every caption of words {3, 4, 5} up to max_length 4 scored by the documented rule: among the captions that
    ended with <end>, the best total log-probability / length^penalty, the length counting the <end>; with
    no_repeat n, among those that write no n-gram twice; with no_end_after, among those whose last word is not
    one of those, nor (with modifiers) a modifier after a determiner or a modifier. A caption cut at max_length (no <end>)
    never wins while one ended."""
    decoder = make_decoder(vocab=6, seed=seed)
    with torch.no_grad():
        decoder.out.weight.mul_(3)  # sharper distributions, so lengths and probabilities differ more
    real, banned, max_length = [3, 4, 5], (PAD, START), 4
    images = torch.randn(3, 5, 6)
    found = beam_search(
        decoder, images, start_id=START, end_id=END, max_length=max_length, beam_size=121,
        length_penalty=length_penalty, no_repeat_ngram_size=no_repeat, no_end_after=no_end_after, modifiers=modifiers,
        determiners=determiners, banned=banned,
    )  # fmt: skip
    penalty_mattered = end_counted = cut_lost = rule_changed = False
    for b in range(len(images)):
        scored, cut = [], []  # (score, total log-probability, words, score had the length left out the <end>)
        for n in range(max_length + 1):
            captions = [list(w) for w in itertools.product(real, repeat=n)]
            inputs = torch.tensor([[START] + w for w in captions])
            with torch.no_grad():
                log_probs = banned_log_probs(decoder, images[b : b + 1], inputs, banned)  # (N, n + 1, V)
            word_totals = log_probs[:, :n].gather(-1, inputs[:, 1:].unsqueeze(-1)).sum((1, 2))  # (N,)
            for i, words in enumerate(captions):
                total = word_totals[i].item()
                if n < max_length:  # ended: the <end> step is in the log-probability and in the length
                    total += log_probs[i, n, END].item()
                    scored.append((total / (n + 1) ** length_penalty, total, words, total / max(n, 1) ** length_penalty))
                else:  # ran to max_length: no <end>, out of the running
                    cut.append((total / n**length_penalty, total, words))
        allowed = [
            s for s in scored
            if not (no_repeat and has_repeated_ngram(s[2], no_repeat)) and not dangling(s[2], no_end_after, modifiers, determiners)
        ]  # fmt: skip
        best_score, best_total, best_words, _ = max(allowed, key=lambda s: s[0])
        runner_up = max(s[0] for s in allowed if s[2] != best_words)
        assert best_score - runner_up > 1e-4  # no near tie for float error to break
        assert found.tokens[b] == best_words, b
        assert found.log_probs[b].item() == pytest.approx(best_total, abs=1e-4)
        penalty_mattered |= best_words != max(allowed, key=lambda s: s[1])[2]
        end_counted |= best_words != max(allowed, key=lambda s: s[3])[2]
        cut_lost |= max(s[0] for s in cut) > best_score
        rule_changed |= max(scored, key=lambda s: s[0])[2] != best_words
    # these cases tell the rules apart: the ban changes a caption; without it, the penalty changes one, counting
    # the <end> in the length changes one, and a caption cut at max_length would have won
    if no_repeat or no_end_after or modifiers:
        assert rule_changed  # the rule changed a caption (the best one otherwise breaks it)
    else:
        assert penalty_mattered and end_counted and cut_lost


def test_repeated_ngram_ban_by_hand():
    """After "7 8 9 7 8" the trigram ban removes 9 ("7 8 9" again), the bigram ban 9 (the one word that followed
    an 8), the unigram ban every word written, and a 4-gram ban nothing ("9 7 8" never came before)."""
    tokens = torch.tensor([[7, 8, 9, 7, 8]])
    for n, expected in [(3, {9}), (2, {9}), (1, {7, 8, 9}), (4, set()), (6, set())]:
        log_probs = torch.zeros(1, 12)
        ban_repeated_ngrams(log_probs, tokens, n)
        assert set(torch.isinf(log_probs[0]).nonzero().flatten().tolist()) == expected, n
    # "5 5 5": the bigram "5 5" was written, so after the last 5 another 5 is banned
    log_probs = torch.zeros(1, 12)
    ban_repeated_ngrams(log_probs, torch.tensor([[5, 5, 5]]), 2)
    assert torch.isinf(log_probs[0]).nonzero().flatten().tolist() == [5]
