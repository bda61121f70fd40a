"""Tool calls in a model's answer: which syntax the model writes them in, and a parser that splits a
streamed answer into the text to show and the calls.

Syntaxes (``style_of`` picks one from the chat template and architecture):

- ``hermes`` (Qwen2.5 / Qwen3, Hermes, most tool-trained models): ``<tool_call>{"name": ...,
  "arguments": {...}}</tool_call>``, one block per call;
- ``llama3``: the answer is a JSON object ``{"name": ..., "parameters": {...}}`` (after an optional
  ``<|python_tag|>``), several separated by ``;``;
- ``gemma``: a fenced ``tool_code`` block of Python calls, ``get_weather(city="Paris")``, as
  Gemma's function-calling guide prompts for (its template has no tool syntax of its own).

The parser holds back text that may open a call (a partial ``<tool_call>`` at the end of what was
decoded, an answer that starts with ``{``) until it knows, so no piece of a call is ever shown as
text; ``in_call`` turns true where the answer enters call syntax (the sampling-mode boundary; ``entered``
stays true after).
"""

from __future__ import annotations

import ast
import json
import uuid
from dataclasses import dataclass, field
from typing import Any

STYLES = ("hermes", "llama3", "gemma")
_OPEN = {"hermes": "<tool_call>", "llama3": "<|python_tag|>", "gemma": "```tool_code"}
_CLOSE = {"hermes": "</tool_call>", "gemma": "```"}


@dataclass
class ToolCall:
    name: str
    arguments: str  # the arguments object as JSON text
    id: str = field(default_factory=lambda: f"call_{uuid.uuid4().hex[:24]}")


def style_of(metadata: dict[str, Any]) -> str:
    template = str(metadata.get("tokenizer.chat_template") or "")
    if "<tool_call>" in template:
        return "hermes"
    if "<|python_tag|>" in template or "ipython" in template:
        return "llama3"
    if str(metadata.get("general.architecture", "")).startswith("gemma"):
        return "gemma"
    return "hermes"


def _json_call(text: str) -> ToolCall | None:
    try:
        obj = json.loads(text)
    except json.JSONDecodeError:
        return None
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        return None
    args = obj.get("arguments", obj.get("parameters", {}))
    if isinstance(args, str):  # some models write the arguments as a JSON string
        try:
            args = json.loads(args)
        except json.JSONDecodeError:
            return None
    if not isinstance(args, dict):
        return None
    return ToolCall(obj["name"], json.dumps(args, ensure_ascii=False))


def _python_calls(code: str) -> list[ToolCall] | None:
    """``f(a=1, b="x")`` lines as calls (keyword arguments of literal values only)."""
    try:
        tree = ast.parse(code.strip())
    except SyntaxError:
        return None
    calls = []
    for stmt in tree.body:
        if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and isinstance(stmt.value.func, ast.Name)):
            return None
        call = stmt.value
        if call.args:
            return None
        try:
            args = {kw.arg: ast.literal_eval(kw.value) for kw in call.keywords if kw.arg is not None}
        except (ValueError, SyntaxError):
            return None
        calls.append(ToolCall(call.func.id, json.dumps(args, ensure_ascii=False)))
    return calls or None


class ToolParser:
    """Feed it the answer's text as it is decoded; it returns the part that is text to show."""

    def __init__(self, style: str) -> None:
        if style not in STYLES:
            raise ValueError(f"tool-call style must be one of {STYLES}, got {style!r}")
        self.style = style
        self.calls: list[ToolCall] = []
        self.in_call = False
        self.entered = False  # in_call was true at some point: the answer reached call syntax
        self._held = ""     # text not shown yet: a possible opener, or a call being decoded
        self._started = False  # any non-space text seen (a llama3 call is the whole answer)

    @property
    def holding(self) -> bool:
        """Whether text outside a call waits to be resolved (a possible opener)."""
        return not self.in_call and bool(self._held)

    def feed(self, piece: str) -> str:
        self._held += piece
        out = []
        while True:
            shown, done = self._step()
            out.append(shown)
            if done:
                return "".join(out)

    def _step(self) -> tuple[str, bool]:
        """Moves what it can out of _held: (text to show, whether to wait for more)."""
        held, style = self._held, self.style
        if self.in_call:
            if style == "llama3":
                return "", True  # a JSON answer: parsed whole at the end
            close = held.find(_CLOSE[style])
            if close < 0:
                return "", True
            body, self._held = held[:close], held[close + len(_CLOSE[style]):]
            calls = [_json_call(body.strip())] if style == "hermes" else _python_calls(body)
            self.in_call = False
            if not calls or None in calls:  # not a call after all: shown as the text it is
                return _OPEN[style] + body + _CLOSE[style], False
            self.calls.extend(c for c in calls if c is not None)
            return "", False
        if style == "llama3" and not self._started and held.strip():
            self._started = True
            if held.lstrip().startswith(("{", _OPEN["llama3"])):
                self.in_call = self.entered = True
                return "", True
        opener = _OPEN[style]
        at = held.find(opener)
        if at >= 0:
            self._held = held[at + len(opener):]
            self.in_call = self.entered = True
            return held[:at], False
        keep = next((k for k in range(min(len(opener) - 1, len(held)), 0, -1) if opener.startswith(held[-k:])), 0)
        self._held = held[len(held) - keep:]
        if held[:len(held) - keep].strip():
            self._started = True
        return held[:len(held) - keep], True

    def finish(self) -> str:
        """At the end of the answer: the text still held (a call never closed is shown as text)."""
        held, self._held = self._held, ""
        if self.in_call and self.style == "llama3":
            body = held.strip().removeprefix(_OPEN["llama3"])
            calls = [_json_call(part) for part in body.split(";") if part.strip()]
            if calls and None not in calls:
                self.calls.extend(c for c in calls if c is not None)
                return ""
            return held
        if self.in_call:
            return _OPEN[self.style] + held
        return held


# ------------------------------------------------------------------------------------------------
# Prompts: the request's tools and its tool history, in the form the model reads them.
#
# Canonical forms, whatever the API: a tool {"name", "description", "parameters"}; an assistant
# message may carry "tool_calls": [{"id", "name", "arguments": dict}]; a tool result is a message
# {"role": "tool", "tool_call_id", "name", "content"}.


def _native(metadata: dict[str, Any], style: str) -> bool:
    """Whether the file's chat template renders tools and calls itself."""
    template = str(metadata.get("tokenizer.chat_template") or "")
    return style != "gemma" and "tools" in template and "tool_calls" in template


def _call_text(style: str, name: str, arguments: dict[str, Any]) -> str:
    if style == "gemma":
        args = ", ".join(f"{k}={v!r}" for k, v in arguments.items())
        return f"```tool_code\n{name}({args})\n```"
    if style == "llama3":
        return json.dumps({"name": name, "parameters": arguments}, ensure_ascii=False)
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments}, ensure_ascii=False)}\n</tool_call>"


def _instructions(style: str, tools: list[dict[str, Any]]) -> str:
    listing = "\n".join(json.dumps(t, ensure_ascii=False) for t in tools)
    # the example calls a real tool (small models copy an example's names)
    params = list((tools[0].get("parameters") or {}).get("properties") or {})[:1]
    example = _call_text(style, tools[0]["name"], {p: "..." for p in params})
    return (f"You can call these functions:\n{listing}\n\nTo call a function, answer with exactly\n{example}\n"
            "(one per call) and nothing else; the results come back in the next message.")


def forced_prefix(style: str, choice: str | None) -> str:
    """The text the answer is made to start with: "any" forces some call, a name that function's."""
    if choice is None:
        return ""
    if style == "gemma":
        return "```tool_code\n" + ("" if choice == "any" else f"{choice}(")
    if style == "llama3":
        return '{"name": "' + ("" if choice == "any" else f'{choice}", "parameters": ')
    return "<tool_call>\n" + ("" if choice == "any" else '{"name": ' + json.dumps(choice) + ', "arguments": ')


def render(model: Any, messages: list[dict[str, Any]], tools: list[dict[str, Any]], style: str,
           force: str | None = None) -> str:
    """The prompt text of a conversation with tools (the template's own tool syntax where it has
    one; otherwise the tools described in the system message, in `style`'s syntax), ending with the
    prefix a forced call starts with."""
    from ds4.chat import apply_chat_template

    md = model if isinstance(model, dict) else _metadata_of(model)
    if _native(md, style):
        msgs = []
        for m in messages:
            m = dict(m)
            if m.get("tool_calls"):
                m["tool_calls"] = [{"id": c["id"], "type": "function",
                                    "function": {"name": c["name"], "arguments": c["arguments"]}} for c in m["tool_calls"]]
            msgs.append(m)
        specs = [{"type": "function", "function": t} for t in tools] or None
        return apply_chat_template(md, msgs, tools=specs) + forced_prefix(style, force)
    msgs = []
    for m in messages:
        if m["role"] == "tool":
            msgs.append({"role": "user", "content": f"Result of {m.get('name') or 'the call'}:\n{m['content']}"})
        elif m.get("tool_calls"):
            calls = "\n".join(_call_text(style, c["name"], c["arguments"]) for c in m["tool_calls"])
            msgs.append({"role": "assistant", "content": ((m.get("content") or "") + "\n" + calls).strip()})
        else:
            msgs.append({"role": m["role"], "content": m.get("content") or ""})
    if tools:
        info = _instructions(style, tools)
        if msgs and msgs[0]["role"] == "system":
            msgs[0] = {"role": "system", "content": msgs[0]["content"] + "\n\n" + info}
        else:
            msgs.insert(0, {"role": "system", "content": info})
    return apply_chat_template(md, msgs) + forced_prefix(style, force)


def _metadata_of(model: Any) -> dict[str, Any]:
    from ds4.gguf import inspect

    return inspect(model.path)["metadata"]
