"""The statistics the sampled-speculation tests share."""

from __future__ import annotations

import numpy as np
from scipy import stats


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
