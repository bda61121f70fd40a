"""Sessions (truncate, snapshot/restore, sharing a model, threads) and clear errors for bad
inputs and broken GGUF files, on a tiny random llama."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Callable

import gguf
import numpy as np
import pytest
import tiny

import ds4

SEQ = np.random.default_rng(3).integers(0, 320, size=48)


@pytest.fixture(scope="module")
def path() -> Path:
    return tiny.convert("llama", "f32")


@pytest.fixture(scope="module")
def model(path: Path) -> ds4.Model:
    return ds4.Model(str(path), threads=2)


def test_truncate_then_reeval(model: ds4.Model) -> None:
    s = model.session()
    full = s.eval(SEQ)
    s.truncate(30)
    assert s.n_past == 30
    assert np.array_equal(s.eval(SEQ[30:]), full[30:])
    # a different continuation after truncation equals a fresh session on that sequence
    alt = np.concatenate([SEQ[:20], SEQ[::-1][:10]])
    s.truncate(20)
    fresh = model.session().eval(alt)
    assert np.array_equal(s.eval(alt[20:]), fresh[20:])
    with pytest.raises(ValueError, match="n_past must be in"):
        s.truncate(31)
    with pytest.raises(ValueError, match="n_past must be in"):
        s.truncate(-1)


def test_snapshot_restore(model: ds4.Model) -> None:
    s = model.session()
    s.eval(SEQ[:30])
    snap = s.snapshot()
    assert snap.n_past == 30
    assert snap.nbytes == 30 * 4 * 2 * (2 * 16) * 2  # positions x layers x (K, V) x kv_dim x f16
    after = s.eval(SEQ[30:])
    s.truncate(5)
    s.restore(snap)
    assert s.n_past == 30
    assert np.array_equal(s.eval(SEQ[30:]), after)
    other = model.session()  # a snapshot moves between sessions of one model
    other.restore(snap)
    assert np.array_equal(other.eval(SEQ[30:]), after)


def test_snapshot_of_another_model_is_refused(model: ds4.Model, path: Path) -> None:
    snap = model.session().snapshot()
    with pytest.raises(ds4.ModelError, match="another model"):
        ds4.Model(str(path)).session().restore(snap)


def test_interleaved_sessions_share_a_model(model: ds4.Model) -> None:
    a_ids, b_ids = SEQ, SEQ[::-1].copy()
    a_ref, b_ref = model.session().eval(a_ids), model.session().eval(b_ids)
    a, b = model.session(), model.session()
    a_out, b_out = [], []
    for i in range(0, len(SEQ), 8):
        a_out.append(a.eval(a_ids[i : i + 8]))
        b_out.append(b.eval(b_ids[i : i + 8]))
    assert np.array_equal(np.concatenate(a_out), a_ref)
    assert np.array_equal(np.concatenate(b_out), b_ref)


def test_sessions_in_threads(model: ds4.Model) -> None:
    """eval releases the GIL; concurrent sessions of one model still give their own results."""
    seqs = [np.roll(SEQ, k) for k in range(4)]
    refs = [model.session().eval(q) for q in seqs]
    results: list[Any] = [None] * len(seqs)

    def run(k: int) -> None:
        s = model.session()
        results[k] = np.concatenate([s.eval(seqs[k][i : i + 5]) for i in range(0, len(SEQ), 5)])

    threads = [threading.Thread(target=run, args=(k,)) for k in range(len(seqs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for got, ref in zip(results, refs):
        assert np.array_equal(got, ref)


def test_context_overflow(path: Path) -> None:
    m = ds4.Model(str(path), n_ctx=40)
    assert m.n_ctx == 40
    s = m.session()
    s.eval(SEQ[:30])
    with pytest.raises(ds4.ContextOverflowError, match="n_ctx is 40"):
        s.eval(SEQ[30:])
    assert s.n_past == 30  # nothing was appended
    s.eval(SEQ[30:40])
    assert s.n_past == 40
    with pytest.raises(ValueError, match="context overflow"):
        s.eval(SEQ[:1])


def test_bad_tokens(model: ds4.Model) -> None:
    s = model.session()
    with pytest.raises(ds4.ModelError, match=r"token id 320 at index 1 is outside the vocabulary \[0, 320\)"):
        s.eval([1, 320])
    with pytest.raises(ValueError, match="token id -1"):
        s.eval(np.array([-1]))
    with pytest.raises(ValueError, match="token id"):
        s.eval([2**40])
    with pytest.raises(TypeError, match="integers"):
        s.eval(np.array([1.0, 2.0]))
    with pytest.raises(ValueError, match="1-D"):
        s.eval(np.zeros((2, 2), dtype=np.int32))
    assert s.n_past == 0
    assert s.eval([]).shape == (0, model.n_vocab)


def test_bad_options(path: Path) -> None:
    with pytest.raises(ValueError, match="kv_type"):
        ds4.Model(str(path), kv_type="q8")  # type: ignore[arg-type]


# --- broken files: a copy of the tiny llama GGUF with one thing changed ---------------------


def rewrite(src: Path, dst: Path, arch: str | None = None,
            tensor: Callable[[str, np.ndarray], np.ndarray | None] | None = None,
            drop_key: str | None = None, override: dict[str, Any] | None = None) -> Path:
    """Copy src to dst, renaming the architecture, dropping a metadata key, replacing the values
    of `override` (as uint64) and passing each tensor through `tensor` (None drops it)."""
    r = gguf.GGUFReader(src)
    old_arch = str(r.fields["general.architecture"].contents())
    new_arch = arch or old_arch
    w = gguf.GGUFWriter(dst, new_arch)
    for name, field in r.fields.items():
        if name.startswith("GGUF.") or name in ("general.architecture", drop_key):
            continue
        types = field.types
        sub = types[1] if types[0] == gguf.GGUFValueType.ARRAY else None
        if override and name in override:
            w.add_key_value(name, override[name], gguf.GGUFValueType.UINT64)
            continue
        w.add_key_value(name.replace(old_arch + ".", new_arch + ".", 1), field.contents(), types[0], sub_type=sub)
    for t in r.tensors:
        data = np.array(t.data)
        out = tensor(t.name, data) if tensor else data
        if out is not None:
            w.add_tensor(t.name, out)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return dst


def test_unknown_architecture(path: Path, tmp_path: Path) -> None:
    bad = rewrite(path, tmp_path / "mamba9.gguf", arch="mamba9")
    with pytest.raises(ds4.ModelError, match=r"architecture 'mamba9' is not supported \(supported: llama, qwen2"):
        ds4.Model(str(bad))


def test_missing_tensor(path: Path, tmp_path: Path) -> None:
    bad = rewrite(path, tmp_path / "missing.gguf", tensor=lambda n, a: None if n == "blk.2.ffn_up.weight" else a)
    with pytest.raises(ds4.ModelError, match=r"tensor 'blk.2.ffn_up.weight' is missing \(required by llama\)"):
        ds4.Model(str(bad))


def test_shape_mismatch(path: Path, tmp_path: Path) -> None:
    bad = rewrite(path, tmp_path / "shape.gguf", tensor=lambda n, a: a[:-16] if n == "blk.1.attn_q.weight" else a)
    with pytest.raises(ds4.ModelError, match=r"'blk.1.attn_q.weight' has shape \[64, 48\], expected \[64, 64\]"):
        ds4.Model(str(bad))


def test_copy_is_faithful(path: Path, tmp_path: Path) -> None:
    """rewrite() with no change gives a file that evaluates identically (guards the tests above)."""
    same = ds4.Model(str(rewrite(path, tmp_path / "same.gguf")))
    assert np.array_equal(same.session().eval(SEQ[:8]), ds4.Model(str(path)).session().eval(SEQ[:8]))


def test_missing_key(path: Path, tmp_path: Path) -> None:
    bad = rewrite(path, tmp_path / "nokey.gguf", drop_key="llama.block_count")
    with pytest.raises(ds4.ModelError, match="metadata key 'llama.block_count' is missing"):
        ds4.Model(str(bad))


@pytest.mark.parametrize("key, value, needle", [
    ("llama.attention.head_count_kv", 2**32, r"head_count_kv' must be in \[1, 1048576\], got 4294967296"),
    ("llama.attention.head_count", 2**32, r"head_count' must be in \[1, 1048576\]"),
    ("llama.block_count", 2**31 - 1, r"block_count' must be in \[1, 1048576\]"),
    ("llama.block_count", 100_000, r"block_count \(100000\) exceeds the \d+ tensors in the file"),
    ("llama.context_length", 2**40, r"context_length' must be in \[1, 1073741824\]"),
])
def test_hostile_hyperparameters(path: Path, tmp_path: Path, key: str, value: int, needle: str) -> None:
    """Sizes from metadata are bounded before they size an allocation or divide anything."""
    bad = rewrite(path, tmp_path / "hostile.gguf", override={key: value})
    with pytest.raises(ds4.ModelError, match=needle):
        ds4.Model(str(bad))


def test_tokenizer_larger_than_embedding(path: Path, tmp_path: Path) -> None:
    bad = rewrite(path, tmp_path / "small_embd.gguf",
                  tensor=lambda n, a: a[:-8] if n in ("token_embd.weight", "output.weight") else a)
    with pytest.raises(ds4.ModelError, match="the tokenizer has 320 tokens but the embedding only 312 rows"):
        ds4.Model(str(bad))
