"""The ``ds4`` command line.

    ds4 [-m FILE] -p PROMPT [...]  generate (see cli_generate.py); without -p, interactive chat
    ds4 inspect [FILE]          metadata and tensor table of a GGUF (default: the embedded model)
    ds4 tokenize [-m FILE] TEXT token ids and pieces of TEXT
    ds4 convert HF_DIR OUT.gguf [--outtype f32|f16|bf16|q8_0] [--target TARGET.gguf]
                                HF safetensors checkpoint (or a DFlash drafter for TARGET) -> GGUF
    ds4 train-drafter TARGET OUT.gguf [...]
                                a DSpark / DFlash drafter trained on TARGET's own output (ds4.train)
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from typing import Any, Sequence



def _fmt_bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB"):
        if size < 1024:
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.2f} {unit}"
        size /= 1024
    return f"{size:.2f} GiB"


def _fmt_value(v: Any, limit: int = 8) -> str:
    if isinstance(v, list):
        head = ", ".join(_fmt_value(x, limit) for x in v[:limit])
        more = f", ... ({len(v)} items)" if len(v) > limit else ""
        return f"[{head}{more}]"
    if isinstance(v, str):
        s = json.dumps(v, ensure_ascii=False)
        return s if len(s) <= 120 else s[:117] + '..."'
    return repr(v)


def _model_path(path: str | None) -> str:
    if path:
        return path
    from ds4.default_model import default_model_path

    return str(default_model_path())


def cmd_inspect(args: argparse.Namespace) -> int:
    from ds4 import inspect

    path = _model_path(args.file)
    info = inspect(path)
    if args.json:
        json.dump(info, sys.stdout, ensure_ascii=False)
        sys.stdout.write("\n")
        return 0
    out = sys.stdout
    out.write(f"{info['path']}: GGUF v{info['version']}, alignment {info['alignment']}, "
              f"{info['n_splits']} file(s), {len(info['metadata'])} metadata keys, {len(info['tensors'])} tensors\n\n")
    width = max((len(k) for k in info["metadata"]), default=0)
    for key, value in info["metadata"].items():
        out.write(f"  {key:<{width}}  {_fmt_value(value)}\n")
    out.write("\n")
    tensors = info["tensors"]
    nw = max((len(t["name"]) for t in tensors), default=4)
    out.write(f"  {'name':<{nw}}  {'type':<8} {'shape':<22} {'bytes':>12}\n")
    per_type: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for t in tensors:
        shape = "×".join(str(d) for d in t["shape"])
        out.write(f"  {t['name']:<{nw}}  {t['type']:<8} {shape:<22} {t['nbytes']:>12,}\n")
        n_el = 1
        for d in t["shape"]:
            n_el *= d
        acc = per_type[t["type"]]
        acc[0] += 1
        acc[1] += t["nbytes"]
        acc[2] += n_el
    total = sum(a[1] for a in per_type.values()) or 1
    out.write(f"\n  {'type':<8} {'tensors':>7} {'elements':>14} {'bytes':>12} {'share':>7} {'bits/weight':>11}\n")
    for name, (count, nbytes, n_el) in sorted(per_type.items(), key=lambda kv: -kv[1][1]):
        bpw = 8 * nbytes / n_el if n_el else 0.0
        out.write(f"  {name:<8} {count:>7} {n_el:>14,} {_fmt_bytes(nbytes):>12} {100 * nbytes / total:>6.1f}% {bpw:>11.2f}\n")
    out.write(f"  {'total':<8} {len(tensors):>7} {sum(a[2] for a in per_type.values()):>14,} "
              f"{_fmt_bytes(sum(a[1] for a in per_type.values())):>12}\n")
    return 0


def cmd_tokenize(args: argparse.Namespace) -> int:
    from ds4 import Model

    m = Model(_model_path(args.model))
    ids = m.tokenize(args.text, add_special=not args.no_special, parse_special=not args.no_parse_special)
    if args.json:
        print(json.dumps({"ids": ids, "pieces": [m.detokenize([i]) for i in ids]}, ensure_ascii=False))
        return 0
    print(f"{m.arch}, vocab {m.vocab_size}: {len(ids)} tokens")
    for i in ids:
        print(f"  {i:>7}  {json.dumps(m.detokenize([i]), ensure_ascii=False)}")
    return 0


def cmd_convert(args: argparse.Namespace) -> int:
    from ds4 import convert

    out = convert(args.hf_dir, args.out, outtype=args.outtype, target=args.target)
    print(out)
    return 0


def cmd_download(args: argparse.Namespace) -> int:
    from ds4.download import DownloadError, download

    try:
        print(download(args.name, args.file, revision=args.revision, token=args.token, local_dir=args.local_dir))
    except DownloadError as e:
        print(f"ds4: error: {e}", file=sys.stderr)
        return 1
    return 0


SUBCOMMANDS = ("inspect", "tokenize", "convert", "train-drafter", "download")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ds4", description="ds4: GGUF inference with lossless speculative decoding; "
                                "without a subcommand, ds4 [-p PROMPT] generates (see ds4 -h)")
    sub = p.add_subparsers(dest="command", required=True)

    pi = sub.add_parser("inspect", help="print a GGUF's metadata and tensor table")
    pi.add_argument("file", nargs="?", help="GGUF file (default: the embedded default model)")
    pi.add_argument("--json", action="store_true", help="print everything as one JSON object")
    pi.set_defaults(func=cmd_inspect)

    pt = sub.add_parser("tokenize", help="print the token ids and pieces of a text")
    pt.add_argument("text")
    pt.add_argument("-m", "--model", help="GGUF file (default: the embedded default model)")
    pt.add_argument("--no-special", action="store_true", help="do not add BOS/EOS")
    pt.add_argument("--no-parse-special", action="store_true", help="tokenize special-token text literally")
    pt.add_argument("--json", action="store_true")
    pt.set_defaults(func=cmd_tokenize)

    from ds4.convert import OUTTYPES

    pc = sub.add_parser("convert", help="convert a Hugging Face safetensors checkpoint directory to GGUF")
    pc.add_argument("hf_dir", help="directory with config.json and *.safetensors (as save_pretrained writes it)")
    pc.add_argument("out", help="GGUF file to write")
    pc.add_argument("--outtype", choices=OUTTYPES, default="f32", help="type of the 2-D tensors (default f32)")
    pc.add_argument("--target", help="a block drafter's target model (GGUF): what the drafter is made for")
    pc.set_defaults(func=cmd_convert)

    from ds4.download import NAMED

    pd = sub.add_parser("download", help="download a GGUF from the Hugging Face Hub (resumable, verified)")
    pd.add_argument("name", help=f"a named target ({', '.join(NAMED)}) or a repository")
    pd.add_argument("file", nargs="?", help="the file in the repository (with REPO)")
    pd.add_argument("--revision", help="branch, tag or commit (default: main)")
    pd.add_argument("--token", help="Hugging Face token (default: HF_TOKEN or the login's)")
    pd.add_argument("--local-dir", help="a directory to put the file in instead of the Hugging Face cache")
    pd.set_defaults(func=cmd_download)

    from ds4.train.cli import add_parser

    add_parser(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if not argv or argv[0] not in SUBCOMMANDS:
            from ds4.cli_generate import run

            return run(argv)
        args = build_parser().parse_args(argv)
        return args.func(args)
    except (ValueError, FileNotFoundError) as e:  # GGUFError, ModelError, ConvertError ... are ValueErrors
        print(f"ds4: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
