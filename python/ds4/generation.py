"""``ds4.Generation``: the result (or, streaming, the progress) of ``Session.generate``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, NamedTuple

from ds4 import _core


class TokenLogprob(NamedTuple):
    """A generated token's log-probability under the model's raw distribution (the log-softmax
    of its logits, before bias, penalties, filters and temperature) and the ``top`` most likely
    ids of that distribution as ``(id, logprob)``, best first (ties: lower id first)."""

    token: int
    logprob: float
    top: list[tuple[int, float]]


class Generation:
    """Tokens, text and statistics of one ``generate`` call.

    With ``stream=True`` iterate over it to receive text pieces as they are decoded (never a
    split UTF-8 character, never part of a stop string); ``tokens``, ``text`` and ``stats``
    reflect what has been generated so far. Otherwise it is complete when returned.

    ``stats`` holds ``n_prompt``, ``n_generated``, ``n_drafted``, ``n_accepted``,
    ``n_verify_passes``, ``accepted_per_position``, ``accepted_per_pass`` (each verify pass's accepted
    draft tokens, in order), ``prefill_seconds``, ``decode_seconds``,
    ``sample_seconds``, ``prefill_tokens_per_second``, ``tokens_per_second`` (the forward passes,
    drafting and sampling), ``end_to_end_seconds`` and ``end_to_end_tokens_per_second`` (every
    second after the prefill: what the user waited for), the phases that split it
    (``plain_seconds``, ``verify_seconds``, ``draft_seconds`` of which ``catch_up_seconds``,
    ``cost_prior_seconds``), the scheduler's ``spec_balance_seconds`` (what speculation gained
    over plain decoding, by its ledger) and ``stop_reason`` (``"max_tokens"``, ``"eog"`` for an
    end-of-generation token, ``"stop"`` for a stop string, ``"context"`` when the context filled
    up, ``"cancelled"`` after :meth:`cancel`) with ``stop_string``, the stop string that ended it.
    """

    def __init__(self, core: _core.Generator) -> None:
        self._g = core

    def __iter__(self) -> Iterator[str]:
        while (piece := self._g.next()) is not None:
            if piece:
                yield piece

    def set_sampling(self, **sampling: Any) -> None:
        """The sampling-mode boundary: from the next token on, sample with these settings
        (``temperature``, ``top_k``, ``top_p``, ``min_p``, ``repeat_penalty``, ``repeat_last_n``,
        ``presence_penalty``, ``frequency_penalty``, ``logit_bias``, ``seed``, as
        ``Session.generate`` takes them; those not given take their defaults). Called between
        pieces of a stream, e.g. where the output enters tool-call syntax: draft tokens a verify
        pass accepted under the old settings and not yet streamed are dropped, the session goes
        back to the last token streamed (from the copy of the recurrent state taken before that
        pass, never re-evaluating the context) and evaluates it again, so what follows is what a
        fresh session that evaluated the same tokens would sample with the new settings."""
        self._g.set_sampling(_core.SamplingParams(**sampling))

    def cancel(self) -> None:
        """Ends the generation where it is (``stats["stop_reason"]`` ``"cancelled"``): a batch
        drops it at its next step. Nothing once it has ended."""
        self._g.cancel()

    @property
    def done(self) -> bool:
        return self._g.done

    @property
    def tokens(self) -> list[int]:
        """Sampled token ids, an end-of-generation token included."""
        return list(self._g.tokens)

    @property
    def logprobs(self) -> list[TokenLogprob] | None:
        """One :class:`TokenLogprob` per token of ``tokens`` when generated with ``logprobs=N``
        (``N`` alternatives each); ``None`` otherwise."""
        return self.logprobs_from(0)

    def logprobs_from(self, start: int) -> list[TokenLogprob] | None:
        """``logprobs[start:]``, without copying the ones before ``start`` (a stream's progress)."""
        got = self._g.logprobs(start)
        return None if got is None else [TokenLogprob(*t) for t in got]

    @property
    def text(self) -> str:
        """Text of the sampled tokens, cut before a stop string; special end tokens are not shown."""
        return self._g.text

    @property
    def stats(self) -> dict[str, Any]:
        return self._g.stats

    def __repr__(self) -> str:
        state = "done" if self.done else "running"
        return f"ds4.Generation({len(self._g.tokens)} tokens, {state}, text={self.text[:40]!r})"
