"""The tensors llama.cpp's converter writes for a tiny model, derived from its HF checkpoint by
the rules that converter follows, written out independently of ds4.convert: the reference the
converter's tests (test_convert.py) and the test of files written to llama.cpp's layout
(test_llamacpp_layout.py) hold ds4 to."""

from __future__ import annotations

import json
from pathlib import Path

import gguf
import numpy as np
import tiny
from safetensors.numpy import load_file, save_file

GGUF_ARCH = {"llama": "llama", "qwen2": "qwen2", "qwen3": "qwen3", "qwen3_moe": "qwen3moe", "qwen3_next": "qwen3next",
             "qwen3_5_text": "qwen35", "qwen3_5_moe_text": "qwen35moe", "gemma3_text": "gemma3"}


def hf_tensors(family: str) -> dict[str, np.ndarray]:
    return load_file(tiny.build(family) / "model.safetensors")


def deltanet_reference(cfg: dict, tensors: dict[str, np.ndarray], tiled: bool) -> dict[str, np.ndarray]:
    """The DeltaNet tensors as llama.cpp's qwen3next / qwen35 GGUFs hold them, under HF-style
    names the gguf package maps: in_proj_qkvz's rows per key-head group (q, k, v, z) regrouped
    as all q, all k, all v (in_proj_qkv) and z (in_proj_z); -exp(A_log); the conv's taps; and
    when tiled (qwen35), value head j * n_k + g taken from the checkpoint's g * r + j."""
    n_k, n_v = cfg.get("linear_num_key_heads", 1), cfg.get("linear_num_value_heads", 1)
    dk, dv, r = cfg.get("linear_key_head_dim", 0), cfg.get("linear_value_head_dim", 0), n_v // n_k

    def v_index(length: int, start: int, width: int) -> list[int]:
        """Source index of each position of an axis whose value-head blocks begin at start."""
        idx = list(range(length))
        if tiled:
            for j in range(r):
                for g in range(n_k):
                    for i in range(width):
                        idx[start + (j * n_k + g) * width + i] = start + (g * r + j) * width + i
        return idx

    out = {}
    for name, a in tensors.items():
        if name.endswith("in_proj_qkvz.weight"):
            group = 2 * dk + 2 * dv * r
            rows: dict[str, list[int]] = {"q": [], "k": [], "v": [], "z": []}
            for g in range(n_k):
                base = g * group
                rows["q"] += range(base, base + dk)
                rows["k"] += range(base + dk, base + 2 * dk)
                rows["v"] += range(base + 2 * dk, base + 2 * dk + dv * r)
                rows["z"] += range(base + 2 * dk + dv * r, base + group)
            out[name.replace("qkvz", "qkv")] = a[rows["q"] + rows["k"] + rows["v"]]
            out[name.replace("qkvz", "z")] = a[rows["z"]]
        elif name.endswith(("in_proj_qkv.weight", "conv1d.weight")):
            a = a[v_index(len(a), 2 * n_k * dk, dv)]
            out[name] = a[:, 0, :] if a.ndim == 3 else a
        elif name.endswith("in_proj_z.weight"):
            out[name] = a[v_index(len(a), 0, dv)]
        elif name.endswith(("in_proj_b.weight", "in_proj_a.weight")):
            out[name] = a[v_index(len(a), 0, 1)]
        elif name.endswith("out_proj.weight"):
            out[name] = a[:, v_index(a.shape[1], 0, dv)]
        elif name.endswith("A_log"):
            out[name] = -np.exp(a[v_index(len(a), 0, 1)])
        elif name.endswith("dt_bias"):
            out[name.replace("dt_bias", "dt_proj.bias")] = a[v_index(len(a), 0, 1)]
        else:
            out[name] = a
    return out


def stack_experts(tensors: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Per-expert matrices stacked as the GGUF holds them ([n_expert, out, in] under the
    experts' HF name without the expert index)."""
    out: dict[str, list[tuple[int, np.ndarray]]] = {}
    rest = {}
    for name, a in tensors.items():
        parts = name.split(".")
        if "experts" in parts and parts[parts.index("experts") + 1].isdigit():
            i = parts.index("experts") + 1
            out.setdefault(".".join(parts[:i] + parts[i + 1 :]), []).append((int(parts[i]), a))
        else:
            rest[name] = a
    return {**rest, **{n: np.stack([a for _, a in sorted(v, key=lambda t: t[0])]) for n, v in out.items()}}


def reference(family: str) -> dict[str, np.ndarray]:
    """GGUF name -> the float32 values the converter must write, derived here from the HF
    tensors by the rules llama.cpp's converter follows."""
    cfg = tiny.config_dict(family)
    names = gguf.TensorNameMap(gguf.MODEL_ARCH[GGUF_ARCH[family].upper()], cfg["num_hidden_layers"])
    hd = cfg["head_dim"]
    out: dict[str, np.ndarray] = {}
    tiled = family in ("qwen3_5_text", "qwen3_5_moe_text")
    for hf_name, a in deltanet_reference(cfg, stack_experts(hf_tensors(family)), tiled).items():
        name = names.get_name(hf_name, try_suffixes=(".weight", ".bias"))
        assert name is not None, hf_name
        a = a.astype(np.float32)
        if family == "llama" and (".attn_q." in name or ".attn_k." in name):
            # GGUF row 2j / 2j+1 of each head = HF row j / j + hd/2 (rotate_half -> interleaved pairs)
            h = a.reshape(-1, hd, *a.shape[1:])
            p = np.empty_like(h)
            p[:, 0::2], p[:, 1::2] = h[:, : hd // 2], h[:, hd // 2 :]
            a = p.reshape(a.shape)
        if family == "gemma3_text" and name.endswith("norm.weight"):
            a = a + 1.0  # Gemma3RMSNorm multiplies by 1 + w
        if family in tiny.HYBRID and name.endswith("norm.weight") and "linear_attn" not in hf_name:
            a = a + 1.0  # Qwen3NextRMSNorm too, but the DeltaNet's gated norm
        out[name] = a
    return out


def add_mtp(hf_dir: Path, seed: int = 4) -> dict[str, np.ndarray]:
    """Writes a random built-in MTP block (mtp.*: what Qwen3-Next checkpoints hold and
    transformers drops) into the tiny hybrid checkpoint at hf_dir; returns its tensors. Its
    decoder layer has the shapes of the trunk's last (full-attention) layer."""
    path = hf_dir / "model.safetensors"
    t = load_file(path)
    cfg = json.loads((hf_dir / "config.json").read_text())
    H, last = cfg["hidden_size"], f"model.layers.{cfg['num_hidden_layers'] - 1}."
    rng = np.random.default_rng(seed)
    mtp = {name.replace(last, "mtp.layers.0."): (0.08 * rng.standard_normal(a.shape)).astype(np.float32)
           for name, a in t.items() if name.startswith(last)}
    mtp["mtp.fc.weight"] = (0.08 * rng.standard_normal((H, 2 * H))).astype(np.float32)
    for norm in ("pre_fc_norm_embedding", "pre_fc_norm_hidden", "norm"):
        mtp[f"mtp.{norm}.weight"] = (0.1 * rng.standard_normal(H)).astype(np.float32)
    save_file({**t, **mtp}, path)
    return mtp
