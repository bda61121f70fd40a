"""OpenAI's ``/v1/responses``: input items (messages, function calls and their outputs) and
``instructions`` as a conversation, function tools; the response object's output items (a message
of output_text, function_call items) and its typed stream events, each with its sequence number.
Stateless: ``previous_response_id`` and ``conversation`` are refused (send the items)."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping
from typing import Any

from ds4.generation import Generation, TokenLogprob
from ds4.server import openai_api
from ds4.server.errors import ApiError, invalid
from ds4.server.fields import body_object, flag, integer, listed, number
from ds4.server.logprobs import Logprobs
from ds4.server.served import Served
from ds4.server.tools import ToolCall, forced_prefix

FIELDS = {"model", "input", "instructions", "max_output_tokens", "temperature", "top_p", "stream", "tools",
          "tool_choice", "parallel_tool_calls", "store", "metadata", "text", "user", "truncation", "top_logprobs",
          "reasoning", "include", "prompt_cache_key", "safety_identifier", "service_tier", "stream_options",
          "max_tool_calls", "background", "previous_response_id", "conversation"}
TEXT_PARTS = ("input_text", "output_text", "text")
LOGPROBS = "message.output_text.logprobs"  # the include value that asks for the output text's logprobs


def _text(content: Any, where: str) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise invalid(where, "expected a string or a list of content parts")
    parts = []
    for i, p in enumerate(content):
        if not isinstance(p, dict) or p.get("type") not in TEXT_PARTS or not isinstance(p.get("text"), str):
            raise invalid(f"{where}[{i}]", "only text parts (input_text, output_text) are supported")
        parts.append(p["text"])
    return "".join(parts)


def _messages(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    items = body.get("input")
    out: list[dict[str, Any]] = []
    if body.get("instructions") is not None:
        if not isinstance(body["instructions"], str):
            raise invalid("instructions", "expected a string")
        out.append({"role": "system", "content": body["instructions"]})
    if isinstance(items, str):
        return [*out, {"role": "user", "content": items}]
    if not isinstance(items, list) or not items:
        raise invalid("input", "expected a string or a non-empty list of input items")
    names: dict[str, str] = {}
    for i, it in enumerate(items):
        where = f"input[{i}]"
        kind = it.get("type", "message") if isinstance(it, dict) else None
        if kind == "message" and it.get("role") in ("user", "system", "developer", "assistant"):
            role = "system" if it["role"] == "developer" else it["role"]
            out.append({"role": role, "content": _text(it.get("content"), where + ".content")})
        elif kind == "function_call":
            if not isinstance(it.get("call_id"), str) or not isinstance(it.get("name"), str):
                raise invalid(where, "a function_call item needs call_id and name")
            try:
                args = json.loads(it.get("arguments") or "{}")
            except json.JSONDecodeError as e:
                raise invalid(where + ".arguments", f"not JSON: {e}") from None
            names[it["call_id"]] = it["name"]
            call = {"id": it["call_id"], "name": it["name"], "arguments": args}
            if out and out[-1]["role"] == "assistant":
                out[-1].setdefault("tool_calls", []).append(call)
            else:
                out.append({"role": "assistant", "content": "", "tool_calls": [call]})
        elif kind == "function_call_output":
            if not isinstance(it.get("call_id"), str):
                raise invalid(where, "a function_call_output item needs the call_id it answers")
            output = it.get("output", "")
            out.append({"role": "tool", "tool_call_id": it["call_id"], "name": names.get(it["call_id"]),
                        "content": output if isinstance(output, str) else _text(output, where + ".output")})
        else:
            raise invalid(where, "supported items: messages (user, system, developer, assistant), function_call, "
                                 "function_call_output")
    return out


def _tools(body: Mapping[str, Any]) -> tuple[list[dict[str, Any]], str | None]:
    out = []
    for i, t in enumerate(listed(body, "tools")):
        if not isinstance(t, dict) or t.get("type") != "function" or not isinstance(t.get("name"), str):
            raise invalid(f"tools[{i}]", "only function tools ({\"type\": \"function\", \"name\", \"parameters\"})")
        out.append({"name": t["name"], "description": t.get("description") or "",
                    "parameters": t.get("parameters") or {"type": "object", "properties": {}}})
    choice = body.get("tool_choice")
    if choice in (None, "auto"):
        return out, None
    if choice == "none":
        return [], None
    if choice == "required" and out:
        return out, "any"
    if isinstance(choice, dict) and choice.get("type") == "function" and choice.get("name") in {t["name"] for t in out}:
        return out, choice["name"]
    raise invalid("tool_choice", f"expected auto, none, required or one of the tools, got {choice!r}")


def parse(served: Served, body: Any) -> openai_api.Request:
    body = body_object(body, FIELDS, "Unrecognized request argument supplied: {key}")
    for key in ("previous_response_id", "conversation"):
        if body.get(key) is not None:
            raise invalid(key, "this server keeps no responses: send the conversation's items in input")
    if flag(body, "background"):
        raise invalid("background", "not supported by this server")
    top = integer(body, "top_logprobs", 0, 20)
    include = listed(body, "include")
    if not all(isinstance(v, str) for v in include):
        raise invalid("include", "expected a list of strings")
    tools, force = _tools(body)
    prompt = served.prompt(_messages(body), tools, force)
    room = served.room(prompt, "input")
    max_tokens = integer(body, "max_output_tokens", 1)
    opts = {"max_tokens": min(max_tokens if max_tokens is not None else room, room),
            "temperature": number(body, "temperature", 0.0, 2.0, 1.0), "top_p": number(body, "top_p", 0.0, 1.0, 1.0)}
    # Either asks for logprobs: the include value, or a count of alternatives.
    logprobs = LOGPROBS in include or top is not None
    if logprobs:
        opts["logprobs"] = top or 0
    req = openai_api.Request("responses", body.get("model") or served.name, prompt, opts, flag(body, "stream"), False,
                             f"resp_{uuid.uuid4().hex[:24]}", int(time.time()), served.tool_style if tools else None,
                             forced_prefix(served.tool_style, force),
                             logprobs=Logprobs(served.model, legacy=False) if logprobs else None)
    req.echo = {"instructions": body.get("instructions"), "max_output_tokens": max_tokens,
                "temperature": opts["temperature"], "top_p": opts["top_p"], "top_logprobs": top,
                "tools": body.get("tools") or [], "tool_choice": body.get("tool_choice") or "auto",
                "parallel_tool_calls": body.get("parallel_tool_calls", True), "metadata": body.get("metadata") or {},
                "text": body.get("text") or {"format": {"type": "text"}}, "store": False}
    return req


def _message(item_id: str, text: str, status: str = "completed",
             logprobs: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    part: dict[str, Any] = {"type": "output_text", "text": text, "annotations": []}
    if logprobs is not None:
        part["logprobs"] = logprobs
    return {"type": "message", "id": item_id, "status": status, "role": "assistant",
            "content": [part] if status == "completed" else []}


def _call(c: ToolCall, status: str = "completed") -> dict[str, Any]:
    return {"type": "function_call", "id": c.id.replace("call_", "fc_"), "call_id": c.id, "name": c.name,
            "arguments": c.arguments if status == "completed" else "", "status": status}


def _object(req: openai_api.Request, output: list[dict[str, Any]], gen: Generation | None, cached: int) -> dict[str, Any]:
    done = gen is not None
    length = done and str(gen.stats.get("stop_reason")) in ("max_tokens", "context")
    out = {"id": req.id, "object": "response", "created_at": req.created, "model": req.model, "output": output,
           "status": ("incomplete" if length else "completed") if done else "in_progress",
           "incomplete_details": {"reason": "max_output_tokens"} if length else None, "error": None,
           **req.echo}
    if done:
        n = int(gen.stats["n_generated"])
        out["usage"] = {"input_tokens": len(req.prompt), "input_tokens_details": {"cached_tokens": cached},
                        "output_tokens": n, "output_tokens_details": {"reasoning_tokens": 0},
                        "total_tokens": len(req.prompt) + n}
    return out


def response(req: openai_api.Request, gen: Generation, text: str, calls: list[ToolCall], cached: int = 0,
             logprobs: list[TokenLogprob] | None = None) -> dict[str, Any]:
    entries = req.logprobs.entries(logprobs or []) if req.logprobs is not None else None
    output = ([_message(f"msg_{req.id[5:]}", text, logprobs=entries)] if text or not calls else [])
    output += [_call(c) for c in calls]
    return _object(req, output, gen, cached)


class Events:
    """The typed events of one response: created, in_progress, then per output item added / deltas /
    done, then completed (or incomplete). Token logprobs ride on the next text delta; the open
    message collects them (with any left at its end) for its done events."""

    def __init__(self, req: openai_api.Request) -> None:
        self.req, self.seq, self.output = req, 0, []
        self.pieces: list[str] | None = None  # the open message's text
        self.msg_id = f"msg_{req.id[5:]}"
        self.pending: list[TokenLogprob] = []
        self.entries: list[dict[str, Any]] = []  # the open message's rendered logprobs

    def logprobs(self, lps: list[TokenLogprob]) -> list[bytes]:
        self.pending += lps
        return []

    def _take(self) -> list[dict[str, Any]]:
        """The pending tokens' logprobs, rendered and added to the open message's."""
        new = self.req.logprobs.entries(self.pending) if self.req.logprobs is not None else []
        self.pending = []
        self.entries += new
        return new

    def _event(self, kind: str, **data: Any) -> bytes:
        self.seq += 1
        body = {"type": kind, "sequence_number": self.seq - 1, **data}
        return f"event: {kind}\ndata: {json.dumps(body, ensure_ascii=False)}\n\n".encode()

    def start(self) -> list[bytes]:
        r = _object(self.req, [], None, 0)
        return [self._event("response.created", response=r), self._event("response.in_progress", response=r)]

    def _open(self) -> list[bytes]:
        self.pieces = []
        part: dict[str, Any] = {"type": "output_text", "text": "", "annotations": []}
        if self.req.logprobs is not None:
            part["logprobs"] = []
        return [self._event("response.output_item.added", output_index=len(self.output),
                            item=_message(self.msg_id, "", "in_progress")),
                self._event("response.content_part.added", item_id=self.msg_id, output_index=len(self.output),
                            content_index=0, part=part)]

    def _close(self) -> list[bytes]:
        if self.pieces is None:
            return []
        self._take()
        text, self.pieces = "".join(self.pieces), None
        entries, self.entries = self.entries, []
        at = len(self.output)
        self.output.append(_message(self.msg_id, text, logprobs=entries if self.req.logprobs is not None else None))
        part = self.output[-1]["content"][0]
        return [self._event("response.output_text.done", item_id=self.msg_id, output_index=at, content_index=0,
                            text=text, logprobs=entries),
                self._event("response.content_part.done", item_id=self.msg_id, output_index=at, content_index=0,
                            part=part),
                self._event("response.output_item.done", output_index=at, item=self.output[-1])]

    def text(self, piece: str) -> list[bytes]:
        out = self._open() if self.pieces is None else []
        assert self.pieces is not None
        self.pieces.append(piece)
        return out + [self._event("response.output_text.delta", item_id=self.msg_id, output_index=len(self.output),
                                  content_index=0, delta=piece, logprobs=self._take())]

    def call(self, c: ToolCall) -> list[bytes]:
        out = self._close()
        at = len(self.output)
        item = _call(c)
        out += [self._event("response.output_item.added", output_index=at, item=_call(c, "in_progress")),
                self._event("response.function_call_arguments.delta", item_id=item["id"], output_index=at,
                            delta=c.arguments),
                self._event("response.function_call_arguments.done", item_id=item["id"], output_index=at,
                            arguments=c.arguments, name=c.name),
                self._event("response.output_item.done", output_index=at, item=item)]
        self.output.append(item)
        return out

    def error(self, e: ApiError) -> list[bytes]:
        return [self._event("error", code=e.code, message=e.message, param=e.param)]

    def end(self, gen: Generation, calls: list[ToolCall], cached: int = 0) -> list[bytes]:
        out = self._open() if self.pieces is None and not self.output else []
        out += self._close()
        r = _object(self.req, self.output, gen, cached)
        return out + [self._event("response.incomplete" if r["status"] == "incomplete" else "response.completed",
                                  response=r)]
