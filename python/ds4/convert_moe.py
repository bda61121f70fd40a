"""Routed experts' tensors for the converter (``convert.py``): the checkpoint's expert weights seen
as the stacks a GGUF stores (``ffn_{gate,up,down}_exps``: ``[n_expert, out, in]``).

Checkpoints hold them in one of two layouts, both read here:

- the hub's: one matrix per expert, ``...mlp.experts.{e}.{gate,up,down}_proj.weight``;
- transformers 5's ``save_pretrained``: fused stacks, ``...mlp.experts.gate_up_proj``
  ``[n_expert, 2 n_ff, in]`` (the gate's rows first, as its forward's ``chunk(2)`` takes them)
  and ``...mlp.experts.down_proj`` ``[n_expert, in, n_ff]``.

Either way the result is named ``...mlp.experts.{gate,up,down}_proj.weight``, the names the
``gguf`` package maps to the stacked tensors.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np


class Tensor(Protocol):
    @property
    def shape(self) -> tuple[int, ...]: ...

    def load(self) -> np.ndarray: ...


@dataclass(frozen=True)
class Stacked:
    """Per-expert matrices read as one ``[n_expert, out, in]`` stack."""

    parts: tuple[Any, ...]

    @property
    def shape(self) -> tuple[int, ...]:
        return (len(self.parts), *self.parts[0].shape)

    def load(self) -> np.ndarray:
        return np.stack([p.load() for p in self.parts])


@dataclass(frozen=True)
class Half:
    """The gate (0) or up (1) half of a fused ``gate_up_proj`` stack."""

    fused: Any
    which: int

    @property
    def shape(self) -> tuple[int, ...]:
        e, rows, cols = self.fused.shape
        return (e, rows // 2, cols)

    def load(self) -> np.ndarray:
        n = self.shape[1]
        return np.ascontiguousarray(self.fused.load()[:, self.which * n : (self.which + 1) * n, :])


_PER_EXPERT = re.compile(r"^(.*\.mlp\.experts)\.(\d+)\.(gate_proj|up_proj|down_proj)\.weight$")
_FUSED = re.compile(r"^(.*\.mlp\.experts)\.(gate_up_proj|down_proj)$")


def expert_views(tensors: dict[str, Any], n_expert: int, where: Path, error: type[Exception]) -> dict[str, Any]:
    """``tensors`` with every expert weight replaced by its stack; raises ``error`` naming the
    first expert missing from a per-expert layout or a fused stack of the wrong length."""
    out: dict[str, Any] = {}
    per_expert: dict[tuple[str, str], dict[int, Any]] = {}
    for name, t in tensors.items():
        m = _PER_EXPERT.match(name)
        if m:
            per_expert.setdefault((m.group(1), m.group(3)), {})[int(m.group(2))] = t
            continue
        m = _FUSED.match(name)
        if not m:
            out[name] = t
            continue
        if len(t.shape) != 3 or t.shape[0] != n_expert:
            raise error(f"{where}: {name} has shape {list(t.shape)}, expected {n_expert} experts first")
        if m.group(2) == "gate_up_proj":
            out[f"{m.group(1)}.gate_proj.weight"] = Half(t, 0)
            out[f"{m.group(1)}.up_proj.weight"] = Half(t, 1)
        else:
            out[f"{m.group(1)}.down_proj.weight"] = t
    for (prefix, proj), mats in per_expert.items():
        missing = [e for e in range(n_expert) if e not in mats]
        extra = sorted(e for e in mats if e >= n_expert)
        if missing or extra:
            what = f"lacks {proj} of expert(s) {missing[:5]}" if missing else f"has {proj} of expert(s) {extra[:5]}"
            raise error(f"{where}: {prefix} {what}; the config has {n_expert} experts")
        out[f"{prefix}.{proj}.weight"] = Stacked(tuple(mats[e] for e in range(n_expert)))
    return out
