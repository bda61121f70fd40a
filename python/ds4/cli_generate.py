"""``ds4`` without a subcommand: generate from a prompt (``-p``) or chat interactively.

    ds4 -p "The capital of France is" -n 64 --temp 0.7 --seed 1
    ds4                                  interactive chat, history kept, /exit to leave
    ds4 -p "..." --json                  one JSON object: text, tokens, stats
    ds4 -m big.gguf --huge-pages         weights copied onto huge pages at load (a long chat)

Load time, prefill and decode speed go to stderr at the end, so stdout holds only the text. The
decode rate counts the forward passes and sampling; the end-to-end rate everything after the
prefill (drafting, catch-up, the scheduler's cost prior, the loop's own work).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any, Sequence

HUGE_PAGES_HELP = ("copy the weights onto transparent huge pages at load (Linux): a model larger than the CPU's caches "
                   "decodes faster when its file's cached pages are small (Qwen2.5-Coder 1.5B +12-19 %% on an Intel "
                   "Xeon), for a longer start")
SUBCOMMANDS_HELP = "subcommands: ds4 inspect FILE | ds4 tokenize TEXT | ds4 convert HF_DIR OUT.gguf (each with -h)"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="ds4",
        description="ds4: GGUF inference with lossless speculative decoding. " + SUBCOMMANDS_HELP,
    )
    p.add_argument("-m", "--model", help="GGUF file (default: the embedded Gemma 3 270M)")
    p.add_argument("-p", "--prompt", help="prompt to continue; without it, an interactive chat starts")
    p.add_argument("-n", "--n-predict", type=int, default=256, help="tokens to generate at most (default 256)")
    p.add_argument("-t", "--threads", type=int, default=None, help="threads (default: all cores)")
    p.add_argument("-c", "--ctx-size", type=int, default=None, help="context length (default: the model's trained context)")
    p.add_argument("--temp", type=float, default=0.0, help="temperature; 0 = greedy (default 0)")
    p.add_argument("--top-k", type=int, default=0, help="keep the k most likely tokens (0 = off)")
    p.add_argument("--top-p", type=float, default=1.0, help="nucleus sampling mass (1 = off)")
    p.add_argument("--min-p", type=float, default=0.0, help="drop tokens below min_p x the top probability (0 = off)")
    p.add_argument("--repeat-penalty", type=float, default=1.0, help="CTRL repetition penalty (1 = off)")
    p.add_argument("--repeat-last-n", type=int, default=64, help="window of the penalties (default 64)")
    p.add_argument("--presence-penalty", type=float, default=0.0)
    p.add_argument("--frequency-penalty", type=float, default=0.0)
    p.add_argument("--seed", type=int, default=None, help="RNG seed (same seed, same output)")
    p.add_argument("--stop", action="append", default=[], help="stop string (repeatable)")
    p.add_argument("--ignore-eos", action="store_true", help="keep going past end-of-generation tokens")
    p.add_argument("--json", action="store_true", help="print the generation and its stats as one JSON object")
    p.add_argument("--huge-pages", action="store_true", help=HUGE_PAGES_HELP)
    add_spec_arguments(p)
    return p


def add_spec_arguments(p: argparse.ArgumentParser) -> None:
    """The speculative-decoding flags (the seeds' names and llama.cpp's), as ``ds4`` and ``ds4-server`` take them."""
    s = p.add_argument_group("speculative decoding (at --temp 0 the same text as plain decoding)")
    s.add_argument("--spec-type", help="proposers chained in order, comma-separated: ngram-simple, ngram-mod, draft, mtp, "
                   "dflash, dspark (llama.cpp's draft-* names too)")
    s.add_argument("--mtp-model", help="a block drafter's support GGUF (DFlash / DSpark: docs/drafters.md), drafting first "
                   "in the chain")
    s.add_argument("--dspark", action="store_true",
                   help="draft with a DSpark block drafter (--mtp-model, or the one shipped for the model), first in the chain")
    s.add_argument("--mtp", action="store_true",
                   help="draft with the model's built-in MTP block (Qwen3-Next / Qwen3.5 GGUFs that keep it), first in the chain")
    s.add_argument("--mtp-draft", type=int, default=None,
                   help="most tokens an MTP draft chains (default 2; DS4_QWEN4_MTP_DEPTH=N fixes the depth)")
    s.add_argument("-md", "--draft-model", help="draft model GGUF (same tokenizer) for the 'draft' proposer")
    s.add_argument("--mtp-exact-sampling", action="store_true",
                   help="at temperature > 0, rejection sampling that keeps the sampling distribution exact")
    s.add_argument("--spec-draft-n-max", type=int, default=None, help="most drafted tokens per verify pass (default 16)")
    s.add_argument("--draft-p-min", "--spec-draft-p-min", "--dspark-confidence", dest="draft_p_min", type=float,
                   default=None, help="a draft model ends its draft where its best token's probability is below this; "
                   "a DSpark drafter where its confidence that the draft is accepted falls below it")
    s.add_argument("--spec-draft-n-min", type=int, default=None, help="least drafted tokens verified when a draft exists (default 0)")
    s.add_argument("--mtp-timing", action="store_true",
                   help="print acceptance per draft position and time per phase at the end (also turns --mtp on "
                        "for a model with an MTP block)")
    s.add_argument("--quality", "--dspark-strict", dest="quality", action="store_true",
                   help="target-only decoding: speculation off")


def _sampling(args: argparse.Namespace, model: Any) -> dict[str, Any]:
    return dict(
        max_tokens=args.n_predict,
        temperature=args.temp,
        top_k=args.top_k,
        top_p=args.top_p,
        min_p=args.min_p,
        repeat_penalty=args.repeat_penalty,
        repeat_last_n=args.repeat_last_n,
        presence_penalty=args.presence_penalty,
        frequency_penalty=args.frequency_penalty,
        seed=args.seed,
        stop=args.stop,
        stop_at_eog=not args.ignore_eos,
        spec=spec_from_args(args, model),
    )


def spec_from_args(args: argparse.Namespace, model: Any) -> Any:
    from ds4 import Spec

    types = [t.strip() for t in (args.spec_type or "").split(",") if t.strip()]
    mtp = args.mtp or (args.mtp_timing and model.has_mtp)
    if mtp and "mtp" not in types and "draft-mtp" not in types:
        types.insert(0, "mtp")
    block = any(t in ("dflash", "draft-dflash", "dspark", "draft-dspark") for t in types)
    if args.dspark and not block:
        types.insert(0, "dspark")
    elif args.mtp_model and not block:
        from ds4.speculative import block_kind

        types.insert(0, block_kind(args.mtp_model))
    if not types and not args.draft_model:
        if args.spec_draft_n_max is not None:
            raise SystemExit("ds4: --spec-draft-n-max needs --spec-type, --mtp, --mtp-model or --draft-model")
        if args.mtp_draft is not None:
            raise SystemExit("ds4: --mtp-draft needs --mtp")
        return None
    return Spec(types=types, draft_model=args.draft_model, mtp_model=args.mtp_model, n_max=args.spec_draft_n_max,
                n_min=args.spec_draft_n_min, mtp_draft=args.mtp_draft,
                confidence=args.draft_p_min, strict=args.quality,
                sampling="exact" if args.mtp_exact_sampling else "opportunistic")


def _timing(stats: dict[str, Any]) -> None:
    """--mtp-timing: acceptance, and every second after the prefill split by phase."""
    passes = stats["n_spec_passes"]
    drafted, accepted = stats["n_drafted"], stats["n_accepted"]
    rate = f"{accepted / drafted:.1%}" if drafted else "n/a"
    per_pos = ", ".join(f"{a}/{d}" for a, d in zip(stats["accepted_per_position"], stats["drafted_per_position"]))
    phases = {"plain steps": stats["plain_seconds"], "verify": stats["verify_seconds"],
              "draft": stats["draft_seconds"] - stats["catch_up_seconds"], "catch-up": stats["catch_up_seconds"],
              "sampling": stats["sample_seconds"], "cost prior": stats["cost_prior_seconds"]}
    phases["other"] = max(0.0, stats["end_to_end_seconds"] - sum(phases.values()))
    split = ", ".join(f"{name} {s * 1e3:.1f} ms" for name, s in phases.items())
    print(
        f"ds4 spec: {stats['n_verify_passes']} decode passes ({passes} verifying drafts), "
        f"{stats['tokens_per_pass']:.2f} tokens/pass | drafted {drafted}, accepted {accepted} ({rate}) | "
        f"accepted/drafted per position: {per_pos or 'n/a'}\n"
        f"ds4 timing: {stats['end_to_end_seconds'] * 1e3:.1f} ms after the prefill = {split} | "
        f"plain decode estimated at {stats['plain_tokens_per_second_estimate']:.1f} tok/s, "
        f"speculation gained {stats['spec_balance_seconds'] * 1e3:.1f} ms by the scheduler's ledger, "
        f"measured / predicted pass time per proposer: "
        f"{', '.join(f'{s:.2f}' for s in stats['spec_slowdown']) or 'n/a'}",
        file=sys.stderr,
    )


def _report(stats: dict[str, Any], load_s: float | None = None) -> None:
    load = f"load {load_s:.2f} s | " if load_s is not None else ""
    print(
        f"\nds4: {load}prefill {stats['n_prompt']} tok, "
        f"{stats['prefill_tokens_per_second']:.1f} tok/s | decode {stats['n_generated']} tok, "
        f"{stats['tokens_per_second']:.1f} tok/s, end to end {stats['end_to_end_tokens_per_second']:.1f} tok/s "
        f"| stop: {stats['stop_reason']}",
        file=sys.stderr,
    )


def _load(args: argparse.Namespace) -> tuple[Any, float]:
    from ds4 import Model

    t0 = time.perf_counter()
    # The KV cache grows with use, so the model's full trained context costs nothing up front.
    model = Model(args.model, threads=args.threads, n_ctx=args.ctx_size, huge_pages=args.huge_pages)
    return model, time.perf_counter() - t0


def run_prompt(args: argparse.Namespace) -> int:
    model, load_s = _load(args)
    session = model.session()
    if args.json:
        g = session.generate(args.prompt, **_sampling(args, model))
        out = {"model": model.path, "prompt": args.prompt, "text": g.text, "tokens": g.tokens,
               "stats": {**g.stats, "load_seconds": load_s}}
        print(json.dumps(out, ensure_ascii=False))
        return 0
    g = session.generate(args.prompt, stream=True, **_sampling(args, model))
    sys.stdout.write(args.prompt)
    sys.stdout.flush()
    for piece in g:
        sys.stdout.write(piece)
        sys.stdout.flush()
    sys.stdout.write("\n")
    _report(g.stats, load_s)
    if args.mtp_timing:
        _timing(g.stats)
    return 0


def run_chat(args: argparse.Namespace) -> int:
    from ds4 import inspect
    from ds4.chat import apply_chat_template

    model, load_s = _load(args)
    metadata = inspect(model.path)["metadata"]
    session = model.session()
    history: list[dict[str, str]] = []
    print(f"ds4 chat with {model.path} (loaded in {load_s:.2f} s). /exit or Ctrl-D to leave, /reset to forget.",
          file=sys.stderr)
    while True:
        try:
            line = input("> ")
        except EOFError:
            print(file=sys.stderr)
            return 0
        if line.strip() in ("/exit", "/quit"):
            return 0
        if line.strip() == "/reset":
            history.clear()
            session.truncate(0)
            continue
        history.append({"role": "user", "content": line})
        ids = model.tokenize(apply_chat_template(metadata, history, add_generation_prompt=True), add_special=False)
        # Reuse the cached prefix the conversation shares with the session; feed only the rest.
        held = session.tokens
        common = 0
        while common < min(len(held), len(ids) - 1) and held[common] == ids[common]:
            common += 1
        session.truncate(common)
        g = session.generate(ids[common:], stream=True, **_sampling(args, model))
        for piece in g:
            sys.stdout.write(piece)
            sys.stdout.flush()
        sys.stdout.write("\n")
        history.append({"role": "assistant", "content": g.text})
        _report(g.stats)


def run(argv: Sequence[str]) -> int:
    args = build_parser().parse_args(argv)
    return run_prompt(args) if args.prompt is not None else run_chat(args)
