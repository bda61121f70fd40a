"""Speed of ds4 against llama-cpp-python on the same GGUF, the same token ids and thread count.

What is measured, per engine (each in its own subprocess, so peak RSS is that engine's alone):

- **prefill tok/s**: a ``--prompt-tokens`` prompt (a fixed English + code text tokenized by ds4,
  BOS included, the same ids for both engines) evaluated from an empty context, last logits row only.
  ds4: ``session.generate(ids, max_tokens=N, stop_at_eog=False)``'s ``prefill_seconds``;
  llama.cpp: wall time of ``llm.reset(); llm.eval(ids)``.
- **decode tok/s**: ``--decode-tokens`` greedy tokens after the prompt: N samples and N - 1
  single-token forwards, wall time. ds4: wall time of that ``generate`` call minus its prefill;
  llama.cpp: a ``llm.sample(temp=0)`` / ``llm.eval([tok])`` loop.
- **verify k** (ms): one pass over k new tokens after the prompt, the cache truncated back to the
  prompt before each pass (median of ``--verify-reps``), computing what greedy acceptance needs:
  every row's greedy token. ds4: ``session.eval_argmax(block)`` (argmax fused into the output
  projection, no logits rows built); llama.cpp, which has no such call: the k tokens decoded in one
  batch asking for all k logits rows, copied into numpy (``verify k``). For reference (no ratio):
  ds4's ``session.eval(block)`` returning all k rows (``eval k``) and llama.cpp's plain
  ``llm.eval(block)``, which computes only the last row (``llm.eval k``).
- **peak RSS**: the worker's ``ru_maxrss`` (mapped weights it touched included), and the same minus
  the RSS before the model was loaded (interpreter, numpy and the engine's library).

Each worker warms up (a 64-token prefill and 4 decode steps; each verify once at the largest k)
and measures once; the
parent alternates engines A B A B for ``--rounds`` rounds and reports medians and ds4 / llama.cpp.

**Bandwidth**: a small C program (compiled on the fly with the system compiler) sums a 1 GiB
array split across the same number of threads, best of 5 passes, in GB/s (1e9 bytes/s); measured
at the start and after every engine's run, so each run is bracketed by two measurements. It moves
by ±15 % between measurements on these shared machines, so each run is judged against the larger of
its own two brackets, and the table gives the median of those per-run figures (and, for reference,
the figure against the best bandwidth of the whole run). Decode's
"% of the bandwidth limit" = bytes read per token x decode tok/s / bandwidth, where the bytes per
token are the weights (every tensor's ``nbytes`` from ``ds4.inspect``, less the token embedding
when the model has a separate output matrix: a lookup reads one row of it) plus the KV cache both
engines read, f16 keys and values of every layer at the mean context of the decode window
(prompt + half the decoded tokens; a Gemma 3 sliding layer reads at most its window).

**Page cache**: a decode step of a model larger than the CPU's caches reads its file's pages, and
how many of them the page cache holds on 2 MiB pages moves decode by 5-15 % (BENCHMARKS.md,
"Weights on huge pages"). Before the rounds the file is read once through ds4's loader's
mapping (``ds4.page_cache.cache_state``), and the table says how much of it was cached before and
how much the mapping got on 2 MiB pages; both engines read the file in that state. With
``--drop-cache`` the file's pages are dropped first, so that it is read back as after a reboot or
ds4's own download (on 2 MiB pages where the kernel gives a file such folios).

The machine may be shared: the load average is printed with every table; treat ratios from one
table as the result, absolute figures as noisy.

Usage: PYTHONPATH=python python bench/vs_llamacpp.py [--model gemma|smollm|qwen05|qwen15|FILE.gguf[,...]]
       [--threads 2] [--rounds 3] [--prompt-tokens 512] [--decode-tokens 128] [--quick] [--drop-cache]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ds4.page_cache import CacheState, drop_written

VERIFY_KS = (1, 2, 4, 8, 16)
ENGINES = ("ds4", "llama.cpp")

# --------------------------------------------------------------------------------------------
# Models (located by ds4.known_models)


def bytes_per_token(path: Path) -> int:
    """Weight bytes a decode step reads: every tensor, less the embedding if the output is untied."""
    import ds4

    tensors = {t["name"]: t["nbytes"] for t in ds4.inspect(path)["tensors"]}
    total = sum(tensors.values())
    if "output.weight" in tensors and "token_embd.weight" in tensors:
        total -= tensors["token_embd.weight"]
    return total


def kv_bytes_per_token(path: Path, context: int) -> int:
    """f16 K and V bytes one decode step reads at `context` positions (sliding layers: their window)."""
    import ds4

    md = dict(ds4.inspect(path)["metadata"])
    arch = md["general.architecture"]
    n_layer, n_head = md[f"{arch}.block_count"], md[f"{arch}.attention.head_count"]
    n_kv = md.get(f"{arch}.attention.head_count_kv", n_head)
    k_len = md.get(f"{arch}.attention.key_length", md[f"{arch}.embedding_length"] // n_head)
    v_len = md.get(f"{arch}.attention.value_length", k_len)
    window = md.get(f"{arch}.attention.sliding_window", 0) if arch == "gemma3" else 0
    pattern = md.get(f"{arch}.attention.sliding_window_pattern")
    sliding = [bool(pattern[i]) if pattern else i % 6 != 5 for i in range(n_layer)] if window else [False] * n_layer
    positions = sum(min(context, window) if s else context for s in sliding)
    return positions * n_kv * (k_len + v_len) * 2


# --------------------------------------------------------------------------------------------
# The prompt

PARAGRAPHS = [
    "The river rose slowly through the night, and by morning the lower fields were under water. "
    "Farmers moved their animals to the ridge, where the old stone barn had stood for two centuries.",
    "def moving_average(values, window):\n    total = sum(values[:window])\n    out = [total / window]\n"
    "    for i in range(window, len(values)):\n        total += values[i] - values[i - window]\n"
    "        out.append(total / window)\n    return out\n",
    "Memory bandwidth, not arithmetic, bounds the speed of generating one token at a time: every "
    "weight of the network is read once per token, while a long prompt reuses each weight many times.",
    "struct Point { double x, y; };\nstatic double dist(const struct Point *a, const struct Point *b) {\n"
    "    double dx = a->x - b->x, dy = a->y - b->y;\n    return sqrt(dx * dx + dy * dy);\n}\n",
    "In the library the index cards were sorted by author, then by title, and a small brass label on "
    "each drawer gave the first and last names it held.",
]


def prompt_ids(path: Path, n: int) -> list[int]:
    """``n`` ids (BOS included) of a fixed text, repeated with numbered sections until long enough."""
    from ds4 import _core

    tok = _core.Tokenizer(str(path))
    text, section = "", 0
    while True:
        section += 1
        text += f"\n\n## Section {section}\n\n" + "\n\n".join(PARAGRAPHS[section % len(PARAGRAPHS):] +
                                                             PARAGRAPHS[:section % len(PARAGRAPHS)])
        ids = tok.encode(text, add_special=True)
        if len(ids) >= n:
            return ids[:n]


# --------------------------------------------------------------------------------------------
# Workers (one engine, one subprocess)


def rss_kib() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _median_ms(fn, reps: int) -> float:
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


class Ds4Engine:
    def __init__(self, path: Path, threads: int, n_ctx: int) -> None:
        import ds4

        self.model = ds4.Model(path, threads=threads, n_ctx=n_ctx)
        self.s = self.model.session()

    def prefill_decode(self, ids: list[int], n_decode: int) -> tuple[float, float, list[int]]:
        self.s.truncate(0)
        t0 = time.perf_counter()
        g = self.s.generate(ids, max_tokens=n_decode, stop_at_eog=False)
        wall = time.perf_counter() - t0
        prefill = g.stats["prefill_seconds"]
        return prefill, wall - prefill, g.tokens

    def verify_fns(self, n_prompt: int, block: list[int]):
        def greedy() -> None:  # what greedy acceptance needs: each row's argmax, fused in C++
            self.s.truncate(n_prompt)
            self.s.eval_argmax(block)

        def full() -> None:  # all k logits rows, returned to Python
            self.s.truncate(n_prompt)
            self.s.eval(block)

        return {"verify": greedy, "eval": full}


class LlamaCppEngine:
    def __init__(self, path: Path, threads: int, n_ctx: int) -> None:
        import llama_cpp

        self.llm = llama_cpp.Llama(model_path=str(path), n_ctx=n_ctx, n_threads=threads,
                                   n_threads_batch=threads, verbose=False)

    def prefill_decode(self, ids: list[int], n_decode: int) -> tuple[float, float, list[int]]:
        llm = self.llm
        llm.reset()
        t0 = time.perf_counter()
        llm.eval(ids)
        t1 = time.perf_counter()
        out: list[int] = []
        while True:
            tok = llm.sample(temp=0.0)
            out.append(tok)
            if len(out) == n_decode:
                break
            llm.eval([tok])
        return t1 - t0, time.perf_counter() - t1, out

    def verify_fns(self, n_prompt: int, block: list[int]):
        import numpy as np

        llm, k = self.llm, len(block)

        def all_rows() -> None:  # the work ds4's eval does: k logits rows, copied out
            llm._ctx.kv_cache_seq_rm(-1, n_prompt, -1)
            llm._batch.set_batch(batch=block, n_past=n_prompt, logits_all=True)
            llm._ctx.decode(llm._batch)
            np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(k * llm.n_vocab(),)).copy()

        def last_row() -> None:  # llm.eval with logits_all=False: only the last row
            llm.n_tokens = n_prompt
            llm.eval(block)

        return {"verify": all_rows, "llm.eval": last_row}


def worker(args: argparse.Namespace) -> None:
    spec = json.loads(Path(args.spec).read_text())
    path, ids, block = Path(spec["path"]), spec["ids"], spec["block"]
    n_prompt, n_decode, reps = len(ids), spec["decode_tokens"], spec["verify_reps"]
    rss_before = rss_kib()
    cls = Ds4Engine if args.worker == "ds4" else LlamaCppEngine
    eng = cls(path, args.threads, n_prompt + n_decode + max(VERIFY_KS) + 16)
    eng.prefill_decode(ids[: min(64, n_prompt)], 4)  # warm-up: a short prefill and decode
    prefill_s, decode_s, tokens = eng.prefill_decode(ids, n_decode)
    for fn in eng.verify_fns(n_prompt, block).values():  # warm-up: each verify once, largest k
        fn()
    verify = {}
    for k in VERIFY_KS:
        for name, fn in eng.verify_fns(n_prompt, block[:k]).items():
            verify[f"{name} k={k}"] = _median_ms(fn, reps)
    print(json.dumps({
        "prefill_tok_s": n_prompt / prefill_s,
        "decode_tok_s": n_decode / decode_s,
        "verify_ms": verify,
        "tokens": tokens,
        "rss_peak_kib": rss_kib(),
        "rss_before_kib": rss_before,
    }))


def file_cache_state(path: Path) -> CacheState:
    """ds4.page_cache.cache_state in a process of its own: reading the file raises this process's
    peak RSS (ru_maxrss), which the workers it starts inherit."""
    code = "import sys; from ds4.page_cache import cache_state; s = cache_state(sys.argv[1]); print(s.resident, s.huge)"
    out = subprocess.run([sys.executable, "-c", code, str(path)], check=True, capture_output=True, text=True)
    resident, huge = map(float, out.stdout.split())
    return CacheState(resident, huge)


def run_worker(engine: str, spec_file: str, threads: int) -> dict:
    cmd = [sys.executable, __file__, "--worker", engine, "--spec", spec_file, "--threads", str(threads)]
    # numpy's OpenBLAS would start its own spinning thread pool in each worker (~2 % of a profile);
    # neither engine uses it, so both workers run without it.
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


# --------------------------------------------------------------------------------------------
# Read bandwidth

BW_C = r"""
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
static uint64_t *buf; static size_t n, nt; static volatile uint64_t sink;
static void *touch(void *p) { size_t t = (size_t)p, a = n * t / nt, b = n * (t + 1) / nt;
    for (size_t i = a; i < b; ++i) buf[i] = i; return 0; }
static void *sum(void *p) { size_t t = (size_t)p, a = n * t / nt, b = n * (t + 1) / nt; uint64_t s = 0;
    for (size_t i = a; i < b; ++i) s += buf[i]; sink += s; return 0; }
static double run(void *(*f)(void *)) { pthread_t th[256]; struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (size_t t = 0; t < nt; ++t) pthread_create(&th[t], 0, f, (void *)t);
    for (size_t t = 0; t < nt; ++t) pthread_join(th[t], 0);
    clock_gettime(CLOCK_MONOTONIC, &t1); return (t1.tv_sec - t0.tv_sec) + 1e-9 * (t1.tv_nsec - t0.tv_nsec); }
int main(int argc, char **argv) { nt = atoi(argv[1]); size_t bytes = (size_t)1 << 30; n = bytes / 8;
    buf = aligned_alloc(64, bytes); run(touch); double best = 1e9;
    for (int r = 0; r < 5; ++r) { double s = run(sum); if (s < best) best = s; }
    printf("%.3f\n", bytes / best / 1e9); return 0; }
"""


def read_bandwidth_gbs(threads: int) -> float:
    """GB/s of summing 1 GiB of uint64 split across ``threads`` threads (best of 5)."""
    with tempfile.TemporaryDirectory() as d:
        src, exe = Path(d) / "bw.c", Path(d) / "bw"
        src.write_text(BW_C)
        cc = os.environ.get("CC", "cc")
        subprocess.run([cc, "-O3", "-march=native", "-pthread", str(src), "-o", str(exe)], check=True)
        return float(subprocess.run([str(exe), str(threads)], check=True, capture_output=True, text=True).stdout)


# --------------------------------------------------------------------------------------------
# Parent: rounds and the table


def load_avg() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def first_divergence(a: list[int], b: list[int]) -> str:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return f"token {i}"
    return "none"


def bench_model(name: str, args: argparse.Namespace, bandwidth: list[float]) -> None:
    from ds4 import known_models

    try:
        path = Path(name) if name.endswith(".gguf") else known_models.model_path(name)
        if not path.is_file():
            raise FileNotFoundError(f"no file {path}")
    except FileNotFoundError as e:
        print(f"\n### {name}: skipped ({e})\n")
        return
    ids_all = prompt_ids(path, args.prompt_tokens + max(VERIFY_KS))
    ids, block = ids_all[: args.prompt_tokens], ids_all[args.prompt_tokens:]
    spec = {"path": str(path), "ids": ids, "block": block, "decode_tokens": args.decode_tokens,
            "verify_reps": args.verify_reps}
    loads = [load_avg()]
    if args.drop_cache:
        drop_written(path)
    cache = file_cache_state(path)  # both engines then read the file as ds4's loader leaves it
    results: dict[str, list[dict]] = {e: [] for e in ENGINES}
    with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
        json.dump(spec, f)
        f.flush()
        for r in range(args.rounds):
            for engine in ENGINES:
                before = bandwidth[-1]
                res = run_worker(engine, f.name, args.threads)
                bandwidth.append(read_bandwidth_gbs(args.threads))
                res["bandwidth_gbs"] = max(before, bandwidth[-1])
                results[engine].append(res)
                print(f"  [{name}] round {r + 1}/{args.rounds} {engine}: prefill "
                      f"{res['prefill_tok_s']:.1f} tok/s, decode {res['decode_tok_s']:.1f} tok/s, "
                      f"bandwidth {before:.1f} -> {bandwidth[-1]:.1f} GB/s (load {load_avg()})", file=sys.stderr)
            loads.append(load_avg())
    print_table(name, path, args, bandwidth, results, loads, cache)


def median_of(runs: list[dict], key: str, sub: str | None = None) -> float:
    return statistics.median(r[key][sub] if sub else r[key] for r in runs)


def print_table(name: str, path: Path, args: argparse.Namespace, bandwidths: list[float],
                results: dict[str, list[dict]], loads: list[str], cache: CacheState) -> None:
    bandwidth = max(bandwidths)
    ds, lc = results["ds4"], results["llama.cpp"]
    weights = bytes_per_token(path)
    kv = kv_bytes_per_token(path, args.prompt_tokens + args.decode_tokens // 2)
    bpt = weights + kv
    rows: list[tuple[str, float, float, str]] = [
        ("prefill tok/s", median_of(ds, "prefill_tok_s"), median_of(lc, "prefill_tok_s"), "{:.1f}"),
        ("decode tok/s", median_of(ds, "decode_tok_s"), median_of(lc, "decode_tok_s"), "{:.1f}"),
    ]
    for k in VERIFY_KS:
        rows.append((f"verify k={k} (ms)", median_of(ds, "verify_ms", f"verify k={k}"),
                     median_of(lc, "verify_ms", f"verify k={k}"), "{:.1f}"))
    rows.append(("peak RSS (MiB)", median_of(ds, "rss_peak_kib") / 1024, median_of(lc, "rss_peak_kib") / 1024, "{:.0f}"))
    rows.append(("peak RSS - RSS before load (MiB)",
                 statistics.median((r["rss_peak_kib"] - r["rss_before_kib"]) / 1024 for r in ds),
                 statistics.median((r["rss_peak_kib"] - r["rss_before_kib"]) / 1024 for r in lc), "{:.0f}"))
    paired = [statistics.median(100 * bpt * r["decode_tok_s"] / (r["bandwidth_gbs"] * 1e9) for r in x)
              for x in (ds, lc)]
    rows.append(("decode, % of read bandwidth (median per run)", paired[0], paired[1], "{:.0f} %"))
    pct = [100 * bpt * median_of(x, "decode_tok_s") / (bandwidth * 1e9) for x in (ds, lc)]
    rows.append(("decode, % of the run's best bandwidth", pct[0], pct[1], "{:.0f} %"))

    print(f"\n### {name}: `{path.name}`\n")
    print(f"{args.threads} threads, {len(ds)} round(s), prompt {args.prompt_tokens} tokens, decode "
          f"{args.decode_tokens} greedy tokens; read per token: weights {weights / 1e6:.1f} MB + KV cache "
          f"{kv / 1e6:.1f} MB (f16, mean context); read bandwidth "
          f"{bandwidth:.1f} GB/s ({args.threads} threads; the best of {', '.join(f'{b:.1f}' for b in bandwidths)}); load average (1/5/15 min) at start and after each "
          f"round: {', '.join(loads)}; the file in the page cache: {100 * cache.resident:.0f} % of its pages before "
          f"the run, {100 * cache.huge:.0f} % on 2 MiB pages (ds4.page_cache.cache_state).\n")
    print("| measure | ds4 | llama.cpp | ds4 / llama.cpp |")
    print("|---|---:|---:|---:|")
    for label, a, b, fmt in rows:
        print(f"| {label} | {fmt.format(a)} | {fmt.format(b)} | {a / b:.2f} |")
    print("\nds4 `session.eval` of k tokens (all k logits rows to numpy), ms: " + ", ".join(
        f"k={k} {median_of(ds, 'verify_ms', f'eval k={k}'):.1f}" for k in VERIFY_KS))
    print("llama.cpp `llm.eval` of k tokens (last logits row only), ms: " + ", ".join(
        f"k={k} {median_of(lc, 'verify_ms', f'llm.eval k={k}'):.1f}" for k in VERIFY_KS))
    c1 = median_of(ds, "verify_ms", "verify k=1")
    print("ds4 verify cost curve cost(k) / cost(1): " + ", ".join(
        f"k={k} {median_of(ds, 'verify_ms', f'verify k={k}') / c1:.2f}" for k in VERIFY_KS[1:]))
    print(f"Greedy tokens, ds4 vs llama.cpp (round 1): first difference at {first_divergence(ds[0]['tokens'], lc[0]['tokens'])}.")
    print("Per round (ds4 | llama.cpp), prefill / decode tok/s / % of the run's bandwidth: " + "; ".join(
        f"{d['prefill_tok_s']:.1f}/{d['decode_tok_s']:.1f}/{100 * bpt * d['decode_tok_s'] / (d['bandwidth_gbs'] * 1e9):.0f}%"
        f" | {l['prefill_tok_s']:.1f}/{l['decode_tok_s']:.1f}/{100 * bpt * l['decode_tok_s'] / (l['bandwidth_gbs'] * 1e9):.0f}%"
        for d, l in zip(ds, lc)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="gemma",
                    help="gemma, smollm, qwen05, qwen15 or a .gguf path, comma-separated, or all")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--prompt-tokens", type=int, default=512)
    ap.add_argument("--decode-tokens", type=int, default=128)
    ap.add_argument("--verify-reps", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="smoke test: 64-token prompt, 16 decode tokens, 1 round")
    ap.add_argument("--drop-cache", action="store_true",
                    help="drop each model file's cached pages first (ds4.page_cache.drop_written), so that it is "
                         "read back as after a reboot or ds4's own download")
    ap.add_argument("--worker", choices=ENGINES, help=argparse.SUPPRESS)
    ap.add_argument("--spec", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args)
        return
    if args.quick:
        args.prompt_tokens, args.decode_tokens, args.rounds, args.verify_reps = 64, 16, 1, 2
    names = ["gemma", "smollm", "qwen05", "qwen15"] if args.model == "all" else args.model.split(",")
    # Measured again after every engine run: each run is judged against the bandwidth around it.
    bandwidth = [read_bandwidth_gbs(args.threads)]
    print(f"read bandwidth, {args.threads} threads: {bandwidth[0]:.1f} GB/s (load average {load_avg()})", file=sys.stderr)
    for name in names:
        bench_model(name, args, bandwidth)


if __name__ == "__main__":
    main()
