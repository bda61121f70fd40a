"""The sampling-mode boundary (Generation.set_sampling; model/generate.h): switched between two
pieces of a speculative stream, whatever the verify pass had accepted beyond the last token
streamed is dropped, the session goes back to that token from the copy of the state taken before
the pass (the recurrent layers of the tiny Qwen3-Next replaying only the accepted rows) and
evaluates it again, and the tokens that follow are exactly those a fresh session that evaluated
the same tokens samples under the new settings: greedy to greedy, sampled (exact, drafts drawn
from the MTP block's q) to greedy, and to other sampled settings with another seed."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import mtp_target  # noqa: E402

import ds4  # noqa: E402

N_TOKENS, SWITCH = 48, 13
GREEDY: dict[str, Any] = dict(temperature=0.0)
SAMPLED: dict[str, Any] = dict(temperature=1.5, top_k=4, seed=3)
OTHER: dict[str, Any] = dict(temperature=0.8, top_k=6, seed=77)


@pytest.fixture(scope="module")
def target() -> ds4.Model:
    return ds4.Model(str(mtp_target.gguf()), threads=2, n_ctx=256, kv_type="f32", precision="f32")


def spec(exact: bool) -> ds4.Spec:
    # n_min and a fixed depth: every step drafts 3 tokens whatever the timings, so two runs
    # draft, verify and draw alike
    return ds4.Spec(types=["mtp"], mtp_depth=3, n_min=1, sampling="exact" if exact else "opportunistic")


@pytest.mark.parametrize("before, after", [(GREEDY, dict(GREEDY)), (SAMPLED, GREEDY), (SAMPLED, OTHER)],
                         ids=["greedy-greedy", "sampled-greedy", "sampled-sampled"])
def test_the_boundary_continues_as_a_fresh_session(target: ds4.Model, before: dict, after: dict) -> None:
    exact = before.get("temperature", 0.0) > 0
    prompt = mtp_target.text(30, np.random.default_rng(21))
    s = target.session()
    g = s.generate(prompt, max_tokens=N_TOKENS, stop_at_eog=False, stream=True, spec=spec(exact), **before)
    pieces = iter(g)
    while len(g.tokens) < SWITCH:  # a piece may hold several tokens (a character's bytes)
        next(pieces)
    at = len(g.tokens)
    rows = target._m.forward_rows
    g.set_sampling(**after)
    next(pieces)  # the last token again, then the first pass under the new settings
    # the rewind and the passes after it: a block's rows, never the context's
    assert target._m.forward_rows - rows <= 2 * 4 < len(prompt) + at
    for _ in pieces:
        pass
    got = g.tokens
    assert len(got) == N_TOKENS and g.stats["n_accepted"] > 0
    fresh = target.session().generate(prompt + got[:at], max_tokens=N_TOKENS - at, stop_at_eog=False,
                                      spec=spec(after.get("temperature", 0.0) > 0), **after)
    assert got[at:] == fresh.tokens
    assert s.tokens[-N_TOKENS:] == got  # the session holds what was streamed


def test_the_boundary_before_the_first_token(target: ds4.Model) -> None:
    prompt = mtp_target.text(20, np.random.default_rng(22))
    g = target.session().generate(prompt, max_tokens=16, stop_at_eog=False, stream=True, spec=spec(True), **SAMPLED)
    g.set_sampling(**GREEDY)
    for _ in g:
        pass
    assert g.tokens == target.session().generate(prompt, max_tokens=16, stop_at_eog=False).tokens


def test_bad_settings_are_refused(target: ds4.Model) -> None:
    g = target.session().generate([5, 6, 7], max_tokens=8, stop_at_eog=False, stream=True)
    with pytest.raises(ValueError, match="temperature"):
        g.set_sampling(temperature=-1.0)
