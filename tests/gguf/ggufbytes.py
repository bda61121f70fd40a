"""Builds GGUF files byte by byte (struct.pack), so tests can corrupt exactly one field.

Layout (little-endian): "GGUF" u32 version, u64 n_tensors, u64 n_kv; n_kv × (string key,
u32 type, value); n_tensors × (string name, u32 n_dims, u64 ne[n_dims], u32 type, u64 offset);
padding to the alignment; data. A string is u64 length + bytes; an array value is u32 element
type, u64 count, elements.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

# Value type ids.
UINT8, INT8, UINT16, INT16, UINT32, INT32, FLOAT32, BOOL, STRING, ARRAY, UINT64, INT64, FLOAT64 = range(13)
_FMT = {UINT8: "<B", INT8: "<b", UINT16: "<H", INT16: "<h", UINT32: "<I", INT32: "<i", FLOAT32: "<f",
        BOOL: "<B", UINT64: "<Q", INT64: "<q", FLOAT64: "<d"}

# Tensor type ids (ggml) with (block size, bytes per block).
F32, F16, Q8_0, Q4_K = 0, 1, 8, 12
BLOCK = {F32: (1, 4), F16: (1, 2), Q8_0: (32, 34), Q4_K: (256, 144)}

HEADER_SIZE = 24  # magic, version, n_tensors, n_kv


def u32(x: int) -> bytes:
    return struct.pack("<I", x)


def u64(x: int) -> bytes:
    return struct.pack("<Q", x)


def string(s: str | bytes) -> bytes:
    b = s.encode() if isinstance(s, str) else s
    return u64(len(b)) + b


def scalar(vtype: int, value) -> bytes:
    """Encoded value without its type tag."""
    if vtype == STRING:
        return string(value)
    return struct.pack(_FMT[vtype], value)


def array(elem_type: int, items: list[bytes]) -> bytes:
    """Array payload (without the ARRAY tag) from already-encoded elements."""
    return u32(elem_type) + u64(len(items)) + b"".join(items)


def kv(key: str | bytes, vtype: int, payload: bytes) -> bytes:
    """One metadata entry; payload is the encoded value (use scalar() / array())."""
    return string(key) + u32(vtype) + payload


def tensor_entry(name: str | bytes, ne: list[int], ttype: int, offset: int) -> bytes:
    return string(name) + u32(len(ne)) + b"".join(u64(d) for d in ne) + u32(ttype) + u64(offset)


def nbytes(ne: list[int], ttype: int) -> int:
    n = 1
    for d in ne:
        n *= d
    bs, ts = BLOCK[ttype]
    return n // bs * ts


@dataclass
class Tensor:
    name: str | bytes
    ne: list[int]
    ttype: int = F32
    offset: int | None = None  # None: placed after the previous tensor, aligned


@dataclass
class Built:
    data: bytes
    kv_at: list[int] = field(default_factory=list)      # byte offset of each metadata entry
    tensor_at: list[int] = field(default_factory=list)  # byte offset of each directory entry
    data_offset: int = 0                                # start of the data section


def build(kvs: list[bytes] = (), tensors: list[Tensor] = (), *, version: int = 3, magic: bytes = b"GGUF",
          n_kv: int | None = None, n_tensors: int | None = None, alignment: int = 32,
          pad_end: bool = False, data_len: int | None = None) -> Built:
    """A GGUF file. Tensor data is filled with a byte pattern; the file ends exactly where the
    last tensor's data ends (so any shorter prefix is truncated) unless pad_end. data_len
    overrides the data size (for tensors too large to write)."""
    out = bytearray(magic + u32(version) + u64(len(tensors) if n_tensors is None else n_tensors)
                    + u64(len(kvs) if n_kv is None else n_kv))
    b = Built(b"")
    for e in kvs:
        b.kv_at.append(len(out))
        out += e
    offsets, end = [], 0
    for t in tensors:
        off = t.offset if t.offset is not None else -(-end // alignment) * alignment
        offsets.append(off)
        end = max(end, off + nbytes(t.ne, t.ttype))
    for t, off in zip(tensors, offsets):
        b.tensor_at.append(len(out))
        out += tensor_entry(t.name, t.ne, t.ttype, off)
    if tensors or pad_end:
        out += bytes(-len(out) % alignment)
    b.data_offset = len(out)
    out += bytes((i * 7 + 1) & 0xFF for i in range(end if data_len is None else data_len))
    if pad_end:
        out += bytes(-len(out) % alignment)
    b.data = bytes(out)
    return b
