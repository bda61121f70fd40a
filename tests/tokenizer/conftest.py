"""Fixtures for the tokenizer tests: each model's GGUF and its oracle, the HF tokenizer that
transformers builds from the same GGUF (AutoTokenizer.from_pretrained(dir, gguf_file=...)).

Building that tokenizer takes about a minute for Gemma's 262k vocabulary, so its backend is
saved once as tokenizer.json in the ds4 cache directory, keyed by the GGUF's size and mtime and
the transformers version, and later sessions load it with `tokenizers` in seconds.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ds4.default_model import cache_dir

MODELS = ["gemma", "smollm", "qwen"]
_PATH_FIXTURES = {"gemma": "gemma_path", "smollm": "smollm_path", "qwen": "qwen05_path"}


def _oracle_file(gguf: Path) -> Path:
    transformers = pytest.importorskip("transformers")
    st = gguf.stat()
    name = f"{gguf.stem}-{st.st_size}-{st.st_mtime_ns}-tf{transformers.__version__}.json"
    target = cache_dir() / "tokenizer-oracle" / name
    if target.exists():
        return target
    from transformers import AutoTokenizer

    hf = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        hf.backend_tokenizer.save(str(tmp))
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return target


class Pair:
    """ds4's tokenizer and the HF oracle for one model."""

    def __init__(self, name: str, path: Path):
        from tokenizers import Tokenizer as HFTokenizer

        from ds4 import _core

        self.name = name
        self.path = path
        self.ds4 = _core.Tokenizer(str(path))
        self.hf = HFTokenizer.from_file(str(_oracle_file(path)))
        if name == "smollm":
            # SmolLM2's tokenizer.json splits digits individually before ByteLevel (and so does
            # llama.cpp for pre "smollm"); transformers' GGUF loader has no mapping for "smollm"
            # and leaves that step out, so the oracle gets it back from the real tokenizer.json.
            from tokenizers import pre_tokenizers

            self.hf.pre_tokenizer = pre_tokenizers.Sequence(
                [pre_tokenizers.Digits(individual_digits=True), self.hf.pre_tokenizer]
            )


@pytest.fixture(scope="session", params=MODELS)
def pair(request) -> Pair:
    path = request.getfixturevalue(_PATH_FIXTURES[request.param])
    return Pair(request.param, Path(path))
