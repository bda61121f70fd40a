"""Speculation with the target's built-in MTP block (speculative/mtp.h) on the tiny Qwen3-Next
target whose block was trained on its own greedy continuations (mtp_target.py): greedy output
byte-identical to plain greedy decoding at every depth, adaptive, and chained with ngram-mod, on
easy and hard prompts, with acceptance far from zero; the block's feed (model/mtp_feed.h) bit for
bit what one pass over the whole context gives, however the context was evaluated (in pieces,
rewound, restored, or before tracking began); exact sampling with the block's own q keeps plain
sampling's distribution, where opportunistic acceptance of the same drafts fails the same test."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "model"))
import mtp_target  # noqa: E402
import tiny  # noqa: E402
from sampling_stats import draws, two_sample_p  # noqa: E402

import ds4  # noqa: E402

N_PROMPTS, N_TOKENS = 20, 128


@pytest.fixture(scope="module")
def target() -> ds4.Model:
    return ds4.Model(str(mtp_target.gguf()), threads=2, n_ctx=256, kv_type="f32", precision="f32")


def prompt_sets() -> dict[str, list[list[int]]]:
    rng = np.random.default_rng(11)
    return {"easy": [mtp_target.text(int(rng.integers(4, 40)), rng) for _ in range(N_PROMPTS)],
            "hard": [[int(t) for t in rng.integers(3, 320, size=int(rng.integers(4, 40)))] for _ in range(N_PROMPTS)]}


@pytest.fixture(scope="module")
def plain(target: ds4.Model) -> dict[str, list[list[int]]]:
    return {name: [target.session().generate(p, max_tokens=N_TOKENS, stop_at_eog=False).tokens for p in ps]
            for name, ps in prompt_sets().items()}


def test_the_block_learnt_the_targets_continuations() -> None:
    acc = mtp_target.accuracy()
    print(f"MTP block, held-out next-but-one accuracy: {acc['accuracy_before']:.3f} -> {acc['accuracy_after']:.3f}")
    assert acc["accuracy_after"] > 0.8 > acc["accuracy_before"]


# n_min=1: every step drafts (a tiny target's step costs little more than the block's, so the
# scheduler alone would often decode plainly), the policy's depth or the fixed one; the chain in
# the seeds' order runs as the scheduler decides, the other way round the n-grams draft first.
SETTINGS = {
    "depth 1": ds4.Spec(types=["mtp"], mtp_depth=1, n_min=1),
    "depth 2": ds4.Spec(types=["mtp"], mtp_depth=2, n_min=1),
    "depth 3": ds4.Spec(types=["mtp"], mtp_depth=3, n_min=1),
    "adaptive": ds4.Spec(types=["mtp"], n_min=1),
    "mtp,ngram-mod": ds4.Spec(types=["mtp", "ngram-mod"]),
    "ngram-mod,mtp": ds4.Spec(types=["ngram-mod", "mtp"], n_min=1),
}


@pytest.mark.parametrize("setting", list(SETTINGS))
def test_greedy_speculation_equals_plain(target: ds4.Model, plain: dict[str, list[list[int]]], setting: str) -> None:
    spec = SETTINGS[setting]
    for name, ps in prompt_sets().items():
        drafted = accepted = 0
        per_position: list[int] = []
        for p, want in zip(ps, plain[name]):
            g = target.session().generate(p, max_tokens=N_TOKENS, stop_at_eog=False, spec=spec)
            assert g.tokens == want, (setting, name, p[:5])
            drafted += g.stats["n_drafted"]
            accepted += g.stats["n_accepted"]
            per_position += [0] * (len(g.stats["drafted_per_position"]) - len(per_position))
            for i, d in enumerate(g.stats["drafted_per_position"]):
                per_position[i] += d
        print(f"{setting}, {name}: {accepted}/{drafted} accepted, drafted per position {per_position}")
        assert drafted > 0
        if spec.n_min:
            assert 0.6 * drafted < accepted < drafted  # far from zero, and rejections rolled back
        if setting == "adaptive" and name == "easy":
            assert len(per_position) == 2 and per_position[1] > 0  # the chained step engaged


def reference(target: ds4.Model, ids: list[int], tok: int) -> tuple[np.ndarray, np.ndarray]:
    """The block's logits and hidden state after `tok` following ids, from one pass over it all."""
    s = target.session()
    seq = np.array(ids + [tok])
    h = s._s.eval_hidden(seq, [target._m.n_layer])[0]
    hidden = np.concatenate([np.zeros((1, h.shape[1]), np.float32), h[:-1]])
    logits, out = s._s.mtp_step(0, seq, hidden)
    return logits[-1], out[-1]


def assert_draft_is_reference(target: ds4.Model, s: Any, tok: int) -> None:
    got = s.mtp_draft(tok)
    assert got is not None
    want = reference(target, list(s.tokens), tok)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])


def test_the_feed_is_one_pass_over_the_context(target: ds4.Model) -> None:
    ids = mtp_target.text(90, np.random.default_rng(3))
    s = target.session()._s
    s.track_mtp()
    s.eval(np.array(ids[:40]))          # a prompt past kEager: fed with the pass
    assert s.mtp_lag == 0
    for t in ids[40:45]:                 # decode steps: fed lazily
        s.eval_argmax(np.array([t]))
    assert s.mtp_lag == 5
    assert_draft_is_reference(target, s, ids[45])
    s.checkpoint()
    s.eval(np.array(ids[45:52]))         # a verify pass, partly rejected
    s.truncate(48)
    assert_draft_is_reference(target, s, ids[48])
    s.truncate(47)                       # behind what the block was fed: a short rewind
    assert_draft_is_reference(target, s, ids[47])
    snap = s.snapshot()
    s.eval(np.array(ids[47:80]))
    assert_draft_is_reference(target, s, ids[80])
    s.restore(snap)
    assert_draft_is_reference(target, s, ids[47])


def test_tracking_late_re_evaluates_the_context_once(target: ds4.Model) -> None:
    ids = mtp_target.text(30, np.random.default_rng(4))
    s = target.session()._s
    s.eval(np.array(ids[:-1]))
    s.track_mtp()
    assert s.mtp_lag == len(ids) - 1     # the hidden states were not kept: the whole context
    assert_draft_is_reference(target, s, ids[-1])
    assert s.mtp_lag == 0


def test_embedding_rows_stand_the_block_aside(target: ds4.Model) -> None:
    s = target.session()._s
    s.track_mtp()
    s.eval_embeddings(np.zeros((3, target._m.n_embd), np.float32))
    assert s.mtp_draft(5) is None


def test_a_pending_token_waits_for_its_pass(target: ds4.Model) -> None:
    s = target.session()
    g = s.generate([5, 6, 7], max_tokens=4, stop_at_eog=False, spec=ds4.Spec(types=["mtp"]))
    assert len(g.tokens) == 4 and s._s.tracks_mtp
    assert s._s.mtp_draft(9) is None     # the last token is pending, its hidden state unknown
    # n_min: the block drafts once the pending token has had its pass, whatever the scheduler
    # would decide from this machine's timings (it once kept the block aside for all 8 tokens)
    g2 = s.generate([], max_tokens=8, stop_at_eog=False, spec=ds4.Spec(types=["mtp"], mtp_depth=1, n_min=1))
    assert g2.stats["n_drafted"] > 0


def test_models_without_the_block_say_so() -> None:
    m = ds4.Model(str(tiny.convert("qwen3_next", "f32")), threads=1)
    with pytest.raises(ds4.ModelError, match="no MTP block"):
        m.session().generate([5, 6], max_tokens=2, spec=ds4.Spec(types=["mtp"]))


def test_depth_settings_are_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    assert ds4.Spec(types=["mtp"]).mtp_depths() == (2, 0)
    assert ds4.Spec(types=["mtp"], mtp_draft=3).mtp_depths() == (3, 0)
    assert ds4.Spec(types=["mtp"], mtp_depth=3).mtp_depths() == (3, 3)
    monkeypatch.setenv("DS4_QWEN4_MTP_DEPTH", "2")
    assert ds4.Spec(types=["mtp"]).mtp_depths() == (2, 2)
    monkeypatch.setenv("DS4_QWEN4_MTP_DEPTH", "two")
    with pytest.raises(ValueError, match="DS4_QWEN4_MTP_DEPTH"):
        ds4.Spec(types=["mtp"]).resolved_types()
    monkeypatch.delenv("DS4_QWEN4_MTP_DEPTH")
    with pytest.raises(ValueError, match="mtp_draft"):
        ds4.Spec(types=["mtp"], mtp_draft=0).resolved_types()
    with pytest.raises(ValueError, match="mtp_depth"):
        ds4.Spec(types=["mtp"], mtp_depth=-1).resolved_types()


# Exact sampling: the next 3 tokens' joint distribution against plain sampling's (a two-sample
# chi-squared test), drafts drawn from the block's own q. The prompt is from the target's own
# greedy continuation, where the block was trained; temperature 3 over the top 3 spreads the
# trained target's peaked distribution so that a biased rule shows.
N_DRAWS = 40_000
SAMPLING = dict(temperature=3.0, top_k=3, stop_at_eog=False)


def _draws(target: ds4.Model, spec: ds4.Spec | None, n: int) -> tuple[np.ndarray, dict[str, int]]:
    start = mtp_target.text(12, np.random.default_rng(9))
    prompt = target.session().generate(start, max_tokens=40, stop_at_eog=False).tokens[-12:]
    s = target.session()
    s._s.track_mtp()  # before the prompt: the snapshot carries the block's feed
    return draws(s, prompt, spec, n, 10**6, **SAMPLING)


@pytest.fixture(scope="module")
def plain_draws(target: ds4.Model) -> np.ndarray:
    return _draws(target, None, N_DRAWS)[0]


def test_exact_sampling_with_the_blocks_q(target: ds4.Model, plain_draws: np.ndarray) -> None:
    spec = ds4.Spec(types=["mtp"], sampling="exact", mtp_depth=2, n_min=1)
    drawn, totals = _draws(target, spec, N_DRAWS)
    print(f"exact: {totals['n_accepted']}/{totals['n_drafted']} accepted")
    assert totals["n_drafted"] >= N_DRAWS and 0.3 * totals["n_drafted"] < totals["n_accepted"] < 0.9 * totals["n_drafted"]
    assert two_sample_p(plain_draws, drawn) > 0.01


def test_the_test_has_power(target: ds4.Model, plain_draws: np.ndarray) -> None:
    # opportunistic acceptance of the block's greedy drafts is not distribution-preserving
    opp, totals = _draws(target, ds4.Spec(types=["mtp"], mtp_depth=2, n_min=1), 20_000)
    assert totals["n_accepted"] > 0
    assert two_sample_p(plain_draws[:20_000], opp) < 1e-6


def test_cli_flags(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    from ds4.cli import main

    path = str(mtp_target.gguf())
    # --mtp-timing alone turns MTP on for a model that has the block, and reports per position
    assert main(["-m", path, "-p", "hello there", "-n", "24", "--ignore-eos", "--spec-draft-n-min", "1",
                 "--mtp-timing"]) == 0
    err = capsys.readouterr().err
    assert "ds4 spec:" in err and "accepted/drafted per position" in err
    monkeypatch.setenv("DS4_QWEN4_MTP_DEPTH", "2")
    assert main(["-m", path, "-p", "hello there", "-n", "24", "--ignore-eos", "--spec-draft-n-min", "1",
                 "--spec-type", "mtp,ngram-mod", "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)["stats"]
    assert stats["n_drafted"] > 0 and len(stats["drafted_per_position"]) == 2
    monkeypatch.delenv("DS4_QWEN4_MTP_DEPTH")
    assert main(["-m", path, "-p", "hi", "-n", "4", "--mtp-draft", "3", "--mtp", "--temp", "0.8",
                 "--mtp-exact-sampling", "--json"]) == 0
    capsys.readouterr()
    with pytest.raises(SystemExit, match="--mtp-draft needs --mtp"):
        main(["-m", path, "-p", "hi", "-n", "4", "--mtp-draft", "3"])


def test_cli_refuses_mtp_without_the_block(capsys: pytest.CaptureFixture[str]) -> None:
    from ds4.cli import main

    assert main(["-m", str(tiny.convert("qwen3_next", "f32")), "-p", "hi", "-n", "4", "--mtp"]) != 0
    assert "no MTP block" in capsys.readouterr().err
