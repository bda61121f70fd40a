"""Chat templates: render a GGUF's ``tokenizer.chat_template`` as transformers does.

The environment matches transformers' ``apply_chat_template``: a jinja2
``ImmutableSandboxedEnvironment`` with ``trim_blocks`` and ``lstrip_blocks``, the loopcontrols
extension, a ``tojson`` filter that is plain ``json.dumps`` (no HTML escaping, non-ASCII kept,
``indent`` / ``separators`` / ``sort_keys`` passed through), and the globals
``raise_exception`` and ``strftime_now``. The template sees ``messages`` (keys whose value is
None dropped; ``reasoning_content`` / ``thinking`` / ``reasoning`` aliased to each other),
``tools``, ``documents``, ``add_generation_prompt``, the special tokens (``bos_token``,
``eos_token``, ``unk_token``, ``pad_token``) as the vocabulary spells them, and any extra
keyword arguments, which override the special tokens.

A file without a template gets a built-in one chosen from its vocabulary: Gemma's turns
(``<start_of_turn>``), llama 3's headers (``<|start_header_id|>``) or ChatML (``<|im_start|>``;
Qwen2, SmolLM).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from datetime import datetime
from functools import lru_cache
from typing import Any

# Gemma: a system message is folded into the first user turn; the assistant's role is "model".
GEMMA_TEMPLATE = (
    "{{ bos_token }}"
    "{% set ns = namespace(prefix='') %}"
    "{% set turns = messages %}"
    "{% if messages and messages[0]['role'] == 'system' %}"
    "{% set ns.prefix = messages[0]['content'] + '\n\n' %}"
    "{% set turns = messages[1:] %}"
    "{% endif %}"
    "{% for m in turns %}"
    "{% if (m['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"
    "{% endif %}"
    "{{ '<start_of_turn>' + ('model' if m['role'] == 'assistant' else m['role']) + '\n' }}"
    "{% if loop.first %}{{ ns.prefix }}{% endif %}"
    "{{ m['content'] | trim }}<end_of_turn>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}"
)

LLAMA3_TEMPLATE = (
    "{{ bos_token }}"
    "{% for m in messages %}"
    "<|start_header_id|>{{ m['role'] }}<|end_header_id|>\n\n{{ m['content'] | trim }}<|eot_id|>"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}"
)

CHATML_TEMPLATE = (
    "{% for m in messages %}"
    "<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def _tojson(x: Any, ensure_ascii: bool = False, indent: int | None = None,
            separators: tuple[str, str] | None = None, sort_keys: bool = False) -> str:
    # transformers replaces jinja's tojson, which HTML-escapes <, >, & and ' and sorts keys
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


@lru_cache(maxsize=16)
def _compile(template: str) -> Any:
    import jinja2
    import jinja2.ext
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message: str) -> None:
        raise jinja2.exceptions.TemplateError(message)

    def strftime_now(fmt: str) -> str:
        return datetime.now().strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env.from_string(template)


def builtin_template(metadata: Mapping[str, Any]) -> str:
    """The built-in template for a file without one, chosen by the special tokens it has."""
    tokens = _token_set(metadata.get("tokenizer.ggml.tokens") or [])
    arch = metadata.get("general.architecture", "")
    if "<start_of_turn>" in tokens or arch.startswith("gemma"):
        return GEMMA_TEMPLATE
    if "<|start_header_id|>" in tokens:
        return LLAMA3_TEMPLATE
    if "<|im_start|>" in tokens:
        return CHATML_TEMPLATE
    raise ValueError(f"the file ({arch}) has no tokenizer.chat_template and no built-in template fits its "
                     "vocabulary (Gemma <start_of_turn>, llama 3 <|start_header_id|>, ChatML <|im_start|>)")


_token_sets: dict[int, tuple[Sequence[str], frozenset[str]]] = {}


def _token_set(tokens: Sequence[str]) -> frozenset[str]:
    # The vocabulary as a set, once per list (a server's every request reads the same one; a
    # 262k-token set costs milliseconds).
    hit = _token_sets.get(id(tokens))
    if hit is None or hit[0] is not tokens:
        if len(_token_sets) >= 8:
            _token_sets.clear()
        hit = _token_sets[id(tokens)] = (tokens, frozenset(tokens))
    return hit[1]


def _special_tokens(metadata: Mapping[str, Any]) -> dict[str, str]:
    tokens = metadata.get("tokenizer.ggml.tokens") or []
    out: dict[str, str] = {}
    for name, key in (("bos_token", "bos_token_id"), ("eos_token", "eos_token_id"),
                      ("unk_token", "unknown_token_id"), ("pad_token", "padding_token_id")):
        i = metadata.get(f"tokenizer.ggml.{key}")
        if isinstance(i, int) and 0 <= i < len(tokens):
            out[name] = tokens[i]
    return out


_REASONING_KEYS = ("reasoning_content", "thinking", "reasoning")


def _message(m: Mapping[str, Any]) -> dict[str, Any]:
    # as transformers: None values dropped (templates test for missing keys), reasoning under
    # every name a template may read
    m = {k: v for k, v in m.items() if v is not None}
    reasoning = next((m[k] for k in _REASONING_KEYS if k in m), None)
    if reasoning is not None:
        m = {"thinking": reasoning, **m, "reasoning_content": reasoning}
    return m


def _metadata(source: Any) -> Mapping[str, Any]:
    if isinstance(source, Mapping):
        return source.get("metadata", source) if "metadata" in source else source
    from ds4.gguf import inspect

    path = getattr(source, "path", source)  # a ds4.Model or a path
    return inspect(os.fspath(path))["metadata"]


def apply_chat_template(
    metadata_or_model: Any,
    messages: Sequence[Mapping[str, Any]],
    add_generation_prompt: bool = True,
    tools: Sequence[Mapping[str, Any]] | None = None,
    **kwargs: Any,
) -> str:
    """The prompt text of ``messages`` under the file's chat template (or the built-in one).

    ``metadata_or_model``: a metadata dict (or ``ds4.inspect``'s result), a ``ds4.Model`` or a
    GGUF path. ``tools`` are JSON schemas; extra keyword arguments (``documents``,
    ``enable_thinking``, ``bos_token`` ...) reach the template as variables.
    """
    md = _metadata(metadata_or_model)
    template = md.get("tokenizer.chat_template") or builtin_template(md)
    variables: dict[str, Any] = {"documents": None, **_special_tokens(md), **kwargs}
    return _compile(template).render(
        messages=[_message(m) for m in messages],
        tools=[dict(t) for t in tools] if tools is not None else None,
        add_generation_prompt=add_generation_prompt,
        **variables,
    )
