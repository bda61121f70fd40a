"""``ds4 train-drafter TARGET OUT.gguf``: a DSpark (or DFlash) drafter for TARGET, trained on its own
continuations (ds4.train.data) and exported as a drafter GGUF for ``ds4 --mtp-model OUT.gguf``.

Work files (the data, the checkpoint) live in OUT.gguf's work directory, so an interrupted run
(Ctrl-C, ``--minutes``) resumes where it stopped when run again with the same arguments.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any


def add_parser(sub: Any) -> None:
    p = sub.add_parser("train-drafter", help="train a DSpark / DFlash drafter for a model (needs the train extra: torch)")
    p.add_argument("target", help="the target model: a GGUF, or a Hugging Face directory (converted first)")
    p.add_argument("out", help="the drafter GGUF to write")
    p.add_argument("--kind", choices=("dspark", "dflash"), default="dspark")
    p.add_argument("--prompts", help="jsonl of prompts ({\"prompt\": ...} per line; default: the shipped set)")
    p.add_argument("--corpus", type=int, default=0,
                   help="add N prompts cut from the standard library's code and docstrings (varied data)")
    p.add_argument("--work-dir", help="data and checkpoints (default: OUT.gguf.work)")
    p.add_argument("--max-new", type=int, default=192, help="tokens the target continues each prompt with")
    p.add_argument("--layers", type=int, default=1, help="draft layers (default 1)")
    p.add_argument("--target-layers", help="target layer ids the drafter reads, comma-separated (default: 3 spread)")
    p.add_argument("--block-size", type=int, default=None, help="tokens a block drafts (default: dspark 8, dflash 16)")
    p.add_argument("--draft-vocab", type=int, default=8192, help="dspark: the reduced draft vocabulary (0: the target's)")
    p.add_argument("--markov-rank", type=int, default=128)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--kv-heads", type=int, default=1)
    p.add_argument("--head-dim", type=int, default=128)
    p.add_argument("--ffn", type=int, default=2048)
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--distill", type=float, default=1.0,
                   help="weight of the cross-entropy against the target's own next-token distribution (0: its tokens only)")
    p.add_argument("--minutes", type=float, default=0.0, help="stop (resumably) after this much training in this run")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--device", default="auto", help="where torch trains: auto (CUDA when present, else the CPU), cpu, cuda")
    p.add_argument("--precision", choices=("auto", "f32", "bf16"), default="auto",
                   help="matrix products in training: auto (bf16 where the hardware has it: AVX512_BF16, AMX, CUDA), f32, bf16")
    p.add_argument("--outtype", choices=("f32", "f16", "q8_0"), default="q8_0", help="the drafter's matrices (default q8_0)")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=run)


def _mask_token(md: dict[str, Any]) -> int:
    """A token the target never reads in text: its mask token, else its padding token."""
    for key in ("tokenizer.ggml.mask_token_id", "tokenizer.ggml.padding_token_id"):
        if isinstance(md.get(key), int):
            return int(md[key])
    toks = md.get("tokenizer.ggml.tokens") or []
    for name in ("<mask>", "<|mask|>", "[MASK]", "<pad>"):
        if name in toks:
            return toks.index(name)
    return 0


def run(args: argparse.Namespace) -> int:
    try:
        import torch
    except ImportError:
        raise SystemExit("ds4 train-drafter needs torch: pip install 'ds4[train]'") from None
    import numpy as np

    import ds4
    from ds4.train import data
    from ds4.train.drafter_net import DrafterConfig, DrafterNet
    from ds4.train.export import export_drafter
    from ds4.train.prompts import corpus_prompts
    from ds4.train.trainer import (TrainConfig, Trainer, acceptance, bf16_is_native, calibrate, default_layers, describe,
                                   reduced_vocab, target_parts)

    out = Path(args.out)
    work = Path(args.work_dir) if args.work_dir else out.with_name(out.name + ".work")
    work.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(args.seed)
    if args.threads:
        torch.set_num_threads(args.threads)
    target = Path(args.target)
    if target.is_dir():
        gguf = work / "target.gguf"
        if not gguf.exists():
            ds4.convert(target, gguf, outtype="f16")
        target = gguf
    model = ds4.Model(target, threads=args.threads)
    info = ds4.inspect(str(target))
    md = info["metadata"]
    layers = (tuple(int(i) + 1 for i in args.target_layers.split(",")) if args.target_layers
              else default_layers(model._m.n_layer))
    t0 = time.time()
    prompts = data.read_prompts(args.prompts) + corpus_prompts(args.corpus, args.seed)
    samples = data.generate_to(work, model, prompts, layers, args.max_new)
    data_s = time.time() - t0
    order = np.random.default_rng(args.seed).permutation(len(samples))
    n_held = max(1, len(samples) // 10)
    heldout, train = [samples[i] for i in order[:n_held]], [samples[i] for i in order[n_held:]]
    parts = target_parts(target)
    dspark = args.kind == "dspark"
    cfg = DrafterConfig(
        n_embd=model._m.n_embd, target_layers=layers, mask_token=_mask_token(md), n_layer=args.layers,
        n_head=args.heads, n_head_kv=args.kv_heads, head_dim=args.head_dim, n_ff=args.ffn,
        block_size=args.block_size or (8 if dspark else 16),
        rope_base=float(md.get(f"{md['general.architecture']}.rope.freq_base", 10000.0)),
        norm_eps=1e-6, markov_rank=args.markov_rank if dspark else 0,
        d2t=reduced_vocab(train, args.draft_vocab, parts.n_vocab) if dspark and args.draft_vocab else ())
    n_tokens = sum(len(s.tokens) for s in samples)
    device = ("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device
    net = DrafterNet(cfg, parts, seed=args.seed).to_device(device)
    bf16 = args.precision == "bf16" or (args.precision == "auto" and bf16_is_native(device))
    tc = TrainConfig(steps=args.steps, lr=args.lr, minutes=args.minutes, seed=args.seed, bf16=bf16, distill=args.distill)
    print(f"ds4 train-drafter: {describe(cfg)}; data {len(samples)} sequences, {n_tokens} tokens "
          f"({len(heldout)} held out), ready in {data_s:.0f} s; training on {device} in {'bf16' if bf16 else 'f32'}",
          file=sys.stderr)
    trainer = Trainer(net, train, heldout, tc, work)
    t1 = time.time()
    if not trainer.run():
        print(f"ds4 train-drafter: stopped at step {trainer.step}/{tc.steps}; run again to resume", file=sys.stderr)
        return 0
    rate, length, z, hit = acceptance(net, heldout, 1024, seed=7)
    scale, shift = calibrate(net, z, hit) if dspark else (1.0, 0.0)
    log = {"data_sequences": len(samples), "data_tokens": n_tokens, "steps": trainer.step,
           "train_minutes_this_run": round((time.time() - t1) / 60, 1),
           "heldout_acceptance_per_position": [round(float(r), 4) for r in rate],
           "heldout_accepted_per_block": round(length, 3), "confidence_calibration": [round(scale, 4), round(shift, 4)],
           "history": trainer.history}
    (work / "log.json").write_text(json.dumps(log, indent=1))
    export_drafter(net, target, out, outtype=args.outtype,
                   metadata={"dflash.training.log": json.dumps({k: v for k, v in log.items() if k != "history"})})
    print(f"ds4 train-drafter: held-out acceptance per position {log['heldout_acceptance_per_position']}, "
          f"{length:.2f} tokens accepted per block; wrote {out}", file=sys.stderr)
    return 0
