"""The prompt cache on disk (ds4.server.kv_disk, ``ds4-server --kv-disk-dir``): after a restart a
repeated long prompt continues the saved state (its answer unchanged, its prefill skipped: usage
reports the cached tokens); entries of another model, corrupt ones and the temporary files of
saves cut short are removed at start, never loaded; the budget evicts the least recently used
entries, never a new entry by its own insertion; a writer killed (SIGKILL) at random points, 60
times, never leaves a file that loads torn."""

from __future__ import annotations

import logging
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import live  # noqa: E402

import ds4  # noqa: E402
from ds4 import state_file  # noqa: E402
from ds4.server.kv_disk import DiskCache  # noqa: E402
from ds4.server.worker import PromptCache  # noqa: E402

TEXT = ("The lighthouse keeper climbed the spiral stairs every evening at dusk, counting the steps as his "
        "father had taught him, and lit the great lamp that warned the fishing boats away from the rocks. ")


def prompt(model: ds4.Model, n: int, tail: str = "") -> list[int]:
    ids = model.tokenize(TEXT * 12)[:n]
    return ids + model.tokenize(tail, add_special=False) if tail else ids


def answer(session: ds4.Session, ids: list[int], cached: int) -> list[int]:
    return session.generate(ids[cached:], max_tokens=6, stop_at_eog=False).tokens


def test_a_restart_continues_the_saved_state(model: ds4.Model, tmp_path: Path) -> None:
    ids = prompt(model, 300)
    disk = DiskCache(model, tmp_path, 1 << 30, min_tokens=64)
    cache = PromptCache(model, 0, disk)  # no sessions kept in RAM: only the disk remembers
    s, cached = cache.take(ids)
    assert cached == 0
    first = answer(s, ids, cached)
    cache.give(s)
    disk.close()
    assert len(disk.entries()) == 1 and disk.entries()[0].tokens.tolist() == ids + first[:-1]

    again = PromptCache(model, 0, DiskCache(model, tmp_path, 1 << 30, min_tokens=64))  # a new server
    s2, cached2 = again.take(ids)
    assert cached2 == len(ids) - 1  # the last prompt token is evaluated again for its logits
    assert answer(s2, ids, cached2) == first
    # a longer prompt sharing the saved prefix (the conversation's next turn) continues it too
    more = ids + first + model.tokenize(" And then", add_special=False)
    s3, cached3 = again.take(more)
    assert cached3 == len(ids) + len(first) - 1
    assert answer(s3, more, cached3) == answer(model.session(), more, 0)


def test_short_prompts_are_not_saved(model: ds4.Model, tmp_path: Path) -> None:
    disk = DiskCache(model, tmp_path, 1 << 30, min_tokens=64)
    s = model.session()
    s.eval(prompt(model, 40))
    assert not disk.offer(s)
    disk.close()
    assert disk.entries() == []


def _saved(model: ds4.Model, disk: DiskCache, n: int, tail: str) -> Any:
    s = model.session()
    s.eval(prompt(model, n, tail))
    assert disk.offer(s)
    disk.flush()
    return next(e for e in disk.entries() if e.tokens.tolist() == s.tokens)


def test_the_budget_evicts_least_recently_used(model: ds4.Model, tmp_path: Path) -> None:
    probe = DiskCache(model, tmp_path / "probe", 1 << 30, min_tokens=64)
    size = _saved(model, probe, 100, " one").size
    probe.close()
    disk = DiskCache(model, tmp_path / "lru", int(3.5 * size), min_tokens=64)
    a, b, c = (_saved(model, disk, 100, t) for t in (" one", " two", " three"))
    assert disk.load(a, model.session())  # a is used again: b is now the oldest
    d = _saved(model, disk, 100, " four")
    names = {e.path.name for e in disk.entries()}
    assert names == {a.path.name, c.path.name, d.path.name} and not b.path.exists()
    assert disk.used_bytes <= disk.budget
    big = model.session()
    big.eval(prompt(model, 380))
    disk.offer(big)  # larger than the whole budget: not saved, and nothing evicted for it
    disk.flush()
    assert {e.path.name for e in disk.entries()} == names
    disk.close()


def test_a_longer_state_replaces_its_prefix(model: ds4.Model, tmp_path: Path) -> None:
    disk = DiskCache(model, tmp_path, 1 << 30, min_tokens=64)
    s = model.session()
    s.eval(prompt(model, 120))
    disk.offer(s)
    disk.flush()
    assert not disk.offer(s)  # already saved
    s.eval(model.tokenize(" and further on", add_special=False))
    disk.offer(s)
    disk.flush()
    assert [e.tokens.tolist() for e in disk.entries()] == [s.tokens]
    assert len(list(tmp_path.iterdir())) == 1
    disk.close()


def test_bad_entries_are_removed_at_start(model: ds4.Model, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    disk = DiskCache(model, tmp_path, 1 << 30, min_tokens=64)
    good = _saved(model, disk, 100, " good")
    disk.close()
    other = ds4.Model(model.path, threads=2, n_ctx=512, kv_type="f32")  # the same file, another KV type
    s = other.session()
    s.eval(prompt(other, 90))
    s.save(tmp_path / ("0" * 32 + ".ds4kv"))
    corrupt = tmp_path / ("1" * 32 + ".ds4kv")
    corrupt.write_bytes(good.path.read_bytes()[:-1000])
    (tmp_path / ".tmp-abc.ds4kv").write_bytes(b"half a save")
    (tmp_path / "notes.txt").write_text("not ours")
    with caplog.at_level(logging.INFO, logger="ds4.server"):
        disk = DiskCache(model, tmp_path, 1 << 30, min_tokens=64)
    assert "another model" in caplog.text and "a save cut short" in caplog.text
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([good.path.name, corrupt.name, "notes.txt"])
    # the cut file's header is whole: it is indexed, and refused by its size when loaded
    bad = next(e for e in disk.entries() if e.path == corrupt)
    with caplog.at_level(logging.INFO, logger="ds4.server"):
        assert not disk.load(bad, model.session())
    assert "bytes of state where the header says" in caplog.text and not corrupt.exists()
    disk.close()


WRITER = textwrap.dedent("""
    import sys, types
    from pathlib import Path
    from ds4 import state_file
    d, data, tokens, model_id = Path(sys.argv[1]), Path(sys.argv[2]).read_bytes(), eval(sys.argv[3]), sys.argv[4]
    snap = types.SimpleNamespace(tokens=tokens)
    print("ready", flush=True)
    i = 0
    while True:
        state_file.write(d / f"{i % 3:032x}.ds4kv", snap, model_id, data=data)
        i += 1
""")


def test_a_killed_writer_never_leaves_a_torn_file(model: ds4.Model, tmp_path: Path) -> None:
    s = model.session()
    s.eval(prompt(model, 300))
    snap = s.snapshot()
    data = snap.to_bytes()
    (tmp_path / "state.bin").write_bytes(data)
    d = tmp_path / "cache"
    d.mkdir()
    rng = random.Random(7)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    torn = 0
    for _ in range(60):
        p = subprocess.Popen([sys.executable, "-c", WRITER, str(d), str(tmp_path / "state.bin"), repr(snap.tokens),
                              state_file.identity(model)], stdout=subprocess.PIPE, env=env)
        assert p.stdout is not None and p.stdout.readline() == b"ready\n"
        time.sleep(rng.uniform(0.0, 0.05))
        p.send_signal(signal.SIGKILL)
        p.wait()
        torn += any(f.name.startswith(".tmp-") for f in d.iterdir())
        disk = DiskCache(model, d, 1 << 30, min_tokens=64)
        assert not any(f.name.startswith(".tmp-") for f in d.iterdir())
        for e in disk.entries():
            restored = model.session()
            assert disk.load(e, restored), e.path
            assert restored.tokens == snap.tokens
        disk.close()
    assert torn >= 10, f"only {torn} of 60 kills landed during a save"


def test_a_restarted_server_reports_the_cached_prompt(model: ds4.Model, tmp_path: Path) -> None:
    openai = pytest.importorskip("openai")
    usage = []
    for _ in range(2):  # the second server starts from the first one's directory
        disk = DiskCache(model, tmp_path, 1 << 30, min_tokens=64)
        with live.serve(model, parallel=2, disk=disk) as (url, _srv):
            client = openai.OpenAI(base_url=url + "/v1", api_key="none", max_retries=0, timeout=120)
            r = client.completions.create(model="gemma-test", prompt=TEXT * 6, max_tokens=4, temperature=0)
        usage.append(r.usage)
    assert usage[0].prompt_tokens_details.cached_tokens == 0
    assert usage[1].prompt_tokens_details.cached_tokens == usage[1].prompt_tokens - 1
    assert usage[1].prompt_tokens > 64
