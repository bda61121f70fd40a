"""Conformance of a backend's ops (csrc/backend/backend.h) against numpy references, on every
ISA the machine has: the suite a GPU backend will run too. Each op is also checked for the
batch invariance the contract states (a row's result does not depend on the rows with it)."""

from __future__ import annotations

import math
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from ds4 import _core

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "quant"))
import qdata  # noqa: E402  (tests/quant: random blocks of every format, gguf's dequantisation)

ISAS = list(_core.simd_available())
OPS = ["matmul", "argmax", "get_rows", "rms_norm", "rope", "attention", "store_kv", "add", "mul", "glu", "softcap",
       "copy", "scatter_add", "ssm_conv", "gated_delta"]


@pytest.fixture(params=ISAS)
def be(request: pytest.FixtureRequest) -> Iterator[_core.Backend]:
    before = _core.simd_active()
    _core.set_simd(request.param)
    try:
        yield _core.Backend("cpu", threads=2)
    finally:
        _core.set_simd(before)


def rel(got: np.ndarray, ref: np.ndarray) -> float:
    return float(np.abs(got.astype(np.float64) - ref).max() / max(np.abs(ref).max(), 1e-30))


def test_every_op_is_supported() -> None:
    b = _core.Backend("cpu")
    for op in OPS:
        assert b.supports_op(op)
    with pytest.raises(ValueError, match="unknown op"):
        b.supports_op("conv3d")
    with pytest.raises(ValueError, match="not available"):
        _core.Backend("cuda")


@pytest.mark.parametrize("type_name", qdata.TYPES)
def test_matmul_and_argmax(be: _core.Backend, type_name: str) -> None:
    rng = np.random.default_rng(1)
    qk, _ = qdata.block_geometry(type_name)
    n_in = max(256, qk)
    n_out = 40
    data = qdata.random_blocks(type_name, n_out * n_in // qk, rng)
    w = qdata.gguf_dequantize(type_name, data, n_out * n_in).reshape(n_out, n_in).astype(np.float64)
    x = rng.standard_normal((9, n_in)).astype(np.float32)
    ref = x.astype(np.float64) @ w.T
    y = be.matmul(type_name, data, n_out, x)
    assert rel(y, ref) < 1e-5, type_name
    # batch invariance: each row alone gives the same bits
    for r in (0, 4, 8):
        np.testing.assert_array_equal(be.matmul(type_name, data, n_out, x[r : r + 1])[0], y[r])
    # the fused head picks from exactly what matmul writes (lowest index on ties)
    np.testing.assert_array_equal(be.argmax(type_name, data, n_out, x), y.argmax(axis=1))
    capped = be.softcap(y, 3.0)  # what the head writes with a final soft-cap
    np.testing.assert_array_equal(be.argmax(type_name, data, n_out, x, 3.0), capped.argmax(axis=1))


@pytest.mark.parametrize("type_name", ["Q4_0", "Q8_0", "Q4_K", "Q6_K", "Q5_0", "IQ4_NL", "MXFP4", "IQ2_XXS", "IQ2_XS",
                                       "IQ2_S", "IQ3_XXS", "IQ3_S", "IQ1_S", "IQ1_M", "TQ1_0", "TQ2_0"])
def test_matmul_int16_activations(type_name: str) -> None:
    rng = np.random.default_rng(2)
    qk, _ = qdata.block_geometry(type_name)
    n_in, n_out = 512, 48
    data = qdata.random_blocks(type_name, n_out * n_in // qk, rng)
    w = qdata.gguf_dequantize(type_name, data, n_out * n_in).reshape(n_out, n_in).astype(np.float64)
    x = rng.standard_normal((5, n_in)).astype(np.float32)
    b = _core.Backend("cpu", threads=2, int16=True)
    for pack in (False, True):
        y = b.matmul(type_name, data, n_out, x, pack=pack)
        assert rel(y, x.astype(np.float64) @ w.T) < 2e-3  # activations quantised to 16 bits
        np.testing.assert_array_equal(b.matmul(type_name, data, n_out, x[2:3], pack=pack)[0], y[2])


@pytest.mark.parametrize("type_name", ["Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "IQ4_XS", "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ3_XXS",
                                       "IQ3_S", "IQ1_S", "IQ1_M", "TQ1_0", "TQ2_0"])
def test_int16_pass_sizes_agree(be: _core.Backend, type_name: str) -> None:  # be: each ISA
    """A K-quant matrix through every pass size of the int16 path (the rows kernels, on AVX-512 over
    four weight streams up to 6 rows, the GEMM over few_rows_tile weight rows up to 48 activation
    rows, over 48-row tiles beyond; 53 weight rows: a unit's last tile short, rows left over from
    the streams and an odd last row): each row bit for bit the 64-row pass's."""
    rng = np.random.default_rng(12)
    n_in, n_out = 512, 53
    data = qdata.random_blocks(type_name, n_out * n_in // 256, rng)
    x = rng.standard_normal((64, n_in)).astype(np.float32)
    b = _core.Backend("cpu", threads=2, int16=True)
    ref = b.matmul(type_name, data, n_out, x)
    for m in (1, 6, 8, 13, 30, 32, 48, 49):
        np.testing.assert_array_equal(b.matmul(type_name, data, n_out, x[:m]), ref[:m], err_msg=f"{m} rows")


@pytest.mark.parametrize("pack", [False, True])
@pytest.mark.parametrize("int16", [False, True])
def test_matmuls_of_one_input_are_each_matmul(pack: bool, int16: bool) -> None:
    """Several weights on one input (a layer's q, k, v): the int16 activations quantised once for
    the weights whose quantiser gives the same rows, again where it changes (Q4_K's groups of 256,
    then Q5_0's block lanes): each result bit for bit its own matmul's."""
    rng = np.random.default_rng(11)
    n_in = 512
    types, n_outs = ["Q5_0", "Q5_0", "Q4_K", "Q8_0", "Q5_0", "Q6_K"], [40, 24, 32, 16, 8, 24]
    data = [qdata.random_blocks(t, m * n_in // qdata.block_geometry(t)[0], rng) for t, m in zip(types, n_outs)]
    x = rng.standard_normal((6, n_in)).astype(np.float32)
    b = _core.Backend("cpu", threads=2, int16=int16)
    ys = b.matmuls(types, data, n_outs, x, pack=pack)
    for t, d, m, y in zip(types, data, n_outs, ys):
        np.testing.assert_array_equal(y, b.matmul(t, d, m, x, pack=pack))
    with pytest.raises(ValueError, match="one type, data and n_out per weight"):
        b.matmuls(types, data[:2], n_outs, x)


@pytest.mark.parametrize("type_name,pack", [("Q4_K", False), ("Q8_0", True), ("Q5_0", True)])
def test_matmul_on_a_stack(type_name: str, pack: bool) -> None:
    """A 3-D weight (routed experts): matrix e of the stack, packed or not, is that matrix alone."""
    rng = np.random.default_rng(10)
    qk, _ = qdata.block_geometry(type_name)
    n_in, n_out, n_mat = 256, 24, 3
    mats = [qdata.random_blocks(type_name, n_out * n_in // qk, rng) for _ in range(n_mat)]
    x = rng.standard_normal((3, n_in)).astype(np.float32)
    b = _core.Backend("cpu", threads=2, int16=True)
    for e in range(n_mat):
        alone = b.matmul(type_name, mats[e], n_out, x, pack=pack)
        np.testing.assert_array_equal(b.matmul(type_name, b"".join(mats), n_out, x, pack=pack, n_mat=n_mat, mat=e), alone)
    with pytest.raises(ValueError, match="out of the stack"):
        b.matmul(type_name, b"".join(mats), n_out, x, n_mat=n_mat, mat=n_mat)


def test_get_rows(be: _core.Backend) -> None:
    rng = np.random.default_rng(3)
    for type_name in ("F32", "F16", "Q8_0", "Q4_K", "Q6_K"):
        qk, _ = qdata.block_geometry(type_name)
        n_in, n_out = 256, 12
        data = qdata.random_blocks(type_name, n_out * n_in // qk, rng)
        w = qdata.gguf_dequantize(type_name, data, n_out * n_in).reshape(n_out, n_in)
        ids = np.array([3, 0, 11, 3], dtype=np.int32)
        np.testing.assert_array_equal(be.get_rows(type_name, data, n_in, n_out, ids), w[ids])


def test_rms_norm(be: _core.Backend) -> None:
    rng = np.random.default_rng(4)
    x = rng.standard_normal((7, 640)).astype(np.float32) * 3
    w = rng.standard_normal(640).astype(np.float32)
    x64 = x.astype(np.float64)
    ref = x64 / np.sqrt((x64**2).mean(axis=1, keepdims=True) + 1e-6)
    assert rel(be.rms_norm(x, None, 1e-6), ref) < 1e-6
    y = be.rms_norm(x, w, 1e-6)
    assert rel(y, ref * w) < 1e-6
    np.testing.assert_array_equal(be.rms_norm(x[3:4], w, 1e-6)[0], y[3])


def rope_ref(x: np.ndarray, n_head: int, hd: int, pos: np.ndarray, mode: str, n_dims: int, base: float,
             scale: float, factors: np.ndarray | None) -> np.ndarray:
    out = x.astype(np.float64).reshape(len(pos), n_head, hd).copy()
    half = n_dims // 2
    # inverse frequencies and angles rounded to float32, as transformers computes them (at
    # position 30000 that moves an angle by ~1e-3 rad; the models were trained with it)
    inv = np.array([1.0 / math.pow(base, 2.0 * i / n_dims) for i in range(half)])
    if factors is not None:
        inv = inv / factors
    inv = inv.astype(np.float32)
    ang = ((pos * np.float32(scale)).astype(np.float32)[:, None] * inv[None, :]).astype(np.float64)  # [n, half]
    c, s = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    if mode == "neox":
        a, b = out[..., :half].copy(), out[..., half:n_dims].copy()
        out[..., :half], out[..., half:n_dims] = a * c - b * s, a * s + b * c
    else:
        a, b = out[..., 0:n_dims:2].copy(), out[..., 1:n_dims:2].copy()
        out[..., 0:n_dims:2], out[..., 1:n_dims:2] = a * c - b * s, a * s + b * c
    return out.reshape(len(pos), n_head * hd)


@pytest.mark.parametrize("mode", ["normal", "neox"])
@pytest.mark.parametrize("n_dims,scale,with_factors", [(64, 1.0, False), (32, 0.25, False), (64, 1.0, True)])
def test_rope(be: _core.Backend, mode: str, n_dims: int, scale: float, with_factors: bool) -> None:
    rng = np.random.default_rng(5)
    n_head, hd = 4, 64
    pos = np.array([0, 1, 7, 100, 4095, 30000], dtype=np.int32)
    x = rng.standard_normal((len(pos), n_head * hd)).astype(np.float32)
    factors = rng.uniform(1, 8, n_dims // 2).astype(np.float32) if with_factors else None
    y = be.rope(x, n_head, hd, pos, mode, n_dims, 10000.0, scale, factors)
    assert np.abs(y - rope_ref(x, n_head, hd, pos, mode, n_dims, 10000.0, scale, factors)).max() < 1e-5
    if n_dims < hd:  # the dimensions past n_dims are not rotated
        ys, xs = y.reshape(len(pos), n_head, hd), x.reshape(len(pos), n_head, hd)
        np.testing.assert_array_equal(ys[..., n_dims:], xs[..., n_dims:])
    np.testing.assert_array_equal(be.rope(x[3:4], n_head, hd, pos[3:4], mode, n_dims, 10000.0, scale, factors)[0], y[3])


def attention_ref(q, pos, last, k, v, n_head, n_head_kv, hd, scale, cap, window):
    out = np.zeros((len(pos), n_head * hd))
    g = n_head // n_head_kv
    for r in range(len(pos)):
        lo = max(0, pos[r] - window + 1) if window else 0
        for h in range(n_head):
            kh = k[lo : last[r] + 1, (h // g) * hd : (h // g + 1) * hd].astype(np.float64)
            vh = v[lo : last[r] + 1, (h // g) * hd : (h // g + 1) * hd].astype(np.float64)
            s = kh @ q[r, h * hd : (h + 1) * hd].astype(np.float64) * scale
            if cap:
                s = cap * np.tanh(s / cap)
            p = np.exp(s - s.max())
            out[r, h * hd : (h + 1) * hd] = (p / p.sum()) @ vh
    return out


@pytest.mark.parametrize("kv_type", ["f32", "f16"])
@pytest.mark.parametrize("mode,window,cap", [("causal", 0, 0.0), ("causal", 50, 0.0), ("block", 0, 0.0),
                                              ("block", 50, 20.0), ("causal", 0, 20.0)])
def test_attention(be: _core.Backend, kv_type: str, mode: str, window: int, cap: float) -> None:
    rng = np.random.default_rng(6)
    n_head, n_head_kv, hd = 8, 2, 64
    n_past, n = 300, 6  # keys over three 128-position chunks
    k = rng.standard_normal((n_past + n, n_head_kv * hd)).astype(np.float32)
    v = rng.standard_normal((n_past + n, n_head_kv * hd)).astype(np.float32)
    q = rng.standard_normal((n, n_head * hd)).astype(np.float32)
    pos = np.arange(n_past, n_past + n, dtype=np.int32)
    last = pos.copy() if mode == "causal" else np.full(n, n_past + n - 1, dtype=np.int32)
    if kv_type == "f16":  # the reference reads what the cache holds
        k, v = k.astype(np.float16).astype(np.float32), v.astype(np.float16).astype(np.float32)
    out = be.attention(q, pos, last, k, v, kv_type, n_head, n_head_kv, hd, 0.125, cap, window)
    ref = attention_ref(q, pos, last, k, v, n_head, n_head_kv, hd, 0.125, cap, window)
    assert np.abs(out - ref).max() < 1e-5
    for r in (0, n - 1):  # a row alone sees and gives the same
        np.testing.assert_array_equal(
            be.attention(q[r : r + 1], pos[r : r + 1], last[r : r + 1], k, v, kv_type, n_head, n_head_kv, hd, 0.125, cap,
                         window)[0], out[r])
    # and so do rows that share kernel calls on the few-rows path (runs of rows per chunk)
    np.testing.assert_array_equal(
        be.attention(q[1:4], pos[1:4], last[1:4], k, v, kv_type, n_head, n_head_kv, hd, 0.125, cap, window), out[1:4])


@pytest.mark.parametrize("kv_type", ["f32", "f16"])
@pytest.mark.parametrize("n_head,n_head_kv,window", [(4, 1, 0), (8, 2, 0), (8, 2, 100)])
@pytest.mark.parametrize("rows", [(1, 1, 1), (2, 1), (1,) * 8, (3, 1, 4), (0, 2, 1, 5)])
def test_attention_of_several_sequences_in_one_op(be: _core.Backend, kv_type: str, n_head: int, n_head_kv: int,
                                                  window: int, rows: tuple[int, ...]) -> None:
    """Each sequence's rows over its own cache (different lengths, causal rows and a non-causal
    block, one sequence with no rows), in one op: bit for bit what each sequence gets alone, on
    the few-rows path (few (row, group) pairs: units per chunk) and the many-rows one."""
    rng = np.random.default_rng(sum(rows) + n_head_kv)
    hd = 32
    q = rng.standard_normal((sum(rows), n_head * hd)).astype(np.float32)
    first = np.concatenate([[0], np.cumsum(rows)]).tolist()
    ks, vs, pos, last = [], [], [], []
    for s, m in enumerate(rows):
        n_past = int(rng.integers(1, 400))
        ks.append(rng.standard_normal((n_past + m, n_head_kv * hd)).astype(np.float32))
        vs.append(rng.standard_normal((n_past + m, n_head_kv * hd)).astype(np.float32))
        p = np.arange(n_past, n_past + m, dtype=np.int32)
        pos.append(p)
        last.append(p.copy() if s % 2 == 0 else np.full(m, n_past + m - 1, dtype=np.int32))  # causal / a block
    pos_all, last_all = np.concatenate(pos), np.concatenate(last)
    out = be.attention_seqs(q, pos_all, last_all, first, ks, vs, kv_type, n_head, n_head_kv, hd, 0.125, 0.0, window)
    for s in range(len(rows)):
        f, t = first[s], first[s + 1]
        if f == t:
            continue
        alone = be.attention(q[f:t], pos[s], last[s], ks[s], vs[s], kv_type, n_head, n_head_kv, hd, 0.125, 0.0, window)
        np.testing.assert_array_equal(out[f:t], alone)


def test_attention_of_several_sequences_checks_its_operands(be: _core.Backend) -> None:
    q = np.zeros((2, 64), np.float32)
    k = np.zeros((4, 64), np.float32)
    at = np.array([1, 3], np.int32)
    with pytest.raises(ValueError, match="one key and one value cache per sequence"):
        be.attention_seqs(q, at, at, [0, 1, 2], [k], [k, k], "f32", 1, 1, 64, 0.125)
    with pytest.raises(ValueError, match="first must run from 0"):
        be.attention_seqs(q, at, at, [0, 1], [k], [k], "f32", 1, 1, 64, 0.125)
    with pytest.raises(ValueError, match="past its cache"):
        be.attention_seqs(q, at, at, [0, 1, 2], [k, k[:2]], [k, k[:2]], "f32", 1, 1, 64, 0.125)


X86_LEVELS = [isa for isa in ("avx2", "avxvnni", "avx512") if isa in ISAS]


@pytest.mark.skipif(len(X86_LEVELS) < 2, reason="one x86 SIMD level on this CPU")
@pytest.mark.parametrize("kv_type", ["f32", "f16"])
@pytest.mark.parametrize("n_head,n_head_kv,hd", [(4, 1, 256), (14, 2, 64), (3, 3, 72), (2, 1, 76), (8, 8, 20)])
def test_attention_is_the_same_on_every_x86_level(kv_type: str, n_head: int, n_head_kv: int, hd: int) -> None:
    """The AVX-512 kernels do the AVX2 kernels' arithmetic (head dims with 8- and <8-element
    remainders, every head-group shape, the many-rows and the few-rows paths): the same floats."""
    rng = np.random.default_rng(hd)
    n_past, n = 150, 40
    k = rng.standard_normal((n_past + n, n_head_kv * hd)).astype(np.float32)
    v = rng.standard_normal((n_past + n, n_head_kv * hd)).astype(np.float32)
    q = rng.standard_normal((n, n_head * hd)).astype(np.float32)
    pos = np.arange(n_past, n_past + n, dtype=np.int32)
    before = _core.simd_active()
    outs = []
    try:
        for isa in X86_LEVELS:
            _core.set_simd(isa)
            be = _core.Backend("cpu", threads=2)
            outs.append([be.attention(q[:m], pos[:m], pos[:m], k, v, kv_type, n_head, n_head_kv, hd, 0.125, 0.0, 0)
                         for m in (1, n)])
    finally:
        _core.set_simd(before)
    for got in outs[1:]:
        for a, b in zip(got, outs[0]):
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("kv_type,dtype", [("f32", np.float32), ("f16", np.float16)])
def test_store_kv(be: _core.Backend, kv_type: str, dtype: type) -> None:
    rng = np.random.default_rng(7)
    k, v = rng.standard_normal((2, 3, 32)).astype(np.float32)
    kc, vc = be.store_kv(k, v, kv_type, pos=4, capacity=8)  # rows 4..6 of a cache of 8, the rest untouched
    for got, rows in ((kc, k), (vc, v)):
        ref = np.zeros((8, 32), dtype=dtype)
        ref[4:7] = rows
        assert got == ref.tobytes()
    with pytest.raises(ValueError, match="capacity"):
        be.store_kv(k, v, kv_type, pos=6, capacity=8)


def test_fill_and_scatter_add(be: _core.Backend) -> None:
    rng = np.random.default_rng(12)
    np.testing.assert_array_equal(be.fill(np.full((3, 50), np.nan, dtype=np.float32), 0.0), np.zeros((3, 50)))
    dst = rng.standard_normal((6, 40)).astype(np.float32)
    src = rng.standard_normal((3, 40)).astype(np.float32)
    w = rng.standard_normal(3).astype(np.float32)
    ref = dst.copy()
    for i, r in enumerate([4, 0, 2]):
        ref[r] += w[i] * src[i]
    np.testing.assert_allclose(be.scatter_add(src, [4, 0, 2], w, dst), ref, rtol=1e-6, atol=1e-6)
    with pytest.raises(ValueError, match="repeat"):
        be.scatter_add(src, [4, 4, 2], w, dst)


def test_gather(be: _core.Backend) -> None:
    x = np.random.default_rng(11).standard_normal((6, 40)).astype(np.float32)
    np.testing.assert_array_equal(be.gather(x, [5, 0, 5, 2]), x[[5, 0, 5, 2]])
    with pytest.raises(ValueError, match="out of range"):
        be.gather(x, [6])


def test_elementwise(be: _core.Backend) -> None:
    rng = np.random.default_rng(8)
    y = rng.standard_normal((5, 100)).astype(np.float32)
    x = rng.standard_normal((5, 100)).astype(np.float32)
    b = rng.standard_normal(100).astype(np.float32)
    np.testing.assert_array_equal(be.add(y, x), y + x)
    np.testing.assert_array_equal(be.add_rows(y, b), y + b)
    np.testing.assert_array_equal(be.mul_rows(y, b), y * b)
    np.testing.assert_array_equal(be.scale(y, 0.5), y * np.float32(0.5))
    capped = be.softcap(y * 40, 30.0)
    assert np.abs(capped - 30.0 * np.tanh((y * 40).astype(np.float64) / 30.0)).max() < 1e-4
    with pytest.raises(ValueError, match="length differs"):
        be.add_rows(y, b[:50])


@pytest.mark.parametrize("act", ["silu", "gelu_tanh", "sigmoid"])
def test_glu(be: _core.Backend, act: str) -> None:
    rng = np.random.default_rng(9)
    g = (rng.standard_normal(1000) * 4).astype(np.float32)
    u = rng.standard_normal(1000).astype(np.float32)
    g64 = g.astype(np.float64)
    if act == "silu":
        ref = g64 / (1 + np.exp(-g64)) * u
    elif act == "sigmoid":
        ref = u / (1 + np.exp(-g64))
    else:
        ref = 0.5 * g64 * (1 + np.tanh(np.sqrt(2 / np.pi) * (g64 + 0.044715 * g64**3))) * u
    y = be.glu(g, u, act)
    assert np.abs(y - ref).max() / np.abs(ref).max() < 1e-5
    np.testing.assert_array_equal(be.glu(g[500:600], u[500:600], act), y[500:600])


def test_ssm_conv(be: _core.Backend) -> None:
    rng = np.random.default_rng(13)
    C, k, n = 40, 4, 9
    x = rng.standard_normal((n, C)).astype(np.float32)
    w = rng.standard_normal((C, k)).astype(np.float32)
    state = rng.standard_normal((k - 1, C)).astype(np.float32)
    y, st = be.ssm_conv(x, w, state)
    full = np.concatenate([state, x]).astype(np.float64)  # oldest first
    ref = np.stack([(full[t : t + k] * w.T).sum(0) for t in range(n)])
    ref = ref / (1 + np.exp(-ref))
    assert rel(y, ref) < 1e-5
    np.testing.assert_array_equal(st, x[-(k - 1) :])
    # row by row, carrying the state, gives the same bits
    s, rows = state, []
    for t in range(n):
        yt, s = be.ssm_conv(x[t : t + 1], w, s)
        rows.append(yt[0])
    np.testing.assert_array_equal(np.stack(rows), y)


def delta_ref(qkv: np.ndarray, a: np.ndarray, b: np.ndarray, a_coef: np.ndarray, dt_bias: np.ndarray, n_k: int,
              n_v: int, d_k: int, d_v: int, state: np.ndarray, tiled: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """transformers' torch_recurrent_gated_delta_rule (Qwen3-Next), in float64."""
    x = qkv.astype(np.float64)
    S = state.astype(np.float64).reshape(n_v, d_k, d_v).copy()
    out = np.zeros((len(x), n_v * d_v))
    kd = n_k * d_k
    for t in range(len(x)):
        for h in range(n_v):
            kh = h % n_k if tiled else h // (n_v // n_k)
            q = x[t, kh * d_k : (kh + 1) * d_k]
            k = x[t, kd + kh * d_k : kd + (kh + 1) * d_k]
            v = x[t, 2 * kd + h * d_v : 2 * kd + (h + 1) * d_v]
            q = q / np.sqrt((q * q).sum() + 1e-6) / np.sqrt(d_k)
            k = k / np.sqrt((k * k).sum() + 1e-6)
            beta = 1 / (1 + np.exp(-b[t, h]))
            g = a_coef[h] * np.log1p(np.exp(a[t, h] + dt_bias[h]))
            S[h] *= np.exp(g)
            delta = (v - S[h].T @ k) * beta
            S[h] += np.outer(k, delta)
            out[t, h * d_v : (h + 1) * d_v] = S[h].T @ q
    return out, S.reshape(n_v * d_k, d_v)


@pytest.mark.parametrize("n_k,n_v,tiled", [(2, 2, False), (2, 4, False), (2, 4, True)])
def test_gated_delta(be: _core.Backend, n_k: int, n_v: int, tiled: bool) -> None:
    rng = np.random.default_rng(14)
    d_k, d_v, n = 16, 8, 7
    qkv = rng.standard_normal((n, 2 * n_k * d_k + n_v * d_v)).astype(np.float32)
    a, b = rng.standard_normal((2, n, n_v)).astype(np.float32)
    a_coef = -np.exp(rng.uniform(-1, 1, n_v)).astype(np.float32)
    dt_bias = rng.standard_normal(n_v).astype(np.float32)
    state = (0.1 * rng.standard_normal((n_v * d_k, d_v))).astype(np.float32)
    out, st = be.gated_delta(qkv, a, b, a_coef, dt_bias, n_k, n_v, d_k, d_v, state, tiled)
    ref, ref_st = delta_ref(qkv, a, b, a_coef, dt_bias, n_k, n_v, d_k, d_v, state, tiled)
    assert rel(out, ref) < 1e-5 and rel(st, ref_st) < 1e-5
    s, rows = state, []
    for t in range(n):  # row by row: the same bits
        o, s = be.gated_delta(qkv[t : t + 1], a[t : t + 1], b[t : t + 1], a_coef, dt_bias, n_k, n_v, d_k, d_v, s, tiled)
        rows.append(o[0])
    np.testing.assert_array_equal(np.stack(rows), out)
    np.testing.assert_array_equal(s, st)
