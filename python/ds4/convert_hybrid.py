"""Gated DeltaNet tensors for the converter (``convert.py``): Qwen3-Next's and Qwen3.5's
linear-attention weights seen as llama.cpp's ``qwen3next`` / ``qwen35`` GGUFs store them.

- ``in_proj_qkvz`` holds, per key-head group, ``[q (d_k), k (d_k), v (r d_v), z (r d_v)]``
  (``r`` value heads per key head): split into ``in_proj_qkv`` (all q, all k, all v: the
  convolution's channels) and ``in_proj_z`` (the output gate), value heads kept in group order.
- ``in_proj_ba`` (per group ``[b (r), a (r)]``) is kept as it is (``ssm_ba``).
- ``A_log`` becomes ``-exp(A_log)`` (``ssm_a``), ``dt_bias`` is ``ssm_dt.bias``, the depthwise
  ``conv1d.weight`` ``[channels, 1, k]`` drops its middle axis.
- The built-in MTP block (``mtp.*``, which transformers drops on load) becomes layer ``n_layer``
  as llama.cpp stores it: ``mtp.layers.0.*`` that layer's tensors, ``mtp.fc`` its
  ``nextn.eh_proj``, ``mtp.pre_fc_norm_embedding`` / ``pre_fc_norm_hidden`` / ``norm`` its
  ``nextn.enorm`` / ``hnorm`` / ``shared_head_norm``.
- Qwen3.5 has ``in_proj_qkv``, ``in_proj_z``, ``in_proj_b``, ``in_proj_a`` apart already; with
  ``tiled`` (llama.cpp's qwen35) the value heads, grouped by key head in the checkpoint (head
  ``g r + j`` reads key head ``g``), are reordered tiled (position ``j n_k + g``, reading key
  head ``h % n_k``) in every tensor indexed by value head: the v rows of ``in_proj_qkv`` and of
  the convolution, ``in_proj_z``, ``in_proj_b``, ``in_proj_a``, ``A_log``, ``dt_bias`` and the
  columns of ``out_proj``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np


@dataclass(frozen=True)
class Derived:
    """A tensor computed from another one when it is loaded."""

    src: Any
    shape: tuple[int, ...]
    fn: Callable[[np.ndarray], np.ndarray]

    def load(self) -> np.ndarray:
        return np.ascontiguousarray(self.fn(self.src.load()), dtype=np.float32)


_MTP_EXTRAS = {"fc.weight": "eh_proj.weight", "pre_fc_norm_embedding.weight": "enorm.weight",
               "pre_fc_norm_hidden.weight": "hnorm.weight", "norm.weight": "shared_head_norm.weight"}


def mtp_layers(tensors: dict[str, Any]) -> int:
    """How many MTP blocks the checkpoint holds (``mtp.layers.{i}.*``)."""
    return len({n.split(".")[2] for n in tensors if n.startswith("mtp.layers.")})


def mtp_views(tensors: dict[str, Any], n_layer: int) -> dict[str, Any]:
    """``tensors`` with the MTP block's under the names its GGUF layer takes: its decoder layer's
    as HF would name layer ``n_layer``, the rest as their final GGUF names (``blk.{n}.nextn.*``)."""
    out: dict[str, Any] = {}
    for name, t in tensors.items():
        if not name.startswith("mtp."):
            out[name] = t
        elif name.startswith("mtp.layers."):
            _, _, i, rest = name.split(".", 3)
            out[f"model.layers.{n_layer + int(i)}.{rest}"] = t
        elif name[4:] in _MTP_EXTRAS:
            out[f"blk.{n_layer}.nextn.{_MTP_EXTRAS[name[4:]]}"] = t
        else:
            out[name] = t  # refused as unexpected, naming it
    return out


def deltanet_views(tensors: dict[str, Any], n_k: int, n_v: int, d_k: int, d_v: int, tiled: bool = False) -> dict[str, Any]:
    """``tensors`` with each DeltaNet layer's checkpoint tensors replaced by the GGUF's."""
    out: dict[str, Any] = {}
    r = n_v // n_k
    # tiled position j n_k + g holds grouped head g r + j
    order = np.array([g * r + j for j in range(r) for g in range(n_k)])

    def heads(axis: int, start: int, width: int) -> Callable[[np.ndarray], np.ndarray]:
        """Reorders the n_v blocks of `width` along `axis` from `start` on (the value heads)."""
        def fn(a: np.ndarray) -> np.ndarray:
            a = np.moveaxis(a, axis, 0)
            v = a[start : start + n_v * width].reshape(n_v, width, *a.shape[1:])[order]
            return np.moveaxis(np.concatenate([a[:start], v.reshape(n_v * width, *a.shape[1:])]), 0, axis)
        return fn

    def tile(t: Any, axis: int, start: int, width: int, then: Callable[[np.ndarray], np.ndarray] = lambda a: a) -> Any:
        if not tiled or r == 1:
            return Derived(t, t.shape, then)
        reorder = heads(axis, start, width)
        return Derived(t, t.shape, lambda a: then(reorder(a)))

    widths = [d_k, d_k, r * d_v, r * d_v]  # one group of in_proj_qkvz: q, k, v, z
    bounds = np.cumsum([0, *widths])

    def part(i: int) -> Callable[[np.ndarray], np.ndarray]:
        def fn(a: np.ndarray) -> np.ndarray:
            g = a.reshape(n_k, int(bounds[-1]), a.shape[-1])
            return g[:, bounds[i] : bounds[i + 1]].reshape(-1, a.shape[-1])

        return fn

    for name, t in tensors.items():
        prefix, _, leaf = name.rpartition(".linear_attn.")
        if not prefix:
            out[name] = t
        elif leaf == "in_proj_qkvz.weight":
            hidden = t.shape[-1]
            qkv = Derived(t, (2 * n_k * d_k + n_v * d_v, hidden),
                          lambda a: np.concatenate([part(0)(a), part(1)(a), part(2)(a)]))
            out[f"{prefix}.linear_attn.in_proj_qkv.weight"] = qkv
            out[f"{prefix}.linear_attn.in_proj_z.weight"] = Derived(t, (n_v * d_v, hidden), part(3))
        elif leaf == "A_log":
            out[name] = tile(t, 0, 0, 1, lambda a: -np.exp(a.astype(np.float32)))
        elif leaf == "dt_bias":
            out[f"{prefix}.linear_attn.dt_proj.bias"] = tile(t, 0, 0, 1)
        elif leaf == "conv1d.weight":
            squeezed = Derived(t, (t.shape[0], t.shape[-1]), lambda a: a.reshape(a.shape[0], a.shape[-1]))
            out[name] = tile(squeezed, 0, 2 * n_k * d_k, d_v)
        elif leaf == "in_proj_qkv.weight":
            out[name] = tile(t, 0, 2 * n_k * d_k, d_v)
        elif leaf == "in_proj_z.weight":
            out[name] = tile(t, 0, 0, d_v)
        elif leaf in ("in_proj_b.weight", "in_proj_a.weight"):
            out[name] = tile(t, 0, 0, 1)
        elif leaf == "out_proj.weight":
            out[name] = tile(t, 1, 0, d_v)
        else:
            out[name] = t
    return out
