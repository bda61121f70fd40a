"""Dot kernels: the scalar reference is the exact dot of the dequantised weights rounded
once to float32; every SIMD path stays within a float32 rounding-error bound of it.

Notation: w = dequantised weights (float32, exactly as gguf.quants gives them), x = float32
activations, S = sum_i w_i x_i computed exactly (math.fsum of float64 products, which are
exact: 24 + 24 significant bits < 53), A = sum_i |w_i x_i|, u32 = 2^-24, u64 = 2^-53,
gamma_k(u) = k u / (1 - k u).

Reference (kernels_ref.h): products exact in double, n - 1 double additions, one rounding to
float, so  |ref - S| <= u32 |S| + (1 + u32) gamma_{n-1}(u64) A  (+ 2^-149 when the result is
a float32 subnormal). With n <= 4096 the second term is < 5e-13 A: the check is 1 ulp tight.

SIMD (any summation order, float32): by the standard bound for floating-point sums
(Higham, Accuracy and Stability of Numerical Algorithms, 2nd ed., eq. 4.4 / 3.5), a float32
evaluation of sum_i t_i in any order whose terms each pass through at most k roundings
satisfies  |fl - sum t| <= gamma_k(u32) sum_i |t_i|.  A kernel may factor the block scales
out (d * sum q x) and split off the format's offset (Q4_0's -8 d, Q4_K's -dmin m, Q6_K's
-32 d sc, ...) as a separate sum, so its terms are bounded by |x_i| (|w_i| + |o_i|), where o
is the per-element offset (the dequantisation of the block with its quant bits zeroed, which
is 0 for formats without an offset). Each term passes through at most n additions plus the
product, the scale and offset multiplies and the final combination: k = n + 4. Hence
    |simd - S| <= gamma_{n+4}(u32) M,   M = sum_i |x_i| (|w_i| + |o_i|),
and |simd - ref| <= that + the reference bound above. A kernel that quantised x (as ggml's
q8_K dot does) would not meet this bound: that is a different contract and needs its own.
"""

from __future__ import annotations

import math
import zlib

import numpy as np
import pytest

from ds4 import _core
from qdata import TYPES, block_geometry, gguf_dequantize, random_blocks, zero_quants

ISAS = _core.simd_available()
U32 = 2.0**-24
U64 = 2.0**-53
TINY = 2.0**-149  # float32 subnormal spacing


def gamma(k: int, u: float) -> float:
    return k * u / (1 - k * u)


def case(name: str, n_blocks: int, seed: str):
    rng = np.random.default_rng(zlib.crc32(f"{name}-{n_blocks}-{seed}".encode()))
    qk, _ = block_geometry(name)
    data = random_blocks(name, n_blocks, rng)
    n = n_blocks * qk
    x = (rng.standard_normal(n) * rng.choice([1e-3, 1.0, 30.0], n)).astype(np.float32)
    return data, n, x


def exact_dot(w: np.ndarray, x: np.ndarray) -> tuple[float, float]:
    prods = w.astype(np.float64) * x.astype(np.float64)  # exact
    return math.fsum(prods), math.fsum(np.abs(prods))


def ref_bound(s: float, a: float, n: int) -> float:
    return U32 * abs(s) + (1 + U32) * gamma(max(n - 1, 1), U64) * a + TINY


ROW_BLOCKS = [1, 3, 16]


@pytest.mark.parametrize("n_blocks", ROW_BLOCKS)
@pytest.mark.parametrize("name", TYPES)
def test_reference_dot_is_the_exact_dot_rounded(name, n_blocks):
    for seed in range(5):
        data, n, x = case(name, n_blocks, str(seed))
        w = gguf_dequantize(name, data, n)  # the oracle's weights, not ours
        s, a = exact_dot(w, x)
        got = _core.dot(name, data, x, "scalar")
        assert isinstance(got, float)
        assert abs(got - s) <= ref_bound(s, a, n), (seed, got, s, a)


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("n_blocks", ROW_BLOCKS)
@pytest.mark.parametrize("name", TYPES)
def test_isa_dot_within_float32_bound(name, n_blocks, isa):
    for seed in range(5):
        data, n, x = case(name, n_blocks, f"isa{seed}")
        w = gguf_dequantize(name, data, n)
        offs = gguf_dequantize(name, zero_quants(name, data), n)
        s, a = exact_dot(w, x)
        m = float(np.sum(np.abs(x.astype(np.float64)) * (np.abs(w.astype(np.float64)) + np.abs(offs.astype(np.float64)))))
        ref = _core.dot(name, data, x, "scalar")
        got = _core.dot(name, data, x, isa)
        bound = gamma(n + 4, U32) * m + ref_bound(s, a, n)
        assert abs(got - ref) <= bound, (isa, seed, got, ref, bound)


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("name", TYPES)
def test_dot_rows_equals_dot_of_each_row(name, isa):
    """The batched entry point runs the same kernel per row: results are identical, bit for bit
    (rows never change each other's reduction order)."""
    rows = 5
    qk, size = block_geometry(name)
    n = 2 * max(qk, 32)
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    data = random_blocks(name, rows * n // qk, rng)
    x = rng.standard_normal(n).astype(np.float32)
    y = _core.dot_rows(name, data, rows, x, isa)
    assert y.dtype == np.float32 and y.shape == (rows,)
    row = n // qk * size
    each = np.array([_core.dot(name, data[r * row:(r + 1) * row], x, isa) for r in range(rows)], dtype=np.float32)
    assert np.array_equal(y.view(np.uint32), each.view(np.uint32))


def test_active_isa_is_used_by_default():
    data, n, x = case("Q4_K", 4, "active")
    active = _core.simd_active()
    assert _core.dot("Q4_K", data, x) == _core.dot("Q4_K", data, x, active)


def test_dot_rejects_bad_arguments():
    data = b"\0" * 34
    x = np.zeros(32, dtype=np.float32)
    with pytest.raises(TypeError, match="float32"):
        _core.dot("Q8_0", data, x.astype(np.float64))
    with pytest.raises(ValueError, match="1-dimensional"):
        _core.dot("Q8_0", data, x.reshape(2, 16))
    with pytest.raises(ValueError, match="C-contiguous"):
        _core.dot("Q8_0", data, np.zeros(64, dtype=np.float32)[::2])
    with pytest.raises(ValueError, match="34 bytes"):
        _core.dot("Q8_0", data, np.zeros(64, dtype=np.float32))
    with pytest.raises(ValueError, match="multiple of Q8_0's block size"):
        _core.dot("Q8_0", data, np.zeros(31, dtype=np.float32))
    with pytest.raises(ValueError, match="less than 4 rows"):
        _core.dot_rows("Q8_0", data * 3, 4, x)
    with pytest.raises(ValueError, match="102 bytes"):
        _core.dot_rows("Q8_0", data * 3, 2, x)
    with pytest.raises(ValueError, match="n_rows must be >= 0"):
        _core.dot_rows("Q8_0", data, -1, x)
