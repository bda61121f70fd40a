"""Speculation on the tiny hybrid (Qwen3-Next: gated DeltaNet + gated attention + MoE) and MoE
(Qwen3-MoE) models: greedy drafts verified in one pass and rolled back when rejected give byte for
byte the tokens of plain greedy decoding. A rejected draft restores the recurrent slots' copy and
replays the accepted rows through the DeltaNet layers alone (tests/model/test_state.py proves no
context is evaluated again); here drafts that are mostly right (the same model quantised: partial
acceptance, rollbacks into the block) and never right (another model: every block rolled back)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "model"))
import tiny  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import mtp_target  # noqa: E402

import ds4  # noqa: E402

N_PROMPTS, N_TOKENS = 20, 128


def exact(family: str, outtype: str = "f32") -> ds4.Model:
    return ds4.Model(str(tiny.convert(family, outtype)), threads=2, kv_type="f32", precision="f32")


def prompts() -> list[list[int]]:
    rng = np.random.default_rng(5)
    return [[int(t) for t in rng.integers(3, 320, size=int(rng.integers(4, 40)))] for _ in range(N_PROMPTS)]


@pytest.mark.parametrize("target", ["qwen3_next", "qwen3_moe"])
def test_greedy_speculation_equals_plain(target: str) -> None:
    m = exact(target)
    drafts = {"quantised": ds4.Model(str(tiny.convert(target, "q8_0")), threads=2),  # mostly right
              "other": exact("qwen3_moe" if target == "qwen3_next" else "qwen3_next")}  # never right
    plain = [m.session().generate(p, max_tokens=N_TOKENS, stop_at_eog=False).tokens for p in prompts()]
    for name, d in drafts.items():
        drafted = accepted = 0
        for p, want in zip(prompts(), plain):
            # n_min: every draft verified whatever the timings (a tiny draft costs what the target does)
            spec = ds4.Spec(types=["draft"], draft_model=d, n_min=3, n_max=6, draft_vocab=0)
            g = m.session().generate(p, max_tokens=N_TOKENS, stop_at_eog=False, spec=spec)
            assert g.tokens == want, (target, name, p[:5])
            drafted += g.stats["n_drafted"]
            accepted += g.stats["n_accepted"]
        print(f"{target} <- {name}: {accepted}/{drafted} accepted")
        if name == "quantised":
            assert 0.5 * drafted < accepted < drafted  # rollbacks inside blocks happened, and acceptance too
        else:
            assert drafted > 1000 and accepted < 0.1 * drafted


@pytest.mark.parametrize("target", ["trained qwen3_next", "qwen3_moe"])
def test_ngram_speculation_equals_plain(target: str) -> None:
    # the output loops, so the n-grams draft often, and miss where it turns; the random hybrid's
    # recurrence keeps it from looping within 128 tokens, the trained one (mtp_target.py) loops
    if target == "qwen3_moe":
        m = exact(target)
    else:
        m = ds4.Model(str(mtp_target.gguf()), threads=2, n_ctx=256, kv_type="f32", precision="f32")
    plain = [m.session().generate(p, max_tokens=N_TOKENS, stop_at_eog=False).tokens for p in prompts()]
    for types in (["ngram-simple"], ["ngram-mod"], ["ngram-mod", "ngram-simple"]):
        drafted = accepted = 0
        for p, want in zip(prompts(), plain):
            # every draft verified 4 tokens at a time: the counts below do not depend on timings
            g = m.session().generate(p, max_tokens=N_TOKENS, stop_at_eog=False, spec=ds4.Spec(types=types, n_min=4, n_max=4))
            assert g.tokens == want, (target, types, p[:5])
            drafted += g.stats["n_drafted"]
            accepted += g.stats["n_accepted"]
        print(f"{target} <- {','.join(types)}: {accepted}/{drafted} accepted")
        assert accepted > 0.5 * N_PROMPTS * N_TOKENS / 4
