"""Drafters shipped with ds4 (``*.gguf`` here): block drafters trained by ``ds4 train-drafter`` for
the models users get with ds4, found by the target fingerprints each file records."""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ds4.model import Model


def shipped_for(model: Model | str | os.PathLike[str]) -> Path | None:
    """The shipped drafter made for ``model`` (a loaded :class:`ds4.Model`, whose fingerprints are
    computed once, or a GGUF path; any quantisation of the same model and vocabulary), or None."""
    from ds4 import _core
    from ds4.model import Model

    want = _core.target_identity(model._m if isinstance(model, Model) else os.fspath(model))
    return _shipped(want["vocab_fingerprint"], want["weights_fingerprint"])


@functools.lru_cache(maxsize=None)
def _shipped(vocab_fingerprint: str, weights_fingerprint: str) -> Path | None:
    from ds4.gguf import inspect

    for path in sorted(Path(__file__).parent.glob("*.gguf")):
        md = inspect(path)["metadata"]
        if (md.get("dflash.target.vocab_fingerprint") == vocab_fingerprint
                and md.get("dflash.target.weights_fingerprint") == weights_fingerprint):
            return path
    return None
