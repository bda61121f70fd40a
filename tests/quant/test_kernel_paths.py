"""The three kernel paths a matmul can take agree bit for bit, per format and per ISA.

``dot`` (one call per weight row x activation row), ``dot_rows`` (one weight row against up to
kDotRowsMax activation rows, every chunk size 1..4 exercised) and ``gemm_groups`` (a tile of weight
rows decoded once, then every activation row) must return identical floats: this is what makes a
verify block or a prefill produce exactly the logits of token-by-token decoding (batch invariance).
The dot kernels themselves are checked against the scalar reference in test_simd_kernels.py.
"""

import numpy as np
import pytest

from ds4 import _core

from test_simd_kernels import SIMD_ISAS, SIMD_TYPES, block_size, random_row

ISAS = ["scalar"] + SIMD_ISAS


def _case(t, n_rows, nx, seed, n=None):
    rng = np.random.default_rng(seed)
    n = n or (block_size(t) * 3 if block_size(t) > 1 else 77)
    data = b"".join(random_row(t, n, rng, quantized=False) for _ in range(n_rows))
    x = rng.standard_normal((nx, n)).astype(np.float32)
    x[0, ::3] *= 1e4  # rows of very different magnitudes share a call
    return data, x


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("t", SIMD_TYPES)
def test_rows_match_dot(t, isa):
    data, x = _case(t, 7, 11, 1)
    ref = _core.matmul_path(t, data, 7, x, "dot", isa=isa)
    try:
        got = _core.matmul_path(t, data, 7, x, "rows", isa=isa)
    except ValueError:
        pytest.skip(f"{t} has no dot_rows on {isa}")
    np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("t", SIMD_TYPES)
def test_gemm_matches_dot(t, isa):
    for n_rows, nx, seed in [(1, 1, 2), (5, 3, 3), (13, 17, 4), (2, 40, 5)]:
        data, x = _case(t, n_rows, nx, seed)
        ref = _core.matmul_path(t, data, n_rows, x, "dot", isa=isa)
        try:
            got = _core.matmul_path(t, data, n_rows, x, "gemm", isa=isa)
        except ValueError:
            pytest.skip(f"{t} has no gemm_groups on {isa}")
        np.testing.assert_array_equal(got, ref, err_msg=f"{n_rows} weight rows x {nx} rows")


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("t", SIMD_TYPES)
def test_unit_rows_give_the_weights(t, isa):
    """Against the unit activation rows every path returns the weights themselves, equal to the
    scalar reference's dequantised values: each kernel forms every weight exactly as the reference
    does (only its sums round, and a sum of one product and zeros is exact)."""
    n_rows = 3
    data, x = _case(t, n_rows, 1, 7)
    n = x.shape[1]
    w = _core.dequantize_raw(t, data, n_rows * n, isa="scalar").reshape(n_rows, n)
    eye = np.eye(n, dtype=np.float32)
    for path in ("dot", "rows", "gemm"):
        try:
            got = _core.matmul_path(t, data, n_rows, eye, path, isa=isa)
        except ValueError:
            continue  # no such path for this format on this ISA
        np.testing.assert_array_equal(got, w.T, err_msg=path)


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("t", SIMD_TYPES)
def test_paths_long_rows(t, isa):
    """Rows long enough for several chunks of blocks plus a remainder (19 blocks; 1013 floats: a
    partial last group), so chunked scale decoding and the zero-padded tail agree across paths."""
    n = block_size(t) * 19 if block_size(t) > 1 else 1013
    data, x = _case(t, 3, 6, 7, n=n)
    ref = _core.matmul_path(t, data, 3, x, "dot", isa=isa)
    for path in ("rows", "gemm"):
        try:
            got = _core.matmul_path(t, data, 3, x, path, isa=isa)
        except ValueError:
            continue
        np.testing.assert_array_equal(got, ref, err_msg=path)


def test_path_errors():
    data, x = _case("Q8_0", 2, 2, 6)
    with pytest.raises(ValueError, match="path must be"):
        _core.matmul_path("Q8_0", data, 2, x, "fast")
    with pytest.raises(TypeError, match="2-D float32"):
        _core.matmul_path("Q8_0", data, 2, x[0], "dot")
    with pytest.raises(ValueError, match="bytes"):
        _core.matmul_path("Q8_0", data[:-1], 2, x, "dot")
