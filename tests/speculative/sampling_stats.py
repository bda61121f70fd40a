"""What the sampled-speculation tests share: draws of the next 3 tokens, and the test comparing two
sets of draws."""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import stats

import ds4


def draws(s: ds4.Session, prompt: list[int], spec: ds4.Spec | None, n: int, seed0: int,
          **sampling: Any) -> tuple[np.ndarray, dict[str, int]]:
    """n draws of the 3 tokens after prompt (its last token fed with each draw, the rest once, in
    session s), seeds seed0, seed0 + 1, ...; and the drafted / accepted totals."""
    s.eval(prompt[:-1])
    snap = s.snapshot()
    out = np.empty((n, 3), dtype=np.int64)
    totals = {"n_drafted": 0, "n_accepted": 0}
    for i in range(n):
        s.restore(snap)
        g = s.generate(prompt[-1:], max_tokens=3, seed=seed0 + i, spec=spec, **sampling)
        out[i] = g.tokens
        for k in totals:
            totals[k] += g.stats[k]
    return out, totals


def two_sample_p(a: np.ndarray, b: np.ndarray) -> float:
    """p-value of a chi-squared test that rows of a and rows of b (draws of a few tokens) come from
    one joint distribution; cells seen fewer than 10 times in all are dropped."""
    codes = {tuple(r) for r in np.concatenate([a, b])}
    index = {c: i for i, c in enumerate(sorted(codes))}
    table = np.zeros((2, len(index)))
    for row, x in enumerate((a, b)):
        for r in x:
            table[row, index[tuple(r)]] += 1
    table = table[:, table.sum(0) >= 10]  # drop cells too rare for the test
    return float(stats.chi2_contingency(table)[1])
