"""The acceptance rules of sampled speculation (csrc/spec/verify.h): unit cases on crafted
distributions, and a chi-squared test that verifying a deterministic draft by rejection sampling
emits token blocks distributed exactly as plain sampling, which a deliberately wrong rule (the
recovered token drawn from p instead of the residual) fails."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from ds4 import _core

P = np.array([0.5, 0.3, 0.2, 0.0], dtype=np.float32)


def test_accept_with_probability_p_of_the_draft() -> None:
    assert _core.spec_accept_exact(P, 0, 0.49)
    assert not _core.spec_accept_exact(P, 0, 0.51)
    assert not _core.spec_accept_exact(P, 3, 0.0)  # a token the target never samples
    assert _core.spec_accept_exact(np.array([0, 1, 0], dtype=np.float32), 1, 0.999999)  # perfect match


def test_residual_is_p_without_the_draft() -> None:
    np.testing.assert_array_equal(_core.spec_residual(P, 0), np.array([0.0, 0.3, 0.2, 0.0], dtype=np.float32))
    np.testing.assert_array_equal(_core.spec_residual(P, 2), np.array([0.5, 0.3, 0.0, 0.0], dtype=np.float32))


def _rows(seed: int, k: int, n: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    rows = rng.dirichlet(np.full(n, 0.7), size=k + 1).astype(np.float32)
    return rows / rows.sum(1, keepdims=True)


def _chi2_vs_product(seqs: np.ndarray, rows: np.ndarray) -> float:
    """p-value of the emitted blocks against the product of the rows (what plain sampling gives)."""
    k1, n = rows.shape
    codes = np.ravel_multi_index(seqs.T, (n,) * k1)
    observed = np.bincount(codes, minlength=n**k1).astype(np.float64)
    expected = np.ones(1)
    for r in rows.astype(np.float64):
        expected = np.outer(expected, r).ravel()
    expected *= len(seqs) / expected.sum()
    keep = expected > 5  # pool the rare cells
    obs = np.append(observed[keep], observed[~keep].sum())
    exp = np.append(expected[keep], expected[~keep].sum())
    if exp[-1] == 0:
        obs, exp = obs[:-1], exp[:-1]
    return float(stats.chisquare(obs, exp).pvalue)


@pytest.mark.parametrize("draft", [[0, 1], [2, 2], [1, 0], [3, 3]])
def test_exact_rule_preserves_the_distribution(draft: list[int]) -> None:
    # 3-token blocks over a 4-token vocabulary (64 cells), 200k draws; drafts of likely,
    # unlikely and impossible tokens (all rejected), and accepted prefixes then the bonus token
    rows = _rows(3, 2, 4)
    seqs = _core.spec_simulate(rows, draft, 200_000, 11)
    assert _chi2_vs_product(seqs, rows) > 0.01


def test_wrong_rule_fails_the_same_test() -> None:
    rows = _rows(3, 2, 4)
    seqs = _core.spec_simulate(rows, [0, 1], 200_000, 11, rule="no-residual")
    assert _chi2_vs_product(seqs, rows) < 1e-6


def test_simulation_arguments() -> None:
    rows = _rows(1, 2, 4)
    with pytest.raises(ValueError, match="k \\+ 1 rows"):
        _core.spec_simulate(rows, [0], 10, 1)
    with pytest.raises(ValueError, match="outside"):
        _core.spec_simulate(rows, [0, 9], 10, 1)
