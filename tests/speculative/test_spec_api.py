"""ds4.Spec and Session.generate(spec=...): validation, bad input, strict mode and the stats a
user judges speculation by."""

from __future__ import annotations

import pytest

import ds4
from ds4 import _core


@pytest.fixture(scope="module")
def model() -> ds4.Model:
    return ds4.Model(threads=2, n_ctx=512)


PROMPT = "one two three four five six seven eight nine ten one two three four five six seven"


def test_unknown_type_is_a_clear_error(model: ds4.Model) -> None:
    with pytest.raises(ValueError, match="unknown speculative proposer 'ngram-bogus'.*ngram-simple"):
        model.session().generate(PROMPT, max_tokens=4, spec=ds4.Spec(types=["ngram-bogus"]))
    with pytest.raises(ValueError, match="unknown speculative proposer"):
        opts = _core.GenerateOptions()
        opts.max_tokens = 4
        opts.spec_types = ["nope"]
        opts.spec_n_max = 4
        _core.Generator(model.session()._s, model._m, __import__("numpy").array([5]), opts)


def test_n_min_range(model: ds4.Model) -> None:
    with pytest.raises(ValueError, match="n_min must be in"):
        model.session().generate(PROMPT, max_tokens=4, spec=ds4.Spec(types=["ngram-simple"], n_max=4, n_min=5))


@pytest.mark.parametrize("n_max", [0, -3])
def test_n_max_must_be_positive(model: ds4.Model, n_max: int) -> None:
    with pytest.raises(ValueError, match="n_max must be >= 1"):
        model.session().generate(PROMPT, max_tokens=4, spec=ds4.Spec(types=["ngram-simple"], n_max=n_max))


def test_empty_types(model: ds4.Model) -> None:
    with pytest.raises(ValueError, match="empty"):
        model.session().generate(PROMPT, max_tokens=4, spec=ds4.Spec(types=[]))


@pytest.mark.parametrize("t", ["dspark", "draft-dspark"])
def test_block_drafters_of_the_embedded_model(model: ds4.Model, t: str) -> None:
    # the embedded model ships a DSpark drafter: no file to give
    g = model.session().generate(PROMPT, max_tokens=4, spec=ds4.Spec(types=[t], n_min=1))
    assert g.stats["n_drafted"] > 0
    with pytest.raises(ValueError, match="is a DSpark drafter: name its proposer 'dspark'"):
        model.session().generate(PROMPT, max_tokens=4, spec=ds4.Spec(types=["dflash"]))


@pytest.mark.parametrize("t", ["mtp", "draft-mtp"])
def test_mtp_needs_a_model_with_the_block(model: ds4.Model, t: str) -> None:
    assert not model.has_mtp
    with pytest.raises(ds4.ModelError, match="no MTP block"):
        model.session().generate(PROMPT, max_tokens=4, spec=ds4.Spec(types=[t]))


@pytest.mark.parametrize("t", ["draft", "draft-simple"])
def test_draft_needs_a_model(model: ds4.Model, t: str) -> None:
    with pytest.raises(ValueError, match="needs Spec\\(draft_model"):
        model.session().generate(PROMPT, max_tokens=4, spec=ds4.Spec(types=[t]))


@pytest.mark.parametrize("confidence", [-0.1, 1.0, 2.0])
def test_confidence_must_be_a_probability(model: ds4.Model, confidence: float) -> None:
    with pytest.raises(ValueError, match="confidence must be in \\[0, 1\\)"):
        model.session().generate(PROMPT, max_tokens=4, spec=ds4.Spec(draft_model=model, confidence=confidence))


def test_draft_vocab_must_not_be_negative(model: ds4.Model) -> None:
    with pytest.raises(ValueError, match="draft_vocab must be >= 0"):
        model.session().generate(PROMPT, max_tokens=4, spec=ds4.Spec(draft_model=model, draft_vocab=-1))


def test_confidence_needs_a_model_proposer(model: ds4.Model) -> None:
    with pytest.raises(ValueError, match="needs the 'draft', 'mtp' or a block drafter's proposer"):
        model.session().generate(PROMPT, max_tokens=4, spec=ds4.Spec(types=["ngram-mod"], confidence=0.5))


def test_bad_sampling_mode(model: ds4.Model) -> None:
    with pytest.raises(ValueError, match="opportunistic"):
        model.session().generate(PROMPT, max_tokens=4, temperature=0.7, spec=ds4.Spec(sampling="fair"))  # type: ignore[arg-type]


def test_exact_at_temperature_zero_is_greedy(model: ds4.Model) -> None:
    # documented: at temperature 0 acceptance is the argmax whatever `sampling` says
    plain = model.session().generate(PROMPT, max_tokens=20, stop_at_eog=False).tokens
    spec = ds4.Spec(types=["ngram-simple"], sampling="exact")
    assert model.session().generate(PROMPT, max_tokens=20, stop_at_eog=False, spec=spec).tokens == plain


def test_strict_is_target_only(model: ds4.Model) -> None:
    g = model.session().generate(PROMPT, max_tokens=24, stop_at_eog=False, spec=ds4.Spec(strict=True))
    assert g.stats["n_drafted"] == 0 and g.stats["n_spec_passes"] == 0
    assert g.tokens == model.session().generate(PROMPT, max_tokens=24, stop_at_eog=False).tokens


def test_stats_and_stop_inside_an_accepted_draft(model: ds4.Model) -> None:
    plain = model.session().generate(PROMPT, max_tokens=40, stop_at_eog=False)
    s = model.session()
    g = s.generate(PROMPT, max_tokens=40, stop_at_eog=False, spec=ds4.Spec(types=["ngram-simple"]))
    st = g.stats
    assert g.tokens == plain.tokens
    assert st["n_accepted"] > 0 and st["tokens_per_pass"] > 1
    assert st["n_verify_passes"] < st["n_generated"]
    assert st["plain_tokens_per_second_estimate"] > 0
    assert len(st["accepted_per_position"]) == len(st["drafted_per_position"])
    assert all(a <= d for a, d in zip(st["accepted_per_position"], st["drafted_per_position"]))
    # max_tokens and stop strings that fall inside an accepted draft end there, and the session
    # then holds exactly the emitted tokens (the last one pending), as with plain decoding
    for n in (5, 13, 22):
        s1, s2 = model.session(), model.session()
        a = s1.generate(PROMPT, max_tokens=n, stop_at_eog=False, spec=ds4.Spec(types=["ngram-simple"]))
        b = s2.generate(PROMPT, max_tokens=n, stop_at_eog=False)
        assert a.tokens == b.tokens and s1.tokens == s2.tokens and s1.n_past == s2.n_past
        # and the sessions continue identically
        assert s1.generate("", max_tokens=6).tokens == s2.generate("", max_tokens=6).tokens
    stop = plain.text[30:36]
    a = model.session().generate(PROMPT, max_tokens=40, stop=stop, spec=ds4.Spec(types=["ngram-simple"]))
    b = model.session().generate(PROMPT, max_tokens=40, stop=stop)
    assert a.text == b.text and a.stats["stop_reason"] == b.stats["stop_reason"] == "stop"


def test_cli_flags(capsys: pytest.CaptureFixture[str]) -> None:
    from ds4.cli import main

    assert main(["-p", PROMPT, "-n", "16", "--spec-type", "ngram-simple,ngram-mod", "--spec-draft-n-max", "4",
                 "--mtp-timing"]) == 0
    err = capsys.readouterr().err
    assert "ds4 spec:" in err and "accepted" in err
    assert main(["-p", PROMPT, "-n", "8", "--temp", "0.8", "--seed", "1", "--spec-type", "ngram-simple",
                 "--mtp-exact-sampling", "--json"]) == 0
    assert '"n_drafted"' in capsys.readouterr().out
    # -md alone: the draft proposer (the embedded model drafting for itself, forced by n-min)
    from ds4.default_model import default_model_path

    assert main(["-p", PROMPT, "-n", "8", "-md", str(default_model_path()), "--spec-draft-n-min", "2",
                 "--mtp-timing"]) == 0
    assert "ds4 spec:" in capsys.readouterr().err
    assert main(["-p", PROMPT, "-n", "8", "-md", str(default_model_path()), "--spec-draft-n-min", "2",
                 "--draft-p-min", "0.5", "--temp", "0.8", "--mtp-exact-sampling", "--json"]) == 0
    assert '"n_drafted"' in capsys.readouterr().out
