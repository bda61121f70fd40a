"""The block drafter in torch, exactly as ds4 runs it (csrc/model/block_drafter.cpp, docs/drafters.md):
what ``ds4 train-drafter`` trains and exports, and the reference ds4's forward is tested against.

Parameters carry the GGUF names (``fc.weight``, ``blk.0.attn_q.weight``, ``markov_w1.weight``, ...) in
torch's orientation ([out, in], which is GGUF's ne [in, out] in the same memory order). The
target's token embeddings and output projection are frozen inputs (:class:`TargetParts`), never
trained or exported.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F


@dataclass(frozen=True)
class DrafterConfig:
    n_embd: int
    target_layers: tuple[int, ...]  # capture indices (request.h): 0 the embeddings, i after layer i
    mask_token: int
    n_layer: int = 1
    n_head: int = 8
    n_head_kv: int = 2
    head_dim: int = 64
    n_ff: int = 2048
    block_size: int = 16
    rope_base: float = 1e6
    norm_eps: float = 1e-6
    markov_rank: int = 0  # > 0: DSpark (a Markov head of this rank and a confidence head)
    d2t: tuple[int, ...] = field(default=())  # DSpark's reduced vocabulary: each draft id's target id

    @property
    def dspark(self) -> bool:
        return self.markov_rank > 0

    @property
    def from_anchor(self) -> bool:
        """The anchor's row predicts the first drafted token (DSpark), so a block drafts block_size."""
        return self.dspark

    @property
    def max_draft(self) -> int:
        return self.block_size if self.from_anchor else self.block_size - 1


@dataclass
class TargetParts:
    """What the drafter borrows from its target: embeddings [V, d] (times embed_scale is what
    layer 0 reads), the output projection [V, d] and its soft-cap (0: none)."""

    embeddings: torch.Tensor
    embed_scale: float
    output: torch.Tensor
    softcap: float = 0.0

    @property
    def n_vocab(self) -> int:
        return int(self.embeddings.shape[0])


def rms_norm(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rope(x: torch.Tensor, pos: torch.Tensor, base: float) -> torch.Tensor:
    """NEOX rotary embedding of x [..., n, heads, hd] at positions pos [n] (halves rotated)."""
    hd = x.shape[-1]
    inv = 1.0 / (base ** (torch.arange(0, hd, 2, dtype=torch.float64, device=x.device) / hd))
    ang = pos.to(torch.float64)[:, None] * inv[None, :]
    cos = torch.cat([ang.cos(), ang.cos()], -1).to(x.dtype)[:, None, :]
    sin = torch.cat([ang.sin(), ang.sin()], -1).to(x.dtype)[:, None, :]
    x1, x2 = x[..., : hd // 2], x[..., hd // 2:]
    return x * cos + torch.cat([-x2, x1], -1) * sin


class DrafterNet(nn.Module):
    def __init__(self, cfg: DrafterConfig, target: TargetParts, init_scale: float = 0.02, seed: int = 0) -> None:
        super().__init__()
        self.cfg = cfg
        self.target = target
        d, k = cfg.n_embd, len(cfg.target_layers)
        shapes: dict[str, tuple[int, ...]] = {"fc.weight": (d, k * d), "enc.output_norm.weight": (d,),
                                              "output_norm.weight": (d,)}
        for i in range(cfg.n_layer):
            p = f"blk.{i}."
            shapes.update({
                p + "attn_norm.weight": (d,), p + "attn_q.weight": (cfg.n_head * cfg.head_dim, d),
                p + "attn_k.weight": (cfg.n_head_kv * cfg.head_dim, d), p + "attn_v.weight": (cfg.n_head_kv * cfg.head_dim, d),
                p + "attn_output.weight": (d, cfg.n_head * cfg.head_dim), p + "attn_q_norm.weight": (cfg.head_dim,),
                p + "attn_k_norm.weight": (cfg.head_dim,), p + "ffn_norm.weight": (d,),
                p + "ffn_gate.weight": (cfg.n_ff, d), p + "ffn_up.weight": (cfg.n_ff, d), p + "ffn_down.weight": (d, cfg.n_ff)})
        if cfg.dspark:
            n_draft = len(cfg.d2t) or target.n_vocab
            # W1 has a row per target token; over a reduced vocabulary, a row per draft token and a
            # last one the tokens outside it share (ds4's compact layout).
            shapes.update({"markov_w1.weight": (n_draft + 1 if cfg.d2t else target.n_vocab, cfg.markov_rank),
                           "markov_w2.weight": (n_draft, cfg.markov_rank),
                           "conf_proj.weight": (1, d + cfg.markov_rank), "conf_proj.bias": (1,)})
            if cfg.d2t:
                shapes["output.weight"] = (n_draft, d)
        gen = torch.Generator().manual_seed(seed)
        self.names = list(shapes)
        self.w = nn.ParameterDict()
        for name, shape in shapes.items():
            if name.endswith("norm.weight"):
                t = torch.ones(shape)
            elif name == "output.weight":  # the target's rows of the reduced vocabulary
                t = target.output[torch.tensor(cfg.d2t)].clone()
            elif name in ("markov_w2.weight", "conf_proj.bias"):
                t = torch.zeros(shape)  # the Markov correction and the confidence start neutral
            else:
                t = init_scale * torch.randn(shape, generator=gen)
            self.w[name.replace(".", "__")] = nn.Parameter(t)
        if cfg.d2t:
            self.register_buffer("d2t", torch.tensor(cfg.d2t, dtype=torch.long), persistent=False)
            t2d = torch.full((target.n_vocab,), len(cfg.d2t), dtype=torch.long)
            t2d[self.d2t] = torch.arange(len(cfg.d2t))
            self.register_buffer("t2d", t2d, persistent=False)  # target id -> W1 row
            self.register_buffer("teacher_rows", target.output[self.d2t].clone(), persistent=False)

    def to_device(self, device: str | torch.device) -> DrafterNet:
        """The net and the target's parts it reads on `device` (CUDA when training there)."""
        self.to(device)
        t = self.target
        self.target = TargetParts(t.embeddings.to(device), t.embed_scale, t.output.to(device), t.softcap)
        return self

    @property
    def device(self) -> torch.device:
        return self.p("fc.weight").device

    def p(self, name: str) -> torch.Tensor:
        return self.w[name.replace(".", "__")]

    def tensors(self) -> dict[str, np.ndarray]:
        """The GGUF tensors (float32, torch orientation) and, for a reduced vocabulary, d2t."""
        out = {n: self.p(n).detach().float().cpu().numpy() for n in self.names}
        if self.cfg.d2t:
            out["d2t"] = np.asarray(self.cfg.d2t, dtype=np.int64)
        return out

    # ------------------------------------------------------------------------------------------

    def context(self, features: torch.Tensor) -> torch.Tensor:
        """The fused context rows [T, d] of the target's features [T, k * d]."""
        return rms_norm(F.linear(features, self.p("fc.weight")), self.p("enc.output_norm.weight"), self.cfg.norm_eps)

    def layers(self, g: torch.Tensor, ctx_pos: torch.Tensor, x: torch.Tensor, pos: torch.Tensor,
               visible: torch.Tensor) -> torch.Tensor:
        """The draft layers over block rows x [n, d] at positions pos [n], each row seeing the
        context rows g [T, d] (at ctx_pos) and the block rows where visible [n, T + n] is true."""
        c = self.cfg
        eps, hd = c.norm_eps, c.head_dim
        groups = c.n_head // c.n_head_kv
        for i in range(c.n_layer):
            p = f"blk.{i}."
            h = rms_norm(x, self.p(p + "attn_norm.weight"), eps)

            def keys(rows: torch.Tensor, at: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
                k = F.linear(rows, self.p(p + "attn_k.weight")).view(rows.shape[0], c.n_head_kv, hd)
                k = rope(rms_norm(k, self.p(p + "attn_k_norm.weight"), eps), at, c.rope_base)
                v = F.linear(rows, self.p(p + "attn_v.weight")).view(rows.shape[0], c.n_head_kv, hd)
                return k, v

            q = F.linear(h, self.p(p + "attn_q.weight")).view(h.shape[0], c.n_head, hd)
            q = rope(rms_norm(q, self.p(p + "attn_q_norm.weight"), eps), pos, c.rope_base)
            kc, vc = keys(g, ctx_pos)
            kb, vb = keys(h, pos)
            k = torch.cat([kc, kb]).repeat_interleave(groups, dim=1)  # [T + n, heads, hd]
            v = torch.cat([vc, vb]).repeat_interleave(groups, dim=1)
            att = torch.einsum("qhd,khd->hqk", q, k) / math.sqrt(hd)
            att = att.masked_fill(~visible[None], float("-inf")).softmax(-1)
            o = torch.einsum("hqk,khd->qhd", att, v).reshape(h.shape[0], c.n_head * hd)
            x = x + F.linear(o, self.p(p + "attn_output.weight"))
            h = rms_norm(x, self.p(p + "ffn_norm.weight"), eps)
            up = F.silu(F.linear(h, self.p(p + "ffn_gate.weight"))) * F.linear(h, self.p(p + "ffn_up.weight"))
            x = x + F.linear(up, self.p(p + "ffn_down.weight"))
        return rms_norm(x, self.p("output_norm.weight"), eps)

    def base_logits(self, h: torch.Tensor) -> torch.Tensor:
        """Logits over the draft vocabulary (the reduced one, or the target's) of final-normed rows."""
        if self.cfg.d2t:
            return F.linear(h, self.p("output.weight"))
        z = F.linear(h, self.target.output)
        cap = self.target.softcap
        return cap * torch.tanh(z / cap) if cap > 0 else z

    def teacher_logits(self, final: torch.Tensor) -> torch.Tensor:
        """The target's own logits over the draft vocabulary, of its final hidden states [..., d]."""
        z = F.linear(final, self.teacher_rows if self.cfg.d2t else self.target.output)
        cap = self.target.softcap
        return cap * torch.tanh(z / cap) if cap > 0 else z

    def markov(self, base: torch.Tensor, h: torch.Tensor, prev: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """DSpark: logits + W2 W1[prev] and the confidence sigmoid(w [h; W1[prev]] + b), per row."""
        w1 = self.p("markov_w1.weight")[self.t2d[prev] if self.cfg.d2t else prev]
        logits = base + F.linear(w1, self.p("markov_w2.weight"))
        conf = torch.sigmoid(F.linear(torch.cat([h, w1], -1), self.p("conf_proj.weight"), self.p("conf_proj.bias")))[..., 0]
        return logits, conf

    def to_target(self, logits: torch.Tensor) -> torch.Tensor:
        """Draft-vocabulary logits [..., n_draft] over the target's vocabulary (-inf elsewhere)."""
        if not self.cfg.d2t:
            return logits
        full = logits.new_full((*logits.shape[:-1], self.target.n_vocab), float("-inf"))
        return full.index_copy(-1, self.d2t, logits)

    # ------------------------------------------------------------------------------------------

    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        return self.target.embeddings[ids] * self.target.embed_scale

    @torch.no_grad()
    def draft(self, features: torch.Tensor, anchor: int, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        """A block pass after the context's features [P, k * d], as ds4's: (logits over the
        target's vocabulary [n, V], confidences [n]), the Markov head following the greedy chain."""
        c = self.cfg
        P, B = features.shape[0], c.block_size
        dev = self.device
        ids = torch.full((B,), c.mask_token, dtype=torch.long, device=dev)
        ids[0] = anchor
        visible = torch.ones(B, P + B, dtype=torch.bool, device=dev)
        h = self.layers(self.context(features.to(dev)), torch.arange(P, device=dev), self.embed(ids),
                        torch.arange(P, P + B, device=dev), visible)
        h = h[(0 if c.from_anchor else 1):][:n]
        base = self.base_logits(h)
        if not c.dspark:
            return base, torch.ones(n)
        rows, confs, prev = [], [], torch.tensor(anchor, device=dev)
        for i in range(n):
            logits, conf = self.markov(base[i], h[i], prev)
            full = self.to_target(logits)
            rows.append(full)
            confs.append(conf)
            prev = full.argmax()
        return torch.stack(rows), torch.stack(confs)
