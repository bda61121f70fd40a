"""``ds4-server``'s command line: its flags reach the model it serves (uvicorn.run replaced by a
client of the app it would have served)."""

from __future__ import annotations

from typing import Any

import pytest
from huge_pages import anon_huge_kib, thp_available

from ds4.server import cli


def serve_once(monkeypatch: pytest.MonkeyPatch, argv: list[str]) -> tuple[dict[str, Any], int]:
    """(the reply to one completion, the growth of AnonHugePages in KiB) of `ds4-server argv`."""
    import uvicorn
    from starlette.testclient import TestClient

    got: dict[str, Any] = {}

    def run(app: Any, **_: Any) -> None:
        got["huge"] = anon_huge_kib() - before
        with TestClient(app) as client:
            r = client.post("/v1/completions", json={"prompt": "The capital of France is", "max_tokens": 4,
                                                     "temperature": 0})
            assert r.status_code == 200, r.text
            got["reply"] = r.json()

    monkeypatch.setattr(uvicorn, "run", run)
    before = anon_huge_kib()
    assert cli.main([*argv, "-t", "2", "-c", "256", "--parallel", "1"]) == 0
    return got["reply"], got["huge"]


def test_huge_pages_flag(monkeypatch: pytest.MonkeyPatch) -> None:
    plain, _ = serve_once(monkeypatch, [])
    huge, grown = serve_once(monkeypatch, ["--huge-pages"])
    if thp_available():
        assert grown >= 100_000  # most of the embedded Gemma's 178 MB packed head
    assert huge["choices"][0]["text"] == plain["choices"][0]["text"]
