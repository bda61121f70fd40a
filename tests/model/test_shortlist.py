"""The sampling head's shortlist (request.h's Out::shortlist, backend.h's Shortlist): the ids a
screened head keeps carry the full row's logits bit for bit, every id left out is below thr, and
a sampled generation draws exactly the tokens that screened sampling draws from full rows."""

from __future__ import annotations

import numpy as np
import pytest

import ds4
from ds4 import _core

PROMPT = "Once upon a time, in a land far away, there lived a"


@pytest.fixture(scope="module")
def gemma(gemma_path) -> ds4.Model:
    return ds4.Model(gemma_path, threads=2, n_ctx=512)


@pytest.mark.parametrize("margin", [0.0, 5.0, 12.0, 40.0])
def test_shortlist_holds_the_rows_logits(gemma: ds4.Model, margin: float) -> None:
    toks = np.asarray(gemma.tokenize(PROMPT), np.int64)
    full = np.asarray(gemma.session().eval(toks))[-1]
    d = gemma.session()._s.eval_shortlist(toks, margin)
    if not d["ok"]:  # a backend without the screen (or an ISA without its kernel): the row whole
        np.testing.assert_array_equal(d["logits"], full)
        return
    ids, thr = d["ids"], d["thr"]
    assert np.all(np.diff(ids) > 0)
    np.testing.assert_array_equal(d["logits"], full[ids])
    left = np.ones(len(full), bool)
    left[ids] = False
    assert full[left].max() < thr
    # everything within the margin is listed, unless the floor rose at capacity (then thr says so)
    assert thr <= full.max() - margin or margin >= 12.0
    probe = np.array([0, 5, int(np.argmax(full)), len(full) - 1], np.int32)
    np.testing.assert_array_equal(d["more"](probe), full[probe])


@pytest.mark.parametrize("sampling", [{"temperature": 0.8, "seed": 5}, {"temperature": 1.3, "seed": 2},
                                      {"temperature": 0.7, "seed": 9, "repeat_penalty": 1.3},
                                      {"temperature": 0.9, "seed": 4, "top_k": 40, "top_p": 0.95},
                                      {"temperature": 1.0, "seed": 6, "min_p": 0.05}])
def test_generation_draws_what_full_rows_draw(gemma: ds4.Model, sampling: dict) -> None:
    """generate() samples from shortlists where the backend screens; the same seed over full rows
    (Session.eval, Sampler.sample_screened: with top-k or min-p, Sampler.sample) gives the same
    tokens."""
    n = 24
    got = gemma.session().generate(PROMPT, max_tokens=n, stop_at_eog=False, **sampling).tokens
    params = dict(sampling)
    s = gemma.session()
    prompt = gemma.tokenize(PROMPT)
    sp = _core.Sampler(_core.SamplingParams(**params), gemma.n_vocab)
    for t in prompt[-64:]:
        sp.accept(t)
    logits = np.asarray(s.eval(np.asarray(prompt, np.int64)))[-1]
    want = []
    for _ in range(n):
        tok = sp.sample_screened(np.ascontiguousarray(logits, np.float32))
        sp.accept(tok)
        want.append(tok)
        logits = np.asarray(s.eval(np.asarray([tok], np.int64)))[-1]
    assert got == want
