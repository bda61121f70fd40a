"""Reading GGUF files: metadata, the tensor directory, and dequantised tensors."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from ds4 import _core


def inspect(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Metadata and tensor directory of a GGUF file (or of all parts of a split model).

    Returns ``{"metadata": {key: value}, "tensors": [{"name", "type", "shape", "offset",
    "nbytes", "split"}]}``. ``shape`` is in numpy order (slowest dimension first), the shape
    :func:`dequantize` returns; ``offset`` is the tensor's offset inside its split's data
    section, as the file's directory records it. Malformed files raise :class:`ds4.GGUFError`.
    """
    return _core.inspect(os.fspath(path))


def dequantize(path: str | os.PathLike[str], tensor_name: str) -> np.ndarray:
    """The named tensor as float32, in numpy order (the shape ``gguf.quants.dequantize`` gives)."""
    return _core.dequantize(os.fspath(path), tensor_name)
