from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import models  # noqa: E402


@pytest.fixture(scope="session")
def gemma_path() -> Path:
    return models.gemma3_270m()


@pytest.fixture(scope="session")
def smollm_path() -> Path:
    return models.smollm2_135m()


@pytest.fixture(scope="session")
def qwen05_path() -> Path:
    return models.qwen25_coder_05b()
