"""How a model file is mapped: on a 2 MiB boundary with MADV_HUGEPAGE (Linux), so that the page
cache's 2 MiB folios map whole and a read of uncached pages fills such folios (csrc/gguf/gguf.cpp,
map_file)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import ds4
import pytest

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
