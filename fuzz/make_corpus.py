#!/usr/bin/env python3
"""Writes small valid GGUF seeds for fuzz_gguf into fuzz/corpus/ (or the directory given).

Seeds stay small (a few hundred bytes to a few KB) so libFuzzer's mutations reach every
section quickly; together they cover every metadata value type, nested arrays, a custom
alignment, v2, and F32 / F16 / Q8_0 tensors of 1 to 4 dimensions.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType, GGUFValueType, GGUFWriter
from gguf.quants import quantize


def write(path: Path, *, alignment: int | None = None, tensors: bool = True, meta: bool = True) -> None:
    w = GGUFWriter(path, arch="llama")
    if alignment:
        w.add_custom_alignment(alignment)
    if meta:
        w.add_uint8("t.u8", 200)
        w.add_int8("t.i8", -5)
        w.add_uint16("t.u16", 60000)
        w.add_int16("t.i16", -30000)
        w.add_uint32("t.u32", 4_000_000_000)
        w.add_int32("t.i32", -2_000_000_000)
        w.add_uint64("t.u64", 2**63 + 1)
        w.add_int64("t.i64", -(2**62))
        w.add_float32("t.f32", 1.5)
        w.add_float64("t.f64", -2.25)
        w.add_bool("t.bool", True)
        w.add_string("t.str", "héllo")
        w.add_array("t.arr_i32", [1, -2, 3])
        w.add_array("t.arr_str", ["a", "bc", ""])
        w.add_array("t.arr_nested", [["x", "y"], ["z"]])
        w.add_key_value("t.arr_f32", [0.5, 1.0], GGUFValueType.ARRAY, sub_type=GGUFValueType.FLOAT32)
    if tensors:
        rng = np.random.default_rng(0)
        w.add_tensor("f32", rng.standard_normal((2, 3)).astype(np.float32))
        w.add_tensor("f16", rng.standard_normal((4,)).astype(np.float16))
        q = quantize(rng.standard_normal((2, 32)).astype(np.float32), GGMLQuantizationType.Q8_0)
        w.add_tensor("q8", q, raw_dtype=GGMLQuantizationType.Q8_0)
        w.add_tensor("scalar", np.array([7.0], dtype=np.float32))
        w.add_tensor("d4", np.zeros((1, 1, 2, 2), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent / "corpus"
    out.mkdir(parents=True, exist_ok=True)
    write(out / "full.gguf")
    write(out / "align64.gguf", alignment=64)
    write(out / "meta_only.gguf", tensors=False)
    write(out / "tensors_only.gguf", meta=False)
    # v2 has the same layout as v3; only the version field differs.
    data = bytearray((out / "full.gguf").read_bytes())
    data[4:8] = (2).to_bytes(4, "little")
    (out / "v2.gguf").write_bytes(bytes(data))
    # The smallest valid file: header only.
    (out / "empty_model.gguf").write_bytes(b"GGUF" + (3).to_bytes(4, "little") + bytes(16))
    for p in sorted(out.iterdir()):
        print(p, p.stat().st_size)


if __name__ == "__main__":
    main()
