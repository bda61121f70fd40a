"""The vocabulary of an HF ``tokenizer.json`` as GGUF tokenizer metadata (used by ds4.convert).

Byte-level BPE (a ByteLevel pre-tokenizer: llama 3, Qwen2, SmolLM) becomes
``tokenizer.ggml.model = gpt2`` with merges and a ``tokenizer.ggml.pre`` named after the
pre-tokenizer's split regex; SentencePiece-style BPE (byte fallback, U+2581 for spaces: Gemma,
llama 2) becomes ``llama``. Special token ids, add_bos/add_eos flags, merges and the chat
template come from ``gguf.SpecialVocab``, which reads tokenizer.json / tokenizer_config.json.
"""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path
from typing import Any

# The split regexes transformers' tokenizers use, keyed by llama.cpp's pre-tokenizer name.
# Distinguished by their digit rule: llama 3 groups up to three digits, Qwen2 takes one.
_PRE_BY_DIGITS: tuple[tuple[str, str], ...] = ((r"\p{N}{1,3}", "llama-bpe"), (r"|\p{N}|", "qwen2"))


def _walk(node: Any) -> list[dict[str, Any]]:
    """Every pre-tokenizer step of a (possibly nested Sequence) pre_tokenizer entry."""
    if not isinstance(node, dict):
        return []
    if node.get("type") == "Sequence":
        return [s for sub in node.get("pretokenizers", []) for s in _walk(sub)]
    return [node]


def _pre_name(tok: dict[str, Any], path: Path) -> str:
    steps = _walk(tok.get("pre_tokenizer"))
    regexes = [s["pattern"]["Regex"] for s in steps if s.get("type") == "Split" and "Regex" in s.get("pattern", {})]
    digits = [s for s in steps if s.get("type") == "Digits" and s.get("individual_digits")]
    if digits and not regexes:
        return "smollm"  # digits isolated, then GPT-2's ByteLevel regex
    for r in regexes:
        for marker, name in _PRE_BY_DIGITS:
            if marker in r:
                return name
    if regexes:
        warnings.warn(f"{path}: unrecognised pre-tokenizer regex {regexes[0]!r}; writing tokenizer.ggml.pre "
                      "'default' (GPT-2's regex), tokenization may differ from the HF tokenizer", stacklevel=4)
    return "default"


def write_tokenizer_json(w: Any, hf_dir: Path, vocab_size: int, model_type: str) -> None:
    import gguf

    path = hf_dir / "tokenizer.json"
    tok = json.loads(path.read_text(encoding="utf-8"))
    model = tok.get("model", {})
    if model.get("type") != "BPE":
        raise ValueError(f"{path}: tokenizer model type {model.get('type')!r} is not supported (BPE only)")
    byte_level = any(s.get("type") == "ByteLevel" for s in _walk(tok.get("pre_tokenizer")))
    by_id: dict[int, str] = {int(i): t for t, i in model["vocab"].items()}
    added = {int(a["id"]): a for a in tok.get("added_tokens", [])}
    for i, a in added.items():
        by_id[i] = a["content"]
    n = max(vocab_size, max(by_id) + 1)
    if n > vocab_size:
        raise ValueError(f"{path}: the tokenizer has ids up to {n - 1}, beyond the model's vocab_size {vocab_size}")

    T = gguf.TokenType
    tokens: list[str] = []
    types: list[int] = []
    unk = model.get("unk_token")
    for i in range(n):
        t = by_id.get(i)
        if t is None:  # rows of the embedding no token uses (llama.cpp's spelling)
            tokens.append(f"[PAD{i}]")
            types.append(T.UNUSED)
        elif i in added:
            tokens.append(t)
            types.append(T.CONTROL if added[i].get("special") else T.USER_DEFINED)
        elif not byte_level and re.fullmatch(r"<0x[0-9A-F]{2}>", t):
            tokens.append(t)
            types.append(T.BYTE)
        else:
            tokens.append(t)
            types.append(T.UNKNOWN if t == unk else T.NORMAL)

    special = gguf.SpecialVocab(hf_dir, load_merges=byte_level, n_vocab=n)
    if byte_level:
        w.add_tokenizer_model("gpt2")
        w.add_tokenizer_pre(_pre_name(tok, path))
    else:
        w.add_tokenizer_model("llama")
        w.add_token_scores([-float(i) for i in range(n)])  # BPE vocabularies are in merge order
        if model_type == "gemma3_text":
            w.add_add_space_prefix(False)
    w.add_token_list(tokens)
    w.add_token_types(types)
    special.add_to_gguf(w, quiet=True)
