"""Anthropic's ``/v1/messages``: requests checked as the API checks them, responses and the stream's
named events (message_start, content_block_start / _delta / _stop, message_delta, message_stop)
in its shapes."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping
from typing import Any

from ds4.generation import Generation
from ds4.model import Model
from ds4.server import openai_api
from ds4.server.errors import ApiError, invalid
from ds4.server.fields import flag, integer, number

FIELDS = {"model", "messages", "max_tokens", "system", "stop_sequences", "temperature", "top_p", "top_k", "stream",
          "metadata", "tools", "tool_choice", "thinking", "service_tier", "output_config", "container",
          # the client's routing and caching hints, which a local server has no use for
          "cache_control", "diagnostics", "inference_geo", "speed", "user_profile_id", "workspace_id"}
STOP = {"eog": "end_turn", "stop": "stop_sequence", "max_tokens": "max_tokens", "context": "max_tokens",
        "cancelled": "end_turn"}


def _text(content: Any, where: str) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for i, block in enumerate(content):
            if not isinstance(block, dict) or block.get("type") != "text" or not isinstance(block.get("text"), str):
                raise invalid(f"{where}[{i}]", "only text blocks ({\"type\": \"text\", \"text\": ...}) are supported")
            parts.append(block["text"])
        return "".join(parts)
    raise invalid(where, f"expected a string or a list of content blocks, got {type(content).__name__}")


def _messages(body: Mapping[str, Any]) -> list[dict[str, str]]:
    msgs = body.get("messages")
    if not isinstance(msgs, list) or not msgs:
        raise invalid("messages", "expected a non-empty list of messages")
    out = []
    system = body.get("system")
    if system is not None:
        out.append({"role": "system", "content": _text(system, "system")})
    for i, m in enumerate(msgs):
        if not isinstance(m, dict) or m.get("role") not in ("user", "assistant"):
            raise invalid(f"messages.{i}.role", "expected 'user' or 'assistant'")
        out.append({"role": m["role"], "content": _text(m.get("content"), f"messages.{i}.content")})
    return out


def parse(model: Model, name: str, body: Any) -> openai_api.Request:
    if not isinstance(body, dict):
        raise ApiError("the request body must be a JSON object")
    for key in body:
        if key not in FIELDS:
            raise ApiError(f"{key}: Extra inputs are not permitted", param=key)
    if not isinstance(body.get("model"), str):
        raise invalid("model", "a model name (string) is required")
    if body.get("tools") or body.get("tool_choice") is not None:
        raise invalid("tools", "tool use is not supported by this server yet")
    for key in ("output_config", "container"):
        if body.get(key) is not None:
            raise invalid(key, "not supported by this server")
    max_tokens = integer(body, "max_tokens", 1)
    if max_tokens is None:
        raise invalid("max_tokens", "required")
    stops = body.get("stop_sequences")
    if stops is not None and (not isinstance(stops, list) or not all(isinstance(s, str) and s for s in stops)):
        raise invalid("stop_sequences", "expected a list of non-empty strings")
    msgs = _messages(body)
    from ds4.chat import apply_chat_template

    # A last assistant message is a prefill: the answer continues its text, in the turn it opens.
    prefill = msgs.pop()["content"] if msgs[-1]["role"] == "assistant" else ""
    text = apply_chat_template(model, msgs, add_generation_prompt=True) + prefill
    prompt = model.tokenize(text, add_special=False)
    room = model.n_ctx - len(prompt)
    if room < 1:
        raise ApiError(f"prompt is too long: {len(prompt)} tokens > {model.n_ctx - 1} maximum", param="messages")
    opts = {
        "max_tokens": min(max_tokens, room),
        "temperature": number(body, "temperature", 0.0, 1.0, 1.0),
        "top_p": number(body, "top_p", 0.0, 1.0, 1.0),
        "top_k": integer(body, "top_k", 0) or 0,
        "stop": list(stops or []),
    }
    return openai_api.Request("messages", body["model"], prompt, opts, flag(body, "stream"), False,
                              f"msg_{uuid.uuid4().hex[:24]}", int(time.time()))


def _stop(model: Model, req: openai_api.Request, gen: Generation) -> tuple[str, str | None]:
    """(stop_reason, the stop sequence that ended the answer, if one did)."""
    reason = STOP.get(str(gen.stats.get("stop_reason")), "end_turn")
    if reason != "stop_sequence":
        return reason, None
    tail = model.detokenize(gen.tokens)[len(gen.text):]
    found = [(tail.find(s), i) for i, s in enumerate(req.options["stop"]) if s in tail]
    return reason, req.options["stop"][min(found)[1] if found else 0]


def _usage(req: openai_api.Request, gen: Generation | None) -> dict[str, int]:
    n = 0 if gen is None else int(gen.stats.get("n_generated", len(gen.tokens)))
    return {"input_tokens": len(req.prompt), "output_tokens": n}


def response(model: Model, req: openai_api.Request, gen: Generation) -> dict[str, Any]:
    reason, seq = _stop(model, req, gen)
    return {"id": req.id, "type": "message", "role": "assistant", "model": req.model,
            "content": [{"type": "text", "text": gen.text}], "stop_reason": reason, "stop_sequence": seq,
            "usage": _usage(req, gen)}


def event(kind: str, data: dict[str, Any]) -> bytes:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **data}, ensure_ascii=False)}\n\n".encode()


def stream_start(req: openai_api.Request) -> list[bytes]:
    message = {"id": req.id, "type": "message", "role": "assistant", "model": req.model, "content": [],
               "stop_reason": None, "stop_sequence": None, "usage": _usage(req, None)}
    return [event("message_start", {"message": message}),
            event("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}),
            event("ping", {})]


def stream_text(piece: str) -> bytes:
    return event("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": piece}})


def stream_end(model: Model, req: openai_api.Request, gen: Generation) -> list[bytes]:
    reason, seq = _stop(model, req, gen)
    return [event("content_block_stop", {"index": 0}),
            event("message_delta", {"delta": {"stop_reason": reason, "stop_sequence": seq},
                                    "usage": {"output_tokens": _usage(req, gen)["output_tokens"]}}),
            event("message_stop", {})]
