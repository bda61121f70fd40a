"""The int16 prefill path (csrc/quant/int16_gemm.h): integer weight decoders, the int16 activation
quantiser and the GEMM, per format and ISA.

- Every ISA's kernels return the scalar reference's floats bit for bit (one lane arithmetic).
- Activations that are already integers of the format's range R with a group maximum of R are
  quantised exactly, so the result must equal sum_i w_i x_i up to float rounding alone: this pins
  every decoder's weights (sw q - mw, K-quant sub-block scales folded into q) to the reference
  dequantiser.
- For general activations the deviation from the exact product stays within the quantisation
  bound sum_i |w_i| da / 2 (da = the group's max |x| / R; groups of 32, or 256 for the K-quants),
  plus float rounding.
- A non-finite activation makes its row NaN, as the float path would.
- The legacy formats take the block lanes (block_lanes.h): the reference, the GEMM and the
  packed-row kernels equal that rule written out in numpy, for every shape of a row's last chunk.
"""

import numpy as np
import pytest

from ds4 import _core

from test_simd_kernels import SIMD_ISAS, SUPER_BLOCK_TYPES, block_size, random_row

I16_TYPES = ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "IQ4_NL", "MXFP4", *SUPER_BLOCK_TYPES]
# The block-lane formats (block_lanes.h), packed at load (csrc/quant/packed.h).
PACKED_TYPES = ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "IQ4_NL", "MXFP4"]
U = 2.0**-24


def _weights(t, n_rows, n, seed):
    rng = np.random.default_rng(seed)
    data = b"".join(random_row(t, n, rng, quantized=False) for _ in range(n_rows))
    w = _core.dequantize_raw(t, data, n_rows * n).reshape(n_rows, n).astype(np.float64)
    return data, w


def _n(t):
    return block_size(t) * (3 if block_size(t) == 256 else 21)  # 21: a partial group of 8 halves


def _group(t):
    """(activation group length, range R) of the format's int16 path (int16_gemm.h)."""
    return block_size(t), 16383 if t in ("Q6_K", "IQ4_XS") else 32767


def _float_slack(n, w, x):
    # h <= n / 16 + 24 roundings per product (lane fmas, scale products, the minimum term, hsum),
    # on terms no larger than |w| |x| plus the minimum's share, bounded by 4 |w| max|x|.
    return (n / 16 + 24) * U * (np.abs(x) @ np.abs(w).T + 4 * np.abs(w).sum(1)[None, :] * np.abs(x).max())


@pytest.mark.parametrize("isa", SIMD_ISAS)
@pytest.mark.parametrize("t", I16_TYPES)
@pytest.mark.parametrize("extra", [0, 1])  # legacy formats: an odd and an even number of spans (padded rows)
# weight rows: the AVX-512 K-quant GEMM's tiles of 3 pairs, 1 pair, and an odd last row
@pytest.mark.parametrize("rows", [13, 3])
def test_simd_equals_reference(t, isa, extra, rows):
    n = _n(t) + extra * block_size(t)
    data, _ = _weights(t, rows, n, 1)
    rng = np.random.default_rng(2)
    x = (rng.standard_normal((27, n)) * np.exp(rng.standard_normal(n))).astype(np.float32)
    x[3, : n // 2] = 0.0  # all-zero spans
    x[5] *= 1e-30  # tiny activations: scales near the subnormal range
    ref = _core.matmul_path(t, data, rows, x, "i16", isa="scalar")
    np.testing.assert_array_equal(_core.matmul_path(t, data, rows, x, "i16", isa=isa), ref)


@pytest.mark.parametrize("isa", SIMD_ISAS)
def test_mxfp4_subnormal_scales(isa):
    # E8M0 exponents 0 and 1 are the subnormal scales 2^-128 and 2^-127 (ggml's
    # ggml_e8m0_to_fp32_half): every kernel and the packed rows convert them as the reference does.
    n, rows = 672, 5
    rng = np.random.default_rng(21)
    raw = rng.integers(0, 256, (rows * n // 32, 17), dtype=np.uint8)
    raw[:, 0] = rng.choice([0, 1, 2, 3], len(raw))
    data = raw.tobytes()
    x = (rng.standard_normal((7, n)) * 1e30).astype(np.float32)
    ref = _core.matmul_path("MXFP4", data, rows, x, "i16", isa="scalar")
    w = _core.dequantize_raw("MXFP4", data, rows * n).reshape(rows, n).astype(np.float64)
    assert np.all(np.abs(w) < 2.0**-120) and np.count_nonzero(w) > 0
    assert np.all(np.isfinite(ref)) and np.count_nonzero(ref) > 0
    np.testing.assert_array_equal(_core.matmul_path("MXFP4", data, rows, x, "i16", isa=isa), ref)
    packed = _core.pack_weights("MXFP4", data, rows, n)
    for nx in (1, 7):
        np.testing.assert_array_equal(_core.matmul_path("MXFP4", packed, rows, x[:nx], "i16packed", isa=isa), ref[:nx])


@pytest.mark.parametrize("isa", SIMD_ISAS)
@pytest.mark.parametrize("t", [*SUPER_BLOCK_TYPES, *PACKED_TYPES])
@pytest.mark.parametrize("blocks", [0, 4, 3])  # block-lane formats: a last chunk of 8, of 4, in natural order
def test_fused_rows_equal_gemm(t, isa, blocks):
    # decode and verify blocks (the fused kernel: 1..4 rows per weight pass on AVX2, 1..8 and two
    # weight rows at a time on AVX-512; the block-lane formats' GGUF rows 1..6 per pass, AVX2's
    # kernel on every x86 ISA; more rows in passes of equal size) = prefill (the GEMM); 5 weight
    # rows: pairs and a last one alone
    if blocks and block_size(t) != 32:
        pytest.skip("K-quant rows have no chunks")
    n = 32 * (32 + blocks) if block_size(t) == 32 else _n(t)
    data, _ = _weights(t, 5, n, 8)
    rng = np.random.default_rng(9)
    x = (rng.standard_normal((33, n)) * np.exp(rng.standard_normal(n))).astype(np.float32)
    want = _core.matmul_path(t, data, 5, x, "i16", isa=isa)
    for nx in (1, 3, 4, 5, 8, 9, 12, 16, 17, 33):
        np.testing.assert_array_equal(_core.matmul_path(t, data, 5, x[:nx], "i16rows", isa=isa), want[:nx])


@pytest.mark.parametrize("t", I16_TYPES)
def test_integer_activations_are_exact(t):
    n = _n(t)
    data, w = _weights(t, 9, n, 3)
    rng = np.random.default_rng(4)
    length, rng_max = _group(t)
    x = rng.integers(-rng_max, rng_max + 1, size=(6, n)).astype(np.float32)
    x[:, ::length] = rng_max  # every group's maximum is R: da = 1, a = x exactly
    got = _core.matmul_path(t, data, 9, x, "i16").astype(np.float64)
    exact = x.astype(np.float64) @ w.T
    assert np.all(np.abs(got - exact) <= _float_slack(n, w, x))


@pytest.mark.parametrize("t", I16_TYPES)
def test_quantisation_bound(t):
    n = _n(t)
    data, w = _weights(t, 9, n, 5)
    rng = np.random.default_rng(6)
    x = (rng.standard_normal((7, n)) * np.exp(2 * rng.standard_normal(n))).astype(np.float32)
    got = _core.matmul_path(t, data, 9, x, "i16").astype(np.float64)
    exact = x.astype(np.float64) @ w.T
    length, rng_max = _group(t)
    da = np.repeat(np.abs(x).reshape(7, -1, length).max(axis=2) / rng_max, length, axis=1)
    bound = (da / 2) @ np.abs(w).T * (1 + 1e-5) + _float_slack(n, w, x)
    err = np.abs(got - exact)
    assert np.all(err <= bound)
    assert err.max() > 0  # the path really quantises (a float path would pass the bound trivially)


@pytest.mark.parametrize("t,n", [("Q8_0", 64), ("Q4_K", 256)])  # the block lanes' quantiser, the natural order's
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_activation_gives_nan(bad, t, n):
    data, _ = _weights(t, 3, n, 7)
    x = np.ones((2, n), dtype=np.float32)
    x[1, 40] = bad
    for isa in ["scalar"] + SIMD_ISAS:
        y = _core.matmul_path(t, data, 3, x, "i16", isa=isa)
        assert np.all(np.isfinite(y[0])) and np.all(np.isnan(y[1])), isa


def test_float_formats_have_no_int16_path():
    x = np.ones((1, 32), dtype=np.float32)
    with pytest.raises(ValueError, match="no int16 path"):
        _core.matmul_path("F32", np.ones(32, dtype=np.float32).tobytes(), 1, x, "i16")


# Packed weights (csrc/quant/packed.h): rows of the legacy formats in the block-lane order
# (block_lanes.h), each the size of its GGUF row. Row lengths: whole chunks of 8 blocks, a last
# chunk of 4, of 1..3 or 5..7 (natural order), and each alone.
LANE_ROWS = [32, 96, 128, 256, 576, 640, 672, 736, 1024]


@pytest.mark.parametrize("n", LANE_ROWS)
@pytest.mark.parametrize("t", PACKED_TYPES)
def test_pack_round_trip(t, n):
    data, _ = _weights(t, 3, n, 12)
    packed = _core.pack_weights(t, data, 3, n)
    assert len(packed) == len(data)
    assert (packed != data) == (n // 32 >= 4)  # 1..3 blocks stay in GGUF order
    assert _core.unpack_weights(t, packed, 3, n) == data


@pytest.mark.parametrize("isa", SIMD_ISAS)
@pytest.mark.parametrize("t", PACKED_TYPES)
def test_packed_rows_equal_gemm(t, isa):
    # activation rows in chunks of the kernels' rows per pass (AVX2 6, AVX-512 12) and a rest; 21 weight
    # rows: pairs (AVX-512) and a last one alone
    n = _n(t)
    data, _ = _weights(t, 21, n, 13)
    rng = np.random.default_rng(14)
    x = (rng.standard_normal((13, n)) * np.exp(rng.standard_normal(n))).astype(np.float32)
    packed = _core.pack_weights(t, data, 21, n)
    want = _core.matmul_path(t, data, 21, x, "i16", isa=isa)
    for nx in (1, 2, 6, 7, 12, 13):
        np.testing.assert_array_equal(_core.matmul_path(t, packed, 21, x[:nx], "i16packed", isa=isa), want[:nx])
    np.testing.assert_array_equal(_core.matmul_path(t, packed, 21, x, "i16packed_gemm", isa=isa), want)


def _fma32(a, b, c):
    # fma(a, b, c) in float32: the product of two floats is exact in float64; the sum then rounds
    # twice (to float64, to float32), which differs from one rounding only when the first lands
    # exactly on a float32 tie (~2^-29 per fma; the seeds here do not)
    return (a.astype(np.float64) * b.astype(np.float64) + c.astype(np.float64)).astype(np.float32)


def _tree(v):
    return ((v[..., 0] + v[..., 4]) + (v[..., 2] + v[..., 6])) + ((v[..., 1] + v[..., 5]) + (v[..., 3] + v[..., 7]))


def _block_lanes(t, data, n_rows, n, x):
    """The block-lane arithmetic of int16_gemm.h in numpy: activations quantised per block
    (round half to even), each block's integer sum exact, lane b % 8 takes
    fma(float(T_b), d_b * da_b) in block order (float32; a last 1..3 or 5..7 blocks: each lane
    its share of the block's products), then the AVX2 tree; Q4_1 / Q5_1 less
    the minimum term, c_j = fma(-m_b, xs_h, c_j) over the halves h = 2 b + i in order (lane h % 8),
    xs_h = da_b * the half's integer sum."""
    nb = n // 32
    blocks = np.frombuffer(data, dtype=np.uint8).reshape(n_rows, nb, len(data) // (n_rows * nb))
    if t == "MXFP4":  # 2^(e - 128): the code book is doubled (e >= 2 here)
        d = np.ldexp(np.float32(1), blocks[:, :, 0].astype(np.int32) - 128).astype(np.float32)
        m = np.zeros_like(d)
    else:
        scales = blocks[:, :, :4].copy().view(np.float16).astype(np.float32)
        d = scales[:, :, 0]
        m = scales[:, :, 1] if t in ("Q4_1", "Q5_1") else np.zeros_like(d)
    w = _core.dequantize_raw(t, data, n_rows * n).reshape(n_rows, nb, 32).astype(np.float64)
    q = np.rint((w - m[:, :, None]) / np.where(d == 0, 1, d)[:, :, None]).astype(np.int64)  # w = d q + m exactly
    xb = x.reshape(len(x), nb, 32).astype(np.float32)
    amax = np.abs(xb).max(axis=2)
    da = (amax / np.float32(32767)).astype(np.float32)
    inv = np.where(amax > 0, np.float32(32767) / np.where(amax > 0, amax, 1), 0).astype(np.float32)
    a = np.rint((xb * inv[:, :, None]).astype(np.float32)).astype(np.int64)
    T = np.einsum("obk,rbk->rob", q, a)  # exact
    # a last 1..3 or 5..7 blocks: the natural order's lane sums, lane j of elements 2j, 2j+1, 2j+16, 2j+17
    lane = np.arange(32) // 2 % 8
    S = np.stack([np.einsum("obk,rbk->rob", q[:, :, lane == j], a[:, :, lane == j]) for j in range(8)], axis=-1)
    natural = nb % 8 not in (0, 4)
    scale = (d[None, :, :] * da[:, None, :]).astype(np.float32)
    acc = np.zeros((len(x), n_rows, 8), dtype=np.float32)
    for b in range(nb):
        if natural and b >= nb // 8 * 8:
            acc = _fma32(S[:, :, b].astype(np.float32), scale[:, :, b, None], acc)
        else:
            acc[:, :, b % 8] = _fma32(T[:, :, b].astype(np.float32), scale[:, :, b], acc[:, :, b % 8])
    y = _tree(acc)
    if t not in ("Q4_1", "Q5_1"):
        return y
    xs = (da[:, :, None] * a.reshape(len(x), nb, 2, 16).sum(axis=3).astype(np.float32)).reshape(len(x), 2 * nb)
    c = np.zeros((len(x), n_rows, 8), dtype=np.float32)
    for h in range(2 * nb):
        c[:, :, h % 8] = _fma32(np.broadcast_to(-m[None, :, h // 2], c.shape[:2]), xs[:, h, None], c[:, :, h % 8])
    return y - _tree(c)


@pytest.mark.parametrize("isa", ["scalar", *SIMD_ISAS])
@pytest.mark.parametrize("n", LANE_ROWS)
@pytest.mark.parametrize("t", PACKED_TYPES)
def test_block_lanes(t, n, isa):
    # The reference, the GEMM and the packed rows kernel against the rule written out in numpy.
    data, _ = _weights(t, 9, n, 16)
    rng = np.random.default_rng(17)
    x = (rng.standard_normal((8, n)) * np.exp(rng.standard_normal(n))).astype(np.float32)
    want = _block_lanes(t, data, 9, n, x)
    np.testing.assert_array_equal(_core.matmul_path(t, data, 9, x, "i16", isa=isa), want)
    packed = _core.pack_weights(t, data, 9, n)
    np.testing.assert_array_equal(_core.matmul_path(t, packed, 9, x, "i16packed_gemm", isa=isa), want)
    if isa != "scalar":
        np.testing.assert_array_equal(_core.matmul_path(t, packed, 9, x, "i16packed", isa=isa), want)


def test_pack_rejects_other_formats():
    data, _ = _weights("Q4_K", 8, 256, 1)
    with pytest.raises(ValueError, match="no packed layout"):
        _core.pack_weights("Q4_K", data, 8, 256)
    with pytest.raises(ValueError, match="bytes"):
        _core.pack_weights("Q5_0", b"\0" * 10, 8, 64)
