"""The tiny hybrid target the MTP tests draft for: the tiny Qwen3-Next (tests/model/tiny.py) trained
briefly on a synthetic phrase language (48 random phrases of 3 to 8 tokens, concatenated at
random) so that its continuations have structure a one-layer head can learn, then its built-in MTP
block trained on the target's own greedy continuations by scripts/train_mtp.py. A random model's
next-but-one token is chaotic (a trained head reaches 2 % held out); this one's is not. Built on
first use (about a minute on two cores), then cached beside the tiny models."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "model"))
import tiny  # noqa: E402

FAMILY = "qwen3_next"
ROOT = Path(__file__).resolve().parents[2]
TARGET_STEPS, MTP_STEPS, N_PHRASES = 150, 300, 48


def phrases(seed: int = 0) -> list[list[int]]:
    rng = np.random.default_rng(seed)
    return [[int(t) for t in rng.integers(3, 320, size=int(rng.integers(3, 9)))] for _ in range(N_PHRASES)]


def text(n: int, rng: np.random.Generator) -> list[int]:
    """n tokens of the phrase language."""
    book, out = phrases(), []
    while len(out) < n:
        out.extend(book[int(rng.integers(len(book)))])
    return out[:n]


def train_target(hf_dir: Path, out: Path) -> None:
    """Trains the tiny model in hf_dir briefly on the phrase language; saves it to out."""
    import torch
    import transformers

    torch.manual_seed(0)
    hf = transformers.AutoModelForCausalLM.from_pretrained(hf_dir, dtype="float32").train()
    opt = torch.optim.Adam(hf.parameters(), lr=3e-3)
    rng = np.random.default_rng(1)
    for _ in range(TARGET_STEPS):
        ids = torch.tensor([text(64, rng) for _ in range(16)])
        loss = hf(ids, labels=ids).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    hf.eval().save_pretrained(out)


def _script() -> Any:
    spec = importlib.util.spec_from_file_location("train_mtp", ROOT / "scripts" / "train_mtp.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def build() -> Path:
    """The HF directory of the trained target with its trained MTP block (mtp_training.json
    holds the block's held-out accuracy before and after)."""
    script = (ROOT / "scripts" / "train_mtp.py").read_bytes()
    key = hashlib.sha256(json.dumps([tiny.build(FAMILY).name, TARGET_STEPS, MTP_STEPS, N_PHRASES]).encode() + script)
    out = tiny.cache_root() / f"mtp-target-{key.hexdigest()[:12]}"
    if (out / "mtp_training.json").exists():
        return out
    work = out.with_name(f".{out.name}.{os.getpid()}")
    shutil.rmtree(work, ignore_errors=True)
    train_target(tiny.build(FAMILY), work / "target")
    _script().train(work / "target", work / "mtp", steps=MTP_STEPS, sequences=128, length=96)
    try:
        os.rename(work / "mtp", out)
    except OSError:  # another process won the race
        pass
    shutil.rmtree(work, ignore_errors=True)
    return out


def gguf(outtype: str = "f32") -> Path:
    import ds4

    hf_dir = build()
    path = hf_dir.parent / f"{hf_dir.name}.{outtype}.gguf"
    if not path.exists():
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*placeholder vocabulary.*")
            tmp = ds4.convert(hf_dir, path.with_suffix(".tmp.gguf"), outtype=outtype)
        os.replace(tmp, path)
    return path


def accuracy() -> dict[str, float]:
    return json.loads((build() / "mtp_training.json").read_text())
