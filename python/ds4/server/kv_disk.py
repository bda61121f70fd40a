"""The prompt cache on disk (``ds4-server --kv-disk-dir DIR --kv-disk-space-mb N``): finished
sessions' states kept as state files (ds4.state_file) named by their tokens, so that a prompt
repeated after a restart, or after its session left the cache in RAM, continues a saved state
instead of being evaluated again.

- Saving: a finished session holding at least ``min_tokens`` positions is snapshotted in the
  caller's thread (a copy of its cache) and written by a background thread, atomically (a
  temporary file, fsync, rename) with a checksum; when saving it would go over the budget, the
  least recently used entries are removed first, never the new one (one larger than the whole
  budget is not saved). An entry whose tokens begin another's is removed when that one is saved:
  the longer one serves every prompt the shorter one did.
- Loading: the entry sharing the longest prefix with a prompt, when it beats the RAM cache's
  best, is read, checked (model, engine format, checksum) and restored; an entry that fails a
  check is removed with a log line and the prompt is evaluated as usual.
- At start, the directory is scanned: files of another model or engine format, corrupt ones and
  the temporary files of saves cut short (a crash, kill -9) are removed with a log line.
"""

from __future__ import annotations

import hashlib
import logging
import os
import queue
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ds4 import state_file
from ds4.model import Model
from ds4.session import Session

log = logging.getLogger("ds4.server")

SUFFIX = ".ds4kv"


@dataclass(eq=False)
class Entry:
    path: Path
    tokens: np.ndarray  # int64 ids of the positions the state holds
    size: int           # bytes on disk
    used: float         # last use (saved or loaded), for LRU


def common_prefix(a: np.ndarray, b: np.ndarray) -> int:
    n = min(len(a), len(b))
    diff = np.flatnonzero(a[:n] != b[:n])
    return int(diff[0]) if len(diff) else n


class DiskCache:
    def __init__(self, model: Model, directory: str | os.PathLike[str], budget_bytes: int, min_tokens: int = 256) -> None:
        if budget_bytes <= 0 or min_tokens < 1:
            raise ValueError(f"the disk cache needs a budget > 0 and min_tokens >= 1, got {budget_bytes}, {min_tokens}")
        self.model, self.dir, self.budget, self.min_tokens = model, Path(directory), budget_bytes, min_tokens
        self.dir.mkdir(parents=True, exist_ok=True)
        self.model_id = state_file.identity(model)
        self.n_ctx = model.n_ctx
        self._lock = threading.Lock()
        self._entries: dict[str, Entry] = {}
        self._scan()
        self._queue: queue.Queue[tuple[str, object] | None] = queue.Queue(maxsize=4)
        self._thread = threading.Thread(target=self._write_loop, name="ds4-kv-disk", daemon=True)
        self._thread.start()

    # -- index ---------------------------------------------------------------------------------

    def _scan(self) -> None:
        for p in sorted(self.dir.iterdir()):
            if p.name.startswith(state_file.TEMP_PREFIX) and p.name.endswith(SUFFIX):
                log.warning("kv-disk: removing %s, a save cut short", p.name)
                p.unlink(missing_ok=True)
                continue
            if not p.name.endswith(SUFFIX) or not p.is_file():
                continue
            try:
                h = state_file.read_header(p)
                state_file.check_header(p, h, self.model_id)
            except (state_file.StateFileError, OSError) as e:
                log.warning("kv-disk: removing %s: %s", p.name, e)
                p.unlink(missing_ok=True)
                continue
            st = p.stat()
            self._entries[p.name] = Entry(p, np.asarray(h.tokens, dtype=np.int64), st.st_size, st.st_mtime)

    @property
    def used_bytes(self) -> int:
        with self._lock:
            return sum(e.size for e in self._entries.values())

    def entries(self) -> list[Entry]:
        with self._lock:
            return list(self._entries.values())

    def _drop(self, name: str, why: str) -> None:
        with self._lock:
            e = self._entries.pop(name, None)
        if e is not None:
            log.warning("kv-disk: removing %s: %s", name, why)
            e.path.unlink(missing_ok=True)

    # -- lookup --------------------------------------------------------------------------------

    def best(self, prompt: Sequence[int], better_than: int = 0) -> tuple[Entry, int] | None:
        """The entry sharing the longest prefix with `prompt` (and that many tokens), when longer
        than `better_than` and than min_tokens."""
        want = np.asarray(prompt, dtype=np.int64)
        found, common = None, max(better_than, self.min_tokens - 1)
        with self._lock:
            for e in self._entries.values():
                if len(e.tokens) > self.n_ctx:
                    continue
                k = common_prefix(e.tokens, want)
                if k > common:
                    found, common = e, k
        return (found, common) if found is not None else None

    def load(self, entry: Entry, session: Session) -> bool:
        """Restores `entry` into `session`; False (logged, the entry removed if it is bad) when it
        cannot be used."""
        try:
            session.load(entry.path)
        except state_file.StateFileError as e:
            self._drop(entry.path.name, str(e))
            return False
        except OSError as e:  # removed meanwhile (evicted by a save)
            log.info("kv-disk: %s is gone: %s", entry.path.name, e)
            with self._lock:
                self._entries.pop(entry.path.name, None)
            return False
        now = time.time()
        entry.used = now
        try:
            os.utime(entry.path, (now, now))
        except OSError:
            pass
        return True

    # -- saving --------------------------------------------------------------------------------

    @staticmethod
    def name_of(tokens: np.ndarray) -> str:
        return hashlib.blake2b(np.asarray(tokens, dtype="<i4").tobytes(), digest_size=16).hexdigest() + SUFFIX

    def offer(self, session: Session) -> bool:
        """Queues `session`'s state for saving, when it holds min_tokens positions or more and no
        entry holds them already; False when skipped (too short, known, or the writer is busy)."""
        if session.n_past < self.min_tokens:
            return False
        if self._queue.full():  # before the snapshot: its copy would be wasted
            log.info("kv-disk: the writer is busy; not saving a %d-position state", session.n_past)
            return False
        snap = session.snapshot()
        tokens = np.asarray(snap.tokens, dtype=np.int64)
        if len(tokens) < self.min_tokens:
            return False
        name = self.name_of(tokens)
        with self._lock:
            for e in self._entries.values():
                if len(e.tokens) >= len(tokens) and common_prefix(e.tokens, tokens) == len(tokens):
                    e.used = time.time()
                    return False
        try:
            self._queue.put_nowait((name, snap))
        except queue.Full:  # filled meanwhile (by a close)
            return False
        return True

    def flush(self) -> None:
        """Waits until every queued state is written."""
        self._queue.join()

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join()

    def _write_loop(self) -> None:
        while (item := self._queue.get()) is not None:
            try:
                self._write(*item)
            except Exception:  # noqa: BLE001 - a failed save loses that entry, not the server
                log.exception("kv-disk: saving a state failed")
            finally:
                self._queue.task_done()
        self._queue.task_done()

    def _write(self, name: str, snap: object) -> None:
        data = snap.to_bytes()  # type: ignore[attr-defined]
        tokens = np.asarray(snap.tokens, dtype=np.int64)  # type: ignore[attr-defined]
        size = len(data) + 4096  # the header's few KiB, counted before it is known
        if size > self.budget:
            log.info("kv-disk: a %d-token state (%d MB) exceeds the whole budget; not saved", len(tokens), size >> 20)
            return
        with self._lock:
            victims = [e for e in self._entries.values()
                       if len(e.tokens) < len(tokens) and common_prefix(e.tokens, tokens) == len(e.tokens)]
            used = sum(e.size for e in self._entries.values() if e not in victims)
            for e in sorted(self._entries.values(), key=lambda e: e.used):
                if used + size <= self.budget:
                    break
                if e not in victims:
                    victims.append(e)
                    used -= e.size
            for e in victims:
                del self._entries[e.path.name]
        for e in victims:
            e.path.unlink(missing_ok=True)
        path = self.dir / name
        written = state_file.write(path, snap, self.model_id, data=data)  # type: ignore[arg-type]
        with self._lock:
            self._entries[name] = Entry(path, tokens, written, time.time())
        log.info("kv-disk: saved %d positions in %s (%.1f MB; %.1f of %.1f MB used)", len(tokens), name,
                 written / 1e6, self.used_bytes / 1e6, self.budget / 1e6)
