"""Speculative greedy decoding gives byte for byte the tokens of plain greedy decoding: every
proposer and a chain, on the embedded Gemma 3 270M, 33 prompts of code, prose, chat and
repetitive text, 128 tokens each. (The verify pass of k + 1 rows gives the same logits as k + 1
single-token passes: the kernels are batch-invariant, tests/model/test_batch_paths.py.)"""

from __future__ import annotations

import pytest
from prompts import PROMPTS

import ds4

N_TOKENS = 128
CONFIGS = {
    "ngram-simple": ds4.Spec(types=["ngram-simple"]),
    "ngram-mod": ds4.Spec(types=["ngram-mod"]),
    "chain": ds4.Spec(types=["ngram-mod", "ngram-simple"], n_max=8),
}


@pytest.fixture(scope="module")
def model() -> ds4.Model:
    return ds4.Model(threads=2, n_ctx=1024)


@pytest.fixture(scope="module")
def plain(model: ds4.Model) -> list[list[int]]:
    return [model.session().generate(p, max_tokens=N_TOKENS, stop_at_eog=False).tokens for p in PROMPTS]


@pytest.mark.parametrize("name", list(CONFIGS))
def test_same_tokens_as_plain_greedy(model: ds4.Model, plain: list[list[int]], name: str) -> None:
    drafted = accepted = 0
    for prompt, want in zip(PROMPTS, plain):
        s = model.session()
        g = s.generate(prompt, max_tokens=N_TOKENS, stop_at_eog=False, spec=CONFIGS[name])
        assert g.tokens == want, f"{name}: {prompt[:40]!r}"
        st = g.stats
        assert st["n_generated"] == N_TOKENS
        assert st["n_accepted"] <= st["n_drafted"]
        assert sum(st["accepted_per_position"]) == st["n_accepted"]
        assert sum(st["drafted_per_position"]) == st["n_drafted"]
        # the session holds the prompt and the generated tokens, the last one pending
        assert s.tokens[-N_TOKENS:] == want
        drafted += st["n_drafted"]
        accepted += st["n_accepted"]
    # the repetitive prompts give long accepted drafts: speculation did happen
    assert accepted > 200, (name, drafted, accepted)
