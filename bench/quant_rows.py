"""Many-row int16 kernels (decode, verify blocks): GMAC/s per format, activation-row count and ISA.

For each int16-path format, a weight matrix that fits the L2 / L3 caches (--kib, so that the kernel,
not DRAM, is measured) against 1, 4, 8, 12 and 16 activation rows through the kernel the engine
uses for fewer than 32 rows: the packed rows kernels for the legacy formats (two weight rows at a
time on AVX-512), the fused rows kernel for the K-quants. One thread (``_core.matmul_path`` runs on the
calling thread), timed by its CPU time, best of --reps; the activations' quantisation is included
(a small share: rows x columns against the matrix's rows x columns x weight rows). First, the
peak of vpdpwssd (bench/madd_peak.cpp, compiled here with g++) where the CPU has it: zmm, the
AVX-512 kernels' instruction and their ceiling, and ymm (AVX-VNNI) for comparison.

    PYTHONPATH=python python bench/quant_rows.py [--kib 4096] [--cols 640] [--reps 5]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from ds4 import _core

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "quant"))
from qdata import block_geometry, random_blocks  # noqa: E402

FORMATS = ["Q8_0", "Q5_0", "Q4_0", "Q4_1", "Q5_1", "IQ4_NL", "MXFP4", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "IQ4_XS"]
PACKED = {"Q8_0", "Q5_0", "Q4_0", "Q4_1", "Q5_1", "IQ4_NL", "MXFP4"}
ROWS = [1, 4, 8, 12, 16]


def gmacs(t: str, data: bytes, n_rows: int, x: np.ndarray, path: str, isa: str, reps: int) -> float:
    _core.matmul_path(t, data, n_rows, x, path, isa=isa)
    best = float("inf")
    for _ in range(reps):
        c0 = time.thread_time()
        _core.matmul_path(t, data, n_rows, x, path, isa=isa)
        best = min(best, time.thread_time() - c0)
    return n_rows * x.shape[1] * x.shape[0] / best / 1e9


# (name, -DOP, compiler flags, /proc/cpuinfo flag) of bench/madd_peak.cpp's instructions
PEAKS = [("vpdpwssd, ymm (avx-vnni)", 2, ["-mavx2", "-mavxvnni"], "avx_vnni"),
         ("vpdpwssd, zmm (avx512-vnni)", 3, ["-mavx512f", "-mavx512bw", "-mavx512vnni"], "avx512_vnni")]


def madd_peaks() -> list[str]:
    """One line per multiply-add instruction this CPU has: its GMAC/s on one core."""
    cxx = shutil.which("g++")
    flags = next((line.split(":", 1)[1].split() for line in open("/proc/cpuinfo") if line.startswith("flags")), [])
    src = Path(__file__).with_name("madd_peak.cpp")
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, op, cflags, flag in PEAKS:
            if cxx is None or flag not in flags:
                continue
            exe = Path(tmp) / f"peak{op}"
            subprocess.run([cxx, "-O2", "-std=c++17", f"-DOP={op}", *cflags, str(src), "-o", str(exe)], check=True)
            runs = [float(subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout) for _ in range(3)]
            out.append(f"# peak of {name}: {max(runs):.1f} GMAC/s per core (best of 3)")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kib", type=int, default=4096, help="weight bytes per matrix (KiB)")
    ap.add_argument("--cols", type=int, default=640, help="row length (a multiple of 256)")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--types", default=",".join(FORMATS))
    args = ap.parse_args()
    isas = [i for i in _core.simd_available() if i != "scalar"]
    rng = np.random.default_rng(0)
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), "?")
    print(f"# int16 rows kernels, 1 thread, {args.kib} KiB of weights, row length {args.cols} (K-quants: rounded up to 256), best of {args.reps}; "
          f"cpu: {cpu}; ISAs: {', '.join(isas)}; load average before: {os.getloadavg()[0]:.2f}")
    print("\n".join(madd_peaks()))
    print("| format | rows | " + " | ".join(f"{i} GMAC/s" for i in isas) + " | " +
          " | ".join(f"{i} / {isas[0]}" for i in isas[1:]) + " |")
    print("|---|---:|" + "---:|" * (2 * len(isas) - 1))
    for t in args.types.split(","):
        block, size = block_geometry(t)
        cols = -(-args.cols // block) * block  # the K-quants' rows are whole super-blocks
        n_rows = max(2, args.kib * 1024 // (cols // block * size))
        data = random_blocks(t, n_rows * cols // block, rng)
        path = "i16rows"
        if t in PACKED:
            data, path = _core.pack_weights(t, data, n_rows, cols), "i16packed"
        for nx in ROWS:
            x = rng.standard_normal((nx, cols)).astype(np.float32)
            res = [gmacs(t, data, n_rows, x, path, isa, args.reps) for isa in isas]
            print(f"| {t} ({cols}) | {nx} | " + " | ".join(f"{r:.1f}" for r in res) + " | " +
                  " | ".join(f"{r / res[0]:.2f}x" for r in res[1:]) + " |", flush=True)


if __name__ == "__main__":
    main()
