"""Session states in files: what :meth:`ds4.Session.save` writes and :meth:`ds4.Session.load`
reads, and what the server's prompt cache on disk keeps (docs/state-files.md).

A file is ``DS4KVF01``, a little-endian u32 header length, a JSON header, then the engine's
bytes of the state (``SessionSnapshot.to_bytes``). The header names the model the state belongs
to (:func:`identity`: the file's bytes sampled, the KV type, the activation precision and the
SIMD level, everything that changes the cached values), the engine's state format, the token
ids held (a prompt cache matches prefixes without reading the state) and a BLAKE2b checksum
of the state. A file is written to a temporary name, flushed to the disk and renamed, so a
crash at any point leaves either the old file or the whole new one, never a torn one.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from ds4 import _core

if TYPE_CHECKING:
    from ds4.model import Model

MAGIC = b"DS4KVF01"
TEMP_PREFIX = ".tmp-"  # a file being written (what a crash mid-save leaves: safe to remove)
_HEAD = struct.Struct("<8sI")
_MAX_HEADER = 64 << 20
_SAMPLES, _SAMPLE_BYTES, _FIRST_BYTES = 16, 64 << 10, 16 << 20


class StateFileError(ValueError):
    """A state file that cannot be used: not one, cut short, corrupt, or for another model or engine."""


@dataclass(frozen=True)
class Header:
    model: str            # identity() of the model whose session was saved
    state_format: int     # the engine's layout of the state bytes (_core.STATE_FORMAT)
    tokens: list[int]     # the ids of the positions held
    nbytes: int           # bytes of the state
    blake2b: str          # hex digest of the state bytes
    offset: int           # where the state bytes start in the file


def identity(model: Model) -> str:
    """A digest of everything that decides a session's cached values: the GGUF's size, its first
    16 MiB (the metadata and tensor directory: architecture, shapes, quantisation) and 16 slices
    of 64 KiB spread over the weights, the KV type, the activation precision and the SIMD level the
    kernels run at (another level rounds differently, so its cache would not be bit for bit a
    fresh prefill's). Memoised on the model."""
    cached = getattr(model, "_state_identity", None)
    if cached is not None:
        return str(cached)
    h = hashlib.blake2b(digest_size=16)
    size = os.path.getsize(model.path)
    h.update(struct.pack("<Q", size))
    with open(model.path, "rb") as f:
        h.update(f.read(_FIRST_BYTES))
        for i in range(_SAMPLES):
            f.seek(size * i // _SAMPLES)
            h.update(f.read(_SAMPLE_BYTES))
    h.update(f"{model.kv_type}/{model.precision}/{_core.simd_active()}".encode())
    digest = h.hexdigest()
    model._state_identity = digest  # type: ignore[attr-defined]
    return digest


def write(path: str | os.PathLike[str], snap: _core.SessionSnapshot, model_id: str,
          data: bytes | None = None) -> int:
    """Writes `snap` (of a session of the model whose identity() is `model_id`; `data`: its
    to_bytes(), when the caller has them) to `path` atomically; returns the file's size."""
    path = Path(path)
    if data is None:
        data = snap.to_bytes()
    header = json.dumps({"model": model_id, "state_format": _core.STATE_FORMAT, "tokens": snap.tokens,
                         "nbytes": len(data), "blake2b": hashlib.blake2b(data).hexdigest()},
                        separators=(",", ":")).encode()
    fd, tmp = tempfile.mkstemp(prefix=TEMP_PREFIX, suffix=path.suffix, dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(_HEAD.pack(MAGIC, len(header)))
            f.write(header)
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)
    return _HEAD.size + len(header) + len(data)


def read_header(path: str | os.PathLike[str]) -> Header:
    """The header of a state file (the state itself is not read nor checked)."""
    with open(path, "rb") as f:
        return _header(f, path)


def _header(f: BinaryIO, path: str | os.PathLike[str]) -> Header:
    """The header at the start of open file f (left just after it)."""
    head = f.read(_HEAD.size)
    if len(head) < _HEAD.size or head[:8] != MAGIC:
        raise StateFileError(f"{path}: not a ds4 state file")
    n = _HEAD.unpack(head)[1]
    if n > _MAX_HEADER:
        raise StateFileError(f"{path}: corrupt header ({n} bytes)")
    raw = f.read(n)
    try:
        h: dict[str, Any] = json.loads(raw)
        out = Header(model=str(h["model"]), state_format=int(h["state_format"]), tokens=[int(t) for t in h["tokens"]],
                     nbytes=int(h["nbytes"]), blake2b=str(h["blake2b"]), offset=_HEAD.size + n)
    except (ValueError, KeyError, TypeError) as e:
        raise StateFileError(f"{path}: corrupt header ({e})") from None
    return out


def check_header(path: str | os.PathLike[str], header: Header, model_id: str) -> None:
    """Raises StateFileError if the header is for another model or engine format."""
    if header.model != model_id:
        raise StateFileError(f"{path}: a state of another model (or of this one with another KV type, precision "
                             f"or SIMD level)")
    if header.state_format != _core.STATE_FORMAT:
        raise StateFileError(f"{path}: state format {header.state_format}, this engine reads {_core.STATE_FORMAT}")


def read(path: str | os.PathLike[str], session: _core.Session, model_id: str) -> _core.SessionSnapshot:
    """The snapshot a state file holds, for `session` (of the model whose identity() is
    `model_id`), after checking the model, the format and the checksum."""
    with open(path, "rb") as f:
        header = _header(f, path)
        check_header(path, header, model_id)
        data = f.read(header.nbytes + 1)
    if len(data) != header.nbytes:
        raise StateFileError(f"{path}: {len(data)} bytes of state where the header says {header.nbytes}")
    if hashlib.blake2b(data).hexdigest() != header.blake2b:
        raise StateFileError(f"{path}: the state's checksum does not match (a corrupt file)")
    try:
        return session.snapshot_from_bytes(data)
    except _core.ModelError as e:
        raise StateFileError(f"{path}: {e}") from None


def _fsync_dir(d: Path) -> None:
    """Makes a rename in `d` durable (where the platform lets a directory be opened)."""
    try:
        fd = os.open(d, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
