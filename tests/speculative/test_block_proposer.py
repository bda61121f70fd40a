"""The block drafters' proposers (speculative/dflash.cpp) on the tiny trained target with drafters
ds4's trainer made for it (block_target.py): greedy output byte-identical to plain decoding over 20
prompts x 128 tokens, alone and chained with ngram-mod; the accepted length of every verify pass
equal to that of z-lab's reference loop (dflash_generate) on the same drafter; exact sampling
distribution-preserving with the drafts drawn from the drafter's own q (and a control the test
rejects); DSpark's confidence cut; the command line."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
import block_target  # noqa: E402
from sampling_stats import draws, two_sample_p  # noqa: E402

import ds4  # noqa: E402

pytest.importorskip("torch")
N_PROMPTS, N_TOKENS = 20, 128


@pytest.fixture(scope="module")
def target() -> ds4.Model:
    return ds4.Model(str(block_target.target_gguf()), threads=2, n_ctx=256, kv_type="f32", precision="f32")


def prompt_sets() -> dict[str, list[list[int]]]:
    rng = np.random.default_rng(11)
    return {"easy": block_target.prompts(N_PROMPTS, 99),
            "hard": [[int(t) for t in rng.integers(3, 320, size=int(rng.integers(4, 40)))] for _ in range(N_PROMPTS)]}


@pytest.fixture(scope="module")
def plain(target: ds4.Model) -> dict[str, list[list[int]]]:
    return {name: [target.session().generate(p, max_tokens=N_TOKENS, stop_at_eog=False).tokens for p in ps]
            for name, ps in prompt_sets().items()}


def test_the_drafters_learnt_the_targets_continuations() -> None:
    for kind in ("dflash", "dspark"):
        log = block_target.training(kind)
        assert log["acceptance"][0] > 0.8 and log["accepted_per_block"] > 4, (kind, log)


@pytest.mark.parametrize("types", [["dflash"], ["dspark"], ["dspark", "ngram-mod"], ["ngram-mod", "dflash"]])
def test_greedy_identity(target: ds4.Model, plain: dict[str, list[list[int]]], types: list[str]) -> None:
    kind = "dspark" if "dspark" in types else "dflash"
    spec = ds4.Spec(types=types, mtp_model=block_target.drafter(kind), n_min=1)
    drafted = accepted = 0
    for name, ps in prompt_sets().items():
        for p, want in zip(ps, plain[name]):
            g = target.session().generate(p, max_tokens=N_TOKENS, stop_at_eog=False, spec=spec)
            assert g.tokens == want, (name, p)
            drafted += g.stats["n_drafted"]
            accepted += g.stats["n_accepted"]
    assert 0 < accepted < drafted  # both paths: drafts kept, drafts rolled back


def test_acceptance_matches_the_reference_loop(target: ds4.Model, tmp_path: Path) -> None:
    """dflash_generate drafts every block whole; so does ds4 with n_min = n_max = block - 1: the
    accepted length of each verify pass is the same, up to the last block (the reference shrinks
    it to the tokens left)."""
    import torch
    import transformers
    from dflash import model as ref

    gguf = ds4.convert(block_target.zlab_dir(), tmp_path / "zlab.gguf", target=block_target.target_gguf())
    drafter = ref.DFlashDraftModel.from_pretrained(block_target.zlab_dir(), dtype=torch.float32).eval()
    hf = transformers.AutoModelForCausalLM.from_pretrained(block_target.target_dir(), dtype="float32").eval()
    ref._cuda_time = lambda: 0.0  # its timer synchronises CUDA
    b = block_target.BLOCK
    spec = ds4.Spec(types=["dflash"], mtp_model=gguf, n_min=b - 1, n_max=b - 1)
    total = 0
    for p in prompt_sets()["easy"][:8] + prompt_sets()["hard"][:4]:
        n = 64
        want = ref.dflash_generate(drafter, hf, torch.tensor([p]), n, None, return_stats=True)
        g = target.session().generate(p, max_tokens=n, stop_at_eog=False, spec=spec)
        assert g.tokens == want.output_ids[0, len(p):].tolist()
        ours = [a + 1 for a in g.stats["accepted_per_pass"]]  # tokens per pass, the bonus included
        theirs = want.acceptance_lengths
        whole = 0  # passes before either loop's blocks near the end
        while whole < min(len(ours), len(theirs)) and sum(theirs[:whole + 1]) + 1 + b <= n:
            whole += 1
        assert whole > 2 and ours[:whole] == theirs[:whole]
        total += sum(ours[:whole])
    assert total > 12 * 20  # long accepted blocks, not only single tokens


SAMPLING = dict(temperature=2.0, top_k=0, top_p=1.0, stop_at_eog=False)  # flatter: drafts half accepted
N_DRAWS = 12_000


def _draws(target: ds4.Model, spec: ds4.Spec | None, n: int) -> tuple[np.ndarray, dict[str, int]]:
    prompt = [int(t) for t in np.random.default_rng(5).integers(3, 320, 4)] + block_target.prompts(1, 5)[0][1:9]
    s = target.session()
    if spec is not None:
        s._s.track_block(spec.block_drafter(target))  # before the prompt: the snapshot carries the context
    return draws(s, prompt, spec, n, 10**6, **SAMPLING)


@pytest.fixture(scope="module")
def plain_draws(target: ds4.Model) -> np.ndarray:
    return _draws(target, None, N_DRAWS)[0]


@pytest.mark.parametrize("kind", ["dflash", "dspark"])
def test_exact_sampling_with_the_drafters_q(target: ds4.Model, plain_draws: np.ndarray, kind: str) -> None:
    spec = ds4.Spec(types=[kind], mtp_model=block_target.drafter(kind), sampling="exact", n_min=2, n_max=2)
    drawn, totals = _draws(target, spec, N_DRAWS)
    print(f"{kind} exact: {totals['n_accepted']}/{totals['n_drafted']} accepted")
    assert totals["n_drafted"] >= N_DRAWS and 0.2 * totals["n_drafted"] < totals["n_accepted"] < 0.95 * totals["n_drafted"]
    assert two_sample_p(plain_draws, drawn) > 0.01


def test_the_test_has_power(target: ds4.Model, plain_draws: np.ndarray) -> None:
    # opportunistic acceptance of greedy drafts is not distribution-preserving
    spec = ds4.Spec(types=["dspark"], mtp_model=block_target.drafter("dspark"), n_min=2, n_max=2)
    opp, totals = _draws(target, spec, N_DRAWS)
    assert totals["n_accepted"] > 0
    assert two_sample_p(plain_draws, opp) < 1e-6


def test_confidence_cuts_drafts(target: ds4.Model, plain: dict[str, list[list[int]]]) -> None:
    """A higher --dspark-confidence drafts less and has less of it rejected."""
    path = block_target.drafter("dspark")
    drafted, rejected = {}, {}
    for c in (0.0, 0.3, 0.95):
        # every step asks for a whole block (what the scheduler decides is timing, not tested here)
        spec = ds4.Spec(types=["dspark"], mtp_model=path, confidence=c, n_min=block_target.BLOCK, n_max=block_target.BLOCK)
        drafted[c] = rejected[c] = 0
        for p, want in zip(prompt_sets()["hard"], plain["hard"]):
            g = target.session().generate(p, max_tokens=N_TOKENS, stop_at_eog=False, spec=spec)
            assert g.tokens == want
            drafted[c] += g.stats["n_drafted"]
            rejected[c] += g.stats["n_drafted"] - g.stats["n_accepted"]
    assert drafted[0.0] > drafted[0.3] > drafted[0.95], drafted
    assert rejected[0.0] > rejected[0.3] > rejected[0.95], rejected


def test_kinds_and_files(target: ds4.Model) -> None:
    with pytest.raises(ValueError, match="is a DSpark drafter: name its proposer 'dspark'"):
        target.session().generate([1, 2], max_tokens=2, spec=ds4.Spec(types=["dflash"], mtp_model=block_target.drafter("dspark")))
    with pytest.raises(ValueError, match="no block drafter ships for"):
        target.session().generate([1, 2], max_tokens=2, spec=ds4.Spec(types=["dspark"]))
    assert ds4.Spec(mtp_model=block_target.drafter("dspark")).resolved_types() == ["ngram-mod", "dspark"]
    with pytest.raises(ValueError, match="not stacked"):
        ds4.Spec(types=["mtp", "dspark"], mtp_model=block_target.drafter("dspark")).resolved_types()
    # a session drafting with one drafter, then another: the second takes over (its context rebuilt)
    s = target.session()
    for kind in ("dspark", "dflash", "dspark"):
        spec = ds4.Spec(types=[kind], mtp_model=block_target.drafter(kind), n_min=1)
        s.generate([1, 5, 6, 7], max_tokens=8, stop_at_eog=False, spec=spec)
        assert not s._s.block_stale


def test_cli_flags(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from ds4.cli import main

    path, drafter = str(block_target.target_gguf()), str(block_target.drafter("dspark"))
    assert main(["-m", path, "-p", "hello there", "-n", "24", "--ignore-eos", "--mtp-model", drafter,
                 "--spec-draft-n-min", "1", "--mtp-timing"]) == 0
    err = capsys.readouterr().err
    assert "ds4 spec:" in err and "accepted/drafted per position" in err
    assert main(["-m", path, "-p", "hello", "-n", "24", "--ignore-eos", "--dspark", "--mtp-model", drafter,
                 "--spec-type", "dspark,ngram-mod", "--dspark-confidence", "0.1", "--spec-draft-n-max", "4",
                 "--spec-draft-n-min", "1", "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)["stats"]
    assert stats["n_drafted"] > 0 and len(stats["drafted_per_position"]) <= 4
    assert main(["-m", path, "-p", "hi", "-n", "4", "--spec-type", "draft-dspark", "--mtp-model", drafter,
                 "--temp", "0.8", "--mtp-exact-sampling", "--json"]) == 0
    capsys.readouterr()


def test_the_embedded_model_ships_a_drafter(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from ds4.cli import main
    from ds4.drafters import shipped_for

    model = ds4.Model(threads=2, n_ctx=512)
    path = shipped_for(model)
    assert path is not None and path.stat().st_size <= 16 << 20
    assert shipped_for(model.path) == path  # the file's fingerprints: the loaded model's
    prompt = "def is_prime(n):\n    \"\"\"Return True if n is a prime number.\"\"\"\n"
    want = model.session().generate(prompt, max_tokens=64, stop_at_eog=False).tokens
    g = model.session().generate(prompt, max_tokens=64, stop_at_eog=False, spec=ds4.Spec(types=["dspark"], n_min=1))
    assert g.tokens == want and g.stats["n_accepted"] > 0
    assert main(["-p", prompt, "-n", "16", "--dspark", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["stats"]["n_generated"] == 16
