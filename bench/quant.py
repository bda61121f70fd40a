"""Dot-kernel throughput: one float32 activation row against a weight matrix larger than L3.

For each format, a matrix of >= 256 MiB of weight bytes (random quants, sane f16 scales) is
multiplied by one activation row with `_core.dot_rows(..., isa=...)` for the scalar reference and
each SIMD path this CPU has.  dot_rows runs on the calling thread only, so the figures are
single-thread; GB/s counts weight bytes read (the activation row stays in L1/L2).  Runs are timed
with the thread's CPU time, so other load on a shared machine does not count against a kernel
(memory stalls do count: they are CPU time); the wall / CPU ratio is printed as a check.

    PYTHONPATH=python python bench/quant.py [--mib 256] [--reps 3] [--types Q4_K,Q6_K] [--cols 640]
"""

import argparse
import os
import platform
import time

import numpy as np

from ds4 import _core

# (block elements, block bytes, byte offsets of f16 scales) per format; blocks.h.
FORMATS = {
    "F32": (1, 4, None), "F16": (1, 2, None), "BF16": (1, 2, None),
    "Q4_0": (32, 18, [0]), "Q4_1": (32, 20, [0, 2]), "Q5_0": (32, 22, [0]), "Q5_1": (32, 24, [0, 2]),
    "Q8_0": (32, 34, [0]), "Q2_K": (256, 84, [80, 82]), "Q3_K": (256, 110, [108]),
    "Q4_K": (256, 144, [0, 2]), "Q5_K": (256, 176, [0, 2]), "Q6_K": (256, 210, [208]),
}
N_COLS = 4096  # row length (a typical hidden / FFN width); multiple of every block size


def make_matrix(t, mib, rng):
    qk, size, f16 = FORMATS[t]
    row = N_COLS // qk * size
    rows = -(-mib * 2**20 // row)
    if f16 is None:  # float formats: sane random values
        vals = rng.standard_normal(rows * N_COLS, dtype=np.float32)
        data = {"F32": vals, "F16": vals.astype(np.float16),
                "BF16": (vals.view(np.uint32) >> 16).astype(np.uint16)}[t].view(np.uint8)
        return data, rows
    data = rng.integers(0, 256, rows * row, dtype=np.uint8)
    blocks = data.reshape(-1, size)
    scales = (rng.uniform(0.5, 1.0, blocks.shape[0]) * 2.0**-8).astype(np.float16).view(np.uint8).reshape(-1, 2)
    for off in f16:
        blocks[:, off:off + 2] = scales
    return data, rows


WALL = [0.0, 0.0]  # total wall and thread-CPU seconds of the timed runs


def bench(t, data, rows, x, isa, reps, warm):
    if warm:
        _core.dot_rows(t, data, rows, x, isa=isa)  # page in the matrix, warm the dispatch
    best = float("inf")
    for _ in range(reps):
        w0, c0 = time.perf_counter(), time.thread_time()
        _core.dot_rows(t, data, rows, x, isa=isa)
        w1, c1 = time.perf_counter(), time.thread_time()
        WALL[0] += w1 - w0
        WALL[1] += c1 - c0
        best = min(best, c1 - c0)
    return data.nbytes / best / 1e9, rows * N_COLS / best / 1e9


def main():
    global N_COLS  # make_matrix and bench read the row length from here
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=int, default=256, help="weight bytes per matrix (MiB)")
    ap.add_argument("--reps", type=int, default=3, help="timed runs per SIMD path (best is kept)")
    ap.add_argument("--types", default=",".join(FORMATS))
    ap.add_argument("--cols", type=int, default=N_COLS,
                    help="row length (a multiple of 256); small models have 576..2048-element rows")
    args = ap.parse_args()
    isas = _core.simd_available()
    rng = np.random.default_rng(0)
    N_COLS = args.cols
    x = rng.standard_normal(N_COLS).astype(np.float32)
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
               platform.processor()) if os.path.exists("/proc/cpuinfo") else platform.processor()
    print(f"# dot throughput, 1 thread (dot_rows is single-threaded), {args.mib} MiB of weights per format, "
          f"row length {N_COLS}, best of {args.reps}")
    print(f"# cpu: {cpu}, {os.cpu_count()} logical cores; ISAs: {', '.join(isas)}; "
          f"load average before: {os.getloadavg()[0]:.2f}")
    head = f"| {'format':6} |" + "".join(f" {i + ' GB/s':>12} |" for i in isas) + \
        "".join(f" {i + ' Gw/s':>12} |" for i in isas if i != "scalar") + \
        "".join(f" {i + '/scalar':>15} |" for i in isas if i != "scalar")
    print(head)
    print("|" + "|".join("-" * (len(c) + 0) for c in head.split("|")[1:-1]) + "|")
    for t in args.types.split(","):
        data, rows = make_matrix(t, args.mib, rng)
        # SIMD paths first (the first one pages the matrix in); the slow scalar path runs once.
        res = {}
        for k, isa in enumerate(reversed(isas)):
            res[isa] = bench(t, data, rows, x, isa, 1 if isa == "scalar" else args.reps, warm=(k == 0))
        line = f"| {t:6} |" + "".join(f" {res[i][0]:12.2f} |" for i in isas) + \
            "".join(f" {res[i][1]:12.2f} |" for i in isas if i != "scalar") + \
            "".join(f" {res[i][0] / res['scalar'][0]:14.1f}x |" for i in isas if i != "scalar")
        print(line, flush=True)
        del data
    print(f"# timed by the calling thread's CPU time (robust to other load on a shared machine); "
          f"wall / CPU time over all runs: {WALL[0] / WALL[1]:.2f}")


if __name__ == "__main__":
    main()
