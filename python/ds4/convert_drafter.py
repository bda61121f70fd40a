"""DFlash block drafters (z-lab's checkpoints: ``DFlashDraftModel``) -> ds4's drafter GGUF.

The layout is docs/drafters.md's, which reads llama.cpp's ``dflash`` files too: architecture
``dflash``, the draft layers as ``blk.N.*`` of a Qwen3 decoder, ``fc.weight`` (the target
features' fusion), ``enc.output_norm.weight`` (its ``hidden_norm``), ``output_norm.weight`` (the
final ``norm``), ``dflash.target_layers`` (the target layer ids + 1: capture indices, counting the
embeddings as 0), ``dflash.block_size``, ``tokenizer.ggml.mask_token_id``; and what ds4 adds: the
target's architecture, name and fingerprints (``dflash.target.*``), so that the drafter is refused
for another model, and ``dflash.input_embedding_scale`` when the checkpoint's config sets one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ds4.convert import ConvertError, _out_qtype, _Planned, _read_checkpoint, _rope, write_gguf

ARCH = "dflash"
_LAYER = {  # HF suffix of layers.N. -> GGUF suffix of blk.N.
    "input_layernorm.weight": "attn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.o_proj.weight": "attn_output.weight",
    "self_attn.q_norm.weight": "attn_q_norm.weight",
    "self_attn.k_norm.weight": "attn_k_norm.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
}
_TOP = {"fc.weight": "fc.weight", "hidden_norm.weight": "enc.output_norm.weight", "norm.weight": "output_norm.weight"}


def is_drafter(cfg: dict[str, Any]) -> bool:
    """Whether a config.json describes a DFlash block drafter."""
    return "dflash_config" in cfg or any("DFlash" in str(a) for a in cfg.get("architectures") or [])


def convert_drafter(hf_dir: Path, cfg: dict[str, Any], out: Path, outtype: str, target: Path | None) -> Path:
    from ds4 import _core

    where = hf_dir / "config.json"
    if target is None:
        raise ConvertError(f"{where}: a DFlash drafter is converted for its target: give target=TARGET.gguf "
                           "(ds4 convert DIR OUT --target TARGET.gguf)")
    dcfg = dict(cfg.get("dflash_config") or {})
    if any("DFlash2" in str(a) for a in cfg.get("architectures") or []) or "conv_kernel_size" in dcfg:
        raise ConvertError(f"{where}: DFlash2 drafters (dynamic convolutions, a candidate selector) are not supported")
    if "sliding_attention" in (cfg.get("layer_types") or []) or cfg.get("is_causal"):
        raise ConvertError(f"{where}: causal or sliding-window draft layers are not supported")
    if float(dcfg.get("output_multiplier", cfg.get("output_multiplier", 1.0))) != 1.0:
        raise ConvertError(f"{where}: an output multiplier other than 1 is not supported")

    def need(key: str) -> int:
        if key not in cfg:
            raise ConvertError(f"{where}: config.json lacks {key!r}")
        return int(cfg[key])

    hidden, layers, heads = need("hidden_size"), need("num_hidden_layers"), need("num_attention_heads")
    kv_heads = int(cfg.get("num_key_value_heads") or heads)
    head_dim = int(cfg.get("head_dim") or hidden // heads)
    ffn = need("intermediate_size")
    rope = _rope(cfg.get("rope_parameters") or cfg.get("rope_scaling") or {}, float(cfg.get("rope_theta", 10000.0)), where)
    if rope.kind != "default":
        raise ConvertError(f"{where}: rope type {rope.kind!r} is not supported for a drafter (default only)")
    try:
        tm = _core.target_identity(str(target))
    except (ValueError, KeyError) as e:
        raise ConvertError(f"{target}: cannot read the target model: {e}") from None
    n_layer = int(tm["n_layer"])
    ids = dcfg.get("target_layer_ids")
    if ids is None:  # z-lab's default: one layer -> the middle, else spread over 1 .. n - 3
        ids = [n_layer // 2] if layers == 1 else [round(1 + i * (n_layer - 4) / (layers - 1)) for i in range(layers)]
    ids = [int(i) for i in ids]
    if not ids or not all(0 <= i < n_layer for i in ids):
        raise ConvertError(f"{where}: target_layer_ids {ids} must lie in the target's layers [0, {n_layer})")
    if hidden != tm["n_embd"]:
        raise ConvertError(f"{where}: hidden size {hidden} differs from the target's {tm['n_embd']} ({target})")
    mask = dcfg.get("mask_token_id", cfg.get("mask_token_id"))
    if mask is None or not 0 <= int(mask) < tm["n_vocab"]:
        raise ConvertError(f"{where}: mask_token_id {mask!r} must be a token of the target's vocabulary")
    block = int(dcfg.get("block_size", cfg.get("block_size", 16)))

    expected: dict[str, tuple[int, ...]] = {
        "fc.weight": (hidden, len(ids) * hidden), "enc.output_norm.weight": (hidden,), "output_norm.weight": (hidden,)}
    for i in range(layers):
        p = f"blk.{i}."
        expected.update({
            p + "attn_norm.weight": (hidden,), p + "attn_q.weight": (heads * head_dim, hidden),
            p + "attn_k.weight": (kv_heads * head_dim, hidden), p + "attn_v.weight": (kv_heads * head_dim, hidden),
            p + "attn_output.weight": (hidden, heads * head_dim), p + "attn_q_norm.weight": (head_dim,),
            p + "attn_k_norm.weight": (head_dim,), p + "ffn_norm.weight": (hidden,),
            p + "ffn_gate.weight": (ffn, hidden), p + "ffn_up.weight": (ffn, hidden), p + "ffn_down.weight": (hidden, ffn)})
    plan: dict[str, _Planned] = {}
    for hf_name, st in sorted(_read_checkpoint(hf_dir).items()):
        name = _gguf_name(hf_name.removeprefix("model."))
        if name is None or name not in expected:
            raise ConvertError(f"{hf_dir}: unexpected tensor {hf_name!r} for a DFlash drafter with this config")
        if st.shape != expected[name]:
            raise ConvertError(f"{hf_dir}: tensor {hf_name!r} has shape {list(st.shape)}, "
                               f"config.json implies {list(expected[name])}")
        plan[name] = _Planned(name, st.load, st.shape, _out_qtype(outtype, name, st.shape))
    missing = [n for n in expected if n not in plan]
    if missing:
        raise ConvertError(f"{hf_dir}: missing tensor(s) {', '.join(missing[:5])}")

    def metadata(w: Any) -> None:
        scale = dcfg.get("input_embedding_scale", cfg.get("input_embedding_scale"))
        write_keys(w, name=hf_dir.resolve().name, ctx=int(cfg.get("max_position_embeddings", 4096)), hidden=hidden,
                   layers=layers, ffn=ffn, heads=heads, kv_heads=kv_heads, head_dim=head_dim,
                   eps=float(cfg.get("rms_norm_eps", 1e-6)), rope_base=rope.theta, captures=[i + 1 for i in ids],
                   block=block, mask=int(mask), scale=None if scale is None else float(scale), target=tm,
                   target_path=Path(target))

    return write_gguf(out, ARCH, metadata, [plan[n] for n in expected])


def write_keys(w: Any, *, name: str, ctx: int, hidden: int, layers: int, ffn: int, heads: int, kv_heads: int,
               head_dim: int, eps: float, rope_base: float, captures: list[int], block: int, mask: int,
               scale: float | None, target: dict[str, Any], target_path: Path) -> None:
    """The keys every drafter file has (docs/drafters.md): the draft layers' shape, the target layers
    (capture indices), block size, mask token, the embedding scale when set, and the target's identity
    (``_core.target_identity``)."""
    w.add_name(name)
    w.add_context_length(ctx)
    w.add_embedding_length(hidden)
    w.add_block_count(layers)
    w.add_feed_forward_length(ffn)
    w.add_head_count(heads)
    w.add_head_count_kv(kv_heads)
    w.add_key_length(head_dim)
    w.add_value_length(head_dim)
    w.add_layer_norm_rms_eps(eps)
    w.add_rope_freq_base(rope_base)
    w.add_array(f"{ARCH}.target_layers", captures)
    w.add_uint32(f"{ARCH}.block_size", block)
    w.add_uint32("tokenizer.ggml.mask_token_id", mask)
    if scale is not None:
        w.add_float32(f"{ARCH}.input_embedding_scale", scale)
    for key in ("architecture", "name", "vocab_fingerprint", "weights_fingerprint"):
        w.add_string(f"{ARCH}.target.{key}", str(target[key]) or target_path.name)


def _gguf_name(hf: str) -> str | None:
    if hf in _TOP:
        return _TOP[hf]
    parts = hf.split(".", 2)
    if len(parts) == 3 and parts[0] == "layers" and parts[1].isdigit() and parts[2] in _LAYER:
        return f"blk.{parts[1]}.{_LAYER[parts[2]]}"
    return None

