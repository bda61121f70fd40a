"""What speculation costs a fresh process beyond drafting and verifying: no calibration passes, a
cost prior whose kernel probe is under 2 % of the plain decode's work, nothing at all for a draft
model the scheduler never picks, and timings that account for every second after the prefill.
Work is counted (forward passes, rows, multiply-adds), never timed against a bound."""

from __future__ import annotations

from prompts import PROMPTS

import ds4
from ds4.default_model import default_model_path

PROMPT = PROMPTS[0]  # a rename: drafts are long and right
CHAIN = ds4.Spec(types=["ngram-mod", "ngram-simple"])


def test_a_first_speculative_generation_runs_only_its_own_passes() -> None:
    m = ds4.Model(threads=2, n_ctx=1024)  # fresh: nothing measured in this model yet
    g = m.session().generate(PROMPT, max_tokens=64, stop_at_eog=False, spec=CHAIN)
    st = g.stats
    assert st["n_accepted"] > 0
    # every pass the model ran is the prefill, a plain step or a verify pass: no calibration
    assert m._m.forward_passes == 1 + st["n_verify_passes"]
    assert m._m.forward_rows == st["n_prompt"] + st["n_verify_passes"] + st["n_drafted"]
    # the cost prior's kernel probe (run once per process and format): < 2 % of plain decoding's work
    assert st["cost_prior_macs"] < 0.02 * st["n_generated"] * m._m.macs_per_token
    # the probe's rates are kept for the process
    g2 = m.session().generate(PROMPT, max_tokens=64, stop_at_eog=False, spec=CHAIN)
    assert g2.stats["cost_prior_macs"] == 0 and g2.tokens == g.tokens


def test_an_unused_draft_model_costs_only_its_mapping() -> None:
    # The embedded model drafting for itself: a draft step as dear as a target step can never
    # gain, so the scheduler never picks it, and it must not even be repacked or fed the prompt.
    m = ds4.Model(threads=2, n_ctx=1024)
    spec = ds4.Spec(types=["draft"], draft_model=str(default_model_path()))
    g = m.session().generate(PROMPT, max_tokens=24, stop_at_eog=False, spec=spec)
    assert g.stats["n_drafted"] == 0
    draft = spec.draft(m.threads)
    assert draft.forward_passes == 0 and draft.repack_pending
    assert g.stats["catch_up_seconds"] == 0


def test_timings_account_for_the_time_after_the_prefill() -> None:
    m = ds4.Model(threads=2, n_ctx=1024)
    for temperature in (0.0, 0.7):
        st = m.session().generate(PROMPT, max_tokens=48, temperature=temperature, seed=1, stop_at_eog=False,
                                  spec=CHAIN).stats
        phases = st["plain_seconds"] + st["verify_seconds"] + st["draft_seconds"] + st["sample_seconds"] + \
            st["cost_prior_seconds"]
        assert 0 < phases <= st["end_to_end_seconds"] * 1.0001
        assert st["end_to_end_tokens_per_second"] <= st["tokens_per_second"] * 1.0001
        assert st["end_to_end_tokens_per_second"] == st["n_generated"] / st["end_to_end_seconds"]
