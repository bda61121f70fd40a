"""Time ds4._core.Sampler.sample on a 262k-wide row (Gemma 3's vocabulary) for common settings.

Prints a table (best of N calls, so load from other processes inflates it less). Not a test.
Usage: PYTHONPATH=python python bench/bench_sample.py [--reps 40]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from ds4 import _core

N_VOCAB = 262144
CONFIGS = [
    dict(),
    dict(temperature=1.0),
    dict(temperature=1.0, top_k=40),
    dict(temperature=1.0, top_p=0.95),
    dict(temperature=1.0, min_p=0.05),
    dict(temperature=0.8, top_k=40, top_p=0.95, min_p=0.05),
    dict(temperature=0.8, top_k=40, repeat_penalty=1.1, presence_penalty=0.5),
]


def rows() -> dict[str, np.ndarray]:
    g = np.random.default_rng(0)
    flat = (g.standard_normal(N_VOCAB) * 3).astype(np.float32)
    peaky = (g.standard_normal(N_VOCAB) * 2).astype(np.float32)
    peaky[:50] += 12  # a few dozen plausible tokens above a long tail, like a real LM row
    return {"flat": flat, "peaky": peaky}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=40)
    args = ap.parse_args()
    print(f"{'row':6} {'params':72} {'ms':>8} {'kept':>7}")
    for name, row in rows().items():
        for kw in CONFIGS:
            s = _core.Sampler(_core.SamplingParams(seed=1, **kw), N_VOCAB)
            for t in range(10):
                s.accept(t)
            best = float("inf")
            for _ in range(args.reps):
                t0 = time.perf_counter()
                s.sample(row)
                best = min(best, time.perf_counter() - t0)
            kept = int((s.probs(row) > 0).sum())
            print(f"{name:6} {str(kw):72} {best * 1e3:8.3f} {kept:7d}")


if __name__ == "__main__":
    main()
