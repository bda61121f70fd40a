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
from ds4.server import openai_api
from ds4.server.errors import ApiError, invalid
from ds4.server.fields import body_object, flag, integer, listed, number
from ds4.server.served import Served
from ds4.server.tools import ToolCall, forced_prefix

FIELDS = {"model", "messages", "max_tokens", "system", "stop_sequences", "temperature", "top_p", "top_k", "stream",
          "metadata", "tools", "tool_choice", "thinking", "service_tier", "output_config", "container",
          # the client's routing and caching hints, which a local server has no use for
          "cache_control", "diagnostics", "inference_geo", "speed", "user_profile_id", "workspace_id"}
STOP = {"eog": "end_turn", "stop": "stop_sequence", "max_tokens": "max_tokens", "context": "max_tokens",
        "cancelled": "end_turn"}


def _blocks(content: Any, where: str) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list):
        raise invalid(where, f"expected a string or a list of content blocks, got {type(content).__name__}")
    for i, block in enumerate(content):
        kind = block.get("type") if isinstance(block, dict) else None
        if kind not in ("text", "tool_use", "tool_result"):
            raise invalid(f"{where}.{i}", "supported blocks: text, tool_use, tool_result")
    return content


def _text(content: Any, where: str) -> str:
    parts = []
    for i, block in enumerate(_blocks(content, where)):
        if block["type"] != "text" or not isinstance(block.get("text"), str):
            raise invalid(f"{where}.{i}", "expected a text block")
        parts.append(block["text"])
    return "".join(parts)


def _messages(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The conversation in ds4.server.tools' canonical form."""
    msgs = body.get("messages")
    if not isinstance(msgs, list) or not msgs:
        raise invalid("messages", "expected a non-empty list of messages")
    out: list[dict[str, Any]] = []
    system = body.get("system")
    if system is not None:
        out.append({"role": "system", "content": _text(system, "system")})
    names: dict[str, str] = {}
    for i, m in enumerate(msgs):
        if not isinstance(m, dict) or m.get("role") not in ("user", "assistant"):
            raise invalid(f"messages.{i}.role", "expected 'user' or 'assistant'")
        text, calls = [], []
        for j, block in enumerate(_blocks(m.get("content"), f"messages.{i}.content")):
            where = f"messages.{i}.content.{j}"
            if block["type"] == "text":
                text.append(str(block.get("text", "")))
            elif block["type"] == "tool_use":
                if m["role"] != "assistant" or not isinstance(block.get("name"), str) or not isinstance(block.get("id"), str) \
                        or not isinstance(block.get("input", {}), dict):
                    raise invalid(where, "a tool_use block belongs to an assistant message: {id, name, input}")
                names[block["id"]] = block["name"]
                calls.append({"id": block["id"], "name": block["name"], "arguments": block.get("input", {})})
            else:
                if m["role"] != "user" or not isinstance(block.get("tool_use_id"), str):
                    raise invalid(where, "a tool_result block belongs to a user message: {tool_use_id, content}")
                result = block.get("content", "")
                out.append({"role": "tool", "tool_call_id": block["tool_use_id"], "name": names.get(block["tool_use_id"]),
                            "content": result if isinstance(result, str) else _text(result, where + ".content")})
        if text or calls or not out or out[-1]["role"] != "tool":
            msg: dict[str, Any] = {"role": m["role"], "content": "".join(text)}
            if calls:
                msg["tool_calls"] = calls
            out.append(msg)
    return out


def _tools(body: Mapping[str, Any]) -> tuple[list[dict[str, Any]], str | None]:
    out = []
    for i, t in enumerate(listed(body, "tools")):
        if not isinstance(t, dict) or not isinstance(t.get("name"), str) or not t["name"]:
            raise invalid(f"tools.{i}", "expected {name, description, input_schema}")
        out.append({"name": t["name"], "description": t.get("description", ""),
                    "parameters": t.get("input_schema", {"type": "object", "properties": {}})})
    choice = body.get("tool_choice")
    kind = choice.get("type") if isinstance(choice, dict) else None
    if choice is None or kind == "auto":
        return out, None
    if kind == "none":
        return [], None
    if kind == "any" and out:
        return out, "any"
    if kind == "tool" and choice.get("name") in {t["name"] for t in out}:
        return out, choice["name"]
    raise invalid("tool_choice", f"expected auto, any, none or one of the tools, got {choice!r}")


def parse(served: Served, body: Any) -> openai_api.Request:
    body = body_object(body, FIELDS, "{key}: Extra inputs are not permitted")
    if not isinstance(body.get("model"), str):
        raise invalid("model", "a model name (string) is required")
    for key in ("output_config", "container"):
        if body.get(key) is not None:
            raise invalid(key, "not supported by this server")
    max_tokens = integer(body, "max_tokens", 1)
    if max_tokens is None:
        raise invalid("max_tokens", "required")
    stops = body.get("stop_sequences")
    if stops is not None and (not isinstance(stops, list) or not all(isinstance(s, str) and s for s in stops)):
        raise invalid("stop_sequences", "expected a list of non-empty strings")
    tools, force = _tools(body)
    msgs = _messages(body)
    # A last assistant message of text is a prefill: the answer continues it, in the turn it opens.
    prefill = msgs.pop()["content"] if msgs[-1]["role"] == "assistant" and not msgs[-1].get("tool_calls") else ""
    prompt = served.prompt(msgs, tools, force, prefill)
    room = served.room(prompt, "messages")
    opts = {
        "max_tokens": min(max_tokens, room),
        "temperature": number(body, "temperature", 0.0, 1.0, 1.0),
        "top_p": number(body, "top_p", 0.0, 1.0, 1.0),
        "top_k": integer(body, "top_k", 0) or 0,
        "stop": list(stops or []),
    }
    return openai_api.Request("messages", body["model"], prompt, opts, flag(body, "stream"), False,
                              f"msg_{uuid.uuid4().hex[:24]}", int(time.time()),
                              served.tool_style if tools else None, forced_prefix(served.tool_style, force))


def _stop(gen: Generation, calls: list[ToolCall]) -> tuple[str, str | None]:
    """(stop_reason, the stop sequence that ended the answer, if one did)."""
    if calls:
        return "tool_use", None
    reason = STOP.get(str(gen.stats.get("stop_reason")), "end_turn")
    return reason, (gen.stats.get("stop_string") or None) if reason == "stop_sequence" else None


def _usage(req: openai_api.Request, gen: Generation | None, cached: int = 0) -> dict[str, int]:
    """Anthropic's split: input_tokens the prompt tokens evaluated, cache_read_input_tokens those
    a cached session held already."""
    n = 0 if gen is None else int(gen.stats["n_generated"])
    return {"input_tokens": len(req.prompt) - cached, "output_tokens": n, "cache_read_input_tokens": cached,
            "cache_creation_input_tokens": 0}


def _tool_use(c: ToolCall) -> dict[str, Any]:
    return {"type": "tool_use", "id": c.id.replace("call_", "toolu_"), "name": c.name, "input": json.loads(c.arguments)}


def response(req: openai_api.Request, gen: Generation, text: str, calls: list[ToolCall], cached: int = 0
             ) -> dict[str, Any]:
    reason, seq = _stop(gen, calls)
    content = ([{"type": "text", "text": text}] if text or not calls else []) + [_tool_use(c) for c in calls]
    return {"id": req.id, "type": "message", "role": "assistant", "model": req.model, "content": content,
            "stop_reason": reason, "stop_sequence": seq, "usage": _usage(req, gen, cached)}


def event(kind: str, data: dict[str, Any]) -> bytes:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **data}, ensure_ascii=False)}\n\n".encode()


class Events:
    """One answer's stream: a text block opened at the first text, a tool_use block per call."""

    def __init__(self, req: openai_api.Request) -> None:
        self.req, self.index, self.text_open = req, 0, False

    def start(self) -> list[bytes]:
        message = {"id": self.req.id, "type": "message", "role": "assistant", "model": self.req.model, "content": [],
                   "stop_reason": None, "stop_sequence": None, "usage": _usage(self.req, None)}
        return [event("message_start", {"message": message}), event("ping", {})]

    def _close_text(self) -> list[bytes]:
        if not self.text_open:
            return []
        self.text_open = False
        self.index += 1
        return [event("content_block_stop", {"index": self.index - 1})]

    def text(self, piece: str) -> list[bytes]:
        out = []
        if not self.text_open:
            self.text_open = True
            out.append(event("content_block_start", {"index": self.index, "content_block": {"type": "text", "text": ""}}))
        out.append(event("content_block_delta", {"index": self.index, "delta": {"type": "text_delta", "text": piece}}))
        return out

    def call(self, c: ToolCall) -> list[bytes]:
        out = self._close_text()
        block = {**_tool_use(c), "input": {}}
        out += [event("content_block_start", {"index": self.index, "content_block": block}),
                event("content_block_delta", {"index": self.index,
                                              "delta": {"type": "input_json_delta", "partial_json": c.arguments}}),
                event("content_block_stop", {"index": self.index})]
        self.index += 1
        return out

    def error(self, e: ApiError) -> list[bytes]:
        return [event("error", {"error": e.anthropic()["error"]})]

    def end(self, gen: Generation, calls: list[ToolCall], cached: int = 0) -> list[bytes]:
        reason, seq = _stop(gen, calls)
        empty = not calls and not self.text_open and self.index == 0
        out = self.text("") if empty else []  # an empty answer is still one text block
        return out + self._close_text() + [
            event("message_delta", {"delta": {"stop_reason": reason, "stop_sequence": seq},
                                    "usage": {"output_tokens": _usage(self.req, gen)["output_tokens"]}}),
            event("message_stop", {})]
