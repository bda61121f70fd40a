"""What a freshly written model file leaves in the page cache.

A decode step streams every weight once from the GGUF's mapping; on a Xeon VM, Qwen2.5-Coder
1.5B decoded at 24 tok/s with its file's pages cached in 2 MiB folios (each mapped by one TLB
entry) and at 21-23 with the small folios that writing the file leaves (BENCHMARKS.md, "Weights
on huge pages"). The loader maps files with MADV_HUGEPAGE, so that a read of pages not yet cached
fills 2 MiB folios; the writers of GGUFs (download, convert, the assembled model packages) hand
their pages to the disk and drop them, so that the first load reads the file that way.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ds4 import _core


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
    cache_state read it; ``huge``, those the loader's mapping got on 2 MiB pages once read."""

    resident: float
    huge: float


def cache_state(path: Path | str) -> CacheState:
    """The page cache's hold on ``path`` (Linux; elsewhere zeros), read through the loader's own
    mapping (2 MiB-aligned, MADV_HUGEPAGE; csrc/platform/huge_map.h): pages not yet cached are
    read in, at the disk's speed, as a load would read them. Decode speed of a model larger than
    the caches depends on it: the benches print it beside their figures. OSError if the file
    cannot be read."""
    return CacheState(*_core.file_cache_state(os.fspath(path)))
