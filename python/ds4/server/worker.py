"""The server's generation thread: one model, every request's generation on it.

Requests wait in a bounded queue (``Busy`` when it is full: the server answers 429) and join the
running batch at the next step (continuous batching: ``ds4.Batch``, one forward pass per step for
every running generation, a long prompt fed in chunks beside the decoding rows). With one slot
(``parallel=1``) a request runs alone and may speculate (``spec``), as the seeds' non-batched
serving; batched generations decode plainly. Events reach each request's asyncio queue through its
event loop: ``("text", piece)`` as text is decoded (after it, ``("call", ToolCall)`` as a call
closes; before it, when the request asked for logprobs, ``("logprobs", [TokenLogprob, ...])`` of
the tokens generated since the last: with tools, of those whose text it shows, call syntax left
out), then ``("done", Generation)`` or ``("error", message)``.
A cancelled request (its client went away) ends at the next step and frees its slot.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ds4.generation import Generation
from ds4.model import Model
from ds4.session import Session
from ds4.server.kv_disk import DiskCache, common_prefix
from ds4.server.tools import ToolParser
from ds4.speculative import Spec

log = logging.getLogger("ds4.server")


class Busy(Exception):
    """The queue of waiting requests is full."""


@dataclass
class Job:
    prompt: Sequence[int]
    options: dict[str, Any]  # Session.generate's options (max_tokens, temperature, stop, seed, ...)
    loop: asyncio.AbstractEventLoop
    tool_style: str | None = None  # the request has tools: parse calls in this syntax (ds4.server.tools)
    prefix: str = ""  # what the prompt made the answer start with (a forced call): parsed, not shown
    events: asyncio.Queue[tuple[str, Any]] = field(default_factory=asyncio.Queue)
    outbox: list[tuple[str, Any]] = field(default_factory=list)  # events not yet posted (post())
    cancelled: bool = False
    gen: Generation | None = None
    session: Session | None = None
    cached: int = 0  # prompt tokens a cached session held already
    batched: bool = False  # decoded in the batched step (whose generations cannot switch sampling)
    shown: int = 0  # characters of the generation's text relayed so far (batched)
    parser: ToolParser | None = None
    calls_sent: int = 0
    switched: bool = False
    logprobs_sent: int = 0  # tokens whose logprobs were taken from the generation
    logprobs_held: list[Any] = field(default_factory=list)  # theirs while the parser holds their text

    def _logprobs(self) -> list[Any]:
        """The logprobs of the tokens generated since the last call, when the request asked for
        them; an end-of-generation token (never shown) is left out."""
        gen = self.gen
        if gen is None or self.options.get("logprobs") is None:
            return []
        new = gen.logprobs_from(self.logprobs_sent) or []
        self.logprobs_sent += len(new)
        if new and gen.done and gen.stats["stop_reason"] == "eog":
            new.pop()
        return new

    def _relay_logprobs(self, new: list[Any], shown: str, call_syntax: bool, waiting: bool) -> None:
        """With tools, the logprobs follow the text as the parser resolves it (OpenAI reports
        them for the message's content only): a step's tokens wait while the parser holds their
        text (a possible call opener), go out with the text it shows, and are dropped where they
        turned out to be call syntax."""
        held = self.logprobs_held + new
        if call_syntax and not shown:
            held = []
        elif waiting and not shown:
            self.logprobs_held = held
            return
        self.logprobs_held = []
        if held:
            self.emit("logprobs", held)

    def emit(self, kind: str, value: Any) -> None:
        """An event for the request, sent by the next post()."""
        self.outbox.append((kind, value))

    def relay(self, piece: str, final: bool = False) -> None:
        """Decoded text to the request: shown text as ``("text", ...)``, each tool call as it closes
        as ``("call", ToolCall)``. Where the answer enters call syntax, a generation that can switch
        (not batched) samples greedily from there on: the seeds' sampling-mode boundary, which
        rewinds drafts accepted past it."""
        new = self._logprobs()
        if self.tool_style is None:
            if new:
                self.emit("logprobs", new)
            if piece:
                self.emit("text", piece)
            return
        if self.parser is None:
            self.parser = ToolParser(self.tool_style)
            self.parser.feed(self.prefix)
        p = self.parser
        calls = len(p.calls)
        shown = p.feed(piece) + (p.finish() if final else "")
        self._relay_logprobs(new, shown, p.in_call or len(p.calls) > calls, p.holding and not final)
        if shown:
            self.emit("text", shown)
        while self.calls_sent < len(p.calls):
            self.emit("call", p.calls[self.calls_sent])
            self.calls_sent += 1
        gen = self.gen
        if p.in_call and not final and not self.batched and not self.switched and gen is not None and not gen.done:
            self.switched = True
            gen.set_sampling(temperature=0.0)


def post(jobs: Sequence[Job]) -> None:
    """Sends the jobs' pending events: one wake-up of each event loop for all of them. A step's
    events go together because every wake-up of the loop (and of the clients it writes to) takes
    a core from the compute threads mid-pass, which stalls the other thread at the op's end."""
    by_loop: dict[asyncio.AbstractEventLoop, list[tuple[Job, list[tuple[str, Any]]]]] = {}
    for job in jobs:
        if job.outbox:
            by_loop.setdefault(job.loop, []).append((job, job.outbox))
            job.outbox = []
    for loop, items in by_loop.items():
        loop.call_soon_threadsafe(_deliver, items)


def _deliver(items: list[tuple[Job, list[tuple[str, Any]]]]) -> None:
    for job, events in items:
        for event in events:
            job.events.put_nowait(event)


class PromptCache:
    """Idle sessions, the most recently used last: a new prompt continues the one holding the
    longest common prefix with it (a conversation's next turn re-sends its history), rewound to
    that prefix, so only the rest is evaluated. With a cache on disk (kv_disk.DiskCache), a
    saved state sharing a longer prefix is loaded instead, and finished sessions are offered to
    it. The cached positions' logits are bit for bit those of a fresh prefill (the engine's batch
    invariance), so the answer does not change."""

    def __init__(self, model: Model, slots: int, disk: DiskCache | None = None) -> None:
        self.model, self.slots, self.disk = model, slots, disk
        self.idle: list[Session] = []

    def take(self, prompt: Sequence[int]) -> tuple[Session, int]:
        """A session for `prompt` and how many of its first tokens it holds already."""
        want = np.asarray(prompt, dtype=np.int64)
        best, common = None, 0
        for s in self.idle:
            k = common_prefix(np.asarray(s.tokens, dtype=np.int64), want)
            if k > common:
                best, common = s, k
        last = len(want) - 1  # the last prompt token is evaluated again: its logits are needed
        hit = self.disk.best(want, better_than=min(common, last)) if self.disk is not None else None
        if hit is not None and min(hit[1], last) > min(common, last):
            session = self.model.session()
            if self.disk.load(hit[0], session):  # type: ignore[union-attr]
                return self._rewound(session, min(hit[1], last))
        keep = min(common, last)
        if best is None or keep < 1:
            return self.model.session(), 0
        self.idle.remove(best)
        return self._rewound(best, keep)

    def _rewound(self, session: Session, keep: int) -> tuple[Session, int]:
        try:
            session.truncate(keep)
        except (ValueError, RuntimeError):  # a state that cannot rewind there (recurrent layers)
            return self.model.session(), 0
        return session, keep

    def give(self, session: Session) -> None:
        if self.disk is not None:
            self.disk.offer(session)
        if self.slots > 0:
            self.idle.append(session)
            del self.idle[:-self.slots]


class Worker:
    def __init__(self, model: Model, parallel: int = 4, max_queue: int = 64, spec: Spec | None = None,
                 max_rows: int = 128, cache_slots: int = 8, disk: DiskCache | None = None) -> None:
        if parallel < 1 or max_queue < 0 or cache_slots < 0:
            raise ValueError(f"parallel must be >= 1, max_queue and cache_slots >= 0, got {parallel}, {max_queue}, "
                             f"{cache_slots}")
        if max_rows < parallel:
            raise ValueError(f"a batched pass of {max_rows} rows cannot decode {parallel} sessions: the batch size must "
                             f"be at least --parallel")
        self.model, self.parallel, self.max_queue, self.spec = model, parallel, max_queue, spec
        self.cache = PromptCache(model, cache_slots, disk)
        self._max_rows = max_rows
        self._waiting: deque[Job] = deque()
        self._cond = threading.Condition()
        self._stop = False
        self._running = 0
        self._thread = threading.Thread(target=self._run, name="ds4-server-worker", daemon=True)
        self._thread.start()

    @property
    def running(self) -> int:
        """Requests generating."""
        return self._running

    def submit(self, job: Job) -> None:
        with self._cond:
            free = self.parallel - self._running
            if len(self._waiting) >= self.max_queue + max(0, free):
                raise Busy(f"{self._running} requests are generating and {len(self._waiting)} waiting "
                           f"(--parallel {self.parallel}, --max-queue {self.max_queue}); retry later")
            self._waiting.append(job)
            self._cond.notify()

    def cancel(self, job: Job) -> None:
        with self._cond:
            job.cancelled = True
            if job in self._waiting:
                self._waiting.remove(job)
            self._cond.notify()

    def close(self) -> None:
        with self._cond:
            self._stop = True
            self._cond.notify()
        self._thread.join()
        if self.cache.disk is not None:
            self.cache.disk.close()

    def _next_jobs(self, running: int) -> list[Job] | None:
        """Waits until there is work; the jobs that take the free slots (None: stopping)."""
        with self._cond:
            self._running = running
            while not self._stop and not self._waiting and running == 0:
                self._cond.wait()
            if self._stop:
                return None
            out = []
            while self._waiting and running + len(out) < self.parallel:
                out.append(self._waiting.popleft())
            self._running = running + len(out)
            return out

    def _run(self) -> None:
        if self.parallel == 1:
            self._run_alone()
            return
        batch = self.model.batch(self._max_rows)
        active: list[Job] = []
        while (new := self._next_jobs(len(active))) is not None:
            for job in new:
                job.batched = True
                job.session, job.cached = self.cache.take(job.prompt)
                try:
                    job.gen = batch.add(list(job.prompt[job.cached:]), session=job.session, **job.options)
                except (ValueError, RuntimeError) as e:
                    job.emit("error", str(e))
                    post([job])
                    continue
                active.append(job)
            for job in active:
                if job.cancelled:
                    job.gen.cancel()
            if active:
                try:
                    batch.step()
                except Exception as e:  # noqa: BLE001 - a failed pass ends its requests, not the server
                    log.exception("a batched step failed")
                    for job in active:
                        job.emit("error", f"generation failed: {e}")
                        job.gen.cancel()
                    post(active)
                    batch = self.model.batch(self._max_rows)
                    active = []
                    continue
            left = []
            for job in active:
                gen = job.gen
                assert gen is not None
                text = gen.text
                if not job.cancelled and (len(text) > job.shown or gen.done):
                    job.relay(text[job.shown:], final=gen.done)
                    job.shown = len(text)
                if gen.done:
                    job.emit("done", gen)
                    self.cache.give(job.session)
                else:
                    left.append(job)
            post(active)
            active = left

    def _run_alone(self) -> None:
        while (new := self._next_jobs(0)) is not None:
            for job in new:
                try:
                    job.session, job.cached = self.cache.take(job.prompt)
                    job.gen = job.session.generate(list(job.prompt[job.cached:]), stream=True, spec=self.spec,
                                                   **job.options)
                    for piece in job.gen:
                        if job.cancelled:
                            job.gen.cancel()
                            break
                        job.relay(piece)
                        post([job])
                    job.relay("", final=True)
                except (ValueError, RuntimeError) as e:
                    job.emit("error", str(e))
                    post([job])
                    continue
                job.emit("done", job.gen)
                post([job])
                self.cache.give(job.session)
