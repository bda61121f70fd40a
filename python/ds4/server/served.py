"""What a request is checked and rendered against: the served model, its name, its metadata (read
once: chat templates render from it on every request) and the syntax it writes tool calls in."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ds4.chat import apply_chat_template
from ds4.model import Model
from ds4.server.errors import ApiError
from ds4.server.tools import render, style_of


@dataclass
class Served:
    model: Model
    name: str
    metadata: dict[str, Any] = field(default_factory=dict)
    tool_style: str = "hermes"

    @classmethod
    def of(cls, model: Model, name: str | None = None) -> Served:
        from ds4.gguf import inspect

        md = inspect(model.path)["metadata"]
        return cls(model, name or model.path.rsplit("/", 1)[-1].removesuffix(".gguf"), md, style_of(md))

    def prompt(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], force: str | None,
               prefill: str = "") -> list[int]:
        """The token ids of a conversation (in ds4.server.tools' canonical form) opening the
        assistant's turn, which starts with `prefill`."""
        if tools or any(m.get("tool_calls") or m["role"] == "tool" for m in messages):
            text = render(self.metadata, messages, tools, self.tool_style, force)
        else:
            text = apply_chat_template(self.metadata, messages, add_generation_prompt=True)
        return self.model.tokenize(text + prefill, add_special=False)

    def room(self, prompt: list[int], param: str) -> int:
        """Tokens the answer may take after `prompt`; a prompt that leaves none is a 400 on `param`."""
        room = self.model.n_ctx - len(prompt)
        if room < 1:
            raise ApiError(f"the prompt is {len(prompt)} tokens; this server's context is {self.model.n_ctx}",
                           param=param, code="context_length_exceeded")
        return room
