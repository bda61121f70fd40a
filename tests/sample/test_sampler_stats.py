"""Statistical tests: draws follow the distribution they claim (Pearson chi-squared goodness of fit,
fixed seeds so the outcome is deterministic), and the same test rejects a wrong distribution, so a
broken sampler cannot pass it."""

from __future__ import annotations

import numpy as np
import pytest
import sample_ref as ref

from ds4 import _core

scipy_stats = pytest.importorskip("scipy.stats")

LOGITS = np.array([1.0, 0.6, 0.3, 0.0, -0.2, -0.5, -0.9, -1.2], dtype=np.float32)
N_DRAWS = 30000
ALPHA = 1e-3


def draw_counts(n_draws: int, seed: int, logits=LOGITS, **kw) -> np.ndarray:
    s = _core.Sampler(_core.SamplingParams(seed=seed, **kw), len(logits))
    return np.bincount([s.sample(logits) for _ in range(n_draws)], minlength=len(logits))


def chi2_pvalue(counts: np.ndarray, p: np.ndarray) -> float:
    expected = p * counts.sum()
    assert expected.min() >= 5, "bins too small for the chi-squared approximation"
    return float(scipy_stats.chisquare(counts, expected).pvalue)


@pytest.mark.parametrize("temperature", [0.5, 1.0, 2.0])
@pytest.mark.parametrize("seed", [1, 2])
def test_temperature_sampling_follows_softmax(temperature, seed):
    counts = draw_counts(N_DRAWS, seed, temperature=temperature)
    p = ref.softmax(LOGITS.astype(np.float64) / temperature)
    assert chi2_pvalue(counts, p) > ALPHA


@pytest.mark.parametrize(
    "temperature, wrong",
    [
        (0.5, lambda l: ref.softmax(l * 0.5)),  # T multiplied instead of divided
        (2.0, lambda l: ref.softmax(l * 2.0)),
        (1.0, lambda l: ref.softmax(l / 1.15)),  # a 15 % temperature error
        (1.0, lambda l: np.full(len(l), 1.0 / len(l))),  # temperature ignored -> uniform
    ],
)
def test_chi2_rejects_wrong_distribution(temperature, wrong):
    counts = draw_counts(N_DRAWS, 1, temperature=temperature)
    assert chi2_pvalue(counts, wrong(LOGITS.astype(np.float64))) < ALPHA


@pytest.mark.parametrize(
    "kw",
    [dict(temperature=1.3, top_k=5), dict(temperature=0.8, top_p=0.8), dict(temperature=1.7, min_p=0.3),
     dict(temperature=1.1, top_k=6, top_p=0.9, min_p=0.2)],
    ids=str,
)
def test_filtered_sampling_follows_probs(kw):
    counts = draw_counts(N_DRAWS, 3, **kw)
    p = ref.probs(LOGITS, **kw)
    assert counts[p == 0].sum() == 0  # filtered tokens are never drawn
    assert chi2_pvalue(counts[p > 0], p[p > 0]) > ALPHA


def test_sample_from_follows_its_input():
    p = ref.softmax(LOGITS.astype(np.float64) / 0.7).astype(np.float32)
    s = _core.Sampler(_core.SamplingParams(seed=4), len(p))
    counts = np.bincount([s.sample_from(p) for _ in range(N_DRAWS)], minlength=len(p))
    assert chi2_pvalue(counts, p.astype(np.float64) / p.sum()) > ALPHA
