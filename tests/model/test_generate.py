"""Session.generate: the C++ decode loop — continuation, seeds, stop strings, streaming, stats."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import ds4

PROMPT = "The capital of France is"


@pytest.fixture(scope="module")
def gemma(gemma_path: Path) -> ds4.Model:
    return ds4.Model(str(gemma_path), threads=2, n_ctx=256)


def test_greedy_equals_argmax_loop(gemma: ds4.Model) -> None:
    s = gemma.session()
    logits = s.eval(gemma.tokenize(PROMPT))
    expected = []
    for _ in range(12):
        expected.append(int(logits[-1].argmax()))
        logits = s.eval([expected[-1]])
    g = gemma.session().generate(PROMPT, max_tokens=12, stop_at_eog=False)
    assert g.tokens == expected
    assert g.stats["n_generated"] == 12 and g.stats["stop_reason"] == "max_tokens"
    assert g.stats["n_prompt"] == len(gemma.tokenize(PROMPT))
    assert g.stats["n_verify_passes"] == 11  # the first token comes from the prefill
    for key in ("n_drafted", "n_accepted", "accepted_per_position", "tokens_per_second"):
        assert key in g.stats


def test_generation_continues_the_session(gemma: ds4.Model) -> None:
    whole = gemma.session().generate(PROMPT, max_tokens=16, stop_at_eog=False)
    s = gemma.session()
    first = s.generate(PROMPT, max_tokens=7, stop_at_eog=False)
    # The last sampled token is held pending: the session counts it, the next call feeds it.
    assert s.n_past == len(gemma.tokenize(PROMPT)) + 7
    assert s.tokens[-7:] == first.tokens
    second = s.generate("", max_tokens=9, stop_at_eog=False)
    assert first.tokens + second.tokens == whole.tokens
    assert s.n_past == len(gemma.tokenize(PROMPT)) + 16


def test_continue_after_eval_and_after_truncate(gemma: ds4.Model) -> None:
    ids = gemma.tokenize(PROMPT)
    ref = gemma.session().generate(ids, max_tokens=5, stop_at_eog=False).tokens
    s = gemma.session()
    s.eval(ids)
    assert s.generate(max_tokens=5, stop_at_eog=False).tokens == ref
    s.truncate(len(ids))  # drops the generated tokens; the last logits are recomputed
    assert s.generate(max_tokens=5, stop_at_eog=False).tokens == ref


def test_same_seed_same_text(gemma: ds4.Model) -> None:
    def sample(seed: int) -> list[int]:
        return gemma.session().generate(PROMPT, max_tokens=24, temperature=1.0, seed=seed, stop_at_eog=False).tokens

    assert sample(7) == sample(7)
    assert sample(7) != sample(8)


def test_stop_string_cuts_text_and_streaming_never_shows_it(gemma: ds4.Model) -> None:
    full = gemma.session().generate(PROMPT, max_tokens=24, stop_at_eog=False).text
    assert "France" in full
    g = gemma.session().generate(PROMPT, max_tokens=24, stop="France", stream=True)
    pieces = list(g)
    assert g.stats["stop_reason"] == "stop" and g.stats["stop_string"] == "France"
    assert "".join(pieces) == g.text == full[: full.index("France")]
    assert all("Fr" not in p for p in pieces[-1:])
    g = gemma.session().generate(PROMPT, max_tokens=24, stop=["zzz", "France", full[full.index("France"):][:3]])
    assert g.stats["stop_string"] == "France"  # the first listed of two matching at the same place
    assert gemma.session().generate(PROMPT, max_tokens=4, stop_at_eog=False).stats["stop_string"] == ""


def test_streaming_pieces_concatenate_to_text(gemma: ds4.Model) -> None:
    g = gemma.session().generate("Write in Japanese: こんにちは、", max_tokens=20, stream=True, stop_at_eog=False)
    assert not g.done
    pieces = list(g)
    assert g.done and "".join(pieces) == g.text
    assert all("\ufffd" not in p for p in pieces)
    assert g.text == gemma.detokenize(g.tokens)


def test_end_of_generation_token(gemma: ds4.Model) -> None:
    eos = gemma._m.eos_id
    g = gemma.session().generate(PROMPT, max_tokens=10, logit_bias={eos: 100.0})
    assert g.tokens == [eos] and g.text == "" and g.stats["stop_reason"] == "eog"


def test_context_full_ends_generation(gemma_path: Path) -> None:
    m = ds4.Model(str(gemma_path), threads=2, n_ctx=12)
    g = m.session().generate(PROMPT, max_tokens=50, stop_at_eog=False)
    assert g.stats["stop_reason"] == "context"
    assert len(m.tokenize(PROMPT)) + len(g.tokens) == 13  # the last sampled token does not fit


def test_bad_arguments(gemma: ds4.Model) -> None:
    s = gemma.session()
    with pytest.raises(ValueError, match="nothing to continue from"):
        s.generate("", max_tokens=4)
    with pytest.raises(ValueError, match="temperature"):
        s.generate(PROMPT, temperature=-1)
    with pytest.raises(ValueError, match="top_p"):
        s.generate(PROMPT, top_p=0.0)
    with pytest.raises(ValueError, match="max_tokens"):
        s.generate(PROMPT, max_tokens=-1)
    with pytest.raises(ValueError, match="stop"):
        s.generate(PROMPT, stop=[""])
    with pytest.raises(TypeError, match="ds4.Spec"):
        s.generate(PROMPT, spec=object())
    with pytest.raises(ds4.ModelError, match="outside the vocabulary"):
        s.generate([gemma.n_vocab + 5])
    assert s.n_past == 0  # none of the failures touched the session
    assert np.isfinite(s.eval(gemma.tokenize(PROMPT))).all()


@pytest.mark.parametrize("extra", [0, 1])
def test_generation_that_fills_the_context_exactly(gemma_path: Path, extra: int) -> None:
    m = ds4.Model(str(gemma_path), threads=2, n_ctx=12)
    n_prompt = len(m.tokenize(PROMPT))
    s = m.session()
    g = s.generate(PROMPT, max_tokens=12 - n_prompt + extra, stop_at_eog=False)
    assert g.stats["stop_reason"] == "max_tokens" and len(g.tokens) == 12 - n_prompt + extra
    # The last token is held (pending) only when the context has room for it.
    assert s.n_past == 12
    assert s.tokens[n_prompt:] == g.tokens[: 12 - n_prompt]


def test_failed_prefill_can_be_retried_without_harm(gemma_path: Path) -> None:
    m = ds4.Model(str(gemma_path), threads=2, n_ctx=8)
    s = m.session()
    g = s.generate(PROMPT * 4, max_tokens=4, stream=True)
    for _ in range(2):
        with pytest.raises(ds4.ContextOverflowError):
            next(iter(g))
    assert s.n_past == 0 and not g.done


def test_progress_can_be_read_from_another_thread(gemma: ds4.Model) -> None:
    import threading

    g = gemma.session().generate(PROMPT, max_tokens=24, stream=True, stop_at_eog=False)
    seen: list[int] = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            seen.append(len(g.tokens))
            _ = g.stats, g.text

    t = threading.Thread(target=watch)
    t.start()
    text = "".join(g)
    stop.set()
    t.join()
    assert text == g.text and len(g.tokens) == 24
    assert seen == sorted(seen) and max(seen) <= 24
