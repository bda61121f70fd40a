"""Checks of a request's JSON fields shared by the APIs: a wrong type or a value out of range is a
400 naming the field."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ds4.server.errors import ApiError, invalid


def body_object(body: Any, allowed: set[str], unknown: str) -> dict[str, Any]:
    """The request body as a JSON object whose keys the API knows (`unknown` formats the error
    for one it does not, with ``{key}``)."""
    if not isinstance(body, dict):
        raise ApiError("the request body must be a JSON object")
    for key in body:
        if key not in allowed:
            raise ApiError(unknown.format(key=key), param=key)
    return body


def number(body: Mapping[str, Any], key: str, lo: float, hi: float, default: float) -> float:
    v = body.get(key)
    if v is None:
        return default
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise invalid(key, f"expected a number, got {type(v).__name__}")
    if not lo <= v <= hi:
        raise invalid(key, f"{v} is not in [{lo}, {hi}]")
    return float(v)


def integer(body: Mapping[str, Any], key: str, lo: int, hi: int | None = None) -> int | None:
    v = body.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int):
        raise invalid(key, f"expected an integer, got {type(v).__name__}")
    if v < lo or (hi is not None and v > hi):
        raise invalid(key, f"{v} is not in [{lo}, {hi if hi is not None else 'inf'}]")
    return v


def flag(body: Mapping[str, Any], key: str) -> bool:
    v = body.get(key, False)
    if v is None:
        return False
    if not isinstance(v, bool):
        raise invalid(key, f"expected a boolean, got {type(v).__name__}")
    return v


def listed(body: Mapping[str, Any], key: str) -> list[Any]:
    """The list at `key` (empty when absent)."""
    v = body.get(key) or []
    if not isinstance(v, list):
        raise invalid(key, f"expected a list, got {type(v).__name__}")
    return v
