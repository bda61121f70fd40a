"""Malformed GGUF files: each must raise ds4.GGUFError (a ValueError) naming the file and,
where there is one, the field and byte offset; none may crash or read outside the file."""

from __future__ import annotations

import os
import struct

import ds4
import pytest
from ggufbytes import (ARRAY, BOOL, F16, F32, FLOAT32, HEADER_SIZE, INT32, Q4_K, Q8_0, STRING, UINT8, UINT16,
                       UINT32, UINT64, Tensor, array, build, kv, scalar, string, tensor_entry, u32, u64)


def expect_error(tmp_path, data: bytes, *needles: str, name: str = "bad.gguf") -> str:
    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(ds4.GGUFError) as info:
        ds4.inspect(path)
    msg = str(info.value)
    assert isinstance(info.value, ValueError)
    assert msg.startswith(str(path) + ":"), msg
    for n in needles:
        assert n in msg, f"{n!r} not in {msg!r}"
    return msg


def good_kvs() -> list[bytes]:
    return [
        kv("general.architecture", STRING, scalar(STRING, "llama")),
        kv("t.u32", UINT32, scalar(UINT32, 7)),
        kv("t.arr", ARRAY, array(STRING, [string("a"), string("bc")])),
        kv("t.nested", ARRAY, array(ARRAY, [array(INT32, [scalar(INT32, 1), scalar(INT32, -1)]),
                                            array(STRING, [string("x")])])),
        kv("t.f", FLOAT32, scalar(FLOAT32, 0.5)),
        kv("t.b", BOOL, scalar(BOOL, 1)),
    ]


def good_tensors() -> list[Tensor]:
    return [Tensor("a", [4, 2], F32), Tensor("b", [32], Q8_0), Tensor("c", [3], F16)]


# ---------------------------------------------------------------------------------------------
# The baseline files parse, so every failure below is caused by its one corruption.

def test_baselines_are_valid(tmp_path):
    for i, b in enumerate([build(good_kvs(), good_tensors()), build(good_kvs()), build([], good_tensors())]):
        p = tmp_path / f"ok{i}.gguf"
        p.write_bytes(b.data)
        ds4.inspect(p)


# ---------------------------------------------------------------------------------------------
# Truncation: every proper prefix of a file whose last tensor ends at EOF must be rejected
# cleanly, which covers truncation inside the magic, version, counts, every key, type tag,
# scalar, string, array count and element, nested array, tensor name, dims, type, offset,
# padding and data.

@pytest.mark.parametrize("which", ["kv+tensors", "kv-only", "tensors-only"])
def test_every_prefix_is_rejected(tmp_path, which):
    kvs = good_kvs() if which != "tensors-only" else []
    tensors = good_tensors() if which != "kv-only" else []
    full = build(kvs, tensors).data
    path = tmp_path / "t.gguf"
    path.write_bytes(full)
    ds4.inspect(path)
    for n in range(len(full)):
        path.write_bytes(full[:n])
        with pytest.raises(ds4.GGUFError) as info:
            ds4.inspect(path)
        msg = str(info.value)
        assert msg.startswith(f"{path}: "), (n, msg)
        assert "at byte" in msg, (n, msg)
        assert ("truncated" in msg or "past the end" in msg or "file is empty" in msg
                or "cannot fit" in msg or "run past" in msg), (n, msg)


def test_every_prefix_of_writer_file_is_rejected(tmp_path):
    # A file from gguf-py (with padding after the last tensor): every prefix that cuts into
    # the header, directory or tensor data must fail.
    import numpy as np
    from gguf import GGUFWriter

    src = tmp_path / "w.gguf"
    w = GGUFWriter(src, arch="llama")
    w.add_array("t.tokens", ["a", "b", "c"])
    w.add_tensor("x", np.arange(8, dtype=np.float32))
    w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
    full = src.read_bytes()
    info = ds4.inspect(src)
    end = info["data_offset"] + info["tensors"][0]["offset"] + info["tensors"][0]["nbytes"]
    path = tmp_path / "t.gguf"
    for n in range(end):
        path.write_bytes(full[:n])
        with pytest.raises(ds4.GGUFError, match="at byte"):
            ds4.inspect(path)


@pytest.mark.parametrize("cut, needles", [
    (0, ["magic at byte 0", "file is empty"]),
    (3, ["magic at byte 0", "truncated"]),
    (6, ["version at byte 4", "truncated"]),
    (12, ["tensor count at byte 8", "truncated"]),
    (20, ["metadata count at byte 16", "truncated"]),
    (HEADER_SIZE + 2, ["metadata count at byte 16", "cannot fit"]),  # the count is bounded first
])
def test_truncation_in_header(tmp_path, cut, needles):
    expect_error(tmp_path, build(good_kvs()).data[:cut], *needles)


def test_truncation_inside_keys_values_arrays_and_directory(tmp_path):
    # Metadata only, led by a 100-byte array so that the count bounds never fire first.
    pad = kv("pad", ARRAY, array(UINT8, [b"\0"] * 100))
    b = build([pad] + good_kvs())
    b.kv_at.pop(0)
    # Inside the last key ('t.b'): its length, then its bytes.
    at = b.kv_at[5]
    expect_error(tmp_path, b.data[:at + 4], f"metadata key #6 length at byte {at}", "truncated")
    expect_error(tmp_path, b.data[:at + 9], f"metadata key #6 at byte {at}", "string length 3 runs past")
    expect_error(tmp_path, b.data[:at + 13], f"metadata 't.b' type at byte {at + 11}", "truncated")
    expect_error(tmp_path, b.data[:at + 15], f"metadata 't.b' at byte {at + 15}", "truncated")
    # Inside the 'general.architecture' string value: key(8+20) + type(4) puts it at +32.
    at = b.kv_at[0] + 32
    expect_error(tmp_path, b.data[:at + 3], f"metadata 'general.architecture' length at byte {at}", "truncated")
    expect_error(tmp_path, b.data[:at + 9], f"metadata 'general.architecture' at byte {at}", "string length 5")
    # Inside a scalar: 't.u32' value at key(8+5) + type(4).
    at = b.kv_at[1] + 17
    expect_error(tmp_path, b.data[:at + 2], f"metadata 't.u32' at byte {at}", "truncated")
    # Inside the t.arr array: after key(8+5) + type(4) come the element type and count.
    at = b.kv_at[2] + 17
    expect_error(tmp_path, b.data[:at + 2], f"metadata 't.arr' element type at byte {at}", "truncated")
    expect_error(tmp_path, b.data[:at + 6], f"metadata 't.arr' element count at byte {at + 4}", "truncated")
    expect_error(tmp_path, b.data[:at + 12 + 4], f"metadata 't.arr' at byte {at + 4}", "cannot fit")
    expect_error(tmp_path, b.data[:at + 12 + 8 + 1 + 8 + 1], f"metadata 't.arr' at byte {at + 12 + 9}",
                 "string length 2 runs past")
    # Inside the nested array: outer header, then the first inner array's header and elements.
    at = b.kv_at[3] + 8 + 8 + 4
    # Layout: outer header (12), inner int32 array (12 + 8), inner string array (12 + 9).
    expect_error(tmp_path, b.data[:at + 6], f"metadata 't.nested' element count at byte {at + 4}", "truncated")
    expect_error(tmp_path, b.data[:at + 44 + 8], f"metadata 't.nested' at byte {at + 44}", "string length 1 runs past")
    b = build(good_kvs(), good_tensors())
    # Inside the tensor directory: name, dims, type, offset.
    t0 = b.tensor_at[0]
    expect_error(tmp_path, b.data[:t0 + 5], f"tensor #0 name length at byte {t0}", "truncated")
    expect_error(tmp_path, b.data[:t0 + 9 + 2], f"tensor 'a' dimension count at byte {t0 + 9}")
    expect_error(tmp_path, b.data[:t0 + 13 + 12], f"tensor 'a' dimension 1 at byte {t0 + 21}")
    expect_error(tmp_path, b.data[:t0 + 29 + 1], f"tensor 'a' type at byte {t0 + 29}")
    expect_error(tmp_path, b.data[:t0 + 33 + 7], f"tensor 'a' offset at byte {t0 + 33}")
    # Inside the data section: the last tensor no longer fits.
    expect_error(tmp_path, b.data[:-1], "tensor 'c' data at byte", "run past its end")


# ---------------------------------------------------------------------------------------------
# Header

def test_empty_file(tmp_path):
    expect_error(tmp_path, b"", "magic at byte 0", "empty")


def test_bad_magic(tmp_path):
    expect_error(tmp_path, build(good_kvs(), magic=b"GGML").data, "magic at byte 0", "not a GGUF file", "47 47 4d 4c")


@pytest.mark.parametrize("version", [0, 1, 4, 0xFFFFFFFF])
def test_unsupported_version(tmp_path, version):
    expect_error(tmp_path, build(good_kvs(), version=version).data, "version at byte 4",
                 f"unsupported GGUF version {version}")


def test_big_endian_version(tmp_path):
    data = bytearray(build(good_kvs()).data)
    data[4:8] = struct.pack(">I", 3)
    expect_error(tmp_path, bytes(data), "version at byte 4", "big-endian")


def test_huge_tensor_count(tmp_path):
    expect_error(tmp_path, build(good_kvs(), n_tensors=2**64 - 1).data, "tensor count at byte 8", "cannot fit")


def test_huge_kv_count(tmp_path):
    expect_error(tmp_path, build(good_kvs(), n_kv=2**62).data, "metadata count at byte 16", "cannot fit")


def test_kv_count_larger_than_entries(tmp_path):
    # Plausible count, but the entries run out: reading the missing key must fail.
    expect_error(tmp_path, build(good_kvs(), n_kv=len(good_kvs()) + 1).data, "metadata key #6", "truncated")


# ---------------------------------------------------------------------------------------------
# Metadata

def test_huge_key_length(tmp_path):
    data = build([u64(2**64 - 1) + b"abc" + bytes(16)], n_kv=1).data
    expect_error(tmp_path, data, "metadata key #0 at byte 24", "string length 18446744073709551615 runs past")


def test_huge_string_value_length(tmp_path):
    e = string("k") + u32(STRING) + u64(2**63) + b"xyz"
    expect_error(tmp_path, build([e]).data, "metadata 'k' at byte 37", "string length 9223372036854775808")


def test_huge_array_count(tmp_path):
    e = kv("k", ARRAY, u32(UINT8) + u64(2**63) + b"\x00" * 16)
    expect_error(tmp_path, build([e]).data, "metadata 'k' at byte 41", "array of 9223372036854775808 uint8")


def test_huge_string_array_count(tmp_path):
    # Each string element needs at least 8 bytes: 4 empty strings fit in 32, 5 do not.
    e = kv("k", ARRAY, u32(STRING) + u64(5) + bytes(32))
    expect_error(tmp_path, build([e]).data, "metadata 'k' at byte 41", "array of 5 string elements cannot fit")


def test_huge_string_inside_array(tmp_path):
    e = kv("k", ARRAY, array(STRING, [string("ok"), u64(2**40) + b"x"]))
    expect_error(tmp_path, build([e]).data, "metadata 'k' at byte 59", "string length 1099511627776")


def test_arrays_nested_too_deep(tmp_path):
    payload = array(UINT8, [scalar(UINT8, 1)])
    for _ in range(16):
        payload = array(ARRAY, [payload])
    expect_error(tmp_path, build([kv("deep", ARRAY, payload)]).data, "metadata 'deep'", "nested too deeply")


def test_arrays_nested_at_the_limit_are_fine(tmp_path):
    payload = array(UINT8, [scalar(UINT8, 1)])
    for _ in range(15):
        payload = array(ARRAY, [payload])
    p = tmp_path / "ok.gguf"
    p.write_bytes(build([kv("deep", ARRAY, payload)]).data)
    v = ds4.inspect(p)["metadata"]["deep"]
    for _ in range(15):
        v = v[0]
    assert v == [1]


@pytest.mark.parametrize("vtype", [13, 255, 2**32 - 1])
def test_unknown_value_type(tmp_path, vtype):
    expect_error(tmp_path, build([kv("k", vtype, b"\x00" * 8)]).data, "metadata 'k' at byte 33",
                 f"unknown value type {vtype}")


def test_unknown_array_element_type(tmp_path):
    e = kv("k", ARRAY, u32(13) + u64(1) + b"\x00" * 8)
    expect_error(tmp_path, build([e]).data, "metadata 'k' at byte 37", "unknown array element type 13")


def test_unknown_nested_array_element_type(tmp_path):
    e = kv("k", ARRAY, u32(ARRAY) + u64(1) + u32(99) + u64(0))
    expect_error(tmp_path, build([e]).data, "metadata 'k' at byte 49", "unknown array element type 99")


def test_duplicate_key(tmp_path):
    kvs = [kv("a", UINT8, b"\x01"), kv("b", UINT8, b"\x02"), kv("a", UINT8, b"\x03")]
    b = build(kvs)
    expect_error(tmp_path, b.data, f"metadata 'a' at byte {b.kv_at[2]}", "duplicate key")


@pytest.mark.parametrize("key", [b"bad\xff", b"\xc0\xaf", b"\xed\xa0\x80", b"abc\xe2\x82", b"\xf4\x90\x80\x80"],
                         ids=["invalid-byte", "overlong", "surrogate", "cut-sequence", "above-U+10FFFF"])
def test_invalid_utf8_key(tmp_path, key):
    b = build([kv("ok", UINT8, b"\x00"), kv(key, UINT8, b"\x00")])
    expect_error(tmp_path, b.data, f"metadata key #1 at byte {b.kv_at[1]}", "not valid UTF-8")


def test_empty_key(tmp_path):
    expect_error(tmp_path, build([kv("", UINT8, b"\x00")]).data, "metadata key #0 at byte 24", "key is empty")


@pytest.mark.parametrize("byte", [2, 0xFF])
def test_bool_out_of_range(tmp_path, byte):
    expect_error(tmp_path, build([kv("flag", BOOL, bytes([byte]))]).data, "metadata 'flag' at byte 40",
                 f"bool value {byte} is neither 0 nor 1")


def test_bool_out_of_range_in_array(tmp_path):
    e = kv("flags", ARRAY, array(BOOL, [b"\x00", b"\x01", b"\x02"]))
    expect_error(tmp_path, build([e]).data, "metadata 'flags' at byte 55", "bool value 2")


@pytest.mark.parametrize("vtype, payload, needle", [
    (UINT32, scalar(UINT32, 0), "is 0, not a power of two"),
    (UINT32, scalar(UINT32, 3), "is 3, not a power of two"),
    (UINT32, scalar(UINT32, 48), "is 48, not a power of two"),
    (UINT32, scalar(UINT32, 4), "is 4, not a power of two of at least 8"),
    (UINT32, scalar(UINT32, 1), "is 1, not a power of two of at least 8"),
    (UINT64, scalar(UINT64, 64), "must be uint32, found uint64"),
    (STRING, scalar(STRING, "32"), "must be uint32, found string"),
    (INT32, scalar(INT32, 32), "must be uint32, found int32"),
])
def test_bad_alignment(tmp_path, vtype, payload, needle):
    expect_error(tmp_path, build([kv("general.alignment", vtype, payload)], good_tensors()).data,
                 "general.alignment", needle)


# ---------------------------------------------------------------------------------------------
# Tensor directory

def test_unknown_tensor_type(tmp_path):
    for ttype in (4, 5, 42, 2**31):  # 4/5 were Q4_2/Q4_3, removed from ggml long ago
        b = build([], [Tensor("a", [4])])
        data = bytearray(b.data)
        at = b.tensor_at[0] + 9 + 4 + 8
        data[at:at + 4] = u32(ttype)
        expect_error(tmp_path, bytes(data), f"tensor 'a' at byte {at}", f"unknown tensor type id {ttype}")


def test_too_many_dims(tmp_path):
    data = build([], [Tensor("a", [1, 1, 1, 1, 2])]).data
    expect_error(tmp_path, data, f"tensor 'a' at byte {HEADER_SIZE + 9}", "5 dimensions (at most 4")


def test_dims_product_overflows(tmp_path):
    data = build([], [Tensor("a", [2**32, 2**32], F32, offset=0)], data_len=64).data
    expect_error(tmp_path, data, f"tensor 'a' at byte {HEADER_SIZE + 21}", "dimension 1 of 4294967296 overflows")


def test_dim_above_int64_max(tmp_path):
    data = build([], [Tensor("a", [2**63], F32, offset=0)], data_len=64).data
    expect_error(tmp_path, data, f"tensor 'a' at byte {HEADER_SIZE + 13}", "dimension 0 of 9223372036854775808")


def test_byte_size_overflows(tmp_path):
    # 2^62 F32 elements fit in int64, their 2^64 bytes do not fit in uint64.
    data = build([], [Tensor("a", [2**62], F32, offset=0)], data_len=64).data
    expect_error(tmp_path, data, "tensor 'a'", "byte size overflows")


@pytest.mark.parametrize("ttype, ne0", [(Q8_0, 33), (Q8_0, 16), (Q4_K, 32)])
def test_row_not_multiple_of_block(tmp_path, ttype, ne0):
    data = build([], [Tensor("a", [ne0, 2], ttype, offset=0)]).data
    expect_error(tmp_path, data, "tensor 'a' at byte", f"row length {ne0} is not a multiple")


def test_tensor_offset_past_eof(tmp_path):
    b = build([], [Tensor("a", [4]), Tensor("b", [4], offset=2**40)], data_len=64)
    expect_error(tmp_path, b.data, f"tensor 'b' data at byte {b.tensor_at[1]}", "run past its end")


def test_tensor_extent_past_eof(tmp_path):
    b = build([], [Tensor("a", [4]), Tensor("b", [8])])
    expect_error(tmp_path, b.data[:-4], f"tensor 'b' data at byte {b.tensor_at[1]}", "bytes 32..64", "run past")


def test_tensor_offset_near_uint64_max(tmp_path):
    # offset + nbytes wraps around 2^64: must still be caught.
    b = build([], [Tensor("a", [8], offset=2**64 - 32)], data_len=64)
    expect_error(tmp_path, b.data, "tensor 'a' data", "run past its end")


def test_data_section_past_eof(tmp_path):
    # A directory whose padding to the data section already runs past EOF.
    b = build([], [Tensor("a", [0], offset=0)])
    data = b.data[:b.tensor_at[0] + len(tensor_entry("a", [0], F32, 0))]
    assert len(data) % 32 != 0
    expect_error(tmp_path, data, "data section at byte", "past the end")


def test_offset_not_aligned(tmp_path):
    b = build([], [Tensor("a", [4]), Tensor("b", [4], offset=40)])
    at = b.tensor_at[1] + 9 + 4 + 8 + 4
    expect_error(tmp_path, b.data, f"tensor 'b' at byte {at}", "data offset 40 is not a multiple of the alignment 32")


def test_offset_not_aligned_custom_alignment(tmp_path):
    b = build([kv("general.alignment", UINT32, scalar(UINT32, 64))], [Tensor("a", [4]), Tensor("b", [4], offset=32)],
              alignment=64)
    expect_error(tmp_path, b.data, "tensor 'b'", "data offset 32 is not a multiple of the alignment 64")


def test_overlapping_tensors(tmp_path):
    b = build([], [Tensor("a", [16]), Tensor("b", [8], offset=32)])
    expect_error(tmp_path, b.data, f"tensor 'b' data at byte {b.tensor_at[1]}", "overlaps the data of tensor 'a'")


def test_identical_tensor_extents(tmp_path):
    b = build([], [Tensor("a", [8]), Tensor("b", [8], offset=0)])
    expect_error(tmp_path, b.data, "overlaps the data of tensor")


def test_overlap_hidden_behind_empty_tensor(tmp_path):
    # 'a' covers [0, 256); the empty 'e' sits at 32; 'c' [96, 128) overlaps 'a'. Comparing only
    # neighbours in offset order (a-e, e-c) missed it.
    b = build([], [Tensor("a", [64]), Tensor("e", [0], offset=32), Tensor("c", [8], offset=96)])
    expect_error(tmp_path, b.data, "tensor 'c' data", "overlaps the data of tensor 'a'")


def test_duplicate_tensor_name(tmp_path):
    b = build([], [Tensor("w", [4]), Tensor("x", [4]), Tensor("w", [4])])
    expect_error(tmp_path, b.data, f"tensor 'w' at byte {b.tensor_at[2]}", "duplicate tensor name")


@pytest.mark.parametrize("name", [b"w\xff", b"\xc1\x81", b"\xed\xbf\xbf"])
def test_invalid_utf8_tensor_name(tmp_path, name):
    b = build([], [Tensor("ok", [4]), Tensor(name, [4])])
    expect_error(tmp_path, b.data, f"tensor #1 name at byte {b.tensor_at[1]}", "not valid UTF-8")


def test_empty_tensor_name(tmp_path):
    expect_error(tmp_path, build([], [Tensor("", [4])]).data, "tensor #0 name at byte 24", "name is empty")


# ---------------------------------------------------------------------------------------------
# Paths and split bookkeeping on a single file

def test_directory_path(tmp_path):
    d = tmp_path / "dir.gguf"
    d.mkdir()
    with pytest.raises(ds4.GGUFError, match="not a regular file") as info:
        ds4.inspect(d)
    assert str(d) in str(info.value)


def test_nonexistent_path(tmp_path):
    p = tmp_path / "missing.gguf"
    with pytest.raises(ds4.GGUFError, match="cannot open: No such file") as info:
        ds4.inspect(p)
    assert isinstance(info.value, ValueError) and str(p) in str(info.value)


@pytest.mark.skipif(os.geteuid() == 0, reason="root can read anything")
def test_unreadable_file(tmp_path):
    p = tmp_path / "locked.gguf"
    p.write_bytes(build(good_kvs()).data)
    p.chmod(0)
    with pytest.raises(ds4.GGUFError, match="cannot open"):
        ds4.inspect(p)


@pytest.mark.parametrize("vtype, payload, needle", [
    (STRING, scalar(STRING, "3"), "'split.count' must be an integer"),
    (UINT16, scalar(UINT16, 0), "'split.count' is 0"),
    (INT32, scalar(INT32, -2), "'split.count' is -2"),
    (UINT16, scalar(UINT16, 3), "file name does not follow <name>-00001-of-00003.gguf"),
])
def test_bad_split_count(tmp_path, vtype, payload, needle):
    expect_error(tmp_path, build([kv("split.count", vtype, payload)]).data, needle)


def test_negative_split_no(tmp_path):
    data = build([kv("split.no", INT32, scalar(INT32, -1)), kv("split.count", UINT16, scalar(UINT16, 2))]).data
    expect_error(tmp_path, data, "metadata 'split.no' is -1, expected 0..1", name="m-00001-of-00002.gguf")


def test_split_no_past_count(tmp_path):
    data = build([kv("split.no", UINT16, scalar(UINT16, 5)), kv("split.count", UINT16, scalar(UINT16, 2))]).data
    expect_error(tmp_path, data, "metadata 'split.no' is 5, expected 0..1", name="m-00001-of-00002.gguf")


# ---------------------------------------------------------------------------------------------
# Resource bounds: a corrupt count in a large file must fail fast, not allocate without limit.

def test_huge_array_in_large_sparse_file(tmp_path):
    # 1 GiB of (sparse) zero bytes after a uint8 array header claiming to span it all: each
    # element costs far more memory as a parsed value than its one byte in the file.
    p = tmp_path / "sparse.gguf"
    head = build([kv("k", ARRAY, u32(UINT8) + u64(2**30))]).data
    with open(p, "wb") as f:
        f.write(head)
        f.truncate(len(head) + 2**30)
    with pytest.raises(ds4.GGUFError, match=r"metadata 'k' at byte 41: array of 1073741824 uint8"):
        ds4.inspect(p)
