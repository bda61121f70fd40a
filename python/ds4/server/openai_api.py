"""OpenAI's ``/v1/chat/completions`` and ``/v1/completions``: requests checked as the API checks
them (an unknown argument, a wrong type or a value out of range is a 400 naming the argument),
turned into a prompt and generation options; responses and stream chunks in the API's shapes."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ds4.generation import Generation, TokenLogprob
from ds4.model import Model
from ds4.server.errors import ApiError, invalid
from ds4.server.fields import body_object, flag, integer, listed, number
from ds4.server.logprobs import Logprobs
from ds4.server.served import Served
from ds4.server.tools import ToolCall, forced_prefix

_COMMON = {"model", "max_tokens", "temperature", "top_p", "n", "stream", "stream_options", "stop", "seed",
           "presence_penalty", "frequency_penalty", "logit_bias", "user", "logprobs", "top_logprobs",
           # llama.cpp's extensions, which its clients send
           "top_k", "min_p", "repeat_penalty"}
CHAT_FIELDS = _COMMON | {"messages", "max_completion_tokens", "tools", "tool_choice", "parallel_tool_calls",
                         "response_format", "metadata", "store", "service_level"}
COMPLETION_FIELDS = _COMMON | {"prompt", "echo", "suffix", "best_of"}
ROLES = {"system", "developer", "user", "assistant", "tool"}
FINISH = {"eog": "stop", "stop": "stop", "max_tokens": "length", "context": "length", "cancelled": "stop"}


@dataclass
class Request:
    """A checked request: the prompt's ids and Session.generate's options."""

    kind: str  # "chat", "completion" or "messages"
    model: str
    prompt: list[int]
    options: dict[str, Any]
    stream: bool
    include_usage: bool
    id: str
    created: int
    tool_style: str | None = None  # the answer may hold tool calls in this syntax
    prefix: str = ""               # what the answer was made to start with (a forced call)
    echo: dict[str, Any] = field(default_factory=dict)  # request settings a response repeats (/v1/responses)
    logprobs: Logprobs | None = None  # the answer reports token logprobs (options["logprobs"] alternatives each)


def _stop(body: Mapping[str, Any]) -> list[str]:
    v = body.get("stop")
    if v is None:
        return []
    stops = [v] if isinstance(v, str) else v
    if not isinstance(stops, list) or not all(isinstance(s, str) and s for s in stops):
        raise invalid("stop", "expected a non-empty string or a list of them")
    if len(stops) > 4:
        raise invalid("stop", f"at most 4 stop sequences, got {len(stops)}")
    return stops


def _logit_bias(model: Model, body: Mapping[str, Any]) -> dict[int, float] | None:
    v = body.get("logit_bias")
    if v is None:
        return None
    if not isinstance(v, dict):
        raise invalid("logit_bias", "expected an object of token id -> bias")
    out = {}
    for k, b in v.items():
        try:
            tok = int(k)
        except ValueError:
            raise invalid("logit_bias", f"{k!r} is not a token id") from None
        if not 0 <= tok < model.n_vocab:
            raise invalid("logit_bias", f"token {tok} is outside the vocabulary [0, {model.n_vocab})")
        if isinstance(b, bool) or not isinstance(b, (int, float)) or not -100 <= b <= 100:
            raise invalid("logit_bias", f"the bias of token {tok} must be a number in [-100, 100]")
        out[tok] = float(b)
    return out


def _logprobs(kind: str, body: Mapping[str, Any]) -> int | None:
    """Alternatives per token the answer reports with its logprobs; None: no logprobs. Chat:
    ``logprobs: true`` and ``top_logprobs`` 0..20; completions: ``logprobs`` 0..5."""
    if kind == "completion":
        if body.get("top_logprobs") is not None:
            raise invalid("top_logprobs", "the completions API takes the number of alternatives in logprobs (0..5)")
        return integer(body, "logprobs", 0, 5)
    top = integer(body, "top_logprobs", 0, 20)
    if not flag(body, "logprobs"):
        if top:
            raise invalid("top_logprobs", "needs logprobs: true")
        return None
    return top or 0


def _content(m: Mapping[str, Any], i: int) -> str:
    c = m.get("content")
    if c is None or isinstance(c, str):
        return c or ""
    if isinstance(c, list):
        parts = []
        for part in c:
            if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                raise invalid(f"messages[{i}].content", "only text parts ({\"type\": \"text\", \"text\": ...}) are supported")
            parts.append(part["text"])
        return "".join(parts)
    raise invalid(f"messages[{i}].content", f"expected a string or a list of parts, got {type(c).__name__}")


def _arguments(text: Any, where: str) -> dict[str, Any]:
    try:
        args = json.loads(text) if isinstance(text, str) else text
    except json.JSONDecodeError as e:
        raise invalid(where, f"not JSON: {e}") from None
    if not isinstance(args, dict):
        raise invalid(where, "expected a JSON object")
    return args


def _messages(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The conversation in ds4.server.tools' canonical form."""
    msgs = body.get("messages")
    if not isinstance(msgs, list) or not msgs:
        raise invalid("messages", "expected a non-empty list of messages")
    out: list[dict[str, Any]] = []
    names: dict[str, str] = {}  # tool call id -> function name, for the results
    for i, m in enumerate(msgs):
        if not isinstance(m, dict):
            raise invalid(f"messages[{i}]", "expected an object")
        role = m.get("role")
        if role not in ROLES:
            raise invalid(f"messages[{i}].role", f"expected one of {sorted(ROLES)}, got {role!r}")
        msg: dict[str, Any] = {"role": "system" if role == "developer" else role, "content": _content(m, i)}
        if role == "assistant" and m.get("tool_calls"):
            calls = m["tool_calls"]
            if not isinstance(calls, list):
                raise invalid(f"messages[{i}].tool_calls", "expected a list")
            msg["tool_calls"] = []
            for j, c in enumerate(calls):
                where = f"messages[{i}].tool_calls[{j}]"
                f = c.get("function") if isinstance(c, dict) else None
                if not isinstance(f, dict) or not isinstance(f.get("name"), str) or not isinstance(c.get("id"), str):
                    raise invalid(where, "expected {\"id\", \"type\": \"function\", \"function\": {\"name\", \"arguments\"}}")
                names[c["id"]] = f["name"]
                msg["tool_calls"].append({"id": c["id"], "name": f["name"],
                                          "arguments": _arguments(f.get("arguments", "{}"), where + ".function.arguments")})
        if role == "tool":
            if not isinstance(m.get("tool_call_id"), str):
                raise invalid(f"messages[{i}].tool_call_id", "a tool message needs the id of the call it answers")
            msg["tool_call_id"] = m["tool_call_id"]
            msg["name"] = names.get(m["tool_call_id"], m.get("name"))
        out.append(msg)
    return out


def _tools(body: Mapping[str, Any]) -> tuple[list[dict[str, Any]], str | None]:
    """(the request's tools in canonical form, the call it forces: None, "any" or a name)."""
    out = []
    for i, t in enumerate(listed(body, "tools")):
        f = t.get("function") if isinstance(t, dict) and t.get("type") == "function" else None
        if not isinstance(f, dict) or not isinstance(f.get("name"), str) or not f["name"]:
            raise invalid(f"tools[{i}]", "expected {\"type\": \"function\", \"function\": {\"name\", ...}}")
        out.append({"name": f["name"], "description": f.get("description", ""),
                    "parameters": f.get("parameters", {"type": "object", "properties": {}})})
    choice = body.get("tool_choice")
    if choice is None or choice == "auto":
        return out, None
    if choice == "none":
        return [], None
    if not out:
        raise invalid("tool_choice", "there are no tools to choose from")
    if choice == "required":
        return out, "any"
    name = choice.get("function", {}).get("name") if isinstance(choice, dict) else None
    if name not in {t["name"] for t in out}:
        raise invalid("tool_choice", f"expected \"none\", \"auto\", \"required\" or one of the tools, got {choice!r}")
    return out, name


def _completion_prompt(model: Model, body: Mapping[str, Any]) -> list[int]:
    p = body.get("prompt")
    if isinstance(p, list) and len(p) == 1 and isinstance(p[0], (str, list)):
        p = p[0]
    if isinstance(p, str):
        return model.tokenize(p)
    if isinstance(p, list) and p and all(isinstance(t, int) and not isinstance(t, bool) for t in p):
        if not all(0 <= t < model.n_vocab for t in p):
            raise invalid("prompt", f"a token id is outside the vocabulary [0, {model.n_vocab})")
        return list(p)
    raise invalid("prompt", "expected a string, a list of token ids, or a list of one of them")


def parse(kind: str, served: Served, body: Any) -> Request:
    """The checked request of a JSON body for `kind` ("chat" or "completion")."""
    model, name = served.model, served.name
    body = body_object(body, CHAT_FIELDS if kind == "chat" else COMPLETION_FIELDS,
                       "Unrecognized request argument supplied: {key}")
    if "model" in body and not isinstance(body["model"], str):
        raise invalid("model", "expected a string")
    if (integer(body, "n", 1) or 1) != 1 or (kind == "completion" and (integer(body, "best_of", 1) or 1) != 1):
        raise invalid("n", "this server makes one choice per request")
    n_top = _logprobs(kind, body)
    tools: list[dict[str, Any]] = []
    force = None
    if kind == "chat":
        fmt = body.get("response_format")
        if fmt is not None and (not isinstance(fmt, dict) or fmt.get("type") != "text"):
            raise invalid("response_format", "only {\"type\": \"text\"} is supported")
        tools, force = _tools(body)
        prompt = served.prompt(_messages(body), tools, force)
    else:
        if flag(body, "echo") or body.get("suffix") is not None:
            raise invalid("echo" if body.get("echo") else "suffix", "not supported by this server")
        prompt = _completion_prompt(model, body)
    room = served.room(prompt, "messages" if kind == "chat" else "prompt")
    key = "max_completion_tokens" if kind == "chat" and body.get("max_completion_tokens") is not None else "max_tokens"
    max_tokens = integer(body, key, 1)
    default = room if kind == "chat" else 16  # the APIs' defaults: the rest of the context; 16
    opts: dict[str, Any] = {
        "max_tokens": min(max_tokens if max_tokens is not None else default, room),
        "temperature": number(body, "temperature", 0.0, 2.0, 1.0),
        "top_p": number(body, "top_p", 0.0, 1.0, 1.0),
        "top_k": integer(body, "top_k", 0) or 0,
        "min_p": number(body, "min_p", 0.0, 1.0, 0.0),
        "repeat_penalty": number(body, "repeat_penalty", 0.0, 10.0, 1.0),
        "presence_penalty": number(body, "presence_penalty", -2.0, 2.0, 0.0),
        "frequency_penalty": number(body, "frequency_penalty", -2.0, 2.0, 0.0),
        "logit_bias": _logit_bias(model, body),
        "seed": integer(body, "seed", -(2**63), 2**64 - 1),
        "stop": _stop(body),
    }
    if n_top is not None:
        opts["logprobs"] = n_top
    if opts["top_p"] == 0.0:
        opts["top_p"] = 1.0
        opts["top_k"] = 1  # top_p 0: only the most likely token, as the API means it
    if opts["seed"] is not None:
        opts["seed"] %= 2**64
    stream_options = body.get("stream_options")
    if stream_options is not None and not isinstance(stream_options, dict):
        raise invalid("stream_options", "expected an object")
    stream = flag(body, "stream")
    prefix = "chatcmpl" if kind == "chat" else "cmpl"
    return Request(kind, body.get("model") or name, prompt, opts, stream,
                   bool((stream_options or {}).get("include_usage")), f"{prefix}-{uuid.uuid4().hex[:24]}", int(time.time()),
                   served.tool_style if tools else None, forced_prefix(served.tool_style, force),
                   logprobs=Logprobs(model, kind == "completion") if n_top is not None else None)


def usage(req: Request, gen: Generation, cached: int = 0) -> dict[str, Any]:
    n = int(gen.stats["n_generated"])
    return {"prompt_tokens": len(req.prompt), "completion_tokens": n, "total_tokens": len(req.prompt) + n,
            "prompt_tokens_details": {"cached_tokens": cached}}


def finish_reason(gen: Generation, calls: list[ToolCall] | None = None) -> str:
    return "tool_calls" if calls else FINISH.get(str(gen.stats.get("stop_reason")), "stop")


def _call(c: ToolCall) -> dict[str, Any]:
    return {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}


def response(req: Request, gen: Generation, text: str, calls: list[ToolCall], cached: int = 0,
             logprobs: list[TokenLogprob] | None = None) -> dict[str, Any]:
    """The answer: `text` shown (without its tool calls) and `calls`, with the tokens' `logprobs`."""
    lp = req.logprobs.render(logprobs or []) if req.logprobs is not None else None
    if req.kind == "chat":
        message: dict[str, Any] = {"role": "assistant", "content": text if text or not calls else None}
        if calls:
            message["tool_calls"] = [_call(c) for c in calls]
        choice: dict[str, Any] = {"index": 0, "message": message, "logprobs": lp}
        obj = "chat.completion"
    else:
        choice, obj = {"index": 0, "text": text, "logprobs": lp}, "text_completion"
    choice["finish_reason"] = finish_reason(gen, calls)
    return {"id": req.id, "object": obj, "created": req.created, "model": req.model, "choices": [choice],
            "usage": usage(req, gen, cached)}


def chunk(req: Request, text: str | None = None, finish: str | None = None, first: bool = False,
          logprobs: dict[str, Any] | None = None) -> dict[str, Any]:
    """A stream chunk: text (the chat's first chunk names the role) or the end (finish), with
    the rendered logprobs of the tokens it brings."""
    if req.kind == "chat":
        delta: dict[str, Any] = {"role": "assistant", "content": ""} if first else {}
        if text is not None:
            delta["content"] = text
        choice: dict[str, Any] = {"index": 0, "delta": delta, "logprobs": logprobs, "finish_reason": finish}
        obj = "chat.completion.chunk"
    else:
        choice = {"index": 0, "text": text or "", "logprobs": logprobs, "finish_reason": finish}
        obj = "text_completion"
    return {"id": req.id, "object": obj, "created": req.created, "model": req.model, "choices": [choice]}


def sse(obj: Any) -> bytes:
    return f"data: {json.dumps(obj, ensure_ascii=False)}\n\n".encode()


class Events:
    """One answer's stream of chunks (the chat's first names the role), then [DONE]. Token
    logprobs ride on the next text chunk (those left at the end, on the last one)."""

    def __init__(self, req: Request) -> None:
        self.req, self.n_calls = req, 0
        self.pending: list[TokenLogprob] = []

    def start(self) -> list[bytes]:
        return [sse(chunk(self.req, first=True))] if self.req.kind == "chat" else []

    def logprobs(self, lps: list[TokenLogprob]) -> list[bytes]:
        self.pending += lps
        return []

    def _take(self) -> dict[str, Any] | None:
        """The pending tokens' logprobs for a chunk (None when there are none, or unasked)."""
        lps, self.pending = self.pending, []
        return self.req.logprobs.render(lps) if self.req.logprobs is not None and lps else None

    def text(self, piece: str) -> list[bytes]:
        return [sse(chunk(self.req, piece, logprobs=self._take()))]

    def call(self, c: ToolCall) -> list[bytes]:
        delta = {"tool_calls": [{"index": self.n_calls, **_call(c)}]}
        self.n_calls += 1
        req = self.req
        return [sse({"id": req.id, "object": "chat.completion.chunk", "created": req.created, "model": req.model,
                     "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": None}]})]

    def error(self, e: ApiError) -> list[bytes]:
        return [sse(e.openai())]

    def end(self, gen: Generation, calls: list[ToolCall], cached: int = 0) -> list[bytes]:
        req = self.req
        out = [sse(chunk(req, finish=finish_reason(gen, calls), logprobs=self._take()))]
        if req.include_usage:
            obj = "chat.completion.chunk" if req.kind == "chat" else "text_completion"
            out.append(sse({"id": req.id, "object": obj, "created": req.created, "model": req.model, "choices": [],
                            "usage": usage(req, gen, cached)}))
        return out + [b"data: [DONE]\n\n"]
