"""The greedy head's int8 screen (quant/head_screen.h): the AVX-512 VBMI kernel against the scalar
reference, the row norms, and the bound the screened head relies on:
|screen(w, x) - w . x| <= ||w|| ||x - s|| for every row (the rounding allowance aside)."""

from __future__ import annotations

import numpy as np
import pytest
import qdata

from ds4 import _core


def _has_kernel() -> bool:
    data = _core.pack_weights("Q8_0", qdata.random_blocks("Q8_0", 8, np.random.default_rng(0)), 1, 256)
    try:
        _core.head_screen(data, 1, np.ones((1, 256), np.float32))
    except ValueError:
        return False
    return True


def _case(n: int, n_out: int, seed: int) -> tuple[bytes, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    data = qdata.random_blocks("Q8_0", n_out * n // 32, rng)
    w = qdata.gguf_dequantize("Q8_0", data, n_out * n).reshape(n_out, n).astype(np.float64)
    # activations with the outlier dimensions of a final norm
    x = rng.standard_normal((13, n)) * np.where(rng.random(n) < 0.05, 40.0, 1.0)
    return _core.pack_weights("Q8_0", data, n_out, n), w, x.astype(np.float32)


@pytest.mark.parametrize("n", [256, 384, 640, 1024])
def test_reference_bound_and_norms(n: int) -> None:
    packed, w, x = _case(n, 45, n)
    scores, norms, err = _core.head_screen(packed, len(w), x, reference=True)
    exact = x.astype(np.float64) @ w.T
    true_norms = np.linalg.norm(w, axis=1)
    assert np.all(norms >= true_norms) and np.all(norms <= true_norms * (1 + 1e-5))
    q = np.abs(scores - exact) / (norms[None] * err[:, None])
    assert q.max() < 1.0
    assert q.max() > 0.01  # the bound is not vacuous: real errors reach a fair share of it


@pytest.mark.skipif(not _has_kernel(), reason="no AVX-512 VNNI + VBMI on this CPU")
@pytest.mark.parametrize("n", [256, 384, 640, 1024])
@pytest.mark.parametrize("n_out", [3, 8, 45])  # the kernel's weight streams: none, runs of 2, runs of 11 + 1 left
def test_kernel_matches_reference(n: int, n_out: int) -> None:
    packed, w, x = _case(n, n_out, n + n_out)
    got, norms, err = _core.head_screen(packed, len(w), x)
    ref, norms_ref, err_ref = _core.head_screen(packed, len(w), x, reference=True)
    scale = (norms[None] * np.linalg.norm(x.astype(np.float64), axis=1)[:, None])
    assert (np.abs(got - ref) / scale).max() < 1e-6  # float sums in another order
    true_norms = np.linalg.norm(w, axis=1)
    assert np.all(norms >= true_norms) and np.all(norms <= true_norms * (1 + 1e-5))
    np.testing.assert_allclose(norms, norms_ref, rtol=1e-6)
    np.testing.assert_array_equal(err, err_ref)


def test_refuses_what_it_cannot_serve() -> None:
    packed, w, x = _case(256, 4, 3)
    with pytest.raises(ValueError, match="0 or 4 blocks"):  # 10 blocks: a last chunk of 2
        _core.head_screen(_core.pack_weights("Q8_0", qdata.random_blocks("Q8_0", 40, np.random.default_rng(1)), 4, 320),
                          4, np.ones((1, 320), np.float32), reference=True)
    bad = x.copy()
    bad[0, 3] = np.nan
    with pytest.raises(ValueError, match="finite"):
        _core.head_screen(packed, 4, bad, reference=True)


@pytest.mark.parametrize("m", [1, 15, 16, 17, 240, 250])
def test_filter_kernel_matches_the_reference(m: int) -> None:
    """The unit filter (the running floor lo and the rows whose upper bound reaches it) against its
    reference: NaN scores never raise the floor and are always kept; rows tied with the floor kept;
    with a margin, every row whose upper bound reaches the floor minus the margin (a sampling head's
    shortlist)."""
    rng = np.random.default_rng(m)
    y = (rng.standard_normal(m) * 4).astype(np.float32)
    y[rng.random(m) < 0.05] = np.nan
    norm = rng.uniform(0.5, 1.5, m).astype(np.float32)
    for b, lo, margin, floor in [(0.5, -np.inf, 0.0, -np.inf), (0.0, -np.inf, 0.0, -np.inf), (0.25, 3.0, 0.0, -np.inf),
                                 (2.0, 100.0, 0.0, -np.inf), (0.5, -np.inf, 3.0, -np.inf), (0.25, 3.0, 7.5, -np.inf),
                                 (0.25, 3.0, 7.5, 1.0), (0.5, -np.inf, 3.0, 50.0)]:
        want = _core.head_screen_filter(y, norm, b, lo, margin, floor, reference=True)
        got = _core.head_screen_filter(y, norm, b, lo, margin, floor)
        assert got[0] == want[0]
        np.testing.assert_array_equal(got[1], want[1])
        np.testing.assert_array_equal(got[2], want[2])
        # fma in float32: the float64 product is exact, its sum with y rounds once at these magnitudes
        low = (y.astype(np.float64) - norm.astype(np.float64) * b).astype(np.float32)
        up = (y.astype(np.float64) + norm.astype(np.float64) * b).astype(np.float32)
        finite = ~np.isnan(y)
        assert want[0] == np.float32(max(lo, float(np.max(low[finite]))) if finite.any() else lo)
        cut = max(np.float32(want[0] - np.float32(margin)), np.float32(floor))
        np.testing.assert_array_equal(want[1], np.flatnonzero(~(up < cut)))
        np.testing.assert_array_equal(want[2], up[want[1]])
