"""A trained drafter (:class:`~ds4.train.drafter_net.DrafterNet`) -> ds4's drafter GGUF (docs/drafters.md)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ds4.convert import _out_qtype, _Planned, write_gguf
from ds4.convert_drafter import ARCH, write_keys


def export_drafter(net: Any, target: str | os.PathLike[str], out: str | os.PathLike[str], outtype: str = "f32",
                   metadata: dict[str, Any] | None = None) -> Path:
    """Writes ``net`` as a drafter for the GGUF ``target`` (whose identity the file records) to
    ``out`` (atomically). ``metadata``: further keys (``dflash.`` prefixed strings, floats, ints)."""
    from ds4 import _core

    cfg = net.cfg
    tm = _core.target_identity(os.fspath(target))
    if tm["n_embd"] != cfg.n_embd:
        raise ValueError(f"{target}: hidden size {tm['n_embd']} differs from the drafter's {cfg.n_embd}")
    tensors = net.tensors()
    plan = []
    for name, a in tensors.items():
        if name == "d2t":
            plan.append(_Planned(name, lambda a=a: a, a.shape, None))
            continue
        plan.append(_Planned(name, lambda a=a: a, a.shape, _out_qtype(outtype, name, a.shape)))

    def meta(w: Any) -> None:
        write_keys(w, name=Path(out).stem, ctx=1 << 20, hidden=cfg.n_embd, layers=cfg.n_layer, ffn=cfg.n_ff,
                   heads=cfg.n_head, kv_heads=cfg.n_head_kv, head_dim=cfg.head_dim, eps=cfg.norm_eps,
                   rope_base=cfg.rope_base, captures=list(cfg.target_layers), block=cfg.block_size, mask=cfg.mask_token,
                   scale=float(net.target.embed_scale), target=tm, target_path=Path(target))
        if cfg.dspark:
            w.add_bool(f"{ARCH}.sample_from_anchor", cfg.from_anchor)
            w.add_uint32(f"{ARCH}.markov_rank", cfg.markov_rank)
        for key, v in (metadata or {}).items():
            if isinstance(v, str):
                w.add_string(key, v)
            elif isinstance(v, float):
                w.add_float32(key, v)
            else:
                w.add_uint32(key, int(v))

    return write_gguf(Path(out), ARCH, meta, plan)

