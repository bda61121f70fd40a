"""The activation arena's mark / release (csrc/backend/arena.h), checked in C++
(tests/backend/arena_check.cpp): a pass releasing each layer's temporaries holds one layer's
memory, not the sum over its layers, and what was taken before a mark survives its release."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_arena_mark_and_release(tmp_path: Path) -> None:
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.skip("no C++ compiler")
    exe = tmp_path / "arena_check"
    subprocess.run([cxx, "-O1", "-std=c++17", "-Wall", "-Wextra", "-Werror", "-fsanitize=address,undefined",
                    f"-I{ROOT / 'csrc'}", str(ROOT / "csrc" / "backend" / "arena.cpp"),
                    str(ROOT / "tests" / "backend" / "arena_check.cpp"), "-o", str(exe)], check=True)
    r = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "0 failures" in r.stdout
