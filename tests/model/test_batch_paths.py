"""Batch invariance across the matmul paths, on every ISA this machine runs: a Q8_0 tiny model
evaluated whole (>= 32 rows: the tiled GEMM over decoded weights), in verify-sized blocks (dot_rows,
up to 4 rows per weight pass) and token by token gives the same logits bit for bit, with 1 or 2
threads. (The f32 oracle tests cover accuracy; this covers the kernel paths a quantised model takes.)

The default ``precision="int16"`` runs these Q8_0 weights with int16-quantised activations at
every batch size (fused kernels for up to 4 rows, the GEMM beyond): its logits deviate from the
float path by a measured, bounded amount, and are again the same bit for bit whatever the block
size and thread count. (That the int16 kernels themselves agree bit for bit across ISAs, and the
fused kernels with the GEMM, is tests/quant/test_int16_gemm.py.)"""

from __future__ import annotations

import numpy as np
import pytest
import tiny

import ds4
from ds4 import _core

ISAS = _core.simd_available()
# Measured on the tiny Q8_0 models (scalar, AVX2, AVX-512): int16 prefill vs exact, max |Δ| / max
# |logit| 5.8e-5 .. 9.9e-5 for the attention-only ones; 5e-4 for the hybrid, whose recurrence
# carries every row's rounding into the rows after it.
INT16_REL_BOUND = dict.fromkeys(tiny.HYBRID, 1.5e-3)
INT16_REL_BOUND_DEFAULT = 3e-4


@pytest.fixture(autouse=True)
def restore_isa():
    prev = _core.simd_active()
    yield
    _core.set_simd(prev)


def ids_for(model: ds4.Model) -> np.ndarray:
    return np.random.default_rng(11).integers(0, model.n_vocab, size=tiny.TEST_LEN)


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("family", tiny.FAMILIES)
@pytest.mark.parametrize("precision", ["f32", "int16"])
def test_paths_agree(family: str, isa: str, precision: str) -> None:
    _core.set_simd(isa)
    path = str(tiny.convert(family, "q8_0"))
    model = ds4.Model(path, threads=2, precision=precision)
    ids = ids_for(model)
    whole = model.session().eval(ids)
    for chunk in (1, 2, 4, 5, 16, 33):
        s = model.session()
        parts = np.concatenate([s.eval(ids[i:i + chunk]) for i in range(0, len(ids), chunk)])
        assert np.array_equal(parts, whole), f"{isa} {precision}: chunks of {chunk}"
    one = ds4.Model(path, threads=1, precision=precision).session().eval(ids)
    assert np.array_equal(one, whole), f"{isa} {precision}: 1 thread"


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("family", tiny.FAMILIES)
def test_int16_deviation_bounded(family: str, isa: str) -> None:
    _core.set_simd(isa)
    path = str(tiny.convert(family, "q8_0"))
    model = ds4.Model(path, threads=2, kv_type="f32")
    ids = ids_for(model)
    exact = ds4.Model(path, threads=2, kv_type="f32", precision="f32").session().eval(ids)
    fast = model.session().eval(ids)
    rel = np.abs(fast - exact).max() / np.abs(exact).max()
    print(f"{family} {isa}: int16 deviates {rel:.2e}")
    assert 0 < rel <= INT16_REL_BOUND.get(family, INT16_REL_BOUND_DEFAULT), f"{isa}: int16 deviates {rel:.2e} of max |logit|"
    assert np.array_equal(fast.argmax(axis=1), exact.argmax(axis=1)), f"{isa}: greedy tokens changed"
    print(f"{family} {isa}: int16 max |Δ| / max |logit| = {rel:.2e}")


def test_prefill_option_checked() -> None:
    with pytest.raises(ValueError, match="precision must be 'int16' or 'f32'"):
        ds4.Model(str(tiny.convert("llama", "q8_0")), precision="int8")
