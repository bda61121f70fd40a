"""Many sequences in one forward pass (csrc/model/engine.h, request.h): each session gets
exactly what it gets alone, greedy and sampled with a seed, whatever shares its passes."""

from __future__ import annotations

import numpy as np
import pytest
import tiny

import ds4

PROMPTS = [
    "The capital of France is",
    "def fibonacci(n):",
    "Once upon a time, in a land far away, there lived a",
    "1, 2, 3, 4,",
    "import numpy as np\n\nx = np.",
    "The quick brown fox",
    "Q: What is the boiling point of water?\nA:",
    "Dear Sir or Madam, I am writing to",
]


@pytest.fixture(scope="module")
def gemma(gemma_path) -> ds4.Model:
    return ds4.Model(gemma_path, threads=2, n_ctx=512)


@pytest.mark.parametrize("sampling", [{}, {"temperature": 0.8, "top_p": 0.95, "seed": 7},
                                      {"temperature": 0.8, "seed": 7, "repeat_penalty": 1.2},
                                      {"temperature": 0.8, "seed": 7, "top_k": 40, "top_p": 0.9}])
def test_eight_sessions_together_equal_each_alone(gemma: ds4.Model, sampling: dict) -> None:
    lengths = [24, 9, 31, 17, 5, 28, 12, 20]  # different ends: sessions leave while others decode
    b = gemma.batch()
    together = [b.add(p, max_tokens=n, stop_at_eog=False, **sampling) for p, n in zip(PROMPTS, lengths)]
    b.run()
    for p, n, g in zip(PROMPTS, lengths, together):
        alone = gemma.session().generate(p, max_tokens=n, stop_at_eog=False, **sampling)
        assert g.tokens == alone.tokens and g.text == alone.text
        assert g.stats["n_generated"] == n and g.stats["stop_reason"] == "max_tokens"
    # every step shares one pass: no more passes than the longest generation needs
    assert b.passes <= max(lengths) + len(PROMPTS)


def test_generate_batch_and_joining_between_steps(gemma: ds4.Model) -> None:
    gens = gemma.generate_batch(PROMPTS[:3], max_tokens=12)
    for p, g in zip(PROMPTS[:3], gens):
        assert g.tokens == gemma.session().generate(p, max_tokens=12).tokens
    b = gemma.batch()
    pieces: list[str] = []
    first = b.add(PROMPTS[0], max_tokens=16, on_text=pieces.append)
    for _ in range(5):
        b.step()
    late = b.add(PROMPTS[1], max_tokens=8)  # joins a batch already decoding
    b.run()
    assert "".join(pieces) == first.text
    assert first.tokens == gemma.session().generate(PROMPTS[0], max_tokens=16).tokens
    assert late.tokens == gemma.session().generate(PROMPTS[1], max_tokens=8).tokens


def test_generations_nobody_holds_and_cancelled_ones_leave_safely(gemma: ds4.Model) -> None:
    # The engine keeps a generation until the step after it ended: the batch keeps it alive till
    # then, so a caller that drops it (a server once its request is answered) frees nothing in use
    # and a new generation can take its place.
    b = gemma.batch()
    for i in range(12):
        b.add(PROMPTS[i % len(PROMPTS)], max_tokens=1 + i % 3)
        b.step()
    b.run()
    long = b.add(PROMPTS[0], max_tokens=50)
    other = b.add(PROMPTS[1], max_tokens=6, stop_at_eog=False)
    b.step()
    long.cancel()
    b.run()
    assert long.stats["stop_reason"] == "cancelled" and len(long.tokens) < 50
    assert other.tokens == gemma.session().generate(PROMPTS[1], max_tokens=6, stop_at_eog=False).tokens


def test_batched_generation_continues_its_session(gemma: ds4.Model) -> None:
    s = gemma.session()
    s.generate(PROMPTS[2], max_tokens=6)
    ref = gemma.session()
    ref.generate(PROMPTS[2], max_tokens=6)
    b = gemma.batch()
    g = b.add(" and then", session=s, max_tokens=10)
    b.run()
    assert g.tokens == ref.generate(" and then", max_tokens=10).tokens
    assert s.tokens == ref.tokens


def test_refused_options(gemma: ds4.Model) -> None:
    b = gemma.batch()
    with pytest.raises(ValueError, match="spec"):
        b.add("x", spec=ds4.Spec())
    with pytest.raises(TypeError, match="stream"):
        b.add("x", stream=True)
    g = b.add("x", max_tokens=2)
    with pytest.raises(Exception, match="engine"):
        list(g)


@pytest.mark.parametrize("family,outtype", [("gemma3_text", "f32"), ("qwen3_moe", "f32"), ("qwen3_moe", "q8_0"),
                                            ("qwen3_next", "f32"), ("qwen3_5_moe_text", "q8_0")])
def test_prefill_decode_and_verify_rows_in_one_pass(family: str, outtype: str) -> None:
    """Also with routed experts, whose rows of every sequence are grouped by expert in one pass,
    and with recurrent layers, each sequence's rows running through its own state."""
    m = ds4.Model(str(tiny.convert(family, outtype)), threads=2, kv_type="f32")
    rng = np.random.default_rng(3)
    a_ids, b_ids, c_ids = (rng.integers(3, m.n_vocab, size=n) for n in (30, 21, 26))
    a, b, c = m.session(), m.session(), m.session()
    b.eval(b_ids[:20])
    c.eval(c_ids[:20])
    # a: a prefill chunk of 12; b: one decode row; c: a verify block of 6
    out = m._m.eval_together([a._s, b._s, c._s], [a_ids[:12], b_ids[20:21], c_ids[20:26]])
    solo = []
    for ids, start, end in ((a_ids, 0, 12), (b_ids, 20, 21), (c_ids, 20, 26)):
        s = m.session()
        if start:
            s.eval(ids[:start])
        solo.append(s.eval(ids[start:end]))
    for got, ref in zip(out, solo):
        np.testing.assert_array_equal(got, ref)
    assert (a.n_past, b.n_past, c.n_past) == (12, 21, 26)
    # and they go on as if alone
    np.testing.assert_array_equal(a.eval(a_ids[12:30]), m.session().eval(a_ids[:30])[12:])


@pytest.mark.parametrize("sampling", [{}, {"temperature": 0.8, "seed": 4}])
def test_hybrid_sessions_together_equal_each_alone(sampling: dict) -> None:
    m = ds4.Model(str(tiny.convert("qwen3_next", "q8_0")), threads=2)
    rng = np.random.default_rng(8)
    prompts = [[int(t) for t in rng.integers(3, 320, size=n)] for n in (5, 17, 9, 30)]
    lengths = [12, 7, 20, 3]
    b = m.batch()
    together = [b.add(p, max_tokens=n, stop_at_eog=False, **sampling) for p, n in zip(prompts, lengths)]
    b.run()
    for p, n, g in zip(prompts, lengths, together):
        assert g.tokens == m.session().generate(p, max_tokens=n, stop_at_eog=False, **sampling).tokens


def test_one_state_twice_in_a_pass_is_refused() -> None:
    m = ds4.Model(str(tiny.convert("llama", "f32")), threads=2)
    s = m.session()
    with pytest.raises(ds4.ModelError, match="repeats sequence 0's state"):
        m._m.eval_together([s._s, s._s], [np.array([5]), np.array([6])])
