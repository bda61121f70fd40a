"""Sampler vs a NumPy reference: greedy, RNG reproducibility, each filter's kept set, the combined
chain, penalties, logit bias, argument errors. Statistical tests are in test_sampler_stats.py."""

from __future__ import annotations

import numpy as np
import pytest
import sample_ref as ref

from ds4 import _core

SIZES = [7, 1000, 262144]


def make(n_vocab: int, **kw) -> _core.Sampler:
    return _core.Sampler(_core.SamplingParams(**kw), n_vocab)


def rand_logits(seed: int, n: int, scale: float = 3.0) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal(n) * scale).astype(np.float32)


def tied_logits(seed: int, n: int) -> np.ndarray:
    # Few distinct values: every filter boundary lands among equal logits.
    return np.random.default_rng(seed).integers(0, 6, n).astype(np.float32)


def spread_logits(seed: int, n: int) -> np.ndarray:
    # Far tails and bans: exercises the open-ended histogram bin and -inf skipping.
    g = np.random.default_rng(seed)
    l = (g.standard_normal(n) * 3).astype(np.float32)
    u = g.random(n)
    l[u < 0.1] = -1e30
    l[(u >= 0.1) & (u < 0.2)] -= 60
    l[(u >= 0.2) & (u < 0.25)] = -np.inf
    return l


def kept_ids(s: _core.Sampler, l: np.ndarray) -> np.ndarray:
    return np.nonzero(s.probs(l) > 0)[0]


# ---------------------------------------------------------------- greedy


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_greedy_is_argmax(n, seed):
    l = rand_logits(seed, n)
    s = make(n, top_k=3, top_p=0.5, seed=seed)  # filters cannot change the argmax
    assert s.sample(l) == int(np.argmax(l))
    p = s.probs(l)
    assert p[int(np.argmax(l))] == 1.0 and p.sum() == 1.0


def test_greedy_ties_lowest_id():
    l = np.zeros(100, dtype=np.float32)
    l[[17, 42, 99]] = 5.0
    assert make(100).sample(l) == 17
    l[:] = -np.inf
    l[[63, 8]] = 1.0
    assert make(100).sample(l) == 8


def test_greedy_does_not_consume_randomness():
    a, b = make(10, seed=5), make(10, seed=5)
    for _ in range(10):
        a.sample(rand_logits(0, 10))
    assert a.next_u64() == b.next_u64()


# ---------------------------------------------------------------- RNG


@pytest.mark.parametrize("seed", [0, 1, 42, 2**64 - 1])
def test_rng_is_xoshiro256ss_splitmix64(seed):
    s = make(4, seed=seed)
    assert [s.next_u64() for _ in range(20)] == ref.xoshiro256ss(seed, 20)
    s.set_seed(seed)
    x = ref.xoshiro256ss(seed, 1)[0]
    assert s.uniform() == (x >> 11) * 2.0**-53


def test_same_seed_same_draws_different_seed_different():
    l = rand_logits(3, 5000, scale=1.0)
    draws = lambda sd: [s.sample(l) for s in [make(5000, temperature=1.0, seed=sd)] for _ in range(200)]  # noqa: E731
    assert draws(123) == draws(123)
    assert draws(123) != draws(124)


def test_reset_replays_and_unseeded_differs():
    l = rand_logits(4, 1000, scale=1.0)
    s = make(1000, temperature=1.0, top_p=0.95, seed=9)
    first = [s.sample(l) for _ in range(50)]
    s.reset()
    assert [s.sample(l) for _ in range(50)] == first
    u1, u2 = make(1000, temperature=1.0), make(1000, temperature=1.0)
    assert u1.seed != u2.seed  # std::random_device; a collision is 2**-64
    assert [u1.sample(l) for _ in range(50)] != [u2.sample(l) for _ in range(50)]


def test_sample_equals_sample_from_probs():
    # The exact-sampling verifier relies on probs() being the distribution sample() draws from.
    for kw in [dict(), dict(top_k=20), dict(top_p=0.7), dict(min_p=0.05, top_k=500)]:
        a = make(262144, temperature=0.8, seed=77, **kw)
        b = make(262144, temperature=0.8, seed=77, **kw)
        for i in range(5):
            l = rand_logits(100 + i, 262144)
            assert a.sample(l) == b.sample_from(b.probs(l))


# ---------------------------------------------------------------- filters vs numpy


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize(
    "filt",
    [dict(top_k=1), dict(top_k=5), dict(top_k=50), dict(top_k=5000), dict(top_p=0.1), dict(top_p=0.5), dict(top_p=0.9),
     dict(top_p=0.999), dict(top_p=0.9999999), dict(min_p=0.01), dict(min_p=0.2), dict(min_p=0.9)],
    ids=str,
)
@pytest.mark.parametrize("gen", [rand_logits, tied_logits, spread_logits], ids=["random", "ties", "spread"])
def test_filter_kept_set_matches_numpy(n, seed, filt, gen):
    l = gen(seed, n)
    s = make(n, temperature=1.0, seed=seed, **filt)
    want = ref.kept(l, **filt)
    if gen is spread_logits:  # kept tokens 1e30 below the max have probability 0: not visible
        want = want[ref.probs(l, temperature=1.0, **filt)[want].astype(np.float32) > 0]
    np.testing.assert_array_equal(kept_ids(s, l), want)


def test_top_k_ties_keep_lowest_ids():
    l = np.zeros(10, dtype=np.float32)
    l[[2, 5, 7, 9]] = 1.0
    np.testing.assert_array_equal(kept_ids(make(10, temperature=1.0, top_k=2), l), [2, 5])
    np.testing.assert_array_equal(kept_ids(make(10, temperature=1.0, top_k=6), l), [0, 1, 2, 5, 7, 9])


def test_top_p_crossing_token_kept_and_later_ties_dropped():
    l = np.log(np.array([0.25, 0.25, 0.25, 0.25], dtype=np.float64)).astype(np.float32)
    # mass 0.25, 0.5, 0.75: 0.5 reached at id 1 -> ids 0,1; 0.6 crosses at id 2 -> ids 0,1,2
    np.testing.assert_array_equal(kept_ids(make(4, temperature=1.0, top_p=0.6), l), [0, 1, 2])
    np.testing.assert_array_equal(kept_ids(make(4, temperature=1.0, top_p=0.1), l), [0])


def test_min_p_keeps_threshold_and_max():
    p = np.array([0.5, 0.25, 0.125, 0.125], dtype=np.float64)
    l = np.log(p).astype(np.float32)
    np.testing.assert_array_equal(kept_ids(make(4, temperature=1.0, min_p=0.3), l), [0, 1])
    np.testing.assert_array_equal(kept_ids(make(4, temperature=1.0, min_p=0.99), l), [0])


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize(
    "kw",
    [dict(temperature=0.7, top_k=40, top_p=0.8, min_p=0.05), dict(temperature=1.5, top_k=400, top_p=0.95),
     dict(temperature=0.3, top_p=0.9, min_p=0.02), dict(temperature=2.0, top_k=10, min_p=0.3),
     dict(temperature=1.0)],
    ids=str,
)
def test_combined_chain_matches_numpy(n, seed, kw):
    for gen in (rand_logits, tied_logits, spread_logits):
        l = gen(seed, n)
        got = make(n, seed=seed, **kw).probs(l)
        want = ref.probs(l, **kw)
        np.testing.assert_array_equal(np.nonzero(got)[0], np.nonzero(want)[0])
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-12)
        assert abs(float(got.astype(np.float64).sum()) - 1.0) < 1e-5


def test_extreme_temperatures():
    l = rand_logits(8, 1000)
    p = make(1000, temperature=1e-40).probs(l)  # denormal T: a point mass, not NaN
    assert p[int(np.argmax(l))] == 1.0 and p.sum() == 1.0
    p = make(1000, temperature=1e30, top_k=10).probs(l)  # flat over what top-k kept
    np.testing.assert_allclose(p[p > 0], 0.1, rtol=1e-6)
    assert (p > 0).sum() == 10


def test_filters_see_untempered_logits():
    # top-p at T=1 keeps {0}; if temperature were applied first (T=10 flattens) it would keep more.
    l = np.array([3.0, 0.0, 0.0, 0.0], dtype=np.float32)
    np.testing.assert_array_equal(kept_ids(make(4, temperature=10.0, top_p=0.8), l), [0])


# ---------------------------------------------------------------- penalties and bias


@pytest.mark.parametrize(
    "pen",
    [dict(repeat_penalty=1.3), dict(presence_penalty=0.7), dict(frequency_penalty=0.4),
     dict(repeat_penalty=0.8, presence_penalty=-0.5, frequency_penalty=0.25, repeat_last_n=8),
     dict(repeat_penalty=1.5, repeat_last_n=0), dict(repeat_penalty=2.0, repeat_last_n=3)],
    ids=str,
)
def test_penalties_match_numpy(pen):
    n = 300
    rng = np.random.default_rng(11)
    l = rand_logits(12, n)
    history = list(rng.integers(0, 40, 30)) + [5, 5, 5, 7]  # repeats, in and out of the window
    s = make(n, temperature=1.0, **pen)
    for t in history:
        s.accept(int(t))
    w = pen.get("repeat_last_n", 64)
    assert s.history == ([int(t) for t in history[-w:]] if w else [])
    adj = ref.adjust(l, history=history, **pen)
    assert not np.array_equal(adj, l) or w == 0
    np.testing.assert_allclose(s.probs(l), ref.probs(adj, temperature=1.0), rtol=2e-5, atol=1e-12)
    s.reset()
    assert s.history == []
    np.testing.assert_allclose(s.probs(l), ref.probs(l, temperature=1.0), rtol=2e-5, atol=1e-12)


def test_repetition_penalty_sign_rule():
    l = np.array([2.0, -2.0, 0.0, 1.0], dtype=np.float32)
    s = make(4, temperature=1.0, repeat_penalty=2.0)
    for t in (0, 1, 2):
        s.accept(t)
    got = np.log(s.probs(l).astype(np.float64))
    want = np.array([1.0, -4.0, 0.0, 1.0])  # positive divided, negative multiplied, zero unchanged
    np.testing.assert_allclose(got - got[3], want - want[3], atol=1e-6)


def test_logit_bias():
    l = np.zeros(50, dtype=np.float32)
    l[3] = 10.0
    assert make(50, logit_bias={7: 20.0}).sample(l) == 7
    assert make(50, logit_bias=[(3, -np.inf)]).sample(l) == 0  # ban: then lowest id of the ties
    assert make(50, logit_bias=[(7, 6.0), (7, 6.0)]).sample(l) == 7  # entries add up
    s = make(50, temperature=1.0, logit_bias={3: -np.inf, 4: -np.inf}, seed=1)
    p = s.probs(l)
    assert p[3] == 0 and p[4] == 0
    assert all(s.sample(l) not in (3, 4) for _ in range(500))
    np.testing.assert_allclose(p, ref.probs(ref.adjust(l, logit_bias={3: -np.inf, 4: -np.inf}), temperature=1.0),
                               rtol=1e-6)
    with pytest.raises(ValueError, match="all tokens banned"):
        make(2, temperature=1.0, logit_bias={0: -np.inf, 1: -np.inf}).sample(np.zeros(2, np.float32))
    with pytest.raises(ValueError, match="all tokens banned"):
        make(2, logit_bias={0: -np.inf, 1: -np.inf}).sample(np.zeros(2, np.float32))


def test_caller_logits_not_modified():
    l = rand_logits(5, 1000)
    keep = l.copy()
    s = make(1000, temperature=0.9, top_k=30, top_p=0.9, min_p=0.01, repeat_penalty=1.2,
             logit_bias={1: 3.0}, seed=3)
    for t in range(10):
        s.accept(t)
    s.sample(l)
    s.probs(l)
    np.testing.assert_array_equal(l, keep)


# ---------------------------------------------------------------- errors


@pytest.mark.parametrize(
    "kw, msg",
    [
        (dict(temperature=-0.1), "temperature must be finite and >= 0"),
        (dict(temperature=float("nan")), "temperature"),
        (dict(temperature=float("inf")), "temperature"),
        (dict(top_k=-1), "top_k must be >= 0"),
        (dict(top_p=0.0), r"top_p must be in \(0, 1\]"),
        (dict(top_p=1.5), "top_p"),
        (dict(top_p=float("nan")), "top_p"),
        (dict(min_p=1.0), r"min_p must be in \[0, 1\)"),
        (dict(min_p=-0.1), "min_p"),
        (dict(repeat_penalty=0.0), "repeat_penalty must be finite and > 0"),
        (dict(repeat_penalty=-1.0), "repeat_penalty"),
        (dict(repeat_last_n=-1), "repeat_last_n must be >= 0"),
        (dict(presence_penalty=float("inf")), "presence_penalty must be finite"),
        (dict(frequency_penalty=float("nan")), "frequency_penalty must be finite"),
        (dict(logit_bias={3: float("nan")}), "logit_bias for token 3"),
        (dict(logit_bias={3: float("inf")}), "logit_bias for token 3"),
        (dict(logit_bias={-2: 1.0}), "logit_bias token id -2 is out of range"),
        (dict(seed=-1), r"seed must be in \[0, 2\*\*64\)"),
        (dict(seed=2**64), "seed"),
    ],
    ids=str,
)
def test_bad_params_raise_value_error(kw, msg):
    with pytest.raises(ValueError, match=msg):
        _core.SamplingParams(**kw)


def test_bad_sampler_arguments():
    with pytest.raises(ValueError, match=r"logit_bias token id 10 is out of range \[0, 10\)"):
        make(10, logit_bias={10: 1.0})
    p = _core.SamplingParams()
    p.top_p = 2.0  # fields are plain; the Sampler validates again
    with pytest.raises(ValueError, match="top_p"):
        _core.Sampler(p, 10)
    with pytest.raises(ValueError, match="n_vocab must be > 0"):
        _core.Sampler(_core.SamplingParams(), 0)
    s = make(10, temperature=1.0)
    with pytest.raises(ValueError, match="10 entries|n_vocab 10"):
        s.sample(np.zeros(11, np.float32))
    with pytest.raises(TypeError, match="float32"):
        s.sample(np.zeros(10, np.float64))
    with pytest.raises(ValueError, match="1-D"):
        s.sample(np.zeros((1, 10), np.float32))
    with pytest.raises(ValueError, match="contiguous"):
        s.sample(np.zeros(20, np.float32)[::2])
    bad = np.zeros(10, np.float32)
    bad[4] = np.nan
    with pytest.raises(ValueError, match="logit 4 is nan"):
        s.sample(bad)
    with pytest.raises(ValueError, match="logit 4 is nan"):
        make(10).sample(bad)
    with pytest.raises(ValueError, match=r"token 10 out of range"):
        s.accept(10)
    with pytest.raises(ValueError, match=r"p\[2\] is -1"):
        s.sample_from(np.array([1, 1, -1, 0, 0, 0, 0, 0, 0, 0], np.float32))
    with pytest.raises(ValueError, match="sums to 0"):
        s.sample_from(np.zeros(10, np.float32))


def test_params_fields_roundtrip():
    p = _core.SamplingParams(temperature=0.5, top_k=3, logit_bias={1: -1.0}, seed=2**63)
    assert (p.temperature, p.top_k, p.seed) == (0.5, 3, 2**63)
    assert p.logit_bias == [(1, -1.0)]
    p.seed = None
    assert p.seed is None
    assert "temperature=0.5" in repr(p)
    s = _core.Sampler(_core.SamplingParams(seed=5), 10)
    assert s.seed == 5 and s.n_vocab == 10 and s.params.seed == 5


def test_sample_from_unnormalised_weights():
    # Leviathan's residual max(0, p - q) is not normalised; sample_from normalises by the sum.
    s = make(5, seed=0)
    w = np.array([0, 3, 0, 1, 0], np.float32)
    draws = np.bincount([s.sample_from(w) for _ in range(4000)], minlength=5)
    assert draws[0] == draws[2] == draws[4] == 0
    assert 0.7 < draws[1] / 4000 < 0.8
