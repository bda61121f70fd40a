"""The built-in MTP proposer on the tiny hybrid target with its trained MTP block
(tests/speculative/mtp_target.py): plain greedy decoding against MTP at depth 1 and 2 and the
adaptive depth, drafting at every step, and the default (the scheduler deciding whether to draft), on an easy prompt set (the phrase language the target learnt: its continuations
are what the block was trained on) and a hard one (random tokens: the first continuations are
unlike anything seen). Per setting: decode tokens/s over the whole set (end to end after each
prefill, drafting and catch-up included), the median over rounds of its ratio to the same
round's plain run, acceptance per draft position and tokens per verify pass. Greedy output is
checked identical to plain on every prompt.

Run through ``bench/spec.py --mtp [--rounds 5] [--prompts 20] [--tokens 128] [--threads 2]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "speculative"))
import mtp_target  # noqa: E402

import ds4  # noqa: E402


def prompt_sets(n: int) -> dict[str, list[list[int]]]:
    rng = np.random.default_rng(7)
    easy = [mtp_target.text(int(rng.integers(8, 40)), rng) for _ in range(n)]
    hard = [[int(t) for t in rng.integers(3, 320, size=int(rng.integers(8, 40)))] for _ in range(n)]
    return {"easy (the phrase language)": easy, "hard (random tokens)": hard}


def run(model: ds4.Model, prompts: list[list[int]], tokens: int, spec: ds4.Spec | None,
        stop_at_eog: bool = False) -> tuple[float, list, dict]:
    """Tokens/s over the set, every output, and the summed speculation counts."""
    seconds, n, outs = 0.0, 0, []
    sums: dict[str, Any] = {"n_accepted": 0, "n_drafted": 0, "n_spec_passes": 0, "acc": [], "dr": []}
    for p in prompts:
        g = model.session().generate(p, max_tokens=tokens, stop_at_eog=stop_at_eog, spec=spec)
        st = g.stats
        seconds += st["end_to_end_seconds"]
        n += st["n_generated"] - 1
        outs.append(g.tokens)
        for k in ("n_accepted", "n_drafted", "n_spec_passes"):
            sums[k] += st[k]
        for key, src in (("acc", "accepted_per_position"), ("dr", "drafted_per_position")):
            total = sums[key]
            total += [0] * (len(st[src]) - len(total))
            for i, x in enumerate(st[src]):
                total[i] += x
    return n / seconds, outs, sums


def mtp(args: argparse.Namespace) -> None:
    model = ds4.Model(str(mtp_target.gguf()), threads=args.threads, n_ctx=args.tokens + 64)
    # every step drafting (n_min=1) compares the depth policies alone; the default is what a user
    # gets, the scheduler deciding whether a draft pays
    settings: dict[str, ds4.Spec | None] = {
        "plain": None,
        "mtp depth 1, every step": ds4.Spec(types=["mtp"], mtp_depth=1, n_min=1),
        "mtp depth 2, every step": ds4.Spec(types=["mtp"], mtp_depth=2, n_min=1),
        "mtp adaptive, every step": ds4.Spec(types=["mtp"], n_min=1),
        "mtp (the default: adaptive, the scheduler deciding)": ds4.Spec(types=["mtp"]),
    }
    from spec import cpu_line

    print(f"# {cpu_line()}\n# tiny Qwen3-Next target (f32 GGUF, its MTP block {mtp_target.accuracy()['accuracy_after']:.0%} "
          f"right held out), {args.prompts} prompts x {args.tokens} tokens, {args.threads} threads, median of {args.rounds}")
    tables(model, prompt_sets(args.prompts), settings, args)


def tables(model: ds4.Model, sets: dict[str, list[list[int]]], settings: dict[str, ds4.Spec | None],
           args: argparse.Namespace, stop_at_eog: bool = False) -> None:
    """Per prompt set, a table of the settings (the first, "plain", the reference): tok/s, the
    median of the per-round ratios to plain, acceptance per position, tokens per pass; greedy
    output checked identical to plain's."""
    for name, prompts in sets.items():
        rates: dict[str, list[float]] = {s: [] for s in settings}
        ratios: dict[str, list[float]] = {s: [] for s in settings}
        counts: dict[str, dict] = {}
        want = None
        for _ in range(args.rounds):
            for s, spec in settings.items():
                rate, outs, sums = run(model, prompts, args.tokens, spec, stop_at_eog)
                want = want or outs
                if outs != want:
                    raise SystemExit(f"{s}: greedy output differs from plain decoding")
                rates[s].append(rate)
                ratios[s].append(rate / rates["plain"][-1])
                counts.setdefault(s, sums)
        print(f"\n### {name}\n")
        print("| ds4 | decode tok/s | vs plain | accepted / drafted per position | tokens / pass |\n|---|---:|---:|---|---:|")
        for s in settings:
            c = counts[s]
            per_pos = ", ".join(f"{a}/{d}" for a, d in zip(c["acc"], c["dr"])) or "n/a"
            tpp = (c["n_accepted"] + c["n_spec_passes"]) / c["n_spec_passes"] if c["n_spec_passes"] else 1.0
            print(f"| {s} | {statistics.median(rates[s]):.0f} | {statistics.median(ratios[s]):.2f} | {per_pos} | {tpp:.2f} |")

