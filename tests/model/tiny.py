"""Tiny randomly initialised HF models, built offline with transformers, and their GGUFs.

    import tiny
    tiny.FAMILIES                       # ("llama", ..., "qwen3_next", "qwen3_5_text", ..., "gemma3_text")
    hf_dir = tiny.build("qwen3")        # Path of a save_pretrained directory (cached)
    gguf = tiny.convert("qwen3", "f32") # Path of ds4.convert's output (cached)
    model = tiny.load_hf("qwen3")       # the transformers model, eval mode, float32

Every model has 4 layers, hidden 64, head_dim 16, 4 query / 2 KV heads (GQA), vocab 320 and
a 32-token trained context no longer than TEST_LEN; gemma3 has sliding and full layers with a
sliding window (SLIDING_WINDOW) shorter than TEST_LEN; qwen3_moe has 8 routed experts of width 32,
2 per token; qwen3_next has three gated DeltaNet layers (2 key and 4 value heads of 16, a
4-tap convolution) and a gated attention layer with half the head rotated, and routed experts
with a shared one; qwen3_5_text the same hybrid with dense FFNs and qwen3_5_moe_text with experts
(their value heads reordered by the converter). All weights, norms included, are drawn from a seeded normal, so a norm offset or a
permutation bug shows; the routers' weights are drawn wider, so that the experts a token picks
are decided by margins far above any rounding (a near-tie would flip with the last bit). Directories live in a cache keyed
by a hash of the config and the seed (``DS4_TINY_CACHE`` or ~/.cache/ds4/tiny), written to a
temporary name and renamed, so concurrent test sessions share them safely.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import shutil
import warnings
from pathlib import Path
from typing import Any

FAMILIES: tuple[str, ...] = ("llama", "qwen2", "qwen3", "qwen3_moe", "qwen3_next", "qwen3_5_text", "qwen3_5_moe_text",
                             "gemma3_text")
HYBRID: tuple[str, ...] = ("qwen3_next", "qwen3_5_text", "qwen3_5_moe_text")  # gated DeltaNet layers
OUTTYPES: tuple[str, ...] = ("f32", "f16", "bf16", "q8_0")
SEED = 1234
TEST_LEN = 64  # the sequence length oracle tests should use
SLIDING_WINDOW = 16

_COMMON: dict[str, Any] = dict(
    vocab_size=320,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=4,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    max_position_embeddings=128,
    rms_norm_eps=1e-6,
    bos_token_id=1,
    eos_token_id=2,
    pad_token_id=0,
)

# Per family: extra config, chosen so each family-specific path is exercised (biases, untied
# output, a non-default rope base, gemma3's local base / query scalar / softcapping).
_EXTRA: dict[str, dict[str, Any]] = {
    "llama": dict(tie_word_embeddings=False, rope_theta=50000.0),
    "qwen2": dict(tie_word_embeddings=False, rope_theta=100000.0),
    "qwen3": dict(tie_word_embeddings=True, rope_theta=200000.0),
    "qwen3_moe": dict(tie_word_embeddings=False, rope_theta=300000.0, num_experts=8, num_experts_per_tok=2,
                      moe_intermediate_size=32, norm_topk_prob=True),
    "qwen3_next": dict(tie_word_embeddings=False, rope_parameters={"rope_type": "default", "rope_theta": 400000.0,
                                                                  "partial_rotary_factor": 0.5},
                       layer_types=["linear_attention"] * 3 + ["full_attention"], linear_num_key_heads=2,
                       linear_num_value_heads=4, linear_key_head_dim=16, linear_value_head_dim=16,
                       linear_conv_kernel_dim=4, num_experts=8, num_experts_per_tok=2, moe_intermediate_size=32,
                       shared_expert_intermediate_size=32, norm_topk_prob=True),
    "qwen3_5_text": dict(tie_word_embeddings=True, rope_parameters={"rope_type": "default", "rope_theta": 500000.0,
                                                                   "partial_rotary_factor": 0.5, "mrope_section": [2, 1, 1]},
                         layer_types=["linear_attention"] * 3 + ["full_attention"], linear_num_key_heads=2,
                         linear_num_value_heads=4, linear_key_head_dim=16, linear_value_head_dim=16,
                         linear_conv_kernel_dim=4),
    "qwen3_5_moe_text": dict(tie_word_embeddings=False, rope_parameters={"rope_type": "default", "rope_theta": 600000.0,
                                                                         "partial_rotary_factor": 0.5,
                                                                         "mrope_section": [2, 1, 1]},
                             layer_types=["linear_attention"] * 3 + ["full_attention"], linear_num_key_heads=2,
                             linear_num_value_heads=4, linear_key_head_dim=16, linear_value_head_dim=16,
                             linear_conv_kernel_dim=4, num_experts=8, num_experts_per_tok=2, moe_intermediate_size=32,
                             shared_expert_intermediate_size=32),
    "gemma3_text": dict(
        tie_word_embeddings=True,
        sliding_window=SLIDING_WINDOW,
        layer_types=["sliding_attention", "full_attention", "sliding_attention", "full_attention"],
        rope_parameters={
            "full_attention": {"rope_type": "default", "rope_theta": 1_000_000.0},
            "sliding_attention": {"rope_type": "default", "rope_theta": 10_000.0},
        },
        query_pre_attn_scalar=24,
        final_logit_softcapping=30.0,
    ),
}


def cache_root() -> Path:
    return Path(os.environ.get("DS4_TINY_CACHE", Path.home() / ".cache" / "ds4" / "tiny"))


def config_dict(family: str) -> dict[str, Any]:
    """The config arguments of ``family``'s tiny model."""
    if family not in FAMILIES:
        raise ValueError(f"unknown family {family!r}; families: {', '.join(FAMILIES)}")
    return {**_COMMON, **_EXTRA[family]}


def _key(family: str) -> str:
    import transformers

    blob = json.dumps([family, config_dict(family), SEED, transformers.__version__], sort_keys=True)
    return f"{family}-{hashlib.sha256(blob.encode()).hexdigest()[:12]}"


def _make_model(family: str) -> Any:
    import torch
    import transformers

    cls_config, cls_model = {
        "llama": ("LlamaConfig", "LlamaForCausalLM"),
        "qwen2": ("Qwen2Config", "Qwen2ForCausalLM"),
        "qwen3": ("Qwen3Config", "Qwen3ForCausalLM"),
        "qwen3_moe": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM"),
        "qwen3_next": ("Qwen3NextConfig", "Qwen3NextForCausalLM"),
        "qwen3_5_text": ("Qwen3_5TextConfig", "Qwen3_5ForCausalLM"),
        "qwen3_5_moe_text": ("Qwen3_5MoeTextConfig", "Qwen3_5MoeForCausalLM"),
        "gemma3_text": ("Gemma3TextConfig", "Gemma3ForCausalLM"),
    }[family]
    cfg = getattr(transformers, cls_config)(**config_dict(family))
    torch.manual_seed(SEED)
    model = getattr(transformers, cls_model)(cfg).float().eval()
    gen = torch.Generator().manual_seed(SEED)
    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            # norms near their working point (1, or 0 for Gemma's 1 + w), everything else small
            if p.ndim == 1 and "norm" in name:
                # Gemma's and Qwen3-Next's norms scale by 1 + w (but the DeltaNet's gated norm)
                zero_centered = family == "gemma3_text" or (family in HYBRID and "linear_attn" not in name)
                base = 0.0 if zero_centered else 1.0
                p.copy_(base + 0.1 * torch.randn(p.shape, generator=gen))
            elif name.endswith("mlp.gate.weight"):  # a router
                p.copy_(1.0 * torch.randn(p.shape, generator=gen))
            else:
                p.copy_(0.08 * torch.randn(p.shape, generator=gen))
    return model


def build(family: str, cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """Directory of ``family``'s tiny model as ``save_pretrained`` writes it (config.json +
    model.safetensors, no tokenizer files); built on first use, then cached."""
    root = Path(cache_dir) if cache_dir is not None else cache_root()
    target = root / _key(family)
    if (target / "config.json").exists():
        return target
    root.mkdir(parents=True, exist_ok=True)
    tmp = root / f".{target.name}.{os.getpid()}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    _make_model(family).save_pretrained(tmp)
    try:
        os.rename(tmp, target)
    except OSError:  # another process won the race
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def convert(family: str, outtype: str = "f32", cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """``ds4.convert`` of ``family``'s tiny model to ``outtype``, cached beside the HF directory.
    The placeholder-vocabulary warning is silenced here (test_convert checks it)."""
    import ds4

    hf_dir = build(family, cache_dir)
    out = hf_dir.parent / f"{hf_dir.name}.{outtype}.gguf"
    src_mtime = (hf_dir / "model.safetensors").stat().st_mtime
    if out.exists() and out.stat().st_mtime >= src_mtime and out.stat().st_mtime >= _converter_mtime():
        return out
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*placeholder vocabulary.*")
        return ds4.convert(hf_dir, out, outtype=outtype)


def _converter_mtime() -> float:
    """A GGUF older than the converter is rebuilt (the converter is under development)."""
    # ds4.convert is the function; the modules are reached through importlib
    modules = ("ds4.convert", "ds4.convert_moe", "ds4.convert_hybrid")
    return max(Path(importlib.import_module(m).__file__ or "").stat().st_mtime for m in modules)


def load_hf(family: str, cache_dir: str | os.PathLike[str] | None = None, dtype: str = "float32") -> Any:
    """The transformers model of ``family``'s tiny checkpoint, float32 (or ``dtype``), eval mode.
    In float64 the experts run eagerly (the grouped matmul has no float64 kernel)."""
    import transformers

    extra = {"experts_implementation": "eager"} if dtype == "float64" else {}
    return transformers.AutoModelForCausalLM.from_pretrained(build(family, cache_dir), dtype=dtype, **extra).eval()
