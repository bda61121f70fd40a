"""The CPU backend's row ops (softmax of attention scores, gated activations, the sampler's
tempered exponentials) on every ISA against
float64 numpy, and their batch invariance: an element's result does not depend on where it sits
in a row (vector body or masked tail)."""

import numpy as np
import pytest

from ds4 import _core

ISAS = [i for i in _core.simd_available() if i != "neon"] + (["neon"] if "neon" in _core.simd_available() else [])


def ref_softmax(x, scale, cap):
    v = x.astype(np.float64) * scale
    if cap > 0:
        v = np.tanh(v / cap) * cap
    e = np.exp(v - v.max())
    return e / e.sum()


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("cap", [0.0, 50.0])
def test_softmax(isa, cap):
    rng = np.random.default_rng(1)
    for n in list(range(1, 20)) + [64, 257, 1000]:
        x = (rng.standard_normal(n) * 8).astype(np.float32)
        got, mx, total = _core.softmax(x, 0.125, cap, isa=isa)
        np.testing.assert_allclose(got, ref_softmax(x, 0.125, cap), rtol=2e-6, atol=1e-12)
        assert got.sum() == pytest.approx(1.0, abs=1e-6)
        v = x.astype(np.float64) * 0.125
        v = np.tanh(v / cap) * cap if cap > 0 else v
        assert mx == pytest.approx(v.max(), rel=1e-6)
        assert total == pytest.approx(np.exp(v - v.max()).sum(), rel=2e-6)
    # extreme spreads: underflowing tails are exactly zero, never NaN
    x = np.array([0.0, -200.0, -1e4, 30.0, 88.0, -88.0, 100.0], np.float32)
    got = _core.softmax(x, 1.0, 0.0, isa=isa)[0]
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, ref_softmax(x, 1.0, 0.0), rtol=2e-6, atol=1e-30)


def ref_glu(g, u, act):
    g64 = g.astype(np.float64)
    if act == "silu":
        a = g64 / (1 + np.exp(-g64))
    else:
        a = 0.5 * g64 * (1 + np.tanh(np.sqrt(2 / np.pi) * (g64 + 0.044715 * g64**3)))
    return a * u


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("act", ["silu", "gelu_tanh"])
def test_glu(isa, act):
    rng = np.random.default_rng(2)
    g = np.concatenate([rng.standard_normal(997) * 4, [0.0, -0.0, 1e-30, -100.0, 100.0, 9.5, -9.5]]).astype(np.float32)
    u = rng.standard_normal(g.size).astype(np.float32)
    got = _core.glu(g, u, act, isa=isa)
    ref = ref_glu(g, u, act)
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6 * np.abs(u).max())
    # every prefix and offset gives each element the same bits (body / tail invariance)
    for start, stop in [(0, 5), (3, 20), (1, 999), (7, 8)]:
        np.testing.assert_array_equal(_core.glu(g[start:stop], u[start:stop], act, isa=isa), got[start:stop])


@pytest.mark.parametrize("isa", ISAS)
def test_argmax_row(isa):
    rng = np.random.default_rng(3)
    for n in list(range(1, 20)) + [240, 1001]:
        v = rng.standard_normal(n).astype(np.float32)
        i, mx, finite = _core.argmax_row(v, isa=isa)
        assert (i, mx, finite) == (int(np.argmax(v)), float(v.max()), True)
        if n > 3:  # ties: the first index wins
            v[n // 2] = v[n - 1] = v.max() + 1
            assert _core.argmax_row(v, isa=isa)[0] == n // 2
    v = np.full(13, -np.inf, np.float32)
    assert _core.argmax_row(v, isa=isa) == (0, -np.inf, True)
    for bad in (np.nan, np.inf):
        for pos in (0, 7, 12):
            v = np.zeros(13, np.float32)
            v[pos] = bad
            assert _core.argmax_row(v, isa=isa)[2] is False


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("t", [0.7, 1.0, 2.5])
def test_exp_scaled(isa, t):
    rng = np.random.default_rng(3)
    x = (rng.standard_normal(1003) * 6).astype(np.float32)
    x[[5, 500, 1002]] = -np.inf  # banned tokens weigh exactly 0
    mx = float(x.max())
    got = _core.exp_scaled(x, mx, t, isa=isa)
    # the argument is float arithmetic by contract (as the sampler's std::exp(float) was)
    with np.errstate(invalid="ignore"):
        arg = (x - np.float32(mx)) / np.float32(t)
    ref = np.exp(arg.astype(np.float64))
    np.testing.assert_allclose(got, ref, rtol=2e-6, atol=2e-38)
    assert got[[5, 500, 1002]].tolist() == [0.0, 0.0, 0.0]
    assert got.max() == 1.0
    # body / tail invariance
    for start, stop in [(0, 5), (3, 20), (1, 999)]:
        np.testing.assert_array_equal(_core.exp_scaled(x[start:stop], mx, t, isa=isa), got[start:stop])
    # below a float's normal range: denormals, then exactly 0, as std::exp
    tail = _core.exp_scaled(np.array([0, -90, -100, -103, -110, -1e4], np.float32), 0.0, 1.0, isa=isa)
    assert (tail[1:4] > 0).all() and (tail[1:4] < 1.2e-38).all() and tail[4:].tolist() == [0.0, 0.0]


@pytest.mark.parametrize("isa", ISAS)
def test_to_f16(isa):
    """IEEE halves rounded to nearest even (numpy's float16 is the oracle), on every ISA the
    scalar conversion's bits, NaN payloads included; body and tail alike."""
    rng = np.random.default_rng(4)
    tie = np.float32(1.0 + 2.0**-11)  # halfway between two halves: to the even one
    specials = np.array([0.0, -0.0, 1.0, -2.5, tie, -tie, 65504.0, 65519.99, 65520.0, 1e6, -1e6, np.inf, -np.inf,
                         2.0**-14, 2.0**-24, 2.0**-25, 1.5 * 2.0**-25, 2.0**-26, 3e-8, -6e-8, 1e-45, 6.1e-5], np.float32)
    x = np.concatenate([specials, (rng.standard_normal(997) * 10.0 ** rng.integers(-8, 6, 997)).astype(np.float32)])
    got = _core.to_f16(x, isa=isa)
    with np.errstate(over="ignore"):  # the overflows to inf are part of the test
        np.testing.assert_array_equal(got, x.astype(np.float16).view(np.uint16))
    for start, stop in [(0, 3), (5, 20), (1, 1000)]:
        np.testing.assert_array_equal(_core.to_f16(x[start:stop], isa=isa), got[start:stop])
    nans = np.array([0x7FC00000, 0xFFC00001, 0x7F800001, 0x7FBFFFFF, 0x7FFFE000], np.uint32).view(np.float32)
    np.testing.assert_array_equal(_core.to_f16(nans, isa=isa), _core.to_f16(nans, isa="scalar"))
    assert ((_core.to_f16(nans, isa=isa) & 0x7E00) == 0x7E00).all()  # quiet NaNs


@pytest.mark.skipif("avx512" not in _core.simd_available(), reason="no AVX-512 on this CPU")
@pytest.mark.parametrize("n", [1, 7, 8, 9, 15, 16, 17, 24, 31, 32, 33, 100, 1000])
def test_avx512_gives_the_avx2_floats(n):
    """The AVX-512 row ops are the AVX2 ones 16 lanes at a time: the same bits, NaN and inf
    included, for every length (a zmm's halves against the AVX2 kernels' 8-element steps)."""
    rng = np.random.default_rng(n)
    x = (rng.standard_normal(n) * 8).astype(np.float32)
    u = rng.standard_normal(n).astype(np.float32)
    rows = [x]
    for pos, bad in [(0, np.nan), (n - 1, np.nan), (n // 2, np.nan), (n // 3, np.inf)]:
        rows.append(x.copy())
        rows[-1][pos] = bad  # vmaxps keeps its second operand on a NaN: the order of steps shows
    for v in rows:
        for cap in (0.0, 30.0):
            a, b = _core.softmax(v, 0.25, cap, isa="avx512"), _core.softmax(v, 0.25, cap, isa="avx2")
            np.testing.assert_array_equal(a[0], b[0])
            np.testing.assert_array_equal(np.float32(a[1:]).view(np.uint32), np.float32(b[1:]).view(np.uint32))
        for act in ("silu", "gelu_tanh"):
            np.testing.assert_array_equal(_core.glu(v, u, act, isa="avx512"), _core.glu(v, u, act, isa="avx2"))
        i, mx, fin = _core.argmax_row(v, isa="avx512")
        j, my, fjn = _core.argmax_row(v, isa="avx2")
        assert fin == fjn and np.float32(mx).view(np.uint32) == np.float32(my).view(np.uint32)
        if fin:
            assert i == j
        np.testing.assert_array_equal(_core.to_f16(v, isa="avx512"), _core.to_f16(v, isa="avx2"))
    far = x - np.float32(60.0) * (np.arange(n) % 3).astype(np.float32)  # lanes below exp's clamp
    for t in (0.7, 1.0):
        np.testing.assert_array_equal(_core.exp_scaled(far, float(far.max()), t, isa="avx512"),
                                      _core.exp_scaled(far, float(far.max()), t, isa="avx2"))
