"""``ds4.Session``: one sequence evaluated against a shared :class:`ds4.Model`."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Sequence

import numpy as np
import numpy.typing as npt

from ds4 import _core, state_file
from ds4.generation import Generation
from ds4.options import generate_options, prompt_ids
from ds4.speculative import Spec

if TYPE_CHECKING:
    from ds4.model import Model

Snapshot = _core.SessionSnapshot


class Session:
    """A sequence being evaluated: its state (a KV cache per attention layer) and position, against a shared model.

    Sessions are made by :meth:`ds4.Model.session`; many may share one model (weights are
    mapped once). Each call that runs the model releases the GIL.
    """

    def __init__(self, model: Model, core: _core.Session) -> None:
        self.model = model
        self._s = core

    @property
    def n_past(self) -> int:
        """Positions held: tokens evaluated so far, minus what was truncated."""
        return self._s.n_past

    @property
    def n_ctx(self) -> int:
        return self._s.n_ctx

    def eval(self, tokens: Sequence[int] | npt.NDArray[np.integer]) -> npt.NDArray[np.float32]:
        """Append ``tokens`` and return their logits, float32 of shape ``(len(tokens), n_vocab)``.

        Raises ``ValueError`` (``ds4.ModelError``) for an id outside the vocabulary and
        ``ds4.ContextOverflowError`` when the session would exceed ``n_ctx``; either way the
        session is left as it was.
        """
        return self._s.eval(self._ids(tokens))

    @staticmethod
    def _ids(tokens: Sequence[int] | npt.NDArray[np.integer]) -> npt.NDArray[np.integer]:
        ids = np.asarray(tokens)
        if ids.size == 0:
            ids = ids.astype(np.int64)
        if ids.ndim != 1:
            raise ValueError(f"tokens must be a 1-D sequence of token ids, got shape {ids.shape}")
        if ids.dtype.kind not in "iu":
            raise TypeError(f"tokens must be integers, got dtype {ids.dtype}")
        return ids

    def eval_argmax(self, tokens: Sequence[int] | npt.NDArray[np.integer]) -> npt.NDArray[np.int32]:
        """Append ``tokens`` and return the greedy next token after every position evaluated.

        The argmax (lowest id on ties) of exactly the logits :meth:`eval` would return, without
        building them: what greedy decoding and the verification of a drafted block need. One id
        per position this call evaluates: when the session holds a pending token (generation
        leaves its last sampled token pending) that position comes first, so the result has
        ``len(tokens) + 1`` entries; otherwise ``len(tokens)``. Errors as :meth:`eval`.
        """
        return self._s.eval_argmax(self._ids(tokens))

    def eval_hidden(self, tokens: Sequence[int] | npt.NDArray[np.integer], layers: Sequence[int]) -> npt.NDArray[np.float32]:
        """Append ``tokens`` and return their hidden states, float32 ``(len(layers), len(tokens), n_embd)``.

        ``layers`` index as transformers' ``output_hidden_states``: 0 the embeddings (scaled as
        the model scales them), ``i`` the residual stream after layer ``i``, ``n_layer`` after
        the final norm (what the output head reads; mean-pool it for an embedding). A pending
        token left by generation is evaluated first and not returned. Errors as :meth:`eval`,
        and ``ds4.ModelError`` for a layer outside ``[0, n_layer]``.
        """
        return self._s.eval_hidden(self._ids(tokens), [int(i) for i in layers])

    @property
    def tokens(self) -> list[int]:
        """Ids of every position the session holds."""
        return list(self._s.tokens)

    def generate(
        self,
        prompt: str | Sequence[int] = "",
        *,
        max_tokens: int = 256,
        temperature: float = 0.0,
        top_k: int = 0,
        top_p: float = 1.0,
        min_p: float = 0.0,
        repeat_penalty: float = 1.0,
        repeat_last_n: int = 64,
        presence_penalty: float = 0.0,
        frequency_penalty: float = 0.0,
        logit_bias: dict[int, float] | None = None,
        seed: int | None = None,
        stop: str | Sequence[str] | None = None,
        stop_at_eog: bool = True,
        logprobs: int | None = None,
        spec: Spec | None = None,
        stream: bool = False,
    ) -> Generation:
        """Continue the session: append ``prompt`` and sample up to ``max_tokens`` tokens.

        ``prompt`` is text (tokenized with BOS only when the session is empty) or token ids; it
        may be empty when the session already holds context. ``temperature=0`` is greedy. The
        sampler applies logit bias, penalties, top-k, top-p, min-p, then temperature (see
        csrc/sample/sampler.h). Generation ends at ``max_tokens``, at an end-of-generation
        token (unless ``stop_at_eog=False``), at a ``stop`` string (cut from the text), or when
        the context is full. Afterwards the session holds the prompt and every sampled token.
        ``stream=True`` returns at once; iterate over the result for text pieces.

        ``logprobs=N`` (0 to 20) records each generated token's log-probability under the
        model's raw distribution (log-softmax of its logits, before the sampler's settings) and
        the ``N`` most likely alternatives: ``Generation.logprobs``. Greedy decoding then reads
        full logits rows instead of a fused argmax (the same tokens, a little slower).

        ``spec`` (a :class:`ds4.Spec`) turns on speculative decoding: drafted tokens verified in
        one batched pass; at temperature 0 the same tokens as plain greedy decoding, otherwise
        ``spec.sampling`` decides (see :class:`ds4.Spec`); its counters are in ``stats``.
        """
        opts = generate_options(self.model, max_tokens=max_tokens, temperature=temperature, top_k=top_k, top_p=top_p,
                                min_p=min_p, repeat_penalty=repeat_penalty, repeat_last_n=repeat_last_n,
                                presence_penalty=presence_penalty, frequency_penalty=frequency_penalty,
                                logit_bias=logit_bias, seed=seed, stop=stop, stop_at_eog=stop_at_eog,
                                logprobs=logprobs, spec=spec)
        ids = prompt_ids(self.model, prompt, self.n_past)
        core = _core.Generator(self._s, self.model._m, np.asarray(ids, dtype=np.int64), opts)
        gen = Generation(core)
        if not stream:
            core.run()
        return gen

    def truncate(self, n_past: int) -> None:
        """Keep only the first ``n_past`` positions (``0 <= n_past <= self.n_past``)."""
        self._s.truncate(n_past)

    def snapshot(self) -> Snapshot:
        """A copy of the session's state: every layer's slot (the KV cache up to ``n_past``).

        Costs a copy of ``n_past * n_layer * 2 * kv_dim`` cache elements (``snap.nbytes``).
        """
        return self._s.snapshot()

    def restore(self, snap: Snapshot) -> None:
        """Return to ``snap``, taken from a session of the same model (this one or another)."""
        self._s.restore(snap)

    def save(self, path: str | os.PathLike[str]) -> int:
        """Write the session's state to a file (atomically: a crash leaves the old file or the
        whole new one), to :meth:`load` later, in this process or another; returns its size.

        The file names the model it belongs to (the GGUF's contents, the KV type, the activation
        precision and the SIMD level) and carries a checksum (``ds4.state_file``)."""
        return state_file.write(path, self._s.snapshot(), state_file.identity(self.model))

    def load(self, path: str | os.PathLike[str]) -> None:
        """Return to the state a :meth:`save` wrote: the positions it held, bit for bit as a fresh
        prefill of them gives. Raises :class:`ds4.StateFileError` for a file that is not one,
        is corrupt, or belongs to another model, KV type, precision or SIMD level (the session
        is then unchanged)."""
        self._s.restore(state_file.read(path, self._s, state_file.identity(self.model)))

    def __repr__(self) -> str:
        return f"ds4.Session(n_past={self.n_past}, n_ctx={self.n_ctx})"
