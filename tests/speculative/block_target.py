"""The tiny target the block-drafter tests draft for, and drafters trained for it by ds4's trainer.

The target: the tiny Qwen3 (tests/model/tiny.py) trained briefly on mtp_target's phrase language,
so that its continuations have structure a drafter can learn. The drafters: ``ds4.train`` on the
target's own greedy continuations of phrase-language prompts (its data made by ds4's engine): a
DFlash drafter (the target's head, no Markov head) and a DSpark one (Markov and confidence heads,
a reduced vocabulary of the 200 ids the target chose most). The DFlash drafter is also written in
z-lab's checkpoint layout (safetensors + config.json with ``dflash_config``), for the ``dflash``
reference package and ``ds4 convert``. Built on first use (well under a minute), then cached
beside the tiny models, keyed by the sources that make them."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "model"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import mtp_target  # noqa: E402
import tiny  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
LAYERS = (1, 2, 3)  # capture indices: after target layers 0, 1, 2
BLOCK = 8
MASK = 4
STEPS = 400


def _key(*parts: Any) -> str:
    h = hashlib.sha256(json.dumps([str(p) for p in parts]).encode())
    for src in sorted((ROOT / "python" / "ds4" / "train").glob("*.py")) + [Path(__file__), Path(mtp_target.__file__)]:
        h.update(src.read_bytes())
    return h.hexdigest()[:12]


def target_dir() -> Path:
    out = tiny.cache_root() / f"block-target-{_key(tiny.build('qwen3').name, mtp_target.TARGET_STEPS)}"
    if not (out / "config.json").exists():
        work = out.with_name(f".{out.name}.{os.getpid()}")
        shutil.rmtree(work, ignore_errors=True)
        mtp_target.train_target(tiny.build("qwen3"), work)
        try:
            os.rename(work, out)
        except OSError:  # another process won the race
            shutil.rmtree(work, ignore_errors=True)
    return out


def target_gguf() -> Path:
    import ds4

    hf_dir = target_dir()
    path = hf_dir.parent / f"{hf_dir.name}.f32.gguf"
    if not path.exists():
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*placeholder vocabulary.*")
            tmp = ds4.convert(hf_dir, path.with_suffix(".tmp.gguf"))
        os.replace(tmp, path)
    return path


def prompts(n: int, seed: int) -> list[list[int]]:
    rng = np.random.default_rng(seed)
    return [[1] + mtp_target.text(int(rng.integers(4, 40)), rng) for _ in range(n)]


def _train(kind: str, out: Path) -> dict[str, Any]:
    import torch

    import ds4
    from ds4.train import data
    from ds4.train.drafter_net import DrafterConfig, DrafterNet
    from ds4.train.export import export_drafter
    from ds4.train.trainer import TrainConfig, Trainer, acceptance, calibrate, reduced_vocab, target_parts

    torch.manual_seed(0)
    target = target_gguf()
    model = ds4.Model(str(target), threads=2, kv_type="f32", precision="f32")
    samples = list(data.generate(model, prompts(160, 0), LAYERS, 64, progress=False))
    train, heldout = samples[:144], samples[144:]
    parts = target_parts(target)
    dspark = kind == "dspark"
    cfg = DrafterConfig(n_embd=64, target_layers=LAYERS, mask_token=MASK, n_layer=1, n_head=4, n_head_kv=2, head_dim=16,
                        n_ff=128, block_size=BLOCK, rope_base=10000.0, markov_rank=16 if dspark else 0,
                        d2t=reduced_vocab(train, 200, parts.n_vocab) if dspark else ())
    net = DrafterNet(cfg, parts, seed=0)
    Trainer(net, train, heldout, TrainConfig(steps=STEPS, eval_every=STEPS, lr=3e-3), out.parent, log=open(os.devnull, "w")).run()
    (out.parent / "checkpoint.pt").unlink()
    rate, length, z, hit = acceptance(net, heldout, 512)
    if dspark:
        calibrate(net, z, hit)
    export_drafter(net, target, out)
    if not dspark:
        _zlab(net, out.parent / "zlab")
    return {"acceptance": rate.tolist(), "accepted_per_block": length}


def _zlab(net: Any, path: Path) -> None:
    """The DFlash drafter as z-lab's DFlashDraftModel checkpoint."""
    from safetensors.numpy import save_file

    inverse = {"fc.weight": "fc.weight", "enc.output_norm.weight": "hidden_norm.weight", "output_norm.weight": "norm.weight"}
    layer = {"attn_norm": "input_layernorm", "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj",
             "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj", "attn_q_norm": "self_attn.q_norm",
             "attn_k_norm": "self_attn.k_norm", "ffn_norm": "post_attention_layernorm", "ffn_gate": "mlp.gate_proj",
             "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj"}
    tensors = {}
    for name, a in net.tensors().items():
        if name.startswith("blk."):
            _, i, part, _ = name.split(".")
            tensors[f"layers.{i}.{layer[part]}.weight"] = a
        else:
            tensors[inverse[name]] = a
    path.mkdir(parents=True, exist_ok=True)
    save_file({k: np.ascontiguousarray(v) for k, v in tensors.items()}, str(path / "model.safetensors"))
    c = net.cfg
    cfg = {**tiny._COMMON, "architectures": ["DFlashDraftModel"], "model_type": "qwen3", "num_hidden_layers": c.n_layer,
           "num_attention_heads": c.n_head, "num_key_value_heads": c.n_head_kv, "head_dim": c.head_dim,
           "intermediate_size": c.n_ff, "rope_theta": c.rope_base, "num_target_layers": 4, "tie_word_embeddings": False,
           "dflash_config": {"target_layer_ids": [i - 1 for i in c.target_layers], "block_size": c.block_size,
                             "mask_token_id": c.mask_token}}
    (path / "config.json").write_text(json.dumps(cfg, indent=1))


def drafter(kind: str) -> Path:
    """The trained drafter GGUF of `kind` ("dflash" or "dspark"); training.json beside it holds its
    held-out acceptance per position."""
    out = tiny.cache_root() / f"block-drafter-{kind}-{_key(kind, STEPS, target_dir().name)}"
    if not (out / "training.json").exists():
        work = out.with_name(f".{out.name}.{os.getpid()}")
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        log = _train(kind, work / "drafter.gguf")
        (work / "training.json").write_text(json.dumps(log))
        try:
            os.rename(work, out)
        except OSError:
            shutil.rmtree(work, ignore_errors=True)
    return out / "drafter.gguf"


def training(kind: str) -> dict[str, Any]:
    return json.loads((drafter(kind).parent / "training.json").read_text())


def zlab_dir() -> Path:
    return drafter("dflash").parent / "zlab"
