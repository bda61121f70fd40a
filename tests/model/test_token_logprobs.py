"""Token log-probabilities (``generate(..., logprobs=N)``, csrc/sample/logprobs.h): each token's
figure is the log-softmax of the raw logits row it was drawn from, whatever the sampler and
however the token was committed (plain step, fused-argmax greedy turned off, accepted draft,
bonus token, batched step), and asking for them never changes the tokens."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

import ds4

PROMPT = "The capital of France is"
# n-gram drafters find long right drafts in repeated text.
REPEAT = "red green blue yellow, red green blue yellow, red green blue yellow, red green blue yellow, red"
N = 24


@pytest.fixture(scope="module")
def gemma(gemma_path: Path) -> ds4.Model:
    return ds4.Model(str(gemma_path), threads=2, n_ctx=256)


def log_softmax_rows(model: ds4.Model, prompt: str, tokens: list[int]) -> npt.NDArray[np.float64]:
    """[i]: numpy's log-softmax (float64) of the row that tokens[i] was drawn from, by Session.eval."""
    ids = model.tokenize(prompt)
    rows = model.session().eval(ids + tokens[:-1])[len(ids) - 1:].astype(np.float64)
    rows -= rows.max(axis=1, keepdims=True)
    return rows - np.log(np.exp(rows).sum(axis=1, keepdims=True))


def check(model: ds4.Model, prompt: str, g: ds4.Generation, n_top: int) -> float:
    """Asserts g's logprobs are numpy's of the eval rows; returns the largest difference."""
    lps = g.logprobs
    assert lps is not None and len(lps) == len(g.tokens)
    ref = log_softmax_rows(model, prompt, g.tokens)
    worst = 0.0
    for i, (lp, tok) in enumerate(zip(lps, g.tokens)):
        assert lp.token == tok
        worst = max(worst, abs(lp.logprob - ref[i, tok]))
        assert len(lp.top) == n_top
        ids = [t for t, _ in lp.top]
        # the best n_top ids by (logprob descending, id ascending)
        assert ids == np.lexsort((np.arange(ref.shape[1]), -ref[i]))[:n_top].tolist()
        vals = [v for _, v in lp.top]
        assert vals == sorted(vals, reverse=True)
        worst = max([worst] + [abs(v - ref[i, t]) for t, v in lp.top])
    assert worst < 1e-4
    return worst


@pytest.mark.parametrize("n_top", [0, 1, 5, 20])
def test_greedy_logprobs_are_the_log_softmax_of_the_rows(gemma: ds4.Model, n_top: int) -> None:
    plain = gemma.session().generate(PROMPT, max_tokens=N, stop_at_eog=False)
    g = gemma.session().generate(PROMPT, max_tokens=N, stop_at_eog=False, logprobs=n_top)
    assert g.tokens == plain.tokens and g.text == plain.text  # the fused argmax and the rows agree
    assert plain.logprobs is None
    check(gemma, PROMPT, g, n_top)
    for lp in g.logprobs or []:
        assert lp.logprob <= 0.0
        if n_top:
            assert lp.top[0] == (lp.token, lp.logprob)  # greedy: the chosen token is the top one


def test_sampled_logprobs_are_raw_whatever_the_sampler(gemma: ds4.Model) -> None:
    # Bias, penalties, filters and temperature change which token is drawn, never its figure.
    opts = dict(temperature=1.3, top_k=40, top_p=0.9, repeat_penalty=1.3, presence_penalty=0.5,
                logit_bias={236761: -5.0}, seed=11)
    g = gemma.session().generate(PROMPT, max_tokens=N, stop_at_eog=False, logprobs=3, **opts)
    check(gemma, PROMPT, g, 3)
    same = gemma.session().generate(PROMPT, max_tokens=N, stop_at_eog=False, **opts)
    assert g.tokens == same.tokens  # the same draws with logprobs off


@pytest.mark.parametrize("types", [["ngram-simple"], ["ngram-mod"], ["ngram-mod", "ngram-simple"]])
def test_speculative_greedy_same_tokens_and_logprobs(gemma: ds4.Model, types: list[str]) -> None:
    plain = gemma.session().generate(REPEAT, max_tokens=N, stop_at_eog=False)
    solo = gemma.session().generate(REPEAT, max_tokens=N, stop_at_eog=False, logprobs=4)
    spec = ds4.Spec(types=types, n_max=6)
    g = gemma.session().generate(REPEAT, max_tokens=N, stop_at_eog=False, logprobs=4, spec=spec)
    assert g.stats["n_accepted"] > 0  # accepted drafts took their figures from verify rows
    assert g.tokens == solo.tokens == plain.tokens
    assert gemma.session().generate(REPEAT, max_tokens=N, stop_at_eog=False, spec=spec).tokens == plain.tokens
    check(gemma, REPEAT, g, 4)
    assert solo.logprobs is not None and g.logprobs is not None
    for a, b in zip(solo.logprobs, g.logprobs):  # batch-invariant rows: the same figures
        assert a.token == b.token and a.logprob == pytest.approx(b.logprob, abs=1e-6)
        assert [t for t, _ in a.top] == [t for t, _ in b.top]


def test_exact_speculative_sampling(gemma: ds4.Model) -> None:
    # Rejection sampling: accepted drafts, residual draws and bonus tokens all scored from their rows.
    spec = ds4.Spec(types=["ngram-simple"], n_max=6, sampling="exact")
    g = gemma.session().generate(REPEAT, max_tokens=N, stop_at_eog=False, temperature=0.7, seed=3, logprobs=2,
                                 spec=spec)
    assert g.stats["n_drafted"] > 0
    check(gemma, REPEAT, g, 2)


def test_batched_equals_single(gemma: ds4.Model) -> None:
    prompts = [PROMPT, REPEAT, "def fibonacci(n):"]
    for sampling in ({}, {"temperature": 0.8, "seed": 5}):
        together = gemma.generate_batch(prompts, max_tokens=12, stop_at_eog=False, logprobs=3, **sampling)
        for p, g in zip(prompts, together):
            alone = gemma.session().generate(p, max_tokens=12, stop_at_eog=False, logprobs=3, **sampling)
            assert g.tokens == alone.tokens
            assert g.logprobs is not None and alone.logprobs is not None
            for a, b in zip(g.logprobs, alone.logprobs):
                assert a.token == b.token and a.logprob == pytest.approx(b.logprob, abs=1e-6)
                assert [t for t, _ in a.top] == [t for t, _ in b.top]
    plain = gemma.generate_batch(prompts, max_tokens=12, stop_at_eog=False)
    assert [g.tokens for g in plain] == [g.tokens for g in gemma.generate_batch(prompts, max_tokens=12,
                                                                                 stop_at_eog=False, logprobs=0)]


def test_streaming_progress_and_sampling_switch(gemma: ds4.Model) -> None:
    g = gemma.session().generate(REPEAT, max_tokens=N, stop_at_eog=False, temperature=0.9, seed=2, logprobs=1,
                                 stream=True, spec=ds4.Spec(types=["ngram-simple"]))
    seen: list[ds4.TokenLogprob] = []
    for i, _ in enumerate(g):
        new = g.logprobs_from(len(seen))
        assert new is not None
        seen += new
        assert len(seen) == len(g.tokens)
        if i == 3:
            g.set_sampling(temperature=0.0)  # rewinds accepted drafts: their figures go with them
    assert seen == g.logprobs
    check(gemma, REPEAT, g, 1)


def test_continuing_a_session(gemma: ds4.Model) -> None:
    s = gemma.session()
    s.eval(gemma.tokenize(PROMPT))
    g = s.generate(max_tokens=6, stop_at_eog=False, logprobs=2)  # the first row is the session's last
    check(gemma, PROMPT, g, 2)


@pytest.mark.parametrize("bad", [-1, 21])
def test_out_of_range_is_a_value_error(gemma: ds4.Model, bad: int) -> None:
    with pytest.raises(ValueError, match="logprobs"):
        gemma.session().generate(PROMPT, max_tokens=2, logprobs=bad)
    with pytest.raises(ValueError, match="logprobs"):
        gemma.generate_batch([PROMPT], max_tokens=2, logprobs=bad)


def test_wrong_type_is_a_type_error(gemma: ds4.Model) -> None:
    for bad in (True, 2.0, "3"):
        with pytest.raises(TypeError, match="logprobs"):
            gemma.session().generate(PROMPT, max_tokens=2, logprobs=bad)  # type: ignore[arg-type]


def test_core_checks_the_range_too(gemma: ds4.Model) -> None:
    opts = ds4._core.GenerateOptions()
    opts.top_logprobs = 21
    with pytest.raises(ValueError, match="top_logprobs"):
        ds4._core.Generator(gemma.session()._s, gemma._m, np.asarray(gemma.tokenize(PROMPT), dtype=np.int64), opts)
