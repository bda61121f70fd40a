"""ds4: a GGUF inference engine built around lossless speculative decoding.

The native core lives in ``ds4._core``; this package is the thin typed surface over it.
"""

from __future__ import annotations

from ds4._core import ContextOverflowError, GGUFError, ModelError, TokenizerError
from ds4.batch import Batch
from ds4.convert import ConvertError, convert
from ds4.generation import Generation, TokenLogprob
from ds4.gguf import dequantize, inspect
from ds4.model import Model
from ds4.session import Session
from ds4.speculative import Spec
from ds4.state_file import StateFileError

__all__ = [
    "Batch",
    "ContextOverflowError",
    "ConvertError",
    "GGUFError",
    "Generation",
    "Model",
    "ModelError",
    "Session",
    "Spec",
    "StateFileError",
    "TokenLogprob",
    "TokenizerError",
    "convert",
    "dequantize",
    "inspect",
    "__version__",
]
__version__ = "0.1.0"
