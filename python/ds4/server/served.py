"""What a request is checked and rendered against: the served model, its name, its metadata (read
once: chat templates render from it on every request) and the syntax it writes tool calls in."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ds4.model import Model
from ds4.server.tools import style_of


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
