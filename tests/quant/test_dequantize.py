"""ds4's dequantisation is bit-identical to gguf.quants (ggml's reference), on every path:
each tensor of the real Gemma 3 270M file, random blocks of every format through every
available ISA, and tensors written into a GGUF file by gguf.GGUFWriter."""

from __future__ import annotations

import zlib

import numpy as np
import pytest
from gguf import GGUFReader, GGUFWriter
from gguf import quants as gq

import ds4
from ds4 import _core
from qdata import (TYPES, bits, block_geometry, gguf_can_quantize, gguf_dequantize, quantized,
                   qtype, random_blocks)

ISAS = _core.simd_available()


def test_type_names_are_the_supported_formats():
    assert sorted(_core.type_names()) == sorted(TYPES)


def test_gemma_every_tensor_matches_gguf(gemma_path):
    reader = GGUFReader(str(gemma_path))
    assert len(reader.tensors) > 200
    seen_types = set()
    mismatched = []
    for t in reader.tensors:
        ours = ds4.dequantize(gemma_path, t.name)
        ref = gq.dequantize(t.data, t.tensor_type)
        seen_types.add(t.tensor_type.name)
        if ours.dtype != np.float32 or ours.shape != ref.shape or not np.array_equal(bits(ours), bits(ref)):
            mismatched.append((t.name, t.tensor_type.name, ours.shape, ref.shape))
    assert not mismatched, mismatched[:10]
    assert {"F32", "Q5_0", "Q4_K", "Q6_K", "Q8_0"} <= seen_types


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("name", TYPES)
@pytest.mark.parametrize("extreme", [False, True], ids=["moderate", "extreme"])
def test_random_blocks_match_gguf(name, isa, extreme):
    rng = np.random.default_rng(zlib.crc32(f"{name}-{extreme}".encode()))
    qk, _ = block_geometry(name)
    n_blocks = max(64, 4096 // qk)
    data = random_blocks(name, n_blocks, rng, extreme)
    n = n_blocks * qk
    ref = gguf_dequantize(name, data, n)
    ours = _core.dequantize_raw(name, data, n, isa)
    assert ours.dtype == np.float32 and ours.shape == (n,)
    diff = np.flatnonzero(bits(ours) != bits(ref))
    assert diff.size == 0, f"{diff.size} values differ, first at {diff[0]}: {ours[diff[0]]!r} vs {ref[diff[0]]!r}"


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("name", [t for t in TYPES if gguf_can_quantize(t)])
def test_gguf_quantized_floats_match_gguf(name, isa):
    rng = np.random.default_rng(7)
    qk, _ = block_geometry(name)
    x = (rng.standard_normal((8, 4 * max(qk, 32))) * np.exp(rng.uniform(-8, 4, (8, 1)))).astype(np.float32)
    data = quantized(name, x)
    ref = gq.dequantize(np.frombuffer(data, dtype=np.uint8).reshape(8, -1), qtype(name)) if name not in (
        "F32", "F16") else gguf_dequantize(name, data, x.size).reshape(x.shape)
    ours = _core.dequantize_raw(name, data, x.size, isa).reshape(x.shape)
    assert np.array_equal(bits(ours), bits(ref))


def test_uint8_array_and_bytearray_inputs():
    rng = np.random.default_rng(3)
    data = random_blocks("Q4_K", 4, rng)
    a = _core.dequantize_raw("Q4_K", data, 1024)
    b = _core.dequantize_raw("Q4_K", np.frombuffer(data, dtype=np.uint8), 1024)
    c = _core.dequantize_raw("Q4_K", bytearray(data), 1024)
    assert np.array_equal(bits(a), bits(b)) and np.array_equal(bits(a), bits(c))


def _write_gguf(path, tensors):
    w = GGUFWriter(str(path), "test")
    for name, (type_name, payload) in tensors.items():
        if type_name == "F32":
            w.add_tensor(name, payload)
        else:
            w.add_tensor(name, payload, raw_dtype=qtype(type_name))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def test_gguf_file_of_every_format(tmp_path):
    """Raw blocks of every format written by GGUFWriter, read back by ds4.dequantize (path)."""
    rng = np.random.default_rng(11)
    tensors = {}
    for name in TYPES:
        qk, size = block_geometry(name)
        rows, cols = 3, 2 * max(qk, 32)
        data = random_blocks(name, rows * cols // qk, rng)
        if name == "F32":
            payload = np.frombuffer(data, dtype=np.float32).reshape(rows, cols)
        elif name == "F16":
            payload = np.frombuffer(data, dtype=np.float16).reshape(rows, cols)
        else:
            payload = np.frombuffer(data, dtype=np.uint8).reshape(rows, cols // qk * size)
        tensors[f"t.{name}"] = (name, payload)
    # A 3-d tensor too: numpy order is the reverse of ggml's ne.
    tensors["t.3d"] = ("Q8_0", np.frombuffer(random_blocks("Q8_0", 2 * 3 * 2, rng), dtype=np.uint8).reshape(2, 3, 68))
    path = tmp_path / "formats.gguf"
    _write_gguf(path, tensors)

    reader = GGUFReader(str(path))
    assert len(reader.tensors) == len(tensors)
    for t in reader.tensors:
        ref = gq.dequantize(t.data, t.tensor_type)
        ours = ds4.dequantize(path, t.name)
        assert ours.shape == ref.shape, t.name
        assert np.array_equal(bits(ours), bits(ref)), t.name
    assert ds4.dequantize(path, "t.3d").shape == (2, 3, 64)


def test_unknown_tensor_is_a_key_error(tmp_path):
    path = tmp_path / "one.gguf"
    _write_gguf(path, {"a": ("F32", np.zeros((2, 4), dtype=np.float32))})
    with pytest.raises(KeyError, match="nope.*one.gguf"):
        ds4.dequantize(path, "nope")


def test_unsupported_tensor_type_is_a_clear_error(tmp_path):
    path = tmp_path / "nvfp4.gguf"
    _write_gguf(path, {"w": ("NVFP4", np.zeros((1, 36), dtype=np.uint8))})
    with pytest.raises(ValueError, match="NVFP4"):
        ds4.dequantize(path, "w")


@pytest.mark.parametrize(
    "args, match",
    [
        (("Q4_0", b"\0" * 18, 16), "multiple of Q4_0's block size 32"),
        (("Q4_0", b"\0" * 17, 32), "17 bytes"),
        (("Q4_0", b"\0" * 36, 32), "36 bytes"),
        (("Q4_K", b"\0" * 144, -256), "n must be >= 0"),
        (("Q9_9", b"", 0), "unknown type name 'Q9_9'"),
        (("NVFP4", b"\0" * 36, 64), "NVFP4 has no ds4 kernels"),
        (("Q8_0", b"\0" * 34, 32, "sse9"), "unknown SIMD ISA 'sse9'"),
    ],
)
def test_dequantize_raw_rejects_bad_arguments(args, match):
    with pytest.raises(ValueError, match=match):
        _core.dequantize_raw(*args)


def test_unavailable_isa_is_rejected():
    missing = [i for i in ("avx2", "avxvnni", "avx512", "neon") if i not in ISAS]
    if not missing:
        pytest.skip("every ISA is available here")
    with pytest.raises(ValueError, match="not available"):
        _core.dequantize_raw("Q8_0", b"\0" * 34, 32, missing[0])


def test_empty_input():
    assert _core.dequantize_raw("Q4_K", b"", 0).shape == (0,)
