"""ds4: a GGUF inference engine built around lossless speculative decoding.

The native core lives in ``ds4._core``; this package is the thin typed surface over it.
"""

from __future__ import annotations

from ds4._core import GGUFError, TokenizerError
from ds4.gguf import dequantize, inspect
from ds4.model import Model

__all__ = ["GGUFError", "TokenizerError", "Model", "dequantize", "inspect", "__version__"]
__version__ = "0.1.0"
