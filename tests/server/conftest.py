"""One live server (the embedded Gemma, 4 batched slots) for the API tests of this folder."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import live  # noqa: E402

import ds4  # noqa: E402

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")


@pytest.fixture(scope="session")
def model() -> ds4.Model:
    return ds4.Model(threads=2, n_ctx=512)


@pytest.fixture(scope="session")
def server(model: ds4.Model) -> Iterator[tuple[str, Any]]:
    with live.serve(model, parallel=4, max_queue=8) as (url, srv):
        yield url, srv
