"""The acceptance rules of sampled speculation (csrc/speculative/verify.h): unit cases on crafted
distributions, and chi-squared tests that verifying a draft by rejection sampling emits token
blocks distributed exactly as plain sampling, for a deterministic draft (one-hot q) and for
drafts drawn from a proposer's own q, which deliberately wrong rules (the recovered token drawn
from p instead of the residual; from p without the draft, as for a one-hot q) fail."""

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


def test_exact_rule_with_a_sampling_proposer() -> None:
    # q unlike p (another Dirichlet draw), with a token p never samples and one q never drafts
    rows = _rows(3, 2, 4)
    q = _rows(8, 1, 4)
    q[0, 1], q[1, 3] = 0.0, 0.0
    q /= q.sum(1, keepdims=True)
    rows[1, 2] = 0.0
    rows[1] /= rows[1].sum()
    seqs = _core.spec_simulate(rows, [], 200_000, 12, q=q)
    assert _chi2_vs_product(seqs, rows) > 0.01
    # identical q and p: every draft is accepted and the blocks are still p's
    same = _core.spec_simulate(rows, [], 50_000, 13, q=rows[:2].copy())
    assert _chi2_vs_product(same, rows) > 0.01


@pytest.mark.parametrize("rule", ["one-hot-residual", "no-residual"])
def test_wrong_rules_fail_with_a_sampling_proposer(rule: str) -> None:
    rows = _rows(3, 2, 4)
    seqs = _core.spec_simulate(rows, [], 200_000, 12, rule=rule, q=_rows(8, 1, 4))
    assert _chi2_vs_product(seqs, rows) < 1e-6


def test_simulation_arguments() -> None:
    rows = _rows(1, 2, 4)
    with pytest.raises(ValueError, match="k \\+ 1 rows"):
        _core.spec_simulate(rows, [0], 10, 1)
    with pytest.raises(ValueError, match="outside"):
        _core.spec_simulate(rows, [0, 9], 10, 1)
    with pytest.raises(ValueError, match="not both"):
        _core.spec_simulate(rows, [0, 1], 10, 1, q=rows[:2])
    with pytest.raises(ValueError, match="rule must be"):
        _core.spec_simulate(rows, [0, 1], 10, 1, rule="greedy")
