"""Drafters shipped with ds4 (``*.gguf`` here): block drafters trained by ``ds4 train-drafter`` for
the models users get with ds4, found by the target fingerprints each file records."""

from __future__ import annotations

import functools
import os
from pathlib import Path


@functools.lru_cache(maxsize=None)
def shipped_for(model_path: str | os.PathLike[str]) -> Path | None:
    """The shipped drafter made for the GGUF ``model_path`` (any quantisation of the same model and
    vocabulary), or None."""
    from ds4 import _core
    from ds4.gguf import inspect

    want = _core.target_identity(os.fspath(model_path))
    for path in sorted(Path(__file__).parent.glob("*.gguf")):
        md = inspect(path)["metadata"]
        if (md.get("dflash.target.vocab_fingerprint") == want["vocab_fingerprint"]
                and md.get("dflash.target.weights_fingerprint") == want["weights_fingerprint"]):
            return path
    return None
