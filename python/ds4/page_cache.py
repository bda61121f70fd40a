"""What a freshly written model file leaves in the page cache.

A decode step streams every weight once from the GGUF's mapping, and on a Xeon VM it ran 13-16 %
faster when the kernel held the file in 2 MiB folios (mapped by one TLB entry each) than in the
small folios that writing the file leaves (BENCHMARKS.md, "Weights on huge pages"). The loader
maps files with MADV_HUGEPAGE, so that a read of pages not yet cached fills 2 MiB folios; the
writers of GGUFs (download, convert, the assembled model packages) hand their pages to the disk
and drop them, so that the first load reads the file that way.
"""

from __future__ import annotations

import os
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
