"""Batch invariance across the matmul paths, on every ISA this machine runs: a Q8_0 tiny model
evaluated whole (>= 32 rows: the tiled GEMM over decoded weights), in verify-sized blocks (dot_rows,
up to 4 rows per weight pass) and token by token gives the same logits bit for bit, with 1 or 2
threads. (The f32 oracle tests cover accuracy; this covers the kernel paths a quantised model takes.)"""

from __future__ import annotations

import numpy as np
import pytest
import tiny

import ds4
from ds4 import _core

ISAS = _core.simd_available()


@pytest.fixture(autouse=True)
def restore_isa():
    prev = _core.simd_active()
    yield
    _core.set_simd(prev)


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("family", tiny.FAMILIES)
def test_paths_agree(family: str, isa: str) -> None:
    _core.set_simd(isa)
    path = str(tiny.convert(family, "q8_0"))
    model = ds4.Model(path, threads=2)
    ids = np.random.default_rng(11).integers(0, model.n_vocab, size=tiny.TEST_LEN)
    whole = model.session().eval(ids)
    for chunk in (1, 2, 4, 5, 16, 33):
        s = model.session()
        parts = np.concatenate([s.eval(ids[i:i + chunk]) for i in range(0, len(ids), chunk)])
        assert np.array_equal(parts, whole), f"{isa}: chunks of {chunk}"
    assert np.array_equal(ds4.Model(path, threads=1).session().eval(ids), whole), f"{isa}: 1 thread"
