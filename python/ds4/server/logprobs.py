"""Token log-probabilities in the OpenAI APIs' shapes: the entries of chat's and Responses'
``logprobs`` (``token``, ``logprob``, ``bytes``, ``top_logprobs``) and the legacy completions'
parallel lists (``tokens``, ``token_logprobs``, ``top_logprobs``, ``text_offset``).

A token may hold part of a UTF-8 character: ``bytes`` is exact, ``token`` shows the bytes that
do not decode as ``\\xNN`` escapes (as OpenAI does)."""

from __future__ import annotations

import codecs
from typing import Any

from ds4.generation import TokenLogprob
from ds4.model import Model

LOWEST = -9999.0  # what OpenAI reports for a token the model cannot emit: JSON has no -inf


class Logprobs:
    """Renders one answer's token logprobs, piece by piece in order (a stream's chunks): the
    legacy format's ``text_offset`` runs on across pieces."""

    def __init__(self, model: Model, legacy: bool) -> None:
        self.model, self.legacy = model, legacy
        self._chars = codecs.getincrementaldecoder("utf-8")("replace")
        self._offset = 0  # characters of the answer's text before the next token

    def _bytes(self, tok: int) -> bytes:
        return self.model.token_bytes(tok) if 0 <= tok < self.model.vocab_size else b""  # padding ids: no text

    def _token(self, tok: int) -> str:
        return self._bytes(tok).decode("utf-8", "backslashreplace")

    def _top(self, tok: int, logprob: float) -> dict[str, Any]:
        return {"token": self._token(tok), "logprob": max(logprob, LOWEST), "bytes": list(self._bytes(tok))}

    def entries(self, lps: list[TokenLogprob]) -> list[dict[str, Any]]:
        """Chat's ``logprobs.content`` and Responses' ``output_text.logprobs``."""
        return [{**self._top(t.token, t.logprob), "top_logprobs": [self._top(i, v) for i, v in t.top]} for t in lps]

    def render(self, lps: list[TokenLogprob]) -> dict[str, Any]:
        """A choice's ``logprobs`` object: chat's, or the completions API's lists."""
        if not self.legacy:
            return {"content": self.entries(lps), "refusal": None}
        out: dict[str, Any] = {"tokens": [], "token_logprobs": [], "top_logprobs": [], "text_offset": []}
        for t in lps:
            token, logprob = self._token(t.token), max(t.logprob, LOWEST)
            out["tokens"].append(token)
            out["token_logprobs"].append(logprob)
            # the N best and, as the API promises, the chosen token (up to N + 1 entries)
            top = {self._token(i): max(v, LOWEST) for i, v in t.top}
            top.setdefault(token, logprob)
            out["top_logprobs"].append(top)
            out["text_offset"].append(self._offset)
            self._offset += len(self._chars.decode(self._bytes(t.token)))
        return out
