"""How a model file is mapped: on a 2 MiB boundary with MADV_HUGEPAGE (Linux), so that the page
cache's 2 MiB folios map whole and a read of uncached pages fills such folios (csrc/gguf/gguf.cpp,
map_file); and ds4.page_cache.drop_written, which leaves a written file's pages to the next read."""

from __future__ import annotations

import ctypes
import mmap
import os
import sys
from pathlib import Path

import ds4
import pytest
from ds4.page_cache import drop_written

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux mappings")

HUGE = 2 << 20


def mapping_of(path: Path) -> tuple[int, list[str]]:
    """(start address, VmFlags) of this process's first mapping of `path`."""
    lines = Path("/proc/self/smaps").read_text().splitlines()
    for i, line in enumerate(lines):
        if line.endswith(str(path)):
            start = int(line.split("-")[0], 16)
            for rest in lines[i + 1:]:
                if rest.startswith("VmFlags:"):
                    return start, rest.split()[1:]
    raise AssertionError(f"{path} is not mapped")


def test_model_file_mapped_for_huge_pages(gemma_path: Path) -> None:
    model = ds4.Model(gemma_path, threads=1, n_ctx=64)
    start, flags = mapping_of(Path(os.path.realpath(gemma_path)))
    assert start % HUGE == 0
    assert "hg" in flags  # MADV_HUGEPAGE
    del model


def resident_pages(path: Path) -> int:
    """Pages of `path` in the page cache (mincore over a fresh read-only mapping)."""
    size = path.stat().st_size
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        assert addr not in (None, ctypes.c_void_p(-1).value), os.strerror(ctypes.get_errno())
        pages = (size + mmap.PAGESIZE - 1) // mmap.PAGESIZE
        vec = ctypes.create_string_buffer(pages)
        assert libc.mincore(addr, size, vec) == 0, os.strerror(ctypes.get_errno())
        libc.munmap(addr, size)
    finally:
        os.close(fd)
    return sum(b & 1 for b in vec.raw)


def on_tmpfs(path: Path) -> bool:
    mounts = [line.split() for line in Path("/proc/mounts").read_text().splitlines()]
    best = max((m for m in mounts if str(path).startswith(m[1])), key=lambda m: len(m[1]))
    return best[2] in ("tmpfs", "ramfs")


def test_drop_written_leaves_the_pages_to_the_next_read(tmp_path: Path) -> None:
    if on_tmpfs(tmp_path):
        pytest.skip("tmpfs pages are the file itself: nothing to drop")
    path = tmp_path / "model.gguf"
    data = os.urandom(8 << 20)
    path.write_bytes(data)
    assert resident_pages(path) > 0  # what writing left behind
    drop_written(path)
    assert resident_pages(path) == 0
    assert path.read_bytes() == data  # read back from the disk, whole
