"""A trained drafter (:class:`~ds4.train.drafter_net.DrafterNet`) -> ds4's drafter GGUF (docs/drafters.md)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ds4.convert import _out_qtype, _Planned, write_gguf
from ds4.convert_drafter import ARCH


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
        w.add_name(Path(out).stem)
        w.add_context_length(1 << 20)
        w.add_embedding_length(cfg.n_embd)
        w.add_block_count(cfg.n_layer)
        w.add_feed_forward_length(cfg.n_ff)
        w.add_head_count(cfg.n_head)
        w.add_head_count_kv(cfg.n_head_kv)
        w.add_key_length(cfg.head_dim)
        w.add_value_length(cfg.head_dim)
        w.add_layer_norm_rms_eps(cfg.norm_eps)
        w.add_rope_freq_base(cfg.rope_base)
        w.add_array(f"{ARCH}.target_layers", list(cfg.target_layers))
        w.add_uint32(f"{ARCH}.block_size", cfg.block_size)
        w.add_uint32("tokenizer.ggml.mask_token_id", cfg.mask_token)
        if cfg.dspark:
            w.add_bool(f"{ARCH}.sample_from_anchor", cfg.from_anchor)
            w.add_uint32(f"{ARCH}.markov_rank", cfg.markov_rank)
        w.add_float32(f"{ARCH}.input_embedding_scale", float(net.target.embed_scale))
        for key in ("architecture", "name", "vocab_fingerprint", "weights_fingerprint"):
            w.add_string(f"{ARCH}.target.{key}", str(tm[key]) or Path(target).name)
        for key, v in (metadata or {}).items():
            if isinstance(v, str):
                w.add_string(key, v)
            elif isinstance(v, float):
                w.add_float32(key, v)
            else:
                w.add_uint32(key, int(v))

    return write_gguf(Path(out), ARCH, meta, plan)

