"""ds4.page_cache: drop_written leaves a written file's pages to the next read, cache_state says
how much of a file the page cache held and how much a loader-like mapping gets on 2 MiB pages."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from ds4.page_cache import cache_state, drop_written
from huge_pages import thp_available

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux page cache")


def mount_of(path: Path) -> tuple[str, str]:
    """(mount point, file system type) holding `path`."""
    mounts = [line.split() for line in Path("/proc/mounts").read_text().splitlines()]
    best = max((m for m in mounts if str(path).startswith(m[1])), key=lambda m: len(m[1]))
    return best[1], best[2]


def kernel_at_least(major: int, minor: int) -> bool:
    release = os.uname().release.split(".")
    return (int(release[0]), int("".join(c for c in release[1] if c.isdigit()))) >= (major, minor)


@pytest.fixture
def written(tmp_path: Path) -> tuple[Path, bytes]:
    if mount_of(tmp_path)[1] in ("tmpfs", "ramfs"):
        pytest.skip("tmpfs pages are the file itself: nothing to drop")
    path = tmp_path / "model.gguf"
    data = os.urandom(8 << 20)
    path.write_bytes(data)
    return path, data


def test_drop_written_leaves_the_pages_to_the_next_read(written: tuple[Path, bytes]) -> None:
    path, data = written
    assert cache_state(path).resident > 0.9  # what writing left behind
    drop_written(path)
    first = cache_state(path)
    assert first.resident == 0.0
    assert cache_state(path).resident == 1.0  # the first call read it all in
    assert 0.0 <= first.huge <= 1.0
    assert path.read_bytes() == data


@pytest.mark.skipif(not thp_available(), reason="transparent huge pages are off")
def test_a_dropped_file_comes_back_on_huge_pages(written: tuple[Path, bytes]) -> None:
    path, _ = written
    if mount_of(path)[1] != "ext4" or not kernel_at_least(6, 16):
        pytest.skip("large folios in the page cache: ext4 from Linux 6.16 (where this was measured)")
    drop_written(path)
    assert cache_state(path).huge == 1.0  # 8 MiB: four 2 MiB folios, read ahead as such


def test_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty"
    path.write_bytes(b"")
    assert cache_state(path).resident == 0.0


def test_missing_file_is_an_os_error(tmp_path: Path) -> None:
    with pytest.raises(OSError, match="missing"):
        cache_state(tmp_path / "missing")
