"""What the kernel reports about transparent huge pages, for the tests of Model(huge_pages=True)."""

from __future__ import annotations

from pathlib import Path


def anon_huge_kib() -> int:
    """The process's anonymous memory on transparent huge pages, KiB (0 where not reported)."""
    rollup = Path("/proc/self/smaps_rollup")
    lines = rollup.read_text().splitlines() if rollup.exists() else []
    return next((int(line.split()[1]) for line in lines if line.startswith("AnonHugePages:")), 0)


def thp_available() -> bool:
    p = Path("/sys/kernel/mm/transparent_hugepage/enabled")
    return p.exists() and "[never]" not in p.read_text()
