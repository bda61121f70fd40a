"""The GGUF models the tests use, from PyPI packages (ds4.known_models); a missing package skips."""

from __future__ import annotations

from pathlib import Path

import pytest

from ds4 import known_models


def _path(name: str) -> Path:
    try:
        return known_models.model_path(name)
    except FileNotFoundError as e:
        pytest.skip(str(e))


def gemma3_270m() -> Path:
    """Gemma 3 270M Q4_K_M (SPM tokenizer; Q8_0, Q5_0, Q4_K, Q6_K, F32)."""
    return _path("gemma")


def smollm2_135m() -> Path:
    """SmolLM2-135M-Instruct Q4_1 (llama family, byte-level BPE, 'smollm' pre-tokenizer)."""
    return _path("smollm")


def qwen25_coder_05b() -> Path:
    """Qwen2.5-Coder-0.5B-Instruct Q4_K_M (qwen2, 152k BPE), concatenated from six packages."""
    return _path("qwen05")
