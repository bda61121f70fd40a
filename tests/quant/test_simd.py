"""SIMD dispatch: which ISAs are detected, DS4_SIMD at first use, set_simd."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

import ds4
from ds4 import _core

# The ds4 this test imported (installed, or the source tree in a dev build), for subprocesses.
PYTHON_DIR = str(Path(ds4.__file__).resolve().parents[1])


def run_with_env(simd: str | None, code: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "DS4_SIMD"}
    env["PYTHONPATH"] = os.pathsep.join([PYTHON_DIR, env.get("PYTHONPATH", "")])
    if simd is not None:
        env["DS4_SIMD"] = simd
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)


def cpu_flags() -> set[str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    for line in text.splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


def test_available_isas_are_ordered_and_known():
    avail = _core.simd_available()
    assert avail[0] == "scalar"
    assert set(avail) <= {"scalar", "avx2", "avxvnni", "avx512", "neon"}
    order = ["scalar", "avx2", "avxvnni", "avx512", "neon"]
    assert avail == sorted(avail, key=order.index)


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64") or not cpu_flags(), reason="x86 Linux only")
def test_x86_detection_agrees_with_the_kernel():
    flags = cpu_flags()
    avail = _core.simd_available()
    assert ("avx2" in avail) == ({"avx2", "fma", "f16c", "bmi2"} <= flags)
    want512 = {"avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512_vnni", "avx512_bf16"}
    assert ("avx512" in avail) == (want512 <= flags and "avx2" in avail)
    assert ("avxvnni" in avail) == ("avx_vnni" in flags and "avx2" in avail)


def test_default_is_the_best_available():
    r = run_with_env(None, "from ds4 import _core; print(_core.simd_active(), _core.simd_available()[-1])")
    assert r.returncode == 0, r.stderr
    active, best = r.stdout.split()
    assert active == best


@pytest.mark.parametrize("isa", _core.simd_available())
def test_env_var_forces_an_available_isa(isa):
    r = run_with_env(isa, "from ds4 import _core; print(_core.simd_active())")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == isa


def test_env_var_unknown_name_is_a_clear_error():
    r = run_with_env("avx9000", "from ds4 import _core; _core.simd_active()")
    assert r.returncode != 0
    assert "ValueError" in r.stderr and "DS4_SIMD='avx9000'" in r.stderr


def test_env_var_unavailable_isa_is_a_clear_error():
    missing = [i for i in ("avx2", "avxvnni", "avx512", "neon") if i not in _core.simd_available()]
    if not missing:
        pytest.skip("every ISA is available here")
    r = run_with_env(missing[0], "from ds4 import _core; _core.dot('Q8_0', bytes(34), __import__('numpy').zeros(32, 'float32'))")
    assert r.returncode != 0
    assert "ValueError" in r.stderr and "not available" in r.stderr and missing[0] in r.stderr


def test_set_simd_switches_and_validates():
    before = _core.simd_active()
    try:
        for isa in _core.simd_available():
            _core.set_simd(isa)
            assert _core.simd_active() == isa
        with pytest.raises(ValueError, match="unknown SIMD ISA"):
            _core.set_simd("mmx")
        missing = [i for i in ("avx2", "avxvnni", "avx512", "neon") if i not in _core.simd_available()]
        if missing:
            with pytest.raises(ValueError, match="not available"):
                _core.set_simd(missing[0])
        assert _core.simd_active() == _core.simd_available()[-1]
    finally:
        _core.set_simd(before)
