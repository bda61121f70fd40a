"""A/B of two source trees (two commits) in one run: does a change keep every speed figure?

Each round runs, for tree A and tree B in turn (the order alternating between rounds), fresh
subprocesses with that tree's ``python/`` (its own ``_core``) on the embedded Gemma:

- prefill (``--prompt-tokens``) and decode (``--decode-tokens``) tok/s: the ds4 worker of that
  tree's ``bench/vs_llamacpp.py`` (see there), and its verify-pass times;
- 8 sessions in one ``ds4.Batch`` (``bench/batch.py``'s first prompts, temperature 0.7,
  ``--batch-tokens`` each): their aggregate tok/s after the prompts, the better of two runs;
- the grounded code edit with the n-gram chain (``bench/spec.py``'s edit prompt, greedy,
  ``--spec-tokens``), end-to-end tok/s, and plain decoding of the same prompt.

It prints per figure (each a rate: higher is faster) the median over rounds of each tree and
B / A (the median of the per-round ratios). Build both trees first (``scripts/dev-build.sh`` in each); e.g. a worktree of the old
commit: ``git worktree add ../ab_old HEAD~1 && (cd ../ab_old && scripts/dev-build.sh)``.

``--set dspark`` times the default DSpark against plain decoding instead (``--drafter-a`` /
``--drafter-b``: two drafters, on one tree or two).

Usage: python bench/ab.py --a ../ab_old --b . [--rounds 5] [--threads 2] [--set core|dspark|all]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

EDIT = r"""
import json, sys
sys.path.insert(0, "bench")
import ds4
from spec import PROMPTS
m = ds4.Model(threads={threads}, n_ctx=2048)
out = {{}}
for name, spec in (("plain", None), ("edit ngram chain", ds4.Spec(types=["ngram-mod", "ngram-simple"]))):
    m.session().generate(PROMPTS["edit"], max_tokens=8, spec=spec)  # warm-up
    g = m.session().generate(PROMPTS["edit"], max_tokens={tokens}, spec=spec, stop_at_eog=False)
    out[name] = g.stats["end_to_end_tokens_per_second"]
print(json.dumps(out))
"""

BATCH = r"""
import json, sys, time
sys.path.insert(0, "bench")
import ds4
from batch import PROMPTS
m = ds4.Model(threads={threads}, n_ctx=1024)
best = 0.0
for _ in range(2):
    b = m.batch(64)
    gens = [b.add(m.tokenize(p), max_tokens={tokens}, temperature=0.7, seed=i, stop_at_eog=False)
            for i, p in enumerate(PROMPTS[:8])]
    b.step()  # the prompts
    n0, t0 = sum(len(g.tokens) for g in gens), time.perf_counter()
    while not all(g.done for g in gens):
        b.step()
    best = max(best, (sum(len(g.tokens) for g in gens) - n0) / (time.perf_counter() - t0))
print(json.dumps({{"8 sessions at T 0.7, aggregate tok/s": best}}))
"""

DSPARK = r"""
import json, sys
sys.path.insert(0, "bench")
import ds4
from spec_dspark import prompt_sets
m = ds4.Model(threads={threads}, n_ctx=1024)
sets = prompt_sets(m)
spec = ds4.Spec(types=["dspark"], mtp_model={drafter!r})
m.session().generate(sets[next(iter(sets))][0], max_tokens=8, spec=spec)  # warm-up
out = {{}}
for name, prompts in sets.items():
    for label, sp in (("plain", None), ("dspark", spec)):
        n, t = 0, 0.0
        for ids in prompts:
            g = m.session().generate(ids, max_tokens={tokens}, spec=sp)
            n += g.stats["n_generated"]
            t += g.stats["end_to_end_seconds"]
        out[f"{{name.split()[0]}} {{label}} e2e tok/s"] = n / t
print(json.dumps(out))
"""


def run(tree: Path, args: list[str], env_extra: dict[str, str] | None = None) -> dict:
    env = dict(os.environ, PYTHONPATH=str(tree / "python"), OPENBLAS_NUM_THREADS="1", **(env_extra or {}))
    out = subprocess.run([sys.executable, *args], cwd=tree, check=True, capture_output=True, text=True, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


def measure(tree: Path, spec_file: str, a: argparse.Namespace, drafter: str | None) -> dict[str, float]:
    figures: dict[str, float] = {}
    if a.set in ("dspark", "all"):
        figures.update(run(tree, ["-c", DSPARK.format(threads=a.threads, tokens=a.dspark_tokens, drafter=drafter)]))
    if a.set == "dspark":
        return figures
    w = run(tree, ["bench/vs_llamacpp.py", "--worker", "ds4", "--spec", spec_file, "--threads", str(a.threads)])
    figures.update({"prefill tok/s": w["prefill_tok_s"], "decode tok/s": w["decode_tok_s"]})
    for k in (1, 8, 16):
        figures[f"verify passes of {k} rows per second"] = 1000.0 / w["verify_ms"][f"verify k={k}"]
    figures.update(run(tree, ["-c", BATCH.format(threads=a.threads, tokens=a.batch_tokens)]))
    e = run(tree, ["-c", EDIT.format(threads=a.threads, tokens=a.spec_tokens)])
    figures["plain e2e tok/s"] = e["plain"]
    figures["edit ngram chain e2e tok/s"] = e["edit ngram chain"]
    return figures


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--a", type=Path, required=True, help="the tree before (its build in place)")
    ap.add_argument("--b", type=Path, required=True, help="the tree after")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prompt-tokens", type=int, default=512)
    ap.add_argument("--decode-tokens", type=int, default=128)
    ap.add_argument("--spec-tokens", type=int, default=256)
    ap.add_argument("--batch-tokens", type=int, default=96, help="tokens per session of the batched step")
    ap.add_argument("--set", choices=("core", "dspark", "all"), default="core",
                    help="core: prefill, decode, verify, 8 batched sessions, the n-gram edit; dspark: the default DSpark against plain on "
                         "bench/spec_dspark.py's held-out chat and code prompts (end to end)")
    ap.add_argument("--dspark-tokens", type=int, default=128)
    ap.add_argument("--drafter-a", help="tree A's DSpark drafter (default: the one it ships)")
    ap.add_argument("--drafter-b", help="tree B's DSpark drafter (default: the one it ships)")
    a = ap.parse_args()
    trees = {"A": a.a.resolve(), "B": a.b.resolve()}
    sys.path.insert(0, str(trees["B"] / "python"))
    sys.path.insert(0, str(trees["B"] / "bench"))
    from vs_llamacpp import prompt_ids

    from ds4 import known_models

    path = known_models.model_path("gemma")
    ids = prompt_ids(path, a.prompt_tokens + 16)
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump({"path": str(path), "ids": ids[: a.prompt_tokens], "block": ids[a.prompt_tokens :],
                   "decode_tokens": a.decode_tokens, "verify_reps": 5}, f)
        spec_file = f.name
    with open("/proc/cpuinfo") as fh:
        cpu = next((line.split(":", 1)[1].strip() for line in fh if line.startswith("model name")), "?")
    print(f"CPU: {cpu}; A = {trees['A']}, B = {trees['B']}; {a.rounds} rounds, {a.threads} threads")
    res: dict[str, dict[str, list[float]]] = {"A": {}, "B": {}}
    ratios: dict[str, list[float]] = {}
    for r in range(a.rounds):
        order = ("A", "B") if r % 2 == 0 else ("B", "A")
        drafters = {"A": a.drafter_a, "B": a.drafter_b}
        got = {t: measure(trees[t], spec_file, a, drafters[t]) for t in order}
        for t in order:
            for k, v in got[t].items():
                res[t].setdefault(k, []).append(v)
        for k in got["A"]:
            ratios.setdefault(k, []).append(got["B"][k] / got["A"][k])
    print("\n| figure | A | B | B / A |\n|---|---:|---:|---:|")
    for k in ratios:
        print(f"| {k} | {statistics.median(res['A'][k]):.1f} | {statistics.median(res['B'][k]):.1f} | "
              f"{statistics.median(ratios[k]):.3f} |")


if __name__ == "__main__":
    main()
