"""``ds4.Batch``: many generations on one model, one forward pass per step."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ds4 import _core
from ds4.generation import Generation
from ds4.options import generate_options, prompt_ids

if TYPE_CHECKING:
    from ds4.model import Model
    from ds4.session import Session


class Batch:
    """Generations that share each forward pass of one model (``Model.batch``).

    Each :meth:`step` runs one pass over every running generation's next rows (its last
    sampled token, or its prompt) and lets each sample and stream its next token. A row's
    result does not depend on the others in its pass, so every generation gets exactly the
    tokens it would get alone. Generations may be added between steps and leave when done;
    decoding is plain (``spec`` is refused), as the seeds' session-batched serving.
    """

    def __init__(self, model: Model, max_rows: int = 512) -> None:
        self.model = model
        self._e = _core.Engine(model._m, max_rows)
        self._watch: list[tuple[Generation, Callable[[str], Any], list[int]]] = []
        # The engine holds each generator until the step after it ended: kept alive here till then.
        self._held: list[Generation] = []

    def add(
        self,
        prompt: str | Sequence[int],
        *,
        session: Session | None = None,
        on_text: Callable[[str], Any] | None = None,
        **options: Any,
    ) -> Generation:
        """Start a generation of ``prompt`` (in ``session``, else a new one) with the options of
        :meth:`ds4.Session.generate` (``stream`` and ``spec`` aside). ``on_text`` is called
        after each step with the text that step added, if any."""
        if options.get("spec") is not None:
            raise ValueError("batched generation decodes plainly: spec is not available here")
        if "stream" in options:
            raise TypeError("batched generations stream through on_text, not stream=")
        session = session if session is not None else self.model.session()
        opts = generate_options(self.model, **options)
        ids = prompt_ids(self.model, prompt, session.n_past)
        core = _core.Generator(session._s, self.model._m, np.asarray(ids, dtype=np.int64), opts)
        self._e.add(core)
        gen = Generation(core)
        self._held.append(gen)
        if on_text is not None:
            self._watch.append((gen, on_text, [0]))
            self._notify()
        return gen

    def step(self) -> bool:
        """One forward pass; returns whether any generation is still running."""
        ended = {id(g) for g in self._held if g.done}
        running = self._e.step()  # which lets go of the ones that had ended
        self._held = [g for g in self._held if id(g) not in ended]
        self._notify()
        return running

    def run(self) -> None:
        """Steps until every generation has ended."""
        while self.step():
            pass

    @property
    def running(self) -> int:
        return self._e.running

    @property
    def passes(self) -> int:
        """Forward passes run so far."""
        return self._e.passes

    def _notify(self) -> None:
        left = []
        for gen, cb, shown in self._watch:
            text = gen.text
            if len(text) > shown[0]:
                cb(text[shown[0]:])
                shown[0] = len(text)
            if not gen.done:
                left.append((gen, cb, shown))
        self._watch = left
