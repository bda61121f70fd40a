"""What a freshly written model file leaves in the page cache.

A decode step streams every weight once from the GGUF's mapping; on a Xeon VM, Qwen2.5-Coder
1.5B decoded at 24 tok/s with its file's pages cached in 2 MiB folios (each mapped by one TLB
entry) and at 21-23 with the small folios that writing the file leaves (BENCHMARKS.md, "Weights
on huge pages"). The loader maps files with MADV_HUGEPAGE, so that a read of pages not yet cached
fills 2 MiB folios; the writers of GGUFs (download, convert, the assembled model packages) hand
their pages to the disk and drop them, so that the first load reads the file that way.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import sys
from dataclasses import dataclass
from pathlib import Path


def drop_written(path: Path | str) -> None:
    """Writes ``path``'s pages to disk and drops them from the page cache (Linux; advice only:
    pages another process maps stay, and elsewhere nothing happens). Errors of the disk raise
    OSError, as the write would have."""
    if not hasattr(os, "posix_fadvise"):
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fdatasync(fd)  # dirty pages cannot be dropped
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


@dataclass(frozen=True)
class CacheState:
    """A file in the page cache, as fractions of its pages: ``resident``, those cached before
    cache_state read it; ``huge``, those a mapping like the loader's got on 2 MiB pages once read."""

    resident: float
    huge: float


def cache_state(path: Path | str) -> CacheState:
    """The page cache's hold on ``path`` (Linux; elsewhere zeros), read through a mapping like the
    loader's (2 MiB-aligned, MADV_HUGEPAGE): pages not yet cached are read in, at the disk's speed,
    as a load would read them. Decode speed of a model larger than the caches depends on it: the
    benches print it beside their figures."""
    size = os.path.getsize(path)
    if not sys.platform.startswith("linux") or size == 0:
        return CacheState(0.0, 0.0)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
    page = mmap.PAGESIZE
    pages = (size + page - 1) // page
    fd = os.open(path, os.O_RDONLY)
    try:
        span = libc.mmap(None, size + _HUGE, _PROT_NONE, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, -1, 0)
        if span in (None, _FAILED):
            raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
        at = (span + _HUGE - 1) // _HUGE * _HUGE
        addr = libc.mmap(at, size, mmap.PROT_READ, mmap.MAP_PRIVATE | _MAP_FIXED, fd, 0)
        if addr in (None, _FAILED):
            err = ctypes.get_errno()
            libc.munmap(span, size + _HUGE)
            raise OSError(err, os.strerror(err))
        try:
            libc.madvise(addr, size, _MADV_HUGEPAGE)
            vec = ctypes.create_string_buffer(pages)
            if libc.mincore(addr, size, vec) != 0:
                raise OSError(ctypes.get_errno(), f"mincore of {path}: {os.strerror(ctypes.get_errno())}")
            resident = sum(b & 1 for b in vec.raw) / pages
            buf = (ctypes.c_char * size).from_address(addr)
            for off in range(0, size, page):
                buf[off]  # noqa: B018 - the read is the point
            huge = _pmd_mapped_bytes(addr) / (pages * page)
        finally:
            libc.munmap(span, size + _HUGE)
    finally:
        os.close(fd)
    return CacheState(resident, huge)


def _pmd_mapped_bytes(addr: int) -> int:
    """FilePmdMapped of this process's mapping that starts at ``addr`` (/proc/self/smaps)."""
    start = f"{addr:x}-"
    inside = False
    with open("/proc/self/smaps") as f:
        for line in f:
            if not line[0].isupper() or ":" not in line.split()[0]:
                inside = line.startswith(start)
            elif inside and line.startswith("FilePmdMapped:"):
                return int(line.split()[1]) * 1024
    return 0


_HUGE = 2 << 20
_PROT_NONE = 0
_FAILED = ctypes.c_void_p(-1).value
_MAP_FIXED = 0x10
_MADV_HUGEPAGE = 14
