"""Train the built-in MTP block (``mtp.*``) of a Qwen3-Next / Qwen3.5 checkpoint on the target's own
greedy continuations, and write it into a copy of the checkpoint (``ds4 convert`` keeps it).

The block predicts the token two ahead of the target's hidden state: row p joins the embedding of
token p with the target's hidden state after its final norm at p - 1 (zeros at 0), through
``fc([pre_fc_norm_embedding(e), pre_fc_norm_hidden(h)])``, one full-attention decoder layer of the
target's own kind, ``norm`` and the target's output head, and is trained to predict token p + 1.
Only the block trains (the embedding and the head are the target's, frozen). With no ``mtp.*`` in
the checkpoint it starts from the target's last full-attention layer and an fc that passes the
hidden state through.

    python scripts/train_mtp.py HF_DIR OUT_DIR [--steps 300] [--sequences 64] [--length 96]

Needs torch and transformers (the test extra).
"""

from __future__ import annotations

import argparse
import copy
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np


def _norm(x: Any, w: Any, eps: float) -> Any:  # the zero-centered RMSNorm of these models
    import torch

    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * (1.0 + w)


def _continuations(hf: Any, n: int, length: int, vocab: int, seed: int) -> Any:
    """Greedy continuations of short random prompts (one batch): what the target will verify."""
    import torch

    prompts = torch.randint(3, vocab, (n, 8), generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        ids = hf.generate(prompts, max_new_tokens=length, min_new_tokens=length, do_sample=False,
                          pad_token_id=hf.config.pad_token_id)
    return ids[:, -length:]


class Mtp:
    """The MTP block in torch: parameters named as the checkpoint names them."""

    def __init__(self, hf: Any, tensors: dict[str, Any]) -> None:
        import torch

        cfg = hf.config
        self.hf, self.eps = hf, cfg.rms_norm_eps
        full = [i for i, t in enumerate(cfg.layer_types) if t == "full_attention"][-1]
        self.layer = copy.deepcopy(hf.model.layers[full]).train()
        self.trunk_prefix = f"model.layers.{full}."
        H = cfg.hidden_size
        got = {k: torch.from_numpy(v.copy()) for k, v in tensors.items() if k.startswith("mtp.")}
        if got:
            self.layer.load_state_dict(self._fused(got))
            fc, norms = got["mtp.fc.weight"], {n: got[f"mtp.{n}.weight"] for n in self.NORMS}
        else:
            fc = torch.cat([0.02 * torch.randn(H, H), torch.eye(H)], 1)
            norms = {n: torch.zeros(H) for n in self.NORMS}
        self.fc = torch.nn.Parameter(fc.clone())
        self.norms = {n: torch.nn.Parameter(w.clone()) for n, w in norms.items()}

    NORMS = ("pre_fc_norm_embedding", "pre_fc_norm_hidden", "norm")

    def parameters(self) -> list[Any]:
        return [self.fc, *self.norms.values(), *self.layer.parameters()]

    def logits(self, ids: Any, hidden: Any) -> Any:
        """Logits of rows p = 0..L-1 of each sequence, hidden[:, p] the target's at p - 1."""
        import torch

        hf = self.hf
        e = hf.model.embed_tokens(ids)
        x = torch.cat([_norm(e, self.norms["pre_fc_norm_embedding"], self.eps),
                       _norm(hidden, self.norms["pre_fc_norm_hidden"], self.eps)], -1) @ self.fc.T
        L = ids.shape[1]
        pos = torch.arange(L)[None].expand(ids.shape[0], L)
        mask = torch.full((L, L), float("-inf")).triu(1)[None, None]
        x = self.layer(x, position_embeddings=hf.model.rotary_emb(x, pos), attention_mask=mask, position_ids=pos)
        x = x[0] if isinstance(x, tuple) else x
        return hf.lm_head(_norm(x, self.norms["norm"], self.eps))

    def _fused(self, got: dict[str, Any]) -> dict[str, Any]:
        """mtp.layers.0.* as the layer's state dict (experts stacked as transformers keeps them)."""
        import torch

        sd = {k[len("mtp.layers.0."):]: v for k, v in got.items() if k.startswith("mtp.layers.0.")}
        experts = sorted({int(k.split(".")[2]) for k in sd if k.startswith("mlp.experts.")})
        if experts:
            sd["mlp.experts.gate_up_proj"] = torch.stack([torch.cat([sd.pop(f"mlp.experts.{e}.gate_proj.weight"),
                                                                     sd.pop(f"mlp.experts.{e}.up_proj.weight")])
                                                          for e in experts])
            sd["mlp.experts.down_proj"] = torch.stack([sd.pop(f"mlp.experts.{e}.down_proj.weight") for e in experts])
        return sd

    def tensors(self, names: set[str]) -> dict[str, np.ndarray]:
        """The block as checkpoint tensors; ``names``: the trunk layer's own, which the layer's must match."""
        out = {}
        for k, v in self.layer.state_dict().items():
            if k == "mlp.experts.gate_up_proj":
                F = v.shape[1] // 2
                for e in range(v.shape[0]):
                    out[f"mlp.experts.{e}.gate_proj.weight"], out[f"mlp.experts.{e}.up_proj.weight"] = v[e, :F], v[e, F:]
            elif k == "mlp.experts.down_proj":
                for e in range(v.shape[0]):
                    out[f"mlp.experts.{e}.down_proj.weight"] = v[e]
            else:
                out[k] = v
        if set(out) != names:
            raise RuntimeError(f"the MTP layer's tensors {sorted(set(out) ^ names)} do not match the checkpoint's")
        res = {f"mtp.layers.0.{k}": v.detach().float().numpy().copy() for k, v in out.items()}
        res["mtp.fc.weight"] = self.fc.detach().numpy().copy()
        for n, w in self.norms.items():
            res[f"mtp.{n}.weight"] = w.detach().numpy().copy()
        return res


def train(hf_dir: str | Path, out_dir: str | Path, steps: int = 300, sequences: int = 64, length: int = 96,
          lr: float = 3e-3, seed: int = 0, log: bool = False) -> dict[str, float]:
    """Trains and writes OUT_DIR (a copy of HF_DIR with the trained ``mtp.*``); returns the
    held-out next-but-one accuracy before and after ("before", "after")."""
    import torch
    import transformers
    from safetensors.numpy import load_file, save_file

    hf_dir, out_dir = Path(hf_dir), Path(out_dir)
    torch.manual_seed(seed)
    hf = transformers.AutoModelForCausalLM.from_pretrained(hf_dir, dtype="float32").eval()
    for p in hf.parameters():
        p.requires_grad_(False)
    tensors = load_file(hf_dir / "model.safetensors")
    mtp = Mtp(hf, tensors)
    seqs = _continuations(hf, sequences, length, hf.config.vocab_size, seed)
    with torch.no_grad():
        h = hf(seqs, output_hidden_states=True).hidden_states[-1]  # after the final norm
    hidden = torch.cat([torch.zeros_like(h[:, :1]), h[:, :-1]], 1)  # row p takes h_{p-1}
    n_eval = max(1, sequences // 8)
    train_ids, eval_ids = seqs[n_eval:], seqs[:n_eval]
    train_h, eval_h = hidden[n_eval:], hidden[:n_eval]

    def accuracy() -> float:
        with torch.no_grad():
            pred = mtp.logits(eval_ids, eval_h)[:, :-1].argmax(-1)
        return float((pred == eval_ids[:, 1:]).float().mean())

    before = accuracy()
    opt = torch.optim.Adam(mtp.parameters(), lr=lr)
    batch = min(32, len(train_ids))
    for step in range(steps):
        idx = torch.randint(len(train_ids), (batch,))
        logits = mtp.logits(train_ids[idx], train_h[idx])[:, :-1]
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), train_ids[idx, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        if log and (step % 50 == 0 or step == steps - 1):
            print(f"step {step}: loss {loss.item():.3f}, held-out accuracy {accuracy():.3f}")
    after = accuracy()
    names = {k[len(mtp.trunk_prefix):] for k in tensors if k.startswith(mtp.trunk_prefix)}
    trained = mtp.tensors(names)
    tmp = out_dir.with_name(out_dir.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(hf_dir, tmp)
    save_file({**{k: v for k, v in tensors.items() if not k.startswith("mtp.")}, **trained}, str(tmp / "model.safetensors"))
    (tmp / "mtp_training.json").write_text(json.dumps({"steps": steps, "sequences": sequences, "length": length,
                                                       "accuracy_before": before, "accuracy_after": after}))
    shutil.rmtree(out_dir, ignore_errors=True)
    tmp.rename(out_dir)
    return {"before": before, "after": after}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("hf_dir")
    ap.add_argument("out_dir")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--sequences", type=int, default=64)
    ap.add_argument("--length", type=int, default=96)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    r = train(a.hf_dir, a.out_dir, a.steps, a.sequences, a.length, a.lr, a.seed, log=True)
    print(f"held-out accuracy of the block: {r['before']:.3f} -> {r['after']:.3f}")


if __name__ == "__main__":
    main()
