"""HF safetensors -> GGUF, with llama.cpp's tensor names and metadata keys.

``convert(hf_dir, out_path, outtype)`` reads a directory as transformers' ``save_pretrained``
writes it (``config.json``, ``*.safetensors``, possibly sharded with
``model.safetensors.index.json``, tokenizer files optional) and writes one GGUF. The safetensors
files are parsed here (a JSON header and raw little-endian arrays), so converting needs numpy
and the ``gguf`` package but no torch. Names come from the ``gguf`` package's tables
(``MODEL_ARCH``, ``TensorNameMap``, ``MODEL_TENSORS``, ``Keys``); nothing of llama.cpp's naming
is spelled out here.

Families (``model_type`` / ``architectures`` -> ``general.architecture``):
``llama`` / LlamaForCausalLM -> llama, ``qwen2`` / Qwen2ForCausalLM -> qwen2,
``qwen3`` / Qwen3ForCausalLM -> qwen3, ``qwen3_moe`` / Qwen3MoeForCausalLM -> qwen3moe,
``qwen3_next`` / Qwen3NextForCausalLM -> qwen3next, ``qwen3_5_text`` / Qwen3_5ForCausalLM -> qwen35,
``qwen3_5_moe_text`` / Qwen3_5MoeForCausalLM -> qwen35moe, ``gemma3_text`` / Gemma3ForCausalLM -> gemma3.

Tensor transforms (as llama.cpp's converter does, so its files and ours agree):

- llama: the rows of ``attn_q`` / ``attn_k`` (and their biases) are permuted per head from HF's
  half-split rotary layout (rotate_half) to the interleaved pairs of llama.cpp's "normal" RoPE.
  qwen2, qwen3 and gemma3 use NEOX RoPE and are stored as HF has them.
- qwen3next: its gated DeltaNet tensors as ``convert_hybrid.py`` says; its norms are
  zero-centered (``1 + weight``) like Gemma's and stored with the 1 added, except the DeltaNet's
  gated norm (``ssm_norm``); the q projection of its attention layers holds each head's q then
  its gate, stored as it is; the built-in MTP block (``mtp.*``) becomes layer ``n_layer``
  as llama.cpp stores it (``convert_hybrid.py``), its norms with the 1 added. qwen35 and
  qwen35moe likewise, their DeltaNet projections already apart in the checkpoint, value heads
  tiled over the key heads as llama.cpp stores them (``convert_hybrid.py``).
- gemma3: Gemma3RMSNorm scales by ``1 + weight``; every norm weight (``attn_norm``,
  ``attn_q_norm``, ``attn_k_norm``, ``post_attention_norm``, ``ffn_norm``, ``post_ffw_norm``,
  ``output_norm``) is stored with the 1 added, so a GGUF RMSNorm multiplies by the stored weight.
- tied embeddings: no ``output`` tensor; the forward uses ``token_embd``.
- llama3 rope scaling: a ``rope_freqs`` tensor (head_dim/2 divisors of the base frequencies).
- routed experts (qwen3moe): the router as ``ffn_gate_inp``, every expert's matrices stacked
  into ``ffn_{gate,up,down}_exps`` (``convert_moe.py`` reads either checkpoint layout). Every
  layer must be MoE (``mlp_only_layers`` empty, ``decoder_sparse_step`` 1): the GGUF
  architecture has no dense FFN tensors.

Out types (llama.cpp's policy): 1-D tensors (norms, biases), ``rope_freqs``, the routers
(``ffn_gate_inp``, ``ffn_gate_inp_shexp``) and the convolutions (``ssm_conv1d``) stay f32; the rest become f16 / bf16 / q8_0 (q8_0 rows whose length is not a
multiple of 32 fall back to f16).

Metadata written, ``{arch}`` being the GGUF architecture:

- ``general.architecture``, ``general.name``, ``general.file_type``,
  ``general.quantization_version``
- ``{arch}.vocab_size``, ``{arch}.context_length`` (max_position_embeddings),
  ``{arch}.embedding_length``, ``{arch}.block_count``, ``{arch}.feed_forward_length``,
  ``{arch}.attention.head_count``, ``{arch}.attention.head_count_kv``,
  ``{arch}.attention.key_length``, ``{arch}.attention.value_length`` (head_dim),
  ``{arch}.attention.layer_norm_rms_epsilon``, ``{arch}.rope.freq_base``,
  ``{arch}.rope.dimension_count``
- rope scaling when the config has it: ``{arch}.rope.scaling.type`` (linear, yarn),
  ``{arch}.rope.scaling.factor``, ``{arch}.rope.scaling.original_context_length`` (yarn),
  ``{arch}.rope.scaling.yarn_beta_fast`` / ``yarn_beta_slow`` (yarn, when given); llama3-type
  scaling is the ``rope_freqs`` tensor instead, as in llama.cpp
- MoE: ``{arch}.expert_count``, ``.expert_used_count``, ``.expert_feed_forward_length``,
  ``.expert_weights_norm`` (norm_topk_prob), ``.expert_gating_func`` (softmax),
  ``.expert_shared_feed_forward_length`` (a shared expert)
- qwen3next: ``{arch}.ssm.conv_kernel``, ``.ssm.state_size`` (d_k = d_v), ``.ssm.group_count``
  (key heads), ``.ssm.time_step_rank`` (value heads), ``.ssm.inner_size``,
  ``.full_attention_interval`` (layer_types must follow it), ``.rope.dimension_count`` from
  ``partial_rotary_factor``; qwen35 also ``.rope.dimension_sections`` (mrope_section, padded to 4)
- gemma3 only: ``gemma3.attention.sliding_window``; ``gemma3.final_logit_softcapping`` and
  ``gemma3.attn_logit_softcapping`` when set. llama.cpp hard-codes the rest in C++ (local RoPE
  base 10000, every 6th layer global, scale 1/sqrt(head_dim) except 27B); the forward pass needs
  them from the file, so they are written with the keys the ``gguf`` package already defines:
  ``gemma3.rope.freq_base_swa`` (rope_local_base_freq: RoPE base of the sliding layers; rope
  scaling applies to the global layers only), ``gemma3.attention.sliding_window_pattern``
  (bool per layer, true = sliding-window layer, the gemma3n convention) and
  ``gemma3.attention.scale`` (query_pre_attn_scalar ** -0.5, the factor on q·k).
- tokenizer: ``tokenizer.ggml.model`` (gpt2 for byte-level BPE, llama for SentencePiece),
  ``.pre`` (gpt2), ``.tokens``, ``.token_type``, ``.scores`` (llama), ``.merges`` (gpt2),
  ``.bos_token_id`` / ``.eos_token_id`` / ``.padding_token_id`` / ``.unknown_token_id`` when
  known, ``.add_bos_token`` / ``.add_eos_token``, ``.add_space_prefix`` (gemma3: false), and
  ``tokenizer.chat_template`` when the tokenizer files carry one.

Without tokenizer files the vocabulary is a placeholder (with a warning): SentencePiece-style,
``vocab_size`` tokens ``<tok_N>``, the config's special ids named ``<bos>``/``<eos>``/``<pad>``
as control tokens, the last 256 ids the byte tokens ``<0x00>``..``<0xFF>`` and the one before
them U+2581 (SentencePiece's space), so any text tokenizes (byte by byte) and round-trips.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Literal

import numpy as np

from ds4.convert_hybrid import deltanet_views, mtp_layers, mtp_views
from ds4.convert_moe import Tensor, expert_views
from ds4.page_cache import drop_written

OutType = Literal["f32", "f16", "bf16", "q8_0"]
OUTTYPES: tuple[str, ...] = ("f32", "f16", "bf16", "q8_0")


class ConvertError(ValueError):
    """The HF directory cannot be converted: the message says what and where."""


# ---------------------------------------------------------------------------------------------
# safetensors, read without torch: 8-byte little-endian header length, a JSON header
# {name: {"dtype", "shape", "data_offsets": [begin, end]}}, then the data (offsets relative to it).


@dataclass(frozen=True)
class _StTensor:
    file: Path
    dtype: str
    shape: tuple[int, ...]
    offset: int  # absolute byte offset in file
    nbytes: int

    def load(self) -> np.ndarray:
        """The tensor as float32 (HF order: [out, in] for matrices)."""
        raw = np.memmap(self.file, dtype=np.uint8, mode="r", offset=self.offset, shape=(self.nbytes,))
        if self.dtype == "F32":
            a = raw.view("<f4").astype(np.float32)
        elif self.dtype == "F16":
            a = raw.view("<f2").astype(np.float32)
        elif self.dtype == "BF16":
            # bf16 is the high half of an f32: widen and shift
            a = (raw.view("<u2").astype(np.uint32) << 16).view(np.float32)
        else:
            raise ConvertError(f"{self.file}: tensor dtype {self.dtype} is not supported (F32, F16, BF16)")
        return a.reshape(self.shape)


_ST_ITEMSIZE = {"F32": 4, "F16": 2, "BF16": 2, "F64": 8, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1}


def _read_safetensors_header(path: Path) -> dict[str, _StTensor]:
    size = path.stat().st_size
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise ConvertError(f"{path}: not a safetensors file (shorter than its 8-byte header length)")
        n = int.from_bytes(head, "little")
        if n > size - 8:
            raise ConvertError(f"{path}: safetensors header length {n} exceeds the file size {size}")
        try:
            header = json.loads(f.read(n))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise ConvertError(f"{path}: safetensors header is not JSON: {e}") from None
    out: dict[str, _StTensor] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        shape = tuple(int(d) for d in info["shape"])
        itemsize = _ST_ITEMSIZE.get(info["dtype"])
        if itemsize is None or end - begin != itemsize * math.prod(shape) or 8 + n + end > size:
            raise ConvertError(f"{path}: tensor {name!r} has an inconsistent header entry {info}")
        out[name] = _StTensor(path, info["dtype"], shape, 8 + n + begin, end - begin)
    return out


def _read_checkpoint(hf_dir: Path) -> dict[str, _StTensor]:
    index = hf_dir / "model.safetensors.index.json"
    if index.exists():
        weight_map: dict[str, str] = json.loads(index.read_text())["weight_map"]
        files = sorted({hf_dir / f for f in weight_map.values()})
        for f in files:
            if not f.exists():
                raise ConvertError(f"{index} names shard {f.name}, which is missing")
    else:
        files = sorted(hf_dir.glob("*.safetensors"))
    if not files:
        raise ConvertError(f"{hf_dir}: no *.safetensors files (only safetensors checkpoints are supported)")
    tensors: dict[str, _StTensor] = {}
    for f in files:
        for name, t in _read_safetensors_header(f).items():
            if name in tensors:
                raise ConvertError(f"{hf_dir}: tensor {name!r} is in both {tensors[name].file.name} and {f.name}")
            tensors[name] = t
    return tensors


# ---------------------------------------------------------------------------------------------
# Families


@dataclass(frozen=True)
class _Family:
    model_type: str
    hf_arch: str  # the transformers class name in config["architectures"]
    gguf_arch: str  # key into gguf.MODEL_ARCH
    hidden_act: str  # the activation the GGUF architecture implies
    permute_qk: bool  # llama.cpp's llama uses interleaved ("normal") RoPE
    norm_shift: float  # added to every norm weight (Gemma's 1 + weight)
    qk_norm: bool
    sandwich_norms: bool  # gemma3: post-attention and pre/post-FFN norms
    qkv_bias_default: bool  # qwen2 always has q/k/v biases
    tie_default: bool
    head_dim_default: int | None  # None: hidden_size // num_attention_heads
    rope_theta_default: float


_FAMILIES: dict[str, _Family] = {
    f.model_type: f
    for f in (
        _Family("llama", "LlamaForCausalLM", "LLAMA", "silu", True, 0.0, False, False, False, False, None, 10000.0),
        _Family("qwen2", "Qwen2ForCausalLM", "QWEN2", "silu", False, 0.0, False, False, True, False, None, 10000.0),
        _Family("qwen3", "Qwen3ForCausalLM", "QWEN3", "silu", False, 0.0, True, False, False, False, 128, 10000.0),
        _Family("qwen3_moe", "Qwen3MoeForCausalLM", "QWEN3MOE", "silu", False, 0.0, True, False, False, False, 128,
                10000.0),
        _Family("qwen3_next", "Qwen3NextForCausalLM", "QWEN3NEXT", "silu", False, 1.0, True, False, False, False, 256,
                10000.0),
        _Family("qwen3_5_text", "Qwen3_5ForCausalLM", "QWEN35", "silu", False, 1.0, True, False, False, False, 256,
                10000.0),
        _Family("qwen3_5_moe_text", "Qwen3_5MoeForCausalLM", "QWEN35MOE", "silu", False, 1.0, True, False, False, False,
                256, 10000.0),
        _Family("gemma3_text", "Gemma3ForCausalLM", "GEMMA3", "gelu_pytorch_tanh", False, 1.0, True, True, False, True,
                256, 1_000_000.0),
    )
}
_HYBRID = ("qwen3_next", "qwen3_5_text", "qwen3_5_moe_text")  # gated DeltaNet + gated attention
SUPPORTED: tuple[str, ...] = tuple(f"{f.model_type} ({f.hf_arch})" for f in _FAMILIES.values())


def _family(cfg: dict[str, Any], where: Path) -> _Family:
    model_type = cfg.get("model_type")
    archs = cfg.get("architectures") or []
    fam = _FAMILIES.get(str(model_type))
    if fam is None or (archs and fam.hf_arch not in archs):
        what = f"model_type {model_type!r}" + (f", architectures {archs}" if archs else "")
        raise ConvertError(f"{where}: {what} is not supported; supported: {', '.join(SUPPORTED)}")
    return fam


@dataclass(frozen=True)
class _Rope:
    theta: float
    kind: str  # "default", "linear", "yarn", "llama3"
    params: dict[str, Any]


def _rope(d: dict[str, Any], theta_default: float, where: Path) -> _Rope:
    """A RoPE parameter set: transformers 5's ``rope_parameters`` entry or an old ``rope_scaling``."""
    kind = str(d.get("rope_type", d.get("type", "default")))
    if kind not in ("default", "linear", "yarn", "llama3"):
        raise ConvertError(f"{where}: rope type {kind!r} is not supported (default, linear, yarn, llama3)")
    return _Rope(float(d.get("rope_theta", theta_default)), kind, d)


@dataclass(frozen=True)
class _HParams:
    vocab: int
    hidden: int
    layers: int
    ffn: int
    heads: int
    kv_heads: int
    head_dim: int
    ctx: int
    eps: float
    tied: bool
    qkv_bias: bool
    o_bias: bool
    mlp_bias: bool
    rope: _Rope  # global (full-attention) layers
    rope_swa: _Rope | None  # gemma3 sliding layers
    sliding: list[bool] | None  # gemma3: per layer, true = sliding window
    experts: int = 0  # routed experts per layer (0: dense FFNs)
    experts_used: int = 0
    expert_ffn: int = 0
    norm_topk: bool = False
    shared_ffn: int = 0  # a gated shared expert's width (0: none)
    rope_dims: int = 0  # rotated dimensions of a head (partial_rotary_factor)
    interval: int = 0  # qwen3next: every interval-th layer is full attention, the others DeltaNet
    linear: tuple[int, int, int, int, int] = (0, 0, 0, 0, 0)  # DeltaNet n_k, n_v, d_k, d_v, conv kernel
    mtp: int = 0  # built-in MTP blocks after the trunk (hybrids)


def _hparams(cfg: dict[str, Any], fam: _Family, where: Path) -> _HParams:
    def need(key: str) -> int:
        if key not in cfg:
            raise ConvertError(f"{where}: config.json lacks {key!r}")
        return int(cfg[key])

    heads = need("num_attention_heads")
    hidden = need("hidden_size")
    layers = need("num_hidden_layers")
    head_dim = cfg.get("head_dim") or fam.head_dim_default or hidden // heads
    act = cfg.get("hidden_activation", cfg.get("hidden_act")) if fam.model_type == "gemma3_text" else cfg.get("hidden_act")
    if act is not None and act != fam.hidden_act:
        raise ConvertError(f"{where}: hidden activation {act!r} is not supported for {fam.model_type} (only {fam.hidden_act!r})")

    rp = cfg.get("rope_parameters")
    rope_swa = None
    sliding = None
    if fam.model_type == "gemma3_text":
        if rp and "full_attention" in rp:
            rope = _rope(rp["full_attention"], fam.rope_theta_default, where)
            rope_swa = _rope(rp.get("sliding_attention", {}), 10000.0, where)
        else:  # transformers 4 spelling
            rope = _rope({"rope_theta": cfg.get("rope_theta", fam.rope_theta_default), **(cfg.get("rope_scaling") or {})},
                         fam.rope_theta_default, where)
            rope_swa = _Rope(float(cfg.get("rope_local_base_freq", 10000.0)), "default", {})
        if rope_swa.kind != "default":
            raise ConvertError(f"{where}: rope scaling on sliding-window layers ({rope_swa.kind}) is not supported")
        if cfg.get("layer_types"):
            types = list(cfg["layer_types"])
        else:
            pattern = int(cfg.get("sliding_window_pattern", cfg.get("_sliding_window_pattern", 6)))
            types = ["sliding_attention" if (i + 1) % pattern else "full_attention" for i in range(layers)]
        if len(types) != layers or not set(types) <= {"sliding_attention", "full_attention"}:
            raise ConvertError(f"{where}: layer_types {types} must name {layers} sliding_attention/full_attention layers")
        sliding = [t == "sliding_attention" for t in types]
    else:
        if rp:
            rope = _rope(rp, fam.rope_theta_default, where)
        else:
            rope = _rope({"rope_theta": cfg.get("rope_theta", fam.rope_theta_default), **(cfg.get("rope_scaling") or {})},
                         fam.rope_theta_default, where)
        types = cfg.get("layer_types") or []
        allowed = {"full_attention", "linear_attention"} if fam.model_type in _HYBRID else {"full_attention"}
        if cfg.get("use_sliding_window") or any(t not in allowed for t in types):
            raise ConvertError(f"{where}: sliding-window attention is not supported for {fam.model_type}")

    attn_bias = bool(cfg.get("attention_bias", False))
    # num_experts in the hub's configs, num_local_experts as transformers 5 saves them
    moe = fam.model_type in ("qwen3_moe", "qwen3_next", "qwen3_5_moe_text")
    experts = int(cfg.get("num_experts") or cfg.get("num_local_experts") or 0) if moe else 0
    interval, linear = 0, (0, 0, 0, 0, 0)
    if fam.model_type in _HYBRID:
        interval = int(cfg.get("full_attention_interval") or 4)
        want = ["full_attention" if (i + 1) % interval == 0 else "linear_attention" for i in range(layers)]
        if cfg.get("layer_types") and list(cfg["layer_types"]) != want:
            raise ConvertError(f"{where}: layer_types must put full attention on every {interval}th layer "
                               f"(full_attention_interval), got {cfg['layer_types']}")
        linear = (need("linear_num_key_heads"), need("linear_num_value_heads"), need("linear_key_head_dim"),
                  need("linear_value_head_dim"), need("linear_conv_kernel_dim"))
        if linear[2] != linear[3] or linear[1] % linear[0]:
            raise ConvertError(f"{where}: linear_key_head_dim must equal linear_value_head_dim and "
                               "linear_num_value_heads be a multiple of linear_num_key_heads")
    partial = float((rp or {}).get("partial_rotary_factor", cfg.get("partial_rotary_factor", 1.0)))
    if experts:
        if cfg.get("mlp_only_layers") or int(cfg.get("decoder_sparse_step", 1)) != 1:
            raise ConvertError(f"{where}: dense layers among MoE ones (mlp_only_layers, decoder_sparse_step) "
                               f"cannot be stored in a {fam.gguf_arch.lower()} GGUF")
    return _HParams(
        vocab=need("vocab_size"),
        hidden=hidden,
        layers=layers,
        # a MoE-only config (qwen3_5_moe_text) has no dense width: the experts' stands for it
        ffn=need("intermediate_size") if cfg.get("intermediate_size") or not experts else need("moe_intermediate_size"),
        heads=heads,
        kv_heads=int(cfg.get("num_key_value_heads") or heads),
        head_dim=int(head_dim),
        ctx=int(cfg.get("max_position_embeddings", 131072 if fam.model_type == "gemma3_text" else 2048)),
        eps=float(cfg.get("rms_norm_eps", 1e-6)),
        tied=bool(cfg.get("tie_word_embeddings", fam.tie_default)),
        qkv_bias=fam.qkv_bias_default or attn_bias,
        # qwen2's attention_bias-less o_proj: its biases are q/k/v only
        o_bias=attn_bias and fam.model_type != "qwen2",
        mlp_bias=bool(cfg.get("mlp_bias", False)),
        rope=rope,
        rope_swa=rope_swa,
        sliding=sliding,
        experts=experts,
        experts_used=need("num_experts_per_tok") if experts else 0,
        expert_ffn=need("moe_intermediate_size") if experts else 0,
        # Qwen3.5's router always rescales its chosen weights
        norm_topk=bool(cfg.get("norm_topk_prob", False)) or fam.model_type == "qwen3_5_moe_text",
        shared_ffn=int(cfg.get("shared_expert_intermediate_size") or 0) if fam.model_type in _HYBRID else 0,
        rope_dims=int(int(head_dim) * partial),
        interval=interval,
        linear=linear,
    )


# ---------------------------------------------------------------------------------------------
# Expected tensors: GGUF name -> shape in numpy order (HF order).


def _expected(fam: _Family, hp: _HParams) -> dict[str, tuple[int, ...]]:
    import gguf

    T = gguf.MODEL_TENSOR
    arch = gguf.MODEL_ARCH[fam.gguf_arch]
    H, q, kv, ffn = hp.hidden, hp.heads * hp.head_dim, hp.kv_heads * hp.head_dim, hp.ffn
    out: dict[str, tuple[int, ...]] = {}

    def add(t: Any, suffix: str, shape: tuple[int, ...], bid: int | None = None) -> None:
        if t not in gguf.MODEL_TENSORS[arch]:
            raise AssertionError(f"{gguf.TENSOR_NAMES[t]} is not a tensor of {arch.name}")
        name = gguf.TENSOR_NAMES[t].format(bid=bid) if bid is not None else gguf.TENSOR_NAMES[t]
        out[f"{name}.{suffix}" if suffix else name] = shape

    add(T.TOKEN_EMBD, "weight", (hp.vocab, H))
    add(T.OUTPUT_NORM, "weight", (H,))
    if not hp.tied:
        add(T.OUTPUT, "weight", (hp.vocab, H))
    for i in range(hp.layers + hp.mtp):
        add(T.ATTN_NORM, "weight", (H,), i)
        if i >= hp.layers:  # an MTP block: fc joins the normed embedding and hidden state (llama.cpp's nextn.*)
            out[f"blk.{i}.nextn.eh_proj.weight"] = (H, 2 * H)
            for norm in ("enorm", "hnorm", "shared_head_norm"):
                out[f"blk.{i}.nextn.{norm}.weight"] = (H,)
        if hp.interval and i < hp.layers and (i + 1) % hp.interval:
            n_k, n_v, d_k, d_v, k = hp.linear
            conv = 2 * n_k * d_k + n_v * d_v
            add(T.ATTN_QKV, "weight", (conv, H), i)
            add(T.ATTN_GATE, "weight", (n_v * d_v, H), i)
            if fam.model_type == "qwen3_next":
                add(T.SSM_BETA_ALPHA, "weight", (2 * n_v, H), i)
            else:
                add(T.SSM_BETA, "weight", (n_v, H), i)
                add(T.SSM_ALPHA, "weight", (n_v, H), i)
            add(T.SSM_CONV1D, "weight", (conv, k), i)
            add(T.SSM_DT, "bias", (n_v,), i)
            add(T.SSM_A, "", (n_v,), i)
            add(T.SSM_NORM, "weight", (d_v,), i)
            add(T.SSM_OUT, "weight", (H, n_v * d_v), i)
        else:
            add(T.ATTN_Q, "weight", (2 * q if hp.interval else q, H), i)  # qwen3next: each head's q, then its gate
            add(T.ATTN_K, "weight", (kv, H), i)
            add(T.ATTN_V, "weight", (kv, H), i)
            add(T.ATTN_OUT, "weight", (H, q), i)
            if fam.qk_norm:
                add(T.ATTN_Q_NORM, "weight", (hp.head_dim,), i)
                add(T.ATTN_K_NORM, "weight", (hp.head_dim,), i)
        # gemma3's pre-FFN norm is its own tensor kind, spelled like the others' ffn_norm; qwen3next
        # calls it post_attention_norm
        ffn_norm = T.ATTN_POST_NORM if hp.interval else T.FFN_PRE_NORM if fam.sandwich_norms else T.FFN_NORM
        add(ffn_norm, "weight", (H,), i)
        if hp.experts:
            E, F = hp.experts, hp.expert_ffn
            add(T.FFN_GATE_INP, "weight", (E, H), i)
            add(T.FFN_GATE_EXP, "weight", (E, F, H), i)
            add(T.FFN_UP_EXP, "weight", (E, F, H), i)
            add(T.FFN_DOWN_EXP, "weight", (E, H, F), i)
            if hp.shared_ffn:
                add(T.FFN_GATE_INP_SHEXP, "weight", (1, H), i)
                add(T.FFN_GATE_SHEXP, "weight", (hp.shared_ffn, H), i)
                add(T.FFN_UP_SHEXP, "weight", (hp.shared_ffn, H), i)
                add(T.FFN_DOWN_SHEXP, "weight", (H, hp.shared_ffn), i)
        else:
            add(T.FFN_GATE, "weight", (ffn, H), i)
            add(T.FFN_UP, "weight", (ffn, H), i)
            add(T.FFN_DOWN, "weight", (H, ffn), i)
        if hp.qkv_bias:
            add(T.ATTN_Q, "bias", (q,), i)
            add(T.ATTN_K, "bias", (kv,), i)
            add(T.ATTN_V, "bias", (kv,), i)
        if hp.o_bias:
            add(T.ATTN_OUT, "bias", (H,), i)
        if hp.mlp_bias:
            add(T.FFN_GATE, "bias", (ffn,), i)
            add(T.FFN_UP, "bias", (ffn,), i)
            add(T.FFN_DOWN, "bias", (H,), i)
        if fam.sandwich_norms:
            add(T.ATTN_POST_NORM, "weight", (H,), i)
            add(T.FFN_POST_NORM, "weight", (H,), i)
    return out


def _interleave_rope_rows(w: np.ndarray, n_head: int) -> np.ndarray:
    """Per head, rows [x0..x(d/2-1), y0..y(d/2-1)] -> [x0, y0, x1, y1, ...]: HF's rotate_half pairs
    dimension j with j + d/2; llama.cpp's normal RoPE pairs 2j with 2j+1."""
    d = w.shape[0] // n_head
    return w.reshape(n_head, 2, d // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _llama3_rope_freqs(rope: _Rope, head_dim: int) -> np.ndarray:
    """llama3 rope scaling as per-frequency divisors (llama.cpp's rope_freqs tensor): high
    frequencies keep theirs, low ones are divided by ``factor``, a smooth ramp in between."""
    p = rope.params
    factor = float(p["factor"])
    low, high = float(p.get("low_freq_factor", 1.0)), float(p.get("high_freq_factor", 4.0))
    old_ctx = float(p.get("original_max_position_embeddings", 8192))
    freqs = rope.theta ** -(np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    wavelen = 2 * math.pi / freqs
    smooth = (old_ctx / wavelen - low) / (high - low)
    div = np.where(wavelen < old_ctx / high, 1.0,
                   np.where(wavelen > old_ctx / low, factor, 1.0 / ((1 - smooth) / factor + smooth)))
    return div.astype(np.float32)


# ---------------------------------------------------------------------------------------------
# Vocabulary


def _special_ids(cfg: dict[str, Any], vocab: int) -> dict[str, int]:
    out: dict[str, int] = {}
    for kind, key in (("bos", "bos_token_id"), ("eos", "eos_token_id"), ("pad", "pad_token_id")):
        v = cfg.get(key)
        if isinstance(v, list):
            v = v[0] if v else None
        if isinstance(v, int) and 0 <= v < vocab:
            out[kind] = v
    return out


def _write_placeholder_vocab(w: Any, cfg: dict[str, Any], vocab: int, fam: _Family) -> None:
    import gguf

    tokens = [f"<tok_{i}>" for i in range(vocab)]
    types = [gguf.TokenType.NORMAL] * vocab
    if vocab >= 256 + 8:
        # U+2581 is the space SentencePiece prepends; with it a leading space decodes as one
        tokens[vocab - 257] = "\u2581"
        for b in range(256):
            tokens[vocab - 256 + b] = f"<0x{b:02X}>"
            types[vocab - 256 + b] = gguf.TokenType.BYTE
    special = _special_ids(cfg, vocab)
    for kind, i in special.items():
        if kind == "pad" and i in (special.get("bos"), special.get("eos")):
            continue
        tokens[i] = f"<{kind}>"
        types[i] = gguf.TokenType.CONTROL
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_scores([-float(i) for i in range(vocab)])
    if "bos" in special:
        w.add_bos_token_id(special["bos"])
    if "eos" in special:
        w.add_eos_token_id(special["eos"])
    if "pad" in special:
        w.add_pad_token_id(special["pad"])
    w.add_add_bos_token("bos" in special)
    w.add_add_eos_token(False)
    if fam.model_type == "gemma3_text":
        w.add_add_space_prefix(False)


def _write_vocab(w: Any, hf_dir: Path, cfg: dict[str, Any], hp: _HParams, fam: _Family) -> None:
    from ds4 import _hf_vocab

    if (hf_dir / "tokenizer.json").exists():
        _hf_vocab.write_tokenizer_json(w, hf_dir, hp.vocab, fam.model_type)
        return
    if (hf_dir / "tokenizer.model").exists():
        raise ConvertError(f"{hf_dir}: tokenizer.model without tokenizer.json is not supported; "
                           "save the tokenizer with transformers (it writes tokenizer.json)")
    warnings.warn(f"{hf_dir} has no tokenizer files (tokenizer.json): writing a placeholder vocabulary of "
                  f"{hp.vocab} tokens <tok_N> with byte fallback", stacklevel=3)
    _write_placeholder_vocab(w, cfg, hp.vocab, fam)


# ---------------------------------------------------------------------------------------------
# Conversion


@dataclass(frozen=True)
class _Planned:
    name: str  # GGUF name
    make: Callable[[], np.ndarray]  # the final float32 data
    shape: tuple[int, ...]
    qtype: Any  # gguf.GGMLQuantizationType; None: an integer array written as it is


def _out_qtype(outtype: str, name: str, shape: tuple[int, ...]) -> Any:
    from gguf import GGMLQuantizationType as Q

    if (outtype == "f32" or len(shape) == 1 or name.startswith("rope_freqs") or ".ffn_gate_inp" in name
            or ".ssm_conv1d." in name):
        return Q.F32
    if outtype == "q8_0":
        return Q.Q8_0 if shape[-1] % 32 == 0 else Q.F16
    return {"f16": Q.F16, "bf16": Q.BF16}[outtype]


def _encode(data: np.ndarray, qtype: Any) -> np.ndarray:
    import gguf
    from gguf import GGMLQuantizationType as Q

    if qtype == Q.F32:
        return np.ascontiguousarray(data, dtype=np.float32)
    if qtype == Q.F16:
        return data.astype(np.float16)
    return gguf.quants.quantize(data, qtype)  # BF16 and Q8_0: uint8 blocks


def convert(hf_dir: str | os.PathLike[str], out_path: str | os.PathLike[str], outtype: OutType = "f32",
            target: str | os.PathLike[str] | None = None) -> Path:
    """Convert the HF checkpoint directory ``hf_dir`` to the GGUF ``out_path``; returns its path.

    A DFlash block drafter (z-lab's ``DFlashDraftModel``: ``dflash_config`` in its config) is
    converted for its target model, the GGUF ``target`` (``convert_drafter.py``).

    The file is written beside the target under a temporary name and renamed at the end, so a
    failure never leaves a partial file. Raises :class:`ConvertError` (a ``ValueError``) for an
    unsupported or inconsistent checkpoint and ``FileNotFoundError`` for a missing directory or
    config.json.
    """
    import gguf

    hf_dir = Path(hf_dir)
    out = Path(out_path)
    if outtype not in OUTTYPES:
        raise ValueError(f"outtype must be one of {', '.join(OUTTYPES)}, got {outtype!r}")
    if not hf_dir.is_dir():
        raise FileNotFoundError(f"{hf_dir}: not a directory")
    cfg_path = hf_dir / "config.json"
    if not cfg_path.exists():
        raise FileNotFoundError(f"{hf_dir}: no config.json (expected a directory written by save_pretrained)")
    cfg = json.loads(cfg_path.read_text())
    from ds4.convert_drafter import convert_drafter, is_drafter

    if is_drafter(cfg):
        return convert_drafter(hf_dir, cfg, out, outtype, Path(target) if target is not None else None)
    fam = _family(cfg, cfg_path)
    hp = _hparams(cfg, fam, cfg_path)
    expected = _expected(fam, hp)
    tensors: dict[str, Any] = _read_checkpoint(hf_dir)
    if hp.interval:
        hp = dataclasses.replace(hp, mtp=mtp_layers(tensors))
        expected = _expected(fam, hp)
    if hp.experts:
        tensors = expert_views(tensors, hp.experts, hf_dir, ConvertError)
    if hp.interval:
        tensors = deltanet_views(mtp_views(tensors, hp.layers), *hp.linear[:4], tiled=fam.model_type != "qwen3_next")
    arch = gguf.MODEL_ARCH[fam.gguf_arch]
    name_map = gguf.TensorNameMap(arch, hp.layers + hp.mtp)

    plan: dict[str, _Planned] = {}
    for hf_name, st in sorted(tensors.items()):
        if hf_name.endswith("rotary_emb.inv_freq") or (hp.tied and hf_name == "lm_head.weight"):
            continue  # recomputed / shared with the embedding
        # mtp_views names the MTP block's own tensors as the GGUF does already
        name = hf_name if hf_name.startswith("blk.") else name_map.get_name(hf_name, try_suffixes=(".weight", ".bias"))
        if name is None or name not in expected:
            raise ConvertError(f"{hf_dir}: unexpected tensor {hf_name!r} for {fam.model_type} with this config")
        if st.shape != expected[name]:
            raise ConvertError(f"{hf_dir}: tensor {hf_name!r} has shape {list(st.shape)}, "
                               f"config.json implies {list(expected[name])}")
        plan[name] = _Planned(name, _transform(fam, hp, name, st), st.shape, _out_qtype(outtype, name, st.shape))
    missing = [n for n in expected if n not in plan]
    if missing:
        raise ConvertError(f"{hf_dir}: missing tensor(s) {', '.join(missing[:5])}"
                           + (f" and {len(missing) - 5} more" if len(missing) > 5 else ""))
    if hp.rope.kind == "llama3":
        freqs = _llama3_rope_freqs(hp.rope, hp.head_dim)
        name = gguf.TENSOR_NAMES[gguf.MODEL_TENSOR.ROPE_FREQS] + ".weight"
        plan[name] = _Planned(name, lambda: freqs, freqs.shape, gguf.GGMLQuantizationType.F32)

    def metadata(w: Any) -> None:
        _write_metadata(w, fam, hp, cfg, hf_dir, outtype)
        _write_vocab(w, hf_dir, cfg, hp, fam)

    order = [n for n in expected if n in plan] + [n for n in plan if n not in expected]
    return write_gguf(out, gguf.MODEL_ARCH_NAMES[arch], metadata, [plan[n] for n in order])


def write_gguf(out: Path, arch: str, metadata: Callable[[Any], None], tensors: list[_Planned]) -> Path:
    """Writes a GGUF of architecture ``arch``: ``metadata(writer)`` adds the keys, then the
    tensors in order, one in memory at a time. The file is written beside ``out`` under a
    temporary name and renamed at the end, so a failure never leaves a partial file."""
    import gguf

    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    w = gguf.GGUFWriter(tmp, arch=arch)
    try:
        metadata(w)
        for p in tensors:
            n = p.name
            if p.qtype is None:  # an integer array, stored as it is (a drafter's d2t)
                dt = p.make().dtype
                w.add_tensor_info(n, p.shape, dt, math.prod(p.shape) * dt.itemsize)
            elif p.qtype in (gguf.GGMLQuantizationType.F32, gguf.GGMLQuantizationType.F16):
                dt = np.dtype(np.float32 if p.qtype == gguf.GGMLQuantizationType.F32 else np.float16)
                w.add_tensor_info(n, p.shape, dt, math.prod(p.shape) * dt.itemsize)
            else:
                byte_shape = gguf.quant_shape_to_byte_shape(p.shape, p.qtype)
                w.add_tensor_info(n, byte_shape, np.dtype(np.uint8), math.prod(byte_shape), raw_dtype=p.qtype)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_ti_data_to_file()
        for p in tensors:
            w.write_tensor_data(p.make() if p.qtype is None else _encode(p.make(), p.qtype))
        w.close()
        drop_written(tmp)
        os.replace(tmp, out)
    except BaseException:
        w.close()
        tmp.unlink(missing_ok=True)
        raise
    return out


def _transform(fam: _Family, hp: _HParams, name: str, st: Tensor) -> Callable[[], np.ndarray]:
    def make() -> np.ndarray:
        a = st.load()
        if fam.permute_qk and (".attn_q." in name or ".attn_k." in name):
            a = _interleave_rope_rows(a, hp.heads if ".attn_q." in name else hp.kv_heads)
        if fam.norm_shift and name.endswith("norm.weight") and ".ssm_norm." not in name:
            a = a + np.float32(fam.norm_shift)
        return a

    return make


def _write_metadata(w: Any, fam: _Family, hp: _HParams, cfg: dict[str, Any], hf_dir: Path, outtype: str) -> None:
    import gguf

    ftype = {"f32": gguf.LlamaFileType.ALL_F32, "f16": gguf.LlamaFileType.MOSTLY_F16,
             "bf16": gguf.LlamaFileType.MOSTLY_BF16, "q8_0": gguf.LlamaFileType.MOSTLY_Q8_0}[outtype]
    w.add_name(hf_dir.resolve().name)
    w.add_file_type(ftype)
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    w.add_vocab_size(hp.vocab)
    w.add_context_length(hp.ctx)
    w.add_embedding_length(hp.hidden)
    w.add_block_count(hp.layers + hp.mtp)
    w.add_feed_forward_length(hp.ffn)
    w.add_head_count(hp.heads)
    w.add_head_count_kv(hp.kv_heads)
    w.add_key_length(hp.head_dim)
    w.add_value_length(hp.head_dim)
    w.add_layer_norm_rms_eps(hp.eps)
    w.add_rope_freq_base(hp.rope.theta)
    w.add_rope_dimension_count(hp.rope_dims)
    p = hp.rope.params
    if hp.rope.kind == "linear":
        w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
        w.add_rope_scaling_factor(float(p["factor"]))
    elif hp.rope.kind == "yarn":
        w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
        w.add_rope_scaling_factor(float(p["factor"]))
        w.add_rope_scaling_orig_ctx_len(int(p.get("original_max_position_embeddings", hp.ctx)))
        if "beta_fast" in p:
            w.add_rope_scaling_yarn_beta_fast(float(p["beta_fast"]))
        if "beta_slow" in p:
            w.add_rope_scaling_yarn_beta_slow(float(p["beta_slow"]))
    if hp.experts:
        w.add_expert_count(hp.experts)
        w.add_expert_used_count(hp.experts_used)
        w.add_expert_feed_forward_length(hp.expert_ffn)
        w.add_expert_weights_norm(hp.norm_topk)
        w.add_expert_gating_func(gguf.ExpertGatingFuncType.SOFTMAX)
        if hp.shared_ffn:
            w.add_expert_shared_feed_forward_length(hp.shared_ffn)
    if hp.interval:
        n_k, n_v, d_k, d_v, k = hp.linear
        w.add_ssm_conv_kernel(k)
        w.add_ssm_state_size(d_k)
        w.add_ssm_group_count(n_k)
        w.add_ssm_time_step_rank(n_v)
        w.add_ssm_inner_size(n_v * d_v)
        w.add_full_attention_interval(hp.interval)
        if hp.mtp:
            w.add_nextn_predict_layers(hp.mtp)
        if fam.model_type != "qwen3_next":
            sections = list((cfg.get("rope_parameters") or {}).get("mrope_section") or [11, 11, 10])
            w.add_rope_dimension_sections((sections + [0] * 4)[:4])
    if fam.model_type == "gemma3_text":
        assert hp.rope_swa is not None and hp.sliding is not None
        w.add_sliding_window(int(cfg.get("sliding_window", 4096)))
        w.add_rope_freq_base_swa(hp.rope_swa.theta)
        w.add_sliding_window_pattern(hp.sliding)
        w.add_attention_scale(float(cfg.get("query_pre_attn_scalar", hp.head_dim)) ** -0.5)
        if cfg.get("final_logit_softcapping") is not None:
            w.add_final_logit_softcapping(float(cfg["final_logit_softcapping"]))
        if cfg.get("attn_logit_softcapping") is not None:
            w.add_attn_logit_softcapping(float(cfg["attn_logit_softcapping"]))
