"""Aggregate decode rate of many sessions sharing each forward pass (ds4.Batch) against one
session, and against llama-cpp-python serving the same prompts one after another (it has no
batched generation API).

On a CPU, decoding one token reads every weight; a pass over k sessions' rows reads them once
for all k, so the aggregate rate grows with k until the multiply-adds catch up with the bytes.
What is measured, per model and session count k (the first k of 16 prompts, greedy or, with
``--temperature``, sampled with a seed per prompt; each ``--tokens`` tokens, every generation to
the end, ``stop_at_eog=False``):

- ds4: all k prompts are added to one ``model.batch()`` and prefilled; then the steps until every
  generation has ended are timed (wall): aggregate decode tok/s = tokens decoded / that time.
- llama.cpp (k = 8 only, as a server without batching would): the 8 prompts one after another,
  each prefilled then decoded with a ``sample`` / ``eval`` loop; aggregate = decoded tokens /
  the decode time summed. It runs in its own process: llama.cpp's OpenMP threads spin after each
  batch, and in the same process they took a quarter of ds4's next runs.

Rounds alternate and the median is reported, with the stolen CPU share of the machine (a
shared VM) over the run.

Usage: PYTHONPATH=python python bench/batch.py [--models gemma,qwen05] [--sessions 1,2,4,8,16]
       [--tokens 64] [--rounds 3] [--threads 2] [--temperature 0] [--no-llama]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from typing import Any

PROMPTS = [
    "The capital of France is",
    "def fibonacci(n):",
    "Once upon a time, in a land far away, there lived a",
    "1, 2, 3, 4,",
    "import numpy as np\n\nx = np.",
    "The quick brown fox",
    "Q: What is the boiling point of water?\nA:",
    "Dear Sir or Madam, I am writing to",
    "SELECT name, price FROM products WHERE",
    "The mitochondria is the",
    "class Stack:\n    def __init__(self):",
    "In 1969, the first humans",
    "Ingredients: 2 cups of flour,",
    "The theory of relativity states that",
    "for (int i = 0; i < n; ++i) {",
    "My favourite book is",
]


def cpu_times() -> list[int]:
    with open("/proc/stat") as f:
        return [int(x) for x in f.readline().split()[1:]]


def ds4_rate(model: Any, k: int, tokens: int, temperature: float = 0.0) -> float:
    b = model.batch()
    gens = [b.add(p, max_tokens=tokens, stop_at_eog=False, temperature=temperature, seed=i)
            for i, p in enumerate(PROMPTS[:k])]
    while any(g.stats["n_generated"] == 0 for g in gens):
        b.step()
    before = sum(g.stats["n_generated"] for g in gens)
    t0 = time.perf_counter()
    b.run()
    seconds = time.perf_counter() - t0
    return (sum(g.stats["n_generated"] for g in gens) - before) / seconds


def llama_worker(path: str, threads: int, k: int, tokens: int, temperature: float) -> None:
    """In its own process, so that llama.cpp's OpenMP threads (which spin after each batch)
    are gone before ds4 runs."""
    import json

    import llama_cpp

    import ds4

    llm = llama_cpp.Llama(model_path=path, n_ctx=1024, n_threads=threads, n_threads_batch=threads, verbose=False)
    tok = ds4.Model(path, threads=threads)
    llama_rate(llm, tok, 2, 8, temperature)  # warm-up
    print(json.dumps(llama_rate(llm, tok, k, tokens, temperature)))


def llama_rate(llm: Any, ds4_model: Any, k: int, tokens: int, temperature: float) -> float:
    decoded, seconds = 0, 0.0
    for p in PROMPTS[:k]:
        llm.reset()
        llm.eval(ds4_model.tokenize(p))
        tok = llm.sample(temp=temperature)
        t0 = time.perf_counter()
        for _ in range(tokens - 1):
            llm.eval([tok])
            tok = llm.sample(temp=temperature)
        seconds += time.perf_counter() - t0
        decoded += tokens - 1
    return decoded / seconds


def main() -> None:
    import ds4
    from ds4 import known_models

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", type=lambda v: v.split(","), default=["gemma", "qwen05"])
    ap.add_argument("--sessions", type=lambda v: [int(x) for x in v.split(",")], default=[1, 2, 4, 8, 16])
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--temperature", type=float, default=0.0, help="sampled decoding (a seed per prompt)")
    ap.add_argument("--no-llama", action="store_true")
    ap.add_argument("--llama-worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.llama_worker:
        llama_worker(args.llama_worker, args.threads, 8, args.tokens, args.temperature)
        return
    from ds4 import _core

    with open("/proc/cpuinfo") as f:
        cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "?")
    print(f"CPU: {cpu}; ds4 kernels: {_core.simd_active()}; {args.threads} threads; {args.tokens} tokens per session; "
          f"temperature {args.temperature}")
    for name in args.models:
        path = known_models.model_path(name)
        model = ds4.Model(path, threads=args.threads, n_ctx=1024)
        ds4_rate(model, 2, 8, args.temperature)  # warm-up
        rates: dict[int, list[float]] = {k: [] for k in args.sessions}
        peer: list[float] = []
        t0 = cpu_times()
        for _ in range(args.rounds):
            for k in args.sessions:
                rates[k].append(ds4_rate(model, k, args.tokens, args.temperature))
            if not args.no_llama:
                cmd = [sys.executable, __file__, "--llama-worker", str(path), "--threads", str(args.threads),
                       "--tokens", str(args.tokens), "--temperature", str(args.temperature)]
                out = subprocess.run(cmd, check=True, capture_output=True, text=True)
                peer.append(float(out.stdout.strip().splitlines()[-1]))
        t1 = cpu_times()
        delta = [b - a for a, b in zip(t0, t1)]
        steal = delta[7] / max(1, sum(delta))
        one = statistics.median(rates[args.sessions[0]])
        print(f"\n### {path.name} (median of {args.rounds}; stolen CPU {steal:.0%})\n")
        print("| sessions | aggregate decode tok/s | vs one session |\n|---:|---:|---:|")
        for k in args.sessions:
            r = statistics.median(rates[k])
            print(f"| {k} | {r:.1f} | {r / one:.2f} |")
        if peer:
            r8 = statistics.median(rates[8]) if 8 in rates else float("nan")
            p = statistics.median(peer)
            print(f"| llama.cpp, 8 prompts one after another | {p:.1f} | ds4's 8 sessions: {r8 / p:.2f}x |")


if __name__ == "__main__":
    main()
