"""Random test data in every block format ds4 supports, and helpers shared by the quant tests.

Two sources of blocks:
- ``quantized``: random floats quantised by ``gguf.quants`` (only for the formats it can write);
- ``random_blocks``: random bytes with the scale fields overwritten by sane values, so every
  bit pattern of the quant fields occurs (gguf.quants cannot write K-quants or IQ formats).
"""

from __future__ import annotations

import numpy as np
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType
from gguf import quants as gq

# Every type ds4 has kernels for (the test of type_names() checks the list is exactly this).
TYPES = [
    "F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0",
    "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ1_S", "IQ4_NL", "IQ3_S", "IQ2_S",
    "IQ4_XS", "IQ1_M", "TQ1_0", "TQ2_0", "MXFP4",
]

# Byte offsets of the f16 scale fields inside one block (ggml's block structs).
F16_FIELDS = {
    "Q4_0": [0], "Q4_1": [0, 2], "Q5_0": [0], "Q5_1": [0, 2], "Q8_0": [0],
    "Q2_K": [80, 82], "Q3_K": [108], "Q4_K": [0, 2], "Q5_K": [0, 2], "Q6_K": [208],
    "IQ2_XXS": [0], "IQ2_XS": [0], "IQ2_S": [0], "IQ3_XXS": [0], "IQ3_S": [0], "IQ1_S": [0], "IQ4_NL": [0], "IQ4_XS": [0],
    "IQ1_M": [], "TQ1_0": [52], "TQ2_0": [64],
}
# IQ1_M keeps its f16 d in the top nibbles of the four little-endian u16 at this byte offset.
NIBBLE_D = {"IQ1_M": 48}


def set_nibble_d(raw: np.ndarray, off: int, d: np.ndarray) -> None:
    """Write the f16 values d (one per block row of raw) into the top nibbles of the four u16 at off."""
    bits = d.astype(np.float16).view(np.uint16)
    for k in range(4):
        hi = raw[:, off + 2 * k + 1]
        raw[:, off + 2 * k + 1] = (hi & 0x0F) | (((bits >> (4 * k)) & 0x0F) << 4).astype(np.uint8)

# Byte ranges of the quant fields (everything but the scales that a zero quant index leaves
# in place): zeroing them gives the per-element offset of the format (Q4_0's -8 d, Q4_K's
# -dmin m, ...), which a SIMD kernel may factor out of its sums (see test_dot.py).
QUANT_FIELDS = {
    "Q4_0": [(2, 18)], "Q4_1": [(4, 20)], "Q5_0": [(2, 22)], "Q5_1": [(4, 24)], "Q8_0": [(2, 34)],
    "Q2_K": [(16, 80)], "Q3_K": [(0, 96)], "Q4_K": [(16, 144)], "Q5_K": [(16, 176)], "Q6_K": [(0, 192)],
}


def qtype(name: str) -> GGMLQuantizationType:
    return GGMLQuantizationType[name]


def block_geometry(name: str) -> tuple[int, int]:
    """(elements per block, bytes per block)."""
    return GGML_QUANT_SIZES[qtype(name)]


def gguf_can_quantize(name: str) -> bool:
    try:
        gq.quantize(np.zeros((1, block_geometry(name)[0]), dtype=np.float32), qtype(name))
    except NotImplementedError:
        return False
    return True


def quantized(name: str, x: np.ndarray) -> bytes:
    """x (float32, last dim a multiple of the block size) quantised by gguf.quants."""
    return gq.quantize(x, qtype(name)).tobytes()


def random_f16(rng: np.random.Generator, size: int, extreme: bool) -> np.ndarray:
    """Scales: mostly moderate magnitudes of both signs; with ``extreme`` also zeros, signed
    zeros, f16 subnormals and the largest finite f16 values."""
    mag = np.exp(rng.uniform(np.log(1e-4), np.log(0.5), size))
    vals = (mag * rng.choice([-1.0, 1.0], size)).astype(np.float16)
    if extreme:
        special = np.array([0.0, -0.0, 6e-8, -6e-8, 3e-5, 65504.0, -65504.0, 1.0], dtype=np.float16)
        pick = rng.random(size) < 0.3
        vals[pick] = rng.choice(special, int(pick.sum()))
    return vals


def random_blocks(name: str, n_blocks: int, rng: np.random.Generator, extreme: bool = False) -> bytes:
    """n_blocks random blocks of a type with finite scales."""
    qk, size = block_geometry(name)
    if name == "F32":
        scale = 1e30 if extreme else 1.0
        return (rng.standard_normal(n_blocks) * rng.choice([1e-30, 1.0, scale], n_blocks)).astype(np.float32).tobytes()
    if name == "F16":
        return random_f16(rng, n_blocks, extreme).tobytes()
    if name == "BF16":
        # Random upper halves of finite floats (exponent field < 255).
        bits = rng.integers(0, 1 << 16, n_blocks, dtype=np.uint16)
        exp = (bits >> 7) & 0xFF
        bits = np.where(exp == 0xFF, bits & np.uint16(0xBFFF), bits).astype(np.uint16)
        if not extreme:
            bits = (bits & np.uint16(0x807F)) | np.uint16(0x3F00)  # |x| in [0.5, 2)
        return bits.tobytes()
    raw = rng.integers(0, 256, (n_blocks, size), dtype=np.uint8)
    if name == "MXFP4":
        # E8M0 exponent byte; 0 and 1 give ggml's subnormal scales. Keep d * 12 finite.
        lo, hi = (0, 250) if extreme else (110, 135)
        raw[:, 0] = rng.integers(lo, hi, n_blocks, dtype=np.uint8)
        return raw.tobytes()
    for off in F16_FIELDS[name]:
        raw[:, off:off + 2] = random_f16(rng, n_blocks, extreme).view(np.uint8).reshape(n_blocks, 2)
    if name in NIBBLE_D:
        set_nibble_d(raw, NIBBLE_D[name], random_f16(rng, n_blocks, extreme))
    return raw.tobytes()


def zero_quants(name: str, data: bytes) -> bytes:
    """The blocks with their quant fields zeroed (see QUANT_FIELDS); other types unchanged."""
    if name not in QUANT_FIELDS:
        return data
    _, size = block_geometry(name)
    raw = np.frombuffer(data, dtype=np.uint8).reshape(-1, size).copy()
    for lo, hi in QUANT_FIELDS[name]:
        raw[:, lo:hi] = 0
    return raw.tobytes()


def gguf_dequantize(name: str, data: bytes, n: int) -> np.ndarray:
    """The oracle: gguf.quants' dequantisation of n values of raw blocks, as float32[n]."""
    qk, size = block_geometry(name)
    arr = np.frombuffer(data, dtype=np.uint8).reshape(1, n // qk * size)
    if name == "F32":
        return np.frombuffer(data, dtype=np.float32).copy()
    if name == "F16":
        return np.frombuffer(data, dtype=np.float16).astype(np.float32)
    return gq.dequantize(arr, qtype(name)).reshape(n)


def bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
