"""Errors the server answers with, in the shape of the API the request came through."""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    """A request the server refuses: HTTP ``status``, OpenAI's error ``type`` and the ``param`` at fault."""

    def __init__(self, message: str, status: int = 400, type: str = "invalid_request_error", param: str | None = None,
                 code: str | None = None) -> None:
        super().__init__(message)
        self.message, self.status, self.type, self.param, self.code = message, status, type, param, code

    def openai(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}

    def anthropic(self) -> dict[str, Any]:
        kind = {413: "request_too_large", 500: "api_error"}.get(self.status, self.type)
        return {"type": "error", "error": {"type": kind, "message": self.message}}


def invalid(param: str, message: str) -> ApiError:
    return ApiError(f"{param}: {message}", param=param)
