"""Session states in files (ds4.state_file, Session.save / load; the C++ side in csrc/state/serial.h
and Session::save / load): a saved and loaded session continues bit for bit as the one saved, for
every family (KV slots, and the recurrent slots of the hybrids); files that are not states, are cut
short or corrupt, or belong to another model, KV type or engine format are refused with
StateFileError and leave the session unchanged."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tiny

import ds4
from ds4 import _core, state_file


@pytest.fixture(scope="module", params=tiny.FAMILIES)
def fam(request: pytest.FixtureRequest) -> dict[str, Any]:
    model = ds4.Model(str(tiny.convert(request.param, "f32")), threads=2)
    ids = np.random.default_rng(5).integers(3, model.n_vocab, size=40)
    return {"name": request.param, "model": model, "ids": ids}


def test_saved_state_continues_bit_for_bit(fam: dict[str, Any], tmp_path: Path) -> None:
    m, ids = fam["model"], fam["ids"]
    s = m.session()
    s.eval(ids[:30])
    size = s.save(tmp_path / "a.ds4kv")
    assert size == (tmp_path / "a.ds4kv").stat().st_size
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".tmp-")]
    loaded = m.session()
    loaded.load(tmp_path / "a.ds4kv")
    assert loaded.n_past == 30 and loaded.tokens == [int(t) for t in ids[:30]]
    np.testing.assert_array_equal(loaded.eval(ids[30:]), s.eval(ids[30:]))


def test_a_pending_token_is_kept(tmp_path: Path) -> None:
    m = ds4.Model(str(tiny.convert("llama", "f32")), threads=2)
    s = m.session()
    g = s.generate([5, 6, 7, 8], max_tokens=4, stop_at_eog=False)
    s.save(tmp_path / "p.ds4kv")
    loaded = m.session()
    loaded.load(tmp_path / "p.ds4kv")
    assert loaded.tokens == s.tokens == [5, 6, 7, 8] + g.tokens
    np.testing.assert_array_equal(loaded.eval([9, 10]), s.eval([9, 10]))


def _rewrite(path: Path, header: dict[str, Any] | None = None, data: bytes | None = None) -> None:
    """The file with its header fields and/or state bytes replaced (the checksum kept unless given)."""
    h = state_file.read_header(path)
    raw = path.read_bytes()
    head: dict[str, Any] = json.loads(raw[12:h.offset])
    body = raw[h.offset:] if data is None else data
    head.update(header or {})
    enc = json.dumps(head).encode()
    path.write_bytes(struct.pack("<8sI", state_file.MAGIC, len(enc)) + enc + body)


@pytest.fixture(scope="module")
def llama() -> ds4.Model:
    return ds4.Model(str(tiny.convert("llama", "f32")), threads=2)


@pytest.fixture()
def saved(llama: ds4.Model, tmp_path: Path) -> Path:
    s = llama.session()
    s.eval(np.arange(3, 23))
    s.save(tmp_path / "s.ds4kv")
    return tmp_path / "s.ds4kv"


def _refused(model: ds4.Model, path: Path, match: str) -> None:
    s = model.session()
    s.eval([3, 4, 5])
    with pytest.raises(ds4.StateFileError, match=match):
        s.load(path)
    assert s.tokens == [3, 4, 5]  # unchanged


def test_not_a_state_file(llama: ds4.Model, tmp_path: Path) -> None:
    (tmp_path / "x").write_bytes(b"GGUF" + bytes(100))
    _refused(llama, tmp_path / "x", "not a ds4 state file")
    (tmp_path / "y").write_bytes(b"")
    _refused(llama, tmp_path / "y", "not a ds4 state file")


def test_a_corrupt_or_cut_file_is_refused(llama: ds4.Model, saved: Path) -> None:
    raw = bytearray(saved.read_bytes())
    raw[-10] ^= 0x40
    saved.write_bytes(bytes(raw))
    _refused(llama, saved, "checksum does not match")
    saved.write_bytes(bytes(raw[:-100]))
    _refused(llama, saved, "bytes of state where the header says")
    saved.write_bytes(bytes(raw[:30]))
    _refused(llama, saved, "corrupt header")


def test_state_bytes_cut_short_with_a_matching_checksum_are_refused(llama: ds4.Model, saved: Path) -> None:
    """What the checksum cannot catch (a writer bug) the engine's reader does, by offset."""
    import hashlib

    h = state_file.read_header(saved)
    body = saved.read_bytes()[h.offset:-64]
    _rewrite(saved, {"nbytes": len(body), "blake2b": hashlib.blake2b(body).hexdigest()}, body)
    _refused(llama, saved, "state data is truncated: a KV slot's V rows")


def test_another_model_kv_type_or_format_is_refused(llama: ds4.Model, saved: Path, tmp_path: Path) -> None:
    _refused(ds4.Model(str(tiny.convert("qwen2", "f32")), threads=2), saved, "a state of another model")
    _refused(ds4.Model(str(tiny.convert("llama", "f32")), threads=2, kv_type="f32"), saved, "another KV type")
    _rewrite(saved, {"state_format": _core.STATE_FORMAT + 1})
    _refused(llama, saved, f"state format {_core.STATE_FORMAT + 1}, this engine reads {_core.STATE_FORMAT}")


def test_the_engine_refuses_bytes_of_another_shape(llama: ds4.Model) -> None:
    s = llama.session()
    s.eval([3, 4, 5])
    data = s.snapshot().to_bytes()
    other = ds4.Model(str(tiny.convert("qwen3_next", "f32")), threads=2).session()  # recurrent layers
    with pytest.raises(ds4.ModelError, match="load state: state data"):
        other._s.snapshot_from_bytes(data)
    with pytest.raises(ds4.ModelError, match="bad magic"):
        s._s.snapshot_from_bytes(b"x" * len(data))
    with pytest.raises(ds4.ModelError, match="bytes follow the state data"):
        s._s.snapshot_from_bytes(data + b"\0")
    with pytest.raises(TypeError):
        s._s.snapshot_from_bytes("text")  # type: ignore[arg-type]
