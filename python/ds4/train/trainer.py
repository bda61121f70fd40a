"""Training a block drafter on the target's own data (ds4.train.data), torch training only the drafter.

Objectives, per block anchored at position a (random anchors among the positions whose next token
the target chose), its rows seeing the context before a and each other (the block mask), draft
position i predicting the token at a + 1 + i with weight exp(-i / gamma):
  - DFlash: cross-entropy (DFlash's position-decayed loss);
  - DSpark: the Markov head teacher-forced on the true previous token; 0.1 x cross-entropy, 0.9 x
    (1 - p(target's token)) (the distribution-matching L1 term against the target's one-hot
    greedy choice: the chance of rejection) and the confidence head's binary cross-entropy against
    whether the drafted (argmax) token is the target's (DeepSpec's recipe, for greedy targets);
  - both: `distill` x the cross-entropy against the target's own next-token distribution at that
    position (its output head over the final hidden state the data keeps, restricted to the draft
    vocabulary): the whole distribution teaches more per token than its argmax (on Gemma 3 270M,
    1,000 steps on 106k tokens: 0.76 -> 1.12 accepted tokens per block held out).
Held-out acceptance is measured as ds4 drafts: the whole block in one pass, the Markov head
following its own greedy chain, the accepted prefix counted against the target's tokens. After
training, the confidence head is calibrated on held-out data (Platt scaling folded into its
weights), so that a --dspark-confidence of 0.7 means what it says.
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.nn import functional as F

from ds4.train.data import Sample
from ds4.train.drafter_net import DrafterConfig, DrafterNet, TargetParts


@dataclass
class TrainConfig:
    steps: int = 2000
    batch: int = 4            # sequences per step
    anchors: int = 16         # blocks per sequence
    lr: float = 2e-3
    warmup: int = 50
    gamma: float = 4.0        # position decay of the loss weights
    distill: float = 1.0      # weight of the cross-entropy against the target's distribution
    eval_every: int = 100
    eval_anchors: int = 256   # held-out blocks per evaluation
    minutes: float = 0.0      # > 0: stop (resumably) after this much training time in this sitting
    bf16: bool = False        # matrix products in bfloat16 (torch.autocast), weights and loss in float32
    seed: int = 0


def anchors_of(sample: Sample, n: int, rng: np.random.Generator) -> np.ndarray:
    """Up to n distinct anchors in [start, T - 2] (each has at least one label after it)."""
    lo, hi = sample.start, len(sample.tokens) - 1
    if hi <= lo:
        return np.zeros(0, dtype=np.int64)
    return np.sort(rng.choice(np.arange(lo, hi), size=min(n, hi - lo), replace=False))


def blocks(net: DrafterNet, sample: Sample, anchors: np.ndarray
           ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The drafter's layers over blocks at `anchors` of one sample: (final-normed rows [M, nd, d],
    labels [M, nd] (target ids), valid [M, nd], previous tokens [M, nd], the target's final
    hidden states [M, nd, d] at the positions whose next token each row predicts)."""
    c = net.cfg
    dev = net.device
    toks = torch.from_numpy(sample.tokens.astype(np.int64)).to(dev)
    T, B, M, nd = len(toks), c.block_size, len(anchors), c.max_draft
    g = net.context(torch.from_numpy(sample.features.astype(np.float32)).to(dev))
    a = torch.from_numpy(anchors).to(dev)
    ids = torch.full((M, B), c.mask_token, dtype=torch.long, device=dev)
    ids[:, 0] = toks[a]
    pos = (a[:, None] + torch.arange(B, device=dev)[None]).reshape(-1)
    ctx = torch.arange(T, device=dev)[None, :] < a[:, None]          # [M, T]: the context before the anchor
    own = torch.eye(M, dtype=torch.bool, device=dev).repeat_interleave(B, 0).repeat_interleave(B, 1)  # same block
    visible = torch.cat([ctx.repeat_interleave(B, 0), own], 1)
    h = net.layers(g, torch.arange(T, device=dev), net.embed(ids.reshape(-1)), pos, visible).view(M, B, -1)
    h = h[:, (0 if c.from_anchor else 1):][:, :nd]
    at = a[:, None] + 1 + torch.arange(nd, device=dev)[None]         # the token each position predicts
    valid = at < T
    labels = toks[at.clamp(max=T - 1)]
    prev = torch.cat([toks[a][:, None], labels[:, :-1]], 1)
    teacher = torch.from_numpy(sample.teacher).to(dev)[(at - 1).clamp(max=T - 1)]
    return h, labels, valid, prev, teacher


def _draft_ids(net: DrafterNet, labels: torch.Tensor) -> torch.Tensor:
    """Target ids as draft-vocabulary ids (-1 outside a reduced vocabulary)."""
    if not net.cfg.d2t:
        return labels
    return torch.where(net.t2d[labels] < len(net.cfg.d2t), net.t2d[labels], -1)


def loss_of(net: DrafterNet, batch: Sequence[tuple[Sample, np.ndarray]], gamma: float, distill: float = 0.0) -> torch.Tensor:
    """The objective over the blocks of a batch of (sample, anchors): the layers run per sample (each
    has its own context), the output head, Markov head and loss once over all the batch's rows."""
    parts = [blocks(net, s, a) for s, a in batch if len(a)]
    h, labels, valid, prev, teacher = (torch.cat([p[i] for p in parts]) for i in range(5))
    base = net.base_logits(h)
    y = _draft_ids(net, labels)
    w = torch.exp(-torch.arange(labels.shape[1], dtype=torch.float32, device=labels.device) / gamma)[None] * valid
    known = y >= 0

    def soft(lsm: torch.Tensor) -> torch.Tensor:  # cross-entropy against the target's distribution
        if distill == 0.0:
            return torch.zeros_like(w)
        with torch.no_grad():
            p = net.teacher_logits(teacher).float().softmax(-1)
        return -(p * lsm).sum(-1) * distill

    if not net.cfg.dspark:
        with torch.autocast(labels.device.type, enabled=False):
            lsm = base.float().log_softmax(-1)
            ce = -lsm.gather(-1, y.clamp(min=0)[..., None])[..., 0] * known
            return (w * (ce + soft(lsm))).sum() / w.sum()
    logits, conf = net.markov(base, h, prev)
    with torch.autocast(labels.device.type, enabled=False):  # the loss in float32 under a bf16 autocast
        logits, conf = logits.float(), conf.float()
        lsm = logits.log_softmax(-1)
        lp = lsm.gather(-1, y.clamp(min=0)[..., None])[..., 0]
        ce = -lp * known
        l1 = 1.0 - lp.exp() * known                                    # 1 - p(target's token)
        hit = ((logits.argmax(-1) == y) & known).float()
        bce = F.binary_cross_entropy(conf.clamp(1e-6, 1 - 1e-6), hit, reduction="none")
        return (w * (0.1 * ce + 0.9 * l1 + bce + soft(lsm))).sum() / w.sum()


@torch.no_grad()
def acceptance(net: DrafterNet, samples: Sequence[Sample], n_anchors: int, seed: int = 1
               ) -> tuple[np.ndarray, float, np.ndarray, np.ndarray]:
    """Held-out acceptance as ds4 drafts greedily: (per draft position, the rate of acceptance
    given the earlier positions were accepted; mean accepted tokens per block; and, for the
    confidence calibration, the confidence head's logit and whether the position was accepted,
    at every position whose earlier ones were)."""
    rng = np.random.default_rng(seed)
    nd = net.cfg.max_draft
    reached, accepted = np.zeros(nd), np.zeros(nd)
    lengths, zs, hits = [], [], []
    per = max(1, n_anchors // max(1, len(samples)))
    for s in samples:
        a = anchors_of(s, per, rng)
        if len(a) == 0:
            continue
        h, labels, valid, _, _ = blocks(net, s, a)
        base = net.base_logits(h)
        for m in range(len(a)):
            prev = labels.new_tensor(int(s.tokens[a[m]]))
            n = 0
            for i in range(nd):
                if not bool(valid[m, i]):
                    break
                if net.cfg.dspark:
                    logits, conf = net.markov(base[m, i], h[m, i], prev)
                    tok = net.to_target(logits).argmax()
                    zs.append(float(torch.logit(conf.clamp(1e-6, 1 - 1e-6))))
                else:
                    tok = net.to_target(base[m, i]).argmax()
                hit = int(tok) == int(labels[m, i])
                reached[i] += 1
                accepted[i] += hit
                if net.cfg.dspark:
                    hits.append(float(hit))
                if not hit:
                    break
                n += 1
                prev = tok
            lengths.append(n)
    rate = np.divide(accepted, reached, out=np.zeros(nd), where=reached > 0)
    return rate, float(np.mean(lengths)) if lengths else 0.0, np.array(zs), np.array(hits)


def calibrate(net: DrafterNet, z: np.ndarray, hit: np.ndarray) -> tuple[float, float]:
    """Platt scaling of the confidence head on held-out (logit, accepted) pairs, folded into its
    weights: returns (scale, shift)."""
    if len(z) < 20 or hit.min() == hit.max():
        return 1.0, 0.0
    zt, yt = torch.tensor(z, dtype=torch.float64), torch.tensor(hit, dtype=torch.float64)
    ab = torch.tensor([1.0, 0.0], dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([ab], max_iter=100)

    def closure() -> torch.Tensor:
        opt.zero_grad()
        loss = F.binary_cross_entropy_with_logits(ab[0] * zt + ab[1], yt)
        loss.backward()
        return loss

    opt.step(closure)
    a, b = float(ab[0].detach()), float(ab[1].detach())
    with torch.no_grad():
        net.p("conf_proj.weight").mul_(a)
        net.p("conf_proj.bias").mul_(a).add_(b)
    return a, b


class Trainer:
    """Trains `net` on `train`, measuring on `heldout`; checkpoints to `work / checkpoint.pt`
    (atomically) and resumes from it."""

    def __init__(self, net: DrafterNet, train: Sequence[Sample], heldout: Sequence[Sample], cfg: TrainConfig,
                 work: Path, log: Any = None) -> None:
        self.net, self.train, self.heldout, self.cfg, self.work = net, train, heldout, cfg, work
        self.log = log if log is not None else sys.stderr  # looked up now: stderr may be replaced
        self.params = [p for p in net.parameters() if p.requires_grad]
        self.opt = torch.optim.AdamW(self.params, lr=cfg.lr, weight_decay=0.0, fused=True)
        self.step = 0
        self.history: list[dict[str, Any]] = []
        self.rng = np.random.default_rng(cfg.seed)
        ckpt = work / "checkpoint.pt"
        if ckpt.exists():
            state = torch.load(ckpt, weights_only=False, map_location=net.device)
            if state["drafter"] != asdict(net.cfg):
                raise ValueError(f"{ckpt}: a checkpoint of another drafter configuration; use another work dir")
            net.load_state_dict(state["net"])
            self.opt.load_state_dict(state["opt"])
            self.step, self.history = state["step"], state["history"]
            self.rng.bit_generator.state = state["rng"]
            print(f"ds4 train-drafter: resumed at step {self.step} from {ckpt}", file=self.log)

    def lr(self) -> float:
        c = self.cfg
        if self.step < c.warmup:
            return c.lr * (self.step + 1) / c.warmup
        return c.lr * 0.5 * (1 + math.cos(math.pi * min(1.0, (self.step - c.warmup) / max(1, c.steps - c.warmup))))

    def save(self) -> None:
        tmp = self.work / f".checkpoint.{os.getpid()}.tmp"
        torch.save({"net": self.net.state_dict(), "opt": self.opt.state_dict(), "step": self.step,
                    "history": self.history, "rng": self.rng.bit_generator.state, "drafter": asdict(self.net.cfg)}, tmp)
        os.replace(tmp, self.work / "checkpoint.pt")

    def evaluate(self) -> dict[str, Any]:
        rate, length, _, _ = acceptance(self.net, self.heldout, self.cfg.eval_anchors)
        row = {"step": self.step, "accepted_per_block": length, "acceptance": [round(float(r), 4) for r in rate]}
        self.history.append(row)
        return row

    def run(self) -> bool:
        """Trains until cfg.steps (True) or cfg.minutes have passed (False: resume later)."""
        c = self.cfg
        t0 = time.time()
        loss_avg = None
        last = self.history[-1] if self.history else None
        while self.step < c.steps:
            for g in self.opt.param_groups:
                g["lr"] = self.lr()
            self.opt.zero_grad()
            picks = [self.train[int(self.rng.integers(len(self.train)))] for _ in range(c.batch)]
            batch = [(s, anchors_of(s, c.anchors, self.rng)) for s in picks]
            with torch.autocast(self.net.device.type, dtype=torch.bfloat16, enabled=c.bf16):
                loss = loss_of(self.net, batch, c.gamma, c.distill)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(self.params, 1.0)
            self.opt.step()
            self.step += 1
            loss_avg = float(loss.detach()) if loss_avg is None else 0.95 * loss_avg + 0.05 * float(loss.detach())
            if self.step % c.eval_every == 0 or self.step == c.steps:
                last = self.evaluate()
                self.save()
            elapsed = time.time() - t0
            held = f"held-out {last['accepted_per_block']:.2f} tok/block" if last else "held-out -"
            print(f"\rds4 train-drafter: step {self.step}/{c.steps} loss {loss_avg:.4f} {held} "
                  f"({elapsed / 60:.1f} min)", end="", file=self.log, flush=True)
            if c.minutes > 0 and elapsed > 60 * c.minutes and self.step < c.steps:
                self.save()
                print(file=self.log)
                return False
        print(file=self.log)
        return True


def bf16_is_native(device: str) -> bool:
    """Whether `device` multiplies bfloat16 in hardware (CUDA with bf16; a CPU with AVX512_BF16 or
    AMX): there a bf16 autocast trains ~2x faster; elsewhere it would be emulated, slower than float32."""
    if device.startswith("cuda"):
        return bool(torch.cuda.is_available() and torch.cuda.is_bf16_supported())
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return " avx512_bf16" in flags or " amx_bf16" in flags


def default_layers(n_layer: int, k: int = 3) -> tuple[int, ...]:
    """Capture indices of k target layers spread as z-lab's DFlash spreads them (1 .. n - 3), + 1."""
    if k == 1:
        return (n_layer // 2 + 1,)
    return tuple(round(1 + i * (n_layer - 4) / (k - 1)) + 1 for i in range(k))


def target_parts(target: str | os.PathLike[str]) -> TargetParts:
    """The target's embeddings and output projection (dequantised), scale and soft-cap."""
    import ds4

    info = ds4.inspect(os.fspath(target))
    md = info["metadata"]
    names = {t["name"] for t in info["tensors"]}
    arch = md["general.architecture"]
    emb = torch.from_numpy(ds4.dequantize(os.fspath(target), "token_embd.weight"))
    out = torch.from_numpy(ds4.dequantize(os.fspath(target), "output.weight")) if "output.weight" in names else emb
    scale = float(np.float32(math.sqrt(emb.shape[1]))) if arch.startswith("gemma") else 1.0
    return TargetParts(emb, scale, out, float(md.get(f"{arch}.final_logit_softcapping", 0.0) or 0.0))


def reduced_vocab(samples: Sequence[Sample], size: int, n_vocab: int) -> tuple[int, ...]:
    """The `size` target ids most often chosen by the target in the data (ties: lower id first)."""
    counts = np.zeros(n_vocab, dtype=np.int64)
    for s in samples:
        np.add.at(counts, s.tokens[s.start + 1:], 1)
    order = np.lexsort((np.arange(n_vocab), -counts))
    return tuple(int(i) for i in np.sort(order[:size]))


def describe(cfg: DrafterConfig) -> str:
    kind = "DSpark" if cfg.dspark else "DFlash"
    vocab = f", draft vocabulary {len(cfg.d2t)}" if cfg.d2t else ""
    return (f"{kind} drafter: {cfg.n_layer} layer(s), block {cfg.block_size}, target layers {list(cfg.target_layers)}"
            f"{vocab}" + (f", Markov rank {cfg.markov_rank}" if cfg.dspark else ""))
