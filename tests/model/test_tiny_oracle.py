"""Every tiny random architecture (tiny.FAMILIES) against transformers fp32 eager, and the
batch invariance of the forward pass (DESIGN.md: the logits of a row do not depend on how
many rows are evaluated with it)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import tiny

import ds4

N_SEQ = 3
# Measured: max |ds4 - transformers| / max |logit| is 6e-7 .. 1.1e-6 for every family (f32 GGUF).
REL_TOL = 1e-4
# A reference top-2 gap below this is a tie for argmax purposes.
TIE = 1e-5


def tiny_arch(family: str) -> str:
    return {"gemma3_text": "gemma3", "qwen3_moe": "qwen3moe", "qwen3_next": "qwen3next", "qwen3_5_text": "qwen35",
            "qwen3_5_moe_text": "qwen35moe"}.get(family, family)


def sequences(vocab: int) -> list[np.ndarray]:
    rng = np.random.default_rng(7)
    seqs = [rng.integers(0, vocab, size=tiny.TEST_LEN) for _ in range(N_SEQ - 1)]
    seqs.append(np.tile(np.arange(1, 9), tiny.TEST_LEN // 8))  # repetitive: attention peaks
    return seqs


@pytest.fixture(scope="module", params=tiny.FAMILIES)
def family(request: pytest.FixtureRequest) -> dict[str, Any]:
    torch = pytest.importorskip("torch")
    fam = request.param
    hf = tiny.load_hf(fam)
    model = ds4.Model(str(tiny.convert(fam, "f32")), threads=2, kv_type="f32")
    refs = []
    for ids in sequences(model.n_vocab):
        with torch.no_grad():
            refs.append(hf(torch.tensor(ids[None, :])).logits[0].float().numpy())
    return {"name": fam, "model": model, "refs": refs}


def check_against_reference(fam: dict[str, Any], out: np.ndarray, ref: np.ndarray, how: str) -> None:
    ratio = float(np.abs(out - ref).max() / np.abs(ref).max())
    top2 = np.sort(ref, axis=1)[:, -2:]
    decided = top2[:, 1] - top2[:, 0] > TIE
    agree = out.argmax(1)[decided] == ref.argmax(1)[decided]
    print(f"{fam['name']} {how}: max|err|/max|logit| = {ratio:.2e}, argmax {agree.sum()}/{decided.sum()}")
    assert ratio <= REL_TOL
    assert agree.all()


def test_logits_match_transformers_whole(family: dict[str, Any]) -> None:
    m = family["model"]
    assert m.arch == tiny_arch(family["name"])
    for ids, ref in zip(sequences(m.n_vocab), family["refs"]):
        out = m.session().eval(ids)
        assert out.shape == ref.shape and out.dtype == np.float32
        check_against_reference(family, out, ref, "whole")


def test_logits_match_transformers_one_at_a_time(family: dict[str, Any]) -> None:
    m = family["model"]
    for ids, ref in zip(sequences(m.n_vocab), family["refs"]):
        s = m.session()
        out = np.concatenate([s.eval(ids[i : i + 1]) for i in range(len(ids))])
        check_against_reference(family, out, ref, "one token at a time")


@pytest.mark.parametrize("chunk", [1, 3, 7, 16])
def test_batch_invariance(family: dict[str, Any], chunk: int) -> None:
    m = family["model"]
    ids = sequences(m.n_vocab)[0]
    whole = m.session().eval(ids)
    s = m.session()
    parts = np.concatenate([s.eval(ids[i : i + chunk]) for i in range(0, len(ids), chunk)])
    assert np.array_equal(parts, whole)


def test_thread_count_invariance(family: dict[str, Any]) -> None:
    """Threads split output columns, never a reduction: 1 and 2 threads agree bit for bit."""
    ids = sequences(family["model"].n_vocab)[0]
    one = ds4.Model(str(tiny.convert(family["name"], "f32")), threads=1, kv_type="f32").session().eval(ids)
    assert np.array_equal(one, family["model"].session().eval(ids))


def test_kv_f16(family: dict[str, Any]) -> None:
    ids = sequences(family["model"].n_vocab)[0]
    m16 = ds4.Model(str(tiny.convert(family["name"], "f32")), threads=2, kv_type="f16")
    out16 = m16.session().eval(ids)
    out32 = family["model"].session().eval(ids)
    ratio = float(np.abs(out16 - out32).max() / np.abs(out32).max())
    print(f"{family['name']}: kv f16 vs f32 max|diff|/max|logit| = {ratio:.2e}")
    assert not np.array_equal(out16, out32)  # the f16 path really ran
    assert ratio < 1e-2


def test_batch_invariance_scalar_isa(family: dict[str, Any]) -> None:
    """With only the reference dots (scalar ISA) matmul takes its dequantise-a-tile path; that
    path must be batch-invariant too, and close to the SIMD-dot path."""
    from ds4 import _core

    m = family["model"]
    ids = sequences(m.n_vocab)[0]
    simd = m.session().eval(ids)
    prev = _core.simd_active()
    _core.set_simd("scalar")
    try:
        whole = m.session().eval(ids)
        s = m.session()
        parts = np.concatenate([s.eval(ids[i : i + 3]) for i in range(0, len(ids), 3)])
    finally:
        _core.set_simd(prev)
    assert np.array_equal(parts, whole)
    assert float(np.abs(whole - simd).max() / np.abs(simd).max()) <= REL_TOL


def test_long_context_attention_chunks(family: dict[str, Any]) -> None:
    """Past 128 keys attention runs in chunks merged in order: whole (a unit per row and KV group,
    chunks in sequence) and token by token (a unit per chunk, spread over the threads) must agree
    bit for bit, on 1 and 2 threads, and stay with transformers."""
    torch = pytest.importorskip("torch")
    n = 300
    path = str(tiny.convert(family["name"], "f32"))
    m = ds4.Model(path, threads=2, n_ctx=n, kv_type="f32")
    ids = np.random.default_rng(9).integers(0, m.n_vocab, size=n)
    with torch.no_grad():
        ref = tiny.load_hf(family["name"])(torch.tensor(ids[None, :])).logits[0].float().numpy()
    whole = m.session().eval(ids)
    check_against_reference(family, whole, ref, f"whole, {n} tokens")
    s = m.session()
    s.eval(ids[:200])
    tail = np.concatenate([s.eval(ids[i : i + 1]) for i in range(200, n)])
    assert np.array_equal(tail, whole[200:])
    one = ds4.Model(path, threads=1, n_ctx=n, kv_type="f32").session()
    one.eval(ids[:250])
    assert np.array_equal(np.concatenate([one.eval(ids[i : i + 1]) for i in range(250, n)]), whole[250:])
