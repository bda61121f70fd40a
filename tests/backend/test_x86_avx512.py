"""The CPU backend's AVX-512 kernels outside the quant tables give the AVX2 kernels' floats bit for
bit: attention (tests/backend/x86_attn_check.cpp) and the row ops (x86_vmath_check.cpp), run
natively where the CPU has AVX-512 and under SIMDe emulation elsewhere, so that a CI machine
without AVX-512 still checks them."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ds4 import _core

ROOT = Path(__file__).resolve().parents[2]
AVX2_FLAGS = ["-mavx2", "-mfma", "-mf16c", "-mbmi2"]
AVX512_FLAGS = AVX2_FLAGS + ["-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512dq", "-mavx512vnni", "-mavx512bf16"]
# check program: (its AVX2 file, its AVX-512 file)
CHECKS = {"x86_attn_check": ("csrc/backend/cpu/attn_avx2.cpp", "csrc/backend/cpu/attn_avx512.cpp"),
          "x86_vmath_check": ("csrc/backend/cpu/vmath_avx2.cpp", "csrc/backend/cpu/vmath_avx512.cpp")}


@pytest.mark.skipif(sys.platform != "linux" or os.uname().machine != "x86_64", reason="x86-64 only")
@pytest.mark.parametrize("check", sorted(CHECKS))
@pytest.mark.parametrize("emulate", [False, True])
def test_avx512_kernels_are_avx2s(tmp_path: Path, check: str, emulate: bool) -> None:
    cxx = shutil.which("g++")
    if cxx is None:
        pytest.skip("no C++ compiler")
    if emulate and not Path("/usr/include/simde/x86/avx512.h").exists():
        pytest.skip("SIMDe headers not installed (apt-get install libsimde-dev)")
    if not emulate and "avx512" not in _core.simd_available():
        pytest.skip("no AVX-512 on this CPU (the emulated run covers it)")
    shim = [f"-I{ROOT / 'tests' / 'quant' / 'simde_shim'}"]
    avx2, avx512 = CHECKS[check]
    units = [(avx2, AVX2_FLAGS), (avx512, shim if emulate else AVX512_FLAGS), (f"tests/backend/{check}.cpp", [])]
    objs = []
    for src, flags in units:
        obj = tmp_path / (Path(src).stem + ".o")
        subprocess.run([cxx, "-O2", "-std=c++17", "-DDS4_X86=1", f"-I{ROOT / 'csrc'}", "-w", *flags, "-c",
                        str(ROOT / src), "-o", str(obj)], check=True)
        objs.append(str(obj))
    exe = tmp_path / check
    subprocess.run([cxx, "-o", str(exe), *objs], check=True)
    r = subprocess.run([str(exe), "7"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert " 0 failures" in r.stdout
