"""Session.eval_argmax: the greedy token of every evaluated position, fused into the output
projection, equal to the argmax (lowest id on ties) of the very logits Session.eval returns, on
every matmul path (1..16 rows use dot_rows, more the tiled GEMM) and with Gemma's final soft-cap."""

from __future__ import annotations

import numpy as np
import pytest
import tiny

import ds4

SEQ = np.random.default_rng(5).integers(0, 320, size=40)


def _argmax(logits: np.ndarray) -> np.ndarray:
    return np.argmax(logits, axis=-1).astype(np.int32)  # numpy also returns the first maximum


@pytest.mark.parametrize("outtype", ["f32", "q8_0"])
@pytest.mark.parametrize("family", tiny.FAMILIES)
def test_matches_eval(family: str, outtype: str) -> None:
    # precision="f32": a 40-row block then takes the float path, so every chunking agrees bit for bit
    model = ds4.Model(str(tiny.convert(family, outtype)), threads=2, precision="f32")
    ref = model.session().eval(SEQ)
    for chunk in (1, 3, 16, 40):
        s = model.session()
        got = np.concatenate([s.eval_argmax(SEQ[i:i + chunk]) for i in range(0, len(SEQ), chunk)])
        assert np.array_equal(got, _argmax(ref)), f"chunk {chunk}"
        assert s.n_past == len(SEQ)
        # the cache it wrote is the one eval writes: the next logits agree bit for bit
        assert np.array_equal(s.eval(SEQ[:5]), model.session().eval(np.concatenate([SEQ, SEQ[:5]]))[-5:])


@pytest.mark.parametrize("family", tiny.FAMILIES)
def test_matches_eval_int16_prefill(family: str) -> None:
    # The default int16 path of 40-row blocks: the argmax of the very logits eval returns.
    model = ds4.Model(str(tiny.convert(family, "q8_0")), threads=2)
    assert np.array_equal(model.session().eval_argmax(SEQ), _argmax(model.session().eval(SEQ)))


def test_pending_token_comes_first() -> None:
    model = ds4.Model(str(tiny.convert("llama", "q8_0")), threads=2)
    s = model.session()
    g = s.generate(list(SEQ[:10]), max_tokens=3, stop_at_eog=False)
    g.text
    held = s.tokens
    ids = s.eval_argmax(SEQ[10:14])
    assert len(ids) == 5  # the pending last sampled token, then the four fed
    ref = model.session().eval(np.asarray(held + list(SEQ[10:14])))
    assert np.array_equal(ids, _argmax(ref[-5:]))
    # eval_argmax keeps no logits: greedy generation goes on by re-running the last position
    nxt = s.generate([], max_tokens=1, stop_at_eog=False)
    nxt.text
    assert nxt.tokens == [int(ids[-1])]


def test_errors_leave_the_session_unchanged() -> None:
    model = ds4.Model(str(tiny.convert("llama", "f32")), threads=1, n_ctx=32)
    s = model.session()
    s.eval_argmax(SEQ[:20])
    with pytest.raises(ValueError, match="outside the vocabulary"):
        s.eval_argmax([1, 10**6])
    with pytest.raises(ds4.ContextOverflowError):
        s.eval_argmax(SEQ[:20])
    assert s.n_past == 20
    assert len(s.eval_argmax([])) == 0


def test_real_gemma_verify_blocks(gemma_path) -> None:
    model = ds4.Model(str(gemma_path), threads=2)
    prompt = model.tokenize("The capital of France is Paris. The capital of Germany is")
    s = model.session()
    s.eval(prompt)
    block = model.tokenize(" Berlin, and the capital of Italy is Rome, and Spain has Madrid.", add_special=False)[:16]
    ref = _argmax(s.eval(block))
    for k in (1, 2, 4, 8, 16):
        s.truncate(len(prompt))
        assert np.array_equal(s.eval_argmax(block[:k]), ref[:k]), f"k={k}"
