"""ds4.inspect on valid files agrees with gguf-py: every metadata value type, nested and empty
arrays, custom alignment, v2 and v3, several tensor types, the real default model, and split
models."""

from __future__ import annotations

import math
import shutil
import struct

import ds4
import numpy as np
import pytest
from gguf import GGMLQuantizationType as QT
from gguf import GGUFReader, GGUFValueType as VT, GGUFWriter
from gguf.quants import quantize
from ggufbytes import (ARRAY, BOOL, F32, FLOAT64, INT8, INT64, STRING, UINT8, UINT64, Tensor, array, build, kv,
                       scalar, string)

# key -> (type, value, array element type). Extremes of each integer type, and floats that
# float32 holds exactly.
VALUES = {
    "t.u8": (VT.UINT8, 255, None),
    "t.i8": (VT.INT8, -128, None),
    "t.u16": (VT.UINT16, 65535, None),
    "t.i16": (VT.INT16, -32768, None),
    "t.u32": (VT.UINT32, 2**32 - 1, None),
    "t.i32": (VT.INT32, -(2**31), None),
    "t.u64": (VT.UINT64, 2**64 - 1, None),
    "t.i64": (VT.INT64, -(2**63), None),
    "t.f32": (VT.FLOAT32, -1.5e-3, None),
    "t.f64": (VT.FLOAT64, math.pi, None),
    "t.true": (VT.BOOL, True, None),
    "t.false": (VT.BOOL, False, None),
    "t.str": (VT.STRING, "ünïcödé ✓ 😀", None),
    "t.str_empty": (VT.STRING, "", None),
    "t.arr_u8": (VT.ARRAY, [0, 1, 255], VT.UINT8),
    "t.arr_i16": (VT.ARRAY, [-32768, 0, 32767], VT.INT16),
    "t.arr_u64": (VT.ARRAY, [2**64 - 1, 0], VT.UINT64),
    "t.arr_f32": (VT.ARRAY, [0.5, -2.0, 1e30], VT.FLOAT32),
    "t.arr_f64": (VT.ARRAY, [1e-300, -0.0], VT.FLOAT64),
    "t.arr_bool": (VT.ARRAY, [True, False, True], VT.BOOL),
    "t.arr_str": (VT.ARRAY, ["a", "", "ß"], VT.STRING),
    "t.arr_arr_str": (VT.ARRAY, [["a", "b"], ["c"], ["d", "e", "f"]], None),
    "t.arr_arr_i32": (VT.ARRAY, [[1, -1], [2**31 - 1]], None),
}


def expected(vtype, value):
    """The Python value ds4 should give: float32 values rounded through float32."""
    if vtype == VT.FLOAT32:
        return float(np.float32(value))
    return value


def write_model(path, *, alignment=None, values=VALUES, tensors=True, **writer_args):
    rng = np.random.default_rng(1)
    w = GGUFWriter(path, arch="llama", **writer_args)
    if alignment:
        w.add_custom_alignment(alignment)
    for key, (vtype, value, sub) in values.items():
        w.add_key_value(key, value, vtype, sub_type=sub)
    if tensors:
        w.add_tensor("f32.2d", rng.standard_normal((3, 5)).astype(np.float32))
        w.add_tensor("f16.1d", rng.standard_normal((7,)).astype(np.float16))
        w.add_tensor("q8_0.2d", quantize(rng.standard_normal((4, 64)).astype(np.float32), QT.Q8_0), raw_dtype=QT.Q8_0)
        w.add_tensor("f32.4d", rng.standard_normal((2, 1, 3, 2)).astype(np.float32))
        w.add_tensor("q8_0.3d", quantize(rng.standard_normal((2, 3, 32)).astype(np.float32), QT.Q8_0),
                     raw_dtype=QT.Q8_0)
        w.add_tensor("f16.empty_rows", np.zeros((0, 4), dtype=np.float16))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def set_version(path, version):
    data = bytearray(path.read_bytes())
    data[4:8] = struct.pack("<I", version)
    path.write_bytes(bytes(data))


def assert_same_value(got, want, key):
    if isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), key
        for g, w in zip(got, want):
            assert_same_value(g, w, key)
    elif isinstance(want, float):
        assert isinstance(got, float), key
        assert got == want or (math.isnan(got) and math.isnan(want)), (key, got, want)
        assert math.copysign(1, got) == math.copysign(1, want), key
    else:
        assert type(got) is type(want) and got == want, (key, got, want)


def reader_value(field):
    """A field's value from gguf-py, for scalars and flat arrays (its contents() does not
    decode nested arrays)."""
    v = field.contents()
    if field.types[0] == VT.FLOAT32 or (field.types[0] == VT.ARRAY and field.types[-1] == VT.FLOAT32):
        v = [float(x) for x in v] if isinstance(v, list) else float(v)
    return v


def assert_matches_reader(path, info, r=None):
    r = r or GGUFReader(path)
    assert info["alignment"] == r.alignment
    assert info["data_offset"] == r.data_offset
    # Metadata: same keys in the same order (GGUFReader also lists the header fields).
    keys = [k for k in r.fields if not k.startswith("GGUF.")]
    assert list(info["metadata"]) == keys
    for k in keys:
        f = r.fields[k]
        if f.types[0] == VT.ARRAY and len(f.types) > 2:
            continue  # nested: checked against the written values instead
        assert_same_value(info["metadata"][k], reader_value(f), k)
    # Tensors: same order, names, types, shapes, extents.
    assert len(info["tensors"]) == len(r.tensors)
    for t, rt in zip(info["tensors"], r.tensors):
        assert t["name"] == rt.name
        assert t["type"] == rt.tensor_type.name
        assert list(t["shape"]) == [int(d) for d in reversed(rt.shape)]
        assert info["data_offset"] + t["offset"] == rt.data_offset
        assert t["nbytes"] == rt.n_bytes
        assert t["split"] == 0


@pytest.mark.parametrize("version", [3, 2])
@pytest.mark.parametrize("alignment", [None, 64, 256])
def test_writer_file_matches_reader(tmp_path, version, alignment):
    p = tmp_path / "m.gguf"
    write_model(p, alignment=alignment)
    if version == 2:
        set_version(p, 2)  # v2 and v3 share the layout; gguf-py writes only v3
    info = ds4.inspect(p)
    assert info["version"] == version
    assert info["alignment"] == (alignment or 32)
    assert info["n_splits"] == 1
    assert info["path"] == str(p)
    for k, (vtype, value, _) in VALUES.items():
        want = [expected(vtype if vtype != VT.ARRAY else VALUES[k][2], x) for x in value] \
            if isinstance(value, list) and VALUES[k][2] is not None else expected(vtype, value)
        assert_same_value(info["metadata"][k], want, k)
    assert info["metadata"]["general.architecture"] == "llama"
    if alignment:
        assert info["metadata"]["general.alignment"] == alignment
        for t in info["tensors"]:
            assert t["offset"] % alignment == 0
        assert info["data_offset"] % alignment == 0
    if version == 3:
        assert_matches_reader(p, info)
    types = {t["name"]: (t["type"], t["shape"], t["nbytes"]) for t in info["tensors"]}
    assert types == {
        "f32.2d": ("F32", (3, 5), 60),
        "f16.1d": ("F16", (7,), 14),
        "q8_0.2d": ("Q8_0", (4, 64), 4 * 2 * 34),
        "f32.4d": ("F32", (2, 1, 3, 2), 48),
        "q8_0.3d": ("Q8_0", (2, 3, 32), 6 * 34),
        "f16.empty_rows": ("F16", (0, 4), 0),
    }


def test_metadata_only_file(tmp_path):
    p = tmp_path / "m.gguf"
    write_model(p, tensors=False)
    info = ds4.inspect(p)
    assert info["tensors"] == []
    assert_matches_reader(p, info)


def test_empty_and_nested_arrays(tmp_path):
    # gguf-py refuses to write empty arrays, so this file is built by hand.
    kvs = [
        kv("e.u8", ARRAY, array(UINT8, [])),
        kv("e.str", ARRAY, array(STRING, [])),
        kv("e.arr", ARRAY, array(ARRAY, [])),
        kv("n.arr_empty", ARRAY, array(ARRAY, [array(STRING, []), array(STRING, [string("x")]), array(INT64, [])])),
        kv("n.strs", ARRAY, array(ARRAY, [array(STRING, [string("a"), string("bc")]), array(STRING, [string("")])])),
        kv("n.mixed", ARRAY, array(ARRAY, [array(INT8, [scalar(INT8, -1)]), array(BOOL, [scalar(BOOL, 1)]),
                                           array(FLOAT64, [scalar(FLOAT64, 2.5)])])),
        kv("n.deep", ARRAY, array(ARRAY, [array(ARRAY, [array(UINT64, [scalar(UINT64, 2**64 - 1)])])])),
        kv("after", STRING, scalar(STRING, "still aligned")),
    ]
    p = tmp_path / "arrays.gguf"
    p.write_bytes(build(kvs, [Tensor("w", [8], F32)]).data)
    md = ds4.inspect(p)["metadata"]
    assert md == {
        "e.u8": [], "e.str": [], "e.arr": [],
        "n.arr_empty": [[], ["x"], []],
        "n.strs": [["a", "bc"], [""]],
        "n.mixed": [[-1], [True], [2.5]],
        "n.deep": [[[2**64 - 1]]],
        "after": "still aligned",
    }
    r = GGUFReader(p)  # gguf-py reads the same file, and agrees on the flat ones
    assert r.fields["e.u8"].contents() == [] and r.fields["e.str"].contents() == []
    assert r.fields["after"].contents() == "still aligned"
    assert [t.name for t in r.tensors] == ["w"]


def test_default_model_matches_reader(default_model):
    info = ds4.inspect(default_model)
    r = GGUFReader(default_model)  # ~20 s: gguf-py builds a numpy view per token string
    assert info["version"] == 3
    assert len(info["tensors"]) == len(r.tensors) > 100
    assert_matches_reader(default_model, info, r)
    md = info["metadata"]
    assert md["general.architecture"] == "gemma3"
    assert len(md["tokenizer.ggml.tokens"]) == 262144
    assert {t["type"] for t in info["tensors"]} >= {"F32", "Q8_0"}


# ---------------------------------------------------------------------------------------------
# Split models

def write_split(tmp_path, name="model.gguf"):
    """A model split into 3 parts of 2 tensors each by gguf-py's own splitter."""
    path = tmp_path / name
    write_model(path, split_max_tensors=2)
    parts = [tmp_path / f"model-{i:05d}-of-00003.gguf" for i in (1, 2, 3)]
    assert all(p.exists() for p in parts) and not path.exists()
    return parts


def patch_u16(path, key: bytes, value: int):
    data = bytearray(path.read_bytes())
    at = data.index(struct.pack("<Q", len(key)) + key) + 8 + len(key)
    assert struct.unpack_from("<I", data, at)[0] == VT.UINT16
    struct.pack_into("<H", data, at + 4, value)
    path.write_bytes(bytes(data))


def test_split_opens_as_one(tmp_path):
    parts = write_split(tmp_path)
    info = ds4.inspect(parts[0])
    assert info["n_splits"] == 3
    names = [t["name"] for t in info["tensors"]]
    assert names == ["f32.2d", "f16.1d", "q8_0.2d", "f32.4d", "q8_0.3d", "f16.empty_rows"]
    assert [t["split"] for t in info["tensors"]] == [0, 0, 1, 1, 2, 2]
    assert info["metadata"]["split.count"] == 3
    assert info["metadata"]["split.no"] == 0
    assert info["metadata"]["split.tensors.count"] == 6
    # Each part's tensors match gguf-py reading that part on its own.
    for i, part in enumerate(parts):
        r = GGUFReader(part)
        mine = [t for t in info["tensors"] if t["split"] == i]
        assert [t["name"] for t in mine] == [t.name for t in r.tensors]
        for t, rt in zip(mine, r.tensors):
            assert t["offset"] + r.data_offset == rt.data_offset
            assert t["nbytes"] == rt.n_bytes
            assert list(t["shape"]) == [int(d) for d in reversed(rt.shape)]


def test_split_part_two_directly(tmp_path):
    parts = write_split(tmp_path)
    with pytest.raises(ds4.GGUFError, match="this is part 2 of a split model; open the first part") as e:
        ds4.inspect(parts[1])
    assert str(parts[1]) in str(e.value)


def test_split_missing_part(tmp_path):
    parts = write_split(tmp_path)
    parts[2].unlink()
    with pytest.raises(ds4.GGUFError, match="cannot open: No such file") as e:
        ds4.inspect(parts[0])
    assert str(e.value).startswith(str(parts[2]))


def test_split_count_disagrees_with_name(tmp_path):
    parts = write_split(tmp_path)
    patch_u16(parts[0], b"split.count", 4)
    with pytest.raises(ds4.GGUFError, match=r"split.count is 4 but the file name does not follow <name>-00001-of-00004"):
        ds4.inspect(parts[0])


def test_split_count_too_large_with_matching_names(tmp_path):
    # Renamed to -of-00004 and every count patched: part 4 does not exist.
    parts = write_split(tmp_path)
    renamed = []
    for i, p in enumerate(parts):
        patch_u16(p, b"split.count", 4)
        q = p.with_name(f"model-{i + 1:05d}-of-00004.gguf")
        shutil.move(p, q)
        renamed.append(q)
    with pytest.raises(ds4.GGUFError, match="model-00004-of-00004.gguf: cannot open"):
        ds4.inspect(renamed[0])


def test_split_count_differs_in_later_part(tmp_path):
    parts = write_split(tmp_path)
    patch_u16(parts[1], b"split.count", 2)
    with pytest.raises(ds4.GGUFError, match="'split.count' is missing or is not 3") as e:
        ds4.inspect(parts[0])
    assert str(e.value).startswith(str(parts[1]))


def test_split_no_wrong_in_later_part(tmp_path):
    parts = write_split(tmp_path)
    patch_u16(parts[2], b"split.no", 1)
    with pytest.raises(ds4.GGUFError, match="'split.no' is missing or is not 2") as e:
        ds4.inspect(parts[0])
    assert str(e.value).startswith(str(parts[2]))


def test_split_tensor_count_mismatch(tmp_path):
    parts = write_split(tmp_path)
    data = bytearray(parts[0].read_bytes())
    key = b"split.tensors.count"
    at = data.index(struct.pack("<Q", len(key)) + key) + 8 + len(key) + 4
    struct.pack_into("<i", data, at, 7)
    parts[0].write_bytes(bytes(data))
    with pytest.raises(ds4.GGUFError, match="split.tensors.count does not match the 6 tensors"):
        ds4.inspect(parts[0])


def test_split_duplicate_tensor_across_parts(tmp_path):
    parts = write_split(tmp_path)
    # Rename part 3's first tensor to the name of part 1's first (same length: "q8_0.3d" -> "f32.2d" won't
    # fit, so rename part 2's "f32.4d" to "f32.2d").
    data = parts[1].read_bytes()
    assert data.count(b"f32.4d") == 1
    parts[1].write_bytes(data.replace(b"f32.4d", b"f32.2d"))
    with pytest.raises(ds4.GGUFError, match="tensor 'f32.2d' at byte .*duplicate tensor name") as e:
        ds4.inspect(parts[0])
    assert str(e.value).startswith(str(parts[1]))
