"""The type stubs of the native module (python/ds4/_core.pyi) declare everything it exports:
every public function and class, and every public method and attribute of each class."""

from __future__ import annotations

import ast
from pathlib import Path

from ds4 import _core

STUBS = Path(__file__).resolve().parents[1] / "python" / "ds4" / "_core.pyi"


def declared() -> dict[str, set[str] | None]:
    out: dict[str, set[str] | None] = {}
    for node in ast.parse(STUBS.read_text()).body:
        if isinstance(node, ast.FunctionDef):
            out[node.name] = None
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):  # a constant
            out[node.target.id] = None
        elif isinstance(node, ast.ClassDef):
            names = {m.name for m in node.body if isinstance(m, ast.FunctionDef)}
            names |= {m.target.id for m in node.body if isinstance(m, ast.AnnAssign) and isinstance(m.target, ast.Name)}
            out[node.name] = names
    return out


def public(cls: type, member: str) -> bool:
    if member == "__init__":  # a constructor of its own (not the placeholder of a class made only in C++)
        return not (cls.__init__.__doc__ or "").startswith("Initialize self")
    return not member.startswith("_")


def test_stubs_cover_the_module() -> None:
    stubs = declared()
    missing = []
    for name in dir(_core):
        if name.startswith("_"):
            continue
        if name not in stubs:
            missing.append(name)
            continue
        obj = getattr(_core, name)
        members = stubs[name]
        if isinstance(obj, type) and members is not None and not issubclass(obj, BaseException):
            missing += [f"{name}.{m}" for m in vars(obj) if public(obj, m) and m not in members]
    assert not missing, f"not declared in {STUBS.name}: {missing}"
