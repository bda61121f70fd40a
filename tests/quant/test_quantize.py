"""quantize_q8_0 writes the same bytes as gguf.quants.quantize(..., Q8_0) (ggml's reference):
ordinary rows, rows spanning many magnitudes, ties at .5, all-zero blocks, f16-subnormal and
f16-overflowing scales."""

from __future__ import annotations

import numpy as np
import pytest
from gguf import GGMLQuantizationType
from gguf import quants as gq

from ds4 import _core


pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")  # gguf: d -> f16 inf


def gguf_q8_0(x: np.ndarray) -> bytes:
    return gq.quantize(x.reshape(-1, 32), GGMLQuantizationType.Q8_0).tobytes()


def blocks(x: np.ndarray) -> np.ndarray:
    return np.frombuffer(_core.quantize_q8_0(x), dtype=np.uint8).reshape(-1, 34)


@pytest.mark.parametrize("log_scale", [-40, -20, -12, -5, 0, 5, 12, 20])
def test_random_rows_match_gguf(log_scale):
    rng = np.random.default_rng(100 + log_scale)
    x = (rng.standard_normal(32 * 512) * np.exp(log_scale + rng.uniform(-2, 2, 32 * 512))).astype(np.float32)
    ours = _core.quantize_q8_0(x)
    assert isinstance(ours, bytes) and len(ours) == 512 * 34
    assert ours == gguf_q8_0(x)


def test_special_blocks_match_gguf():
    rng = np.random.default_rng(5)
    rows = [
        np.zeros(32),                                   # d = 0: all quants 0
        -np.zeros(32),
        np.arange(-16, 16) * 127 / 16 / 8 * 8,          # amax = 127 -> d = 1: exact ties at .5 below
        np.array([127.0] + [k + 0.5 for k in range(-15, 16)]),  # round half away from zero
        np.full(32, 1e-7),                              # d is an f16 subnormal
        np.full(32, 3e-12),                             # d underflows f16 to 0, quants still 127
        np.array([1e7] + [1.0] * 31),                   # d overflows f16 to inf
        rng.standard_normal(32) * 65504.0,
        np.array([-5.0] + [0.0] * 31),                  # negative extreme
    ]
    x = np.concatenate(rows).astype(np.float32)
    ours = _core.quantize_q8_0(x)
    ref = gguf_q8_0(x)
    assert ours == ref, [i for i in range(len(rows)) if ours[34 * i:34 * i + 34] != ref[34 * i:34 * i + 34]]
    b = blocks(x)
    assert list(b[3, 2:].view(np.int8)[1:5]) == [-15, -14, -13, -12]  # -14.5 -> -15: away from zero
    assert b[6, 0:2].view(np.float16)[0] == np.inf


def test_roundtrip_error_is_half_a_step():
    """Independent of gguf: |dequant(quant(x)) - x| <= d/2 per block (plus the f16 rounding of
    d, which moves every value by at most 127 * |d - f16(d)| <= 127 * 2^-11 d)."""
    rng = np.random.default_rng(9)
    x = rng.standard_normal(32 * 64).astype(np.float32)
    q = _core.quantize_q8_0(x)
    y = _core.dequantize_raw("Q8_0", q, x.size).reshape(-1, 32)
    d = np.abs(x.reshape(-1, 32)).max(axis=1, keepdims=True) / 127
    assert np.all(np.abs(y - x.reshape(-1, 32)) <= d * (0.5 + 127 * 2.0**-11) * (1 + 1e-6))


def test_any_shape_and_bad_input():
    x = np.random.default_rng(1).standard_normal((4, 64)).astype(np.float32)
    assert _core.quantize_q8_0(x) == _core.quantize_q8_0(x.ravel())
    with pytest.raises(ValueError, match="multiple of Q8_0's block size"):
        _core.quantize_q8_0(np.zeros(33, dtype=np.float32))
    with pytest.raises(TypeError, match="float32"):
        _core.quantize_q8_0(np.zeros(32))
    with pytest.raises(ValueError, match="C-contiguous"):
        _core.quantize_q8_0(np.zeros((32, 2), dtype=np.float32)[:, 0])
    assert _core.quantize_q8_0(np.zeros(0, dtype=np.float32)) == b""
