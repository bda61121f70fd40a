"""``ds4.Session``: one sequence evaluated against a shared :class:`ds4.Model`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import numpy as np
import numpy.typing as npt

from ds4 import _core

if TYPE_CHECKING:
    from ds4.model import Model

Snapshot = _core.SessionSnapshot


class Session:
    """A sequence being evaluated: its KV cache and position, against a shared model.

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
        ids = np.asarray(tokens)
        if ids.size == 0:
            ids = ids.astype(np.int64)
        if ids.ndim != 1:
            raise ValueError(f"tokens must be a 1-D sequence of token ids, got shape {ids.shape}")
        if ids.dtype.kind not in "iu":
            raise TypeError(f"tokens must be integers, got dtype {ids.dtype}")
        return self._s.eval(ids)

    def truncate(self, n_past: int) -> None:
        """Keep only the first ``n_past`` positions (``0 <= n_past <= self.n_past``)."""
        self._s.truncate(n_past)

    def snapshot(self) -> Snapshot:
        """A copy of the session's state (``n_past`` and the KV cache up to it).

        Costs a copy of ``n_past * n_layer * 2 * kv_dim`` cache elements (``snap.nbytes``).
        """
        return self._s.snapshot()

    def restore(self, snap: Snapshot) -> None:
        """Return to ``snap``, taken from a session of the same model (this one or another)."""
        self._s.restore(snap)

    def __repr__(self) -> str:
        return f"ds4.Session(n_past={self.n_past}, n_ctx={self.n_ctx})"
