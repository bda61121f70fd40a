"""Screened sampling (Sampler.sample_screened, csrc/sample/sampler.h): the draw a generation makes
from a shortlisted head row. Oracles: the same tokens from the full row and from any valid
shortlist of it (penalties, bias and the fetch-whole fallback included); with top-k or min-p,
sample()'s very tokens on the full row; without filters, the distribution of sample() (softmax at
the temperature) by a chi-square test, with a control that drops the ids outside the shortlist and
must fail."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from ds4 import _core

V = 5000


def sampler(**kw: object) -> _core.Sampler:
    return _core.Sampler(_core.SamplingParams(**kw), V)


@pytest.mark.parametrize("trial", range(12))
def test_any_shortlist_gives_the_full_rows_tokens(trial: int) -> None:
    rng = np.random.default_rng(trial)
    row = (rng.standard_normal(V) * rng.uniform(0.5, 4)).astype(np.float32)
    kw: dict = {"temperature": float(rng.uniform(0.3, 1.5)), "seed": trial}
    if trial % 3 == 1:
        kw.update(repeat_penalty=1.3, presence_penalty=0.5, frequency_penalty=-0.2)
    if trial % 3 == 2:
        kw.update(logit_bias={int(np.argmax(row)): float("-inf"), 7: 2.5})  # the top token banned: fetched whole
    a, b = sampler(**kw), sampler(**kw)
    for t in rng.integers(0, V, 30):
        a.accept(int(t))
        b.accept(int(t))
    for _ in range(60):
        # what a head may return: every id at or above thr, and any others
        thr = np.float32(row.max() - 1.5 * a.margin - rng.uniform(0, 3))
        ids = np.union1d(np.flatnonzero(row >= thr), rng.choice(V, 20)).astype(np.int32)
        assert a.sample_screened(row) == b.sample_screened(row, ids, float(thr))


FILTERS = [{"top_k": 40}, {"top_k": 40, "top_p": 0.9}, {"top_k": 3, "min_p": 0.1}, {"min_p": 0.05},
           {"top_k": 200, "top_p": 0.95, "min_p": 0.02}]


@pytest.mark.parametrize("filters", FILTERS)
@pytest.mark.parametrize("trial", range(4))
def test_filtered_shortlists_draw_samples_tokens(filters: dict, trial: int) -> None:
    """top-k / min-p: the full row's sample() token from a shortlist that holds what the filters
    keep, and from one too short for them (fetched whole)."""
    rng = np.random.default_rng(100 + trial)
    row = (rng.standard_normal(V) * rng.uniform(0.5, 4)).astype(np.float32)
    kw: dict = {"temperature": float(rng.uniform(0.3, 1.5)), "seed": trial, **filters}
    if trial % 2:
        kw.update(repeat_penalty=1.3, logit_bias={int(np.argmax(row)): -3.0})
    a, b = sampler(**kw), sampler(**kw)
    assert b.screens
    for t in rng.integers(0, V, 30):
        a.accept(int(t))
        b.accept(int(t))
    for _ in range(60):
        thr = np.float32(row.max() - rng.uniform(0, 25))
        ids = np.union1d(np.flatnonzero(row >= thr), rng.choice(V, 20)).astype(np.int32)
        assert a.sample(row) == b.sample_screened(row, ids, float(thr))


def test_a_shortlist_too_short_for_the_adjusted_row_is_fetched_whole() -> None:
    """A shortlist whose thr sits above what the adjusted row needs (a head asked for too little)
    still draws the full row's tokens."""
    rng = np.random.default_rng(5)
    row = (rng.standard_normal(V) * 2).astype(np.float32)
    a, b = sampler(temperature=1.0, seed=3), sampler(temperature=1.0, seed=3)
    thr = np.float32(row.max() - 0.5)
    ids = np.flatnonzero(row >= thr).astype(np.int32)
    for _ in range(200):
        assert a.sample_screened(row) == b.sample_screened(row, ids, float(thr))


def _chi2(draws: np.ndarray, p: np.ndarray, bins: int = 40) -> float:
    counts = np.bincount(draws, minlength=len(p))
    order = np.argsort(-p)
    b = np.minimum((np.cumsum(p[order]) * bins).astype(int), bins - 1)
    obs = np.bincount(b, weights=counts[order], minlength=bins)
    exp = np.bincount(b, weights=p[order], minlength=bins) * len(draws)
    k = exp > 0
    return float(stats.chisquare(obs[k], exp[k] * obs[k].sum() / exp[k].sum()).pvalue)


@pytest.mark.parametrize("flat", [False, True])
def test_draws_follow_the_tempered_softmax(flat: bool) -> None:
    """A peaked row (S: the ids within the margin) and a flat one (S: the 256 largest), each with
    a third or more of the mass outside S; the control without those ids fails."""
    rng = np.random.default_rng(11)
    row = (rng.standard_normal(V) * (0.3 if flat else 1.0)).astype(np.float32)
    if not flat:
        row[:5] += 4
    T = 0.8
    p = np.exp((row.astype(np.float64) - row.max()) / T)
    p /= p.sum()
    s = sampler(temperature=T, seed=1)
    in_s = row >= max(row.max() - s.margin, np.sort(row)[-256])
    assert p[~in_s].sum() > 0.3
    n = 100_000
    assert _chi2(np.array([s.sample_screened(row) for _ in range(n)]), p) > 1e-3
    clipped = np.where(in_s, row, -np.inf).astype(np.float32)
    assert _chi2(np.array([s.sample_screened(clipped) for _ in range(n)]), p) < 1e-6


def test_what_screens() -> None:
    """Every sampled configuration but top-p without top-k (its nucleus needs the whole row's mass)."""
    for kw in ({}, {"repeat_penalty": 1.1}, {"top_k": 40}, {"top_k": 40, "top_p": 0.9}, {"min_p": 0.05}):
        assert sampler(temperature=0.7, **kw).screens
    for s in (sampler(), sampler(temperature=0.7, top_p=0.9), sampler(temperature=0.7, top_p=0.9, min_p=0.05)):
        assert not s.screens
        with pytest.raises(RuntimeError, match="temperature > 0"):
            s.sample_screened(np.zeros(V, np.float32))
    assert sampler(temperature=0.5).margin == pytest.approx(0.5 * (np.log(V) - 2), rel=1e-6)


def test_the_head_keeps_what_the_draw_needs() -> None:
    """The head may shortlist a row down to its head_keep largest values: a top-k's k; 256 (the
    draw's S never holds more) plus every id the bias and the penalties can move; min-p alone
    needs every id above its cut (0). Below that a head would list too little and the row would
    be fetched whole."""
    assert sampler(temperature=0.7).head_keep == 256
    assert sampler(temperature=0.7, top_k=40).head_keep == 40
    assert sampler(temperature=0.7, min_p=0.05).head_keep == 0
    assert sampler(temperature=0.7, logit_bias={3: 2.0, 9: -1.0}).head_keep == 258
    s = sampler(temperature=0.7, repeat_penalty=1.3, repeat_last_n=4)
    assert s.head_keep == 256  # nothing to penalise yet
    for t in (5, 6, 5, 7, 8, 9):
        s.accept(t)
    assert s.head_keep == 256 + 4  # the window's 4 ids at most
