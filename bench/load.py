"""Load on ``ds4-server`` (and, with ``--peer``, on llama-cpp-python's server over the same GGUF):
streaming chat clients in parallel for a while, some hanging up mid-stream.

Per server: a single client alone first (its tok/s is the baseline), then ``--clients`` clients
for ``--seconds`` (each request a short chat from a fixed list, ``--tokens`` tokens at most,
``--disconnect`` of them closed after their first few chunks), then the same with 8 clients.
Printed: requests completed, errors among them (a completed request must end with [DONE]),
hang-ups, time to first token p50 / p99, aggregate tok/s and its ratio to the single client, and
the server's RSS (sampled every 2 s) with its slope after the first fifth of the run (flat: no
leak).

Usage: python bench/load.py [--clients 32] [--seconds 300] [--parallel 8] [--threads 2] [--peer [--peer-python PY]]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ASKS = ["Name three colors.", "What is a river?", "Give me a tip for studying.", "Write a haiku about rain.",
        "Explain what a noun is.", "How do plants grow?", "Say something kind.", "What is 12 times 12?",
        "Describe a cat in one sentence.", "Why do we sleep?", "List two fruits.", "What is the capital of Italy?"]


@dataclass
class Tally:
    completed: int = 0
    errors: int = 0
    hung_up: int = 0
    tokens: int = 0
    ttft: list[float] = field(default_factory=list)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def one(client: object, url: str, tokens: int, hang_up: bool, tally: Tally) -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": random.choice(ASKS)}], "max_tokens": tokens,
            "temperature": 0.7, "stream": True, "stream_options": {"include_usage": True}}
    t0 = time.perf_counter()
    first, n, done, used = None, 0, False, 0
    try:
        async with client.stream("POST", url + "/v1/chat/completions", json=body, timeout=600) as r:  # type: ignore[attr-defined]
            if r.status_code != 200:
                tally.errors += 1
                return
            async for line in r.aiter_lines():
                if not line.startswith("data: "):
                    continue
                if line == "data: [DONE]":
                    done = True
                    break
                chunk = json.loads(line[6:])
                if chunk.get("usage"):
                    used = chunk["usage"]["completion_tokens"]
                delta = chunk["choices"]
                if delta and delta[0]["delta"].get("content"):
                    n += 1
                    first = first or time.perf_counter()
                    if hang_up and n >= 3:
                        tally.hung_up += 1
                        tally.tokens += n
                        return  # leaving the block closes the connection mid-stream
    except Exception:  # noqa: BLE001 - any failure of a request that was not hung up is an error
        tally.errors += 1
        return
    tally.completed += 1
    tally.errors += 0 if done else 1
    tally.tokens += used or n
    if first is not None:
        tally.ttft.append(first - t0)


async def load(url: str, clients: int, seconds: float, tokens: int, disconnect: float) -> tuple[Tally, float]:
    import httpx2 as httpx

    tally = Tally()
    end = time.perf_counter() + seconds
    async with httpx.AsyncClient(limits=httpx.Limits(max_connections=clients + 4)) as client:
        async def worker() -> None:
            while time.perf_counter() < end:
                await one(client, url, tokens, random.random() < disconnect, tally)
        t0 = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(clients)))
    return tally, time.perf_counter() - t0


def start(cmd: list[str], port: int) -> subprocess.Popen[bytes]:
    import urllib.request

    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": str(ROOT / "python")})
    for _ in range(600):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2)
            return p
        except OSError:
            time.sleep(0.5)
    p.kill()
    raise SystemExit(f"server did not start: {' '.join(cmd)}")


def ds4_cmd(gguf: str, port: int, threads: int, parallel: int, max_queue: int, ctx: int) -> list[str]:
    return [sys.executable, "-m", "ds4.server.cli", "-m", gguf, "--port", str(port), "--threads", str(threads),
            "--parallel", str(parallel), "--max-queue", str(max_queue), "--ctx", str(ctx)]


def peer_cmd(python: str, gguf: str, port: int, threads: int, ctx: int, chat_format: str = "gemma") -> list[str]:
    return [python, "-m", "llama_cpp.server", "--model", gguf, "--port", str(port), "--n_threads", str(threads),
            "--n_ctx", str(ctx), "--chat_format", chat_format,
            # by default a new request interrupts the one streaming
            "--interrupt_requests", "False"]


def report(name: str, t: Tally, wall: float, single: float | None, rss: list[tuple[float, float]]) -> float:
    rate = t.tokens / wall
    ttft = sorted(t.ttft) or [float("nan")]
    p99 = ttft[min(len(ttft) - 1, int(0.99 * len(ttft)))]
    line = (f"| {name} | {t.completed} | {t.errors} | {t.hung_up} | {statistics.median(ttft):.2f} | {p99:.2f} | "
            f"{rate:.1f} | {rate / single:.2f}x |" if single else "")
    if rss:
        warm = rss[len(rss) // 5:]
        if len(warm) >= 2:
            xs, ys = [x for x, _ in warm], [y for _, y in warm]
            mx, my = statistics.fmean(xs), statistics.fmean(ys)
            slope = sum((x - mx) * (y - my) for x, y in warm) / max(1e-9, sum((x - mx) ** 2 for x in xs))
            line += f" {ys[0]:.0f} -> {ys[-1]:.0f} MB, {slope * 60:+.2f} MB/min |"
    print(line, flush=True)
    return rate


def run(name: str, cmd: list[str], port: int, a: argparse.Namespace) -> None:
    proc = start(cmd, port)
    url = f"http://127.0.0.1:{port}"
    try:
        single, wall = asyncio.run(load(url, 1, a.single_seconds, a.tokens, 0.0))
        base = single.tokens / wall
        print(f"| {name}, 1 client | {single.completed} | {single.errors} | 0 | {statistics.median(single.ttft or [float('nan')]):.2f} | "
              f"- | {base:.1f} | 1.00x | |", flush=True)
        for clients, seconds in ((8, a.seconds / 4), (a.clients, a.seconds)):
            rss: list[tuple[float, float]] = []
            t0 = time.perf_counter()

            async def sample() -> tuple[Tally, float]:
                async def watch() -> None:
                    while True:
                        rss.append((time.perf_counter() - t0, rss_mb(proc.pid)))
                        await asyncio.sleep(2)
                w = asyncio.create_task(watch())
                out = await load(url, clients, seconds, a.tokens, a.disconnect)
                w.cancel()
                return out
            t, wall = asyncio.run(sample())
            report(f"{name}, {clients} clients", t, wall, base, rss)
    finally:
        proc.terminate()
        proc.wait(30)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--seconds", type=float, default=300)
    ap.add_argument("--single-seconds", type=float, default=30)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--disconnect", type=float, default=0.1)
    ap.add_argument("--parallel", type=int, default=8, help="ds4-server --parallel")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--peer", action="store_true", help="also llama-cpp-python's server on the same GGUF")
    ap.add_argument("--peer-python", default=sys.executable,
                    help="the Python that has llama-cpp-python's server extras (fastapi, sse-starlette, ...), "
                         "e.g. a venv beside this one, so that their pins do not touch ds4-server's stack")
    ap.add_argument("--peer-chat-format", default="gemma",
                    help="its --chat_format (the embedded Gemma's; from the GGUF's template it answers nothing)")
    ap.add_argument("--no-ds4", action="store_true", help="the peer only")
    a = ap.parse_args()
    sys.path.insert(0, str(ROOT / "python"))
    from ds4.default_model import default_model_path

    gguf = str(default_model_path())
    with open("/proc/cpuinfo") as fh:
        cpu = next((line.split(":", 1)[1].strip() for line in fh if line.startswith("model name")), "?")
    print(f"# {cpu}, {a.threads} threads; {Path(gguf).name}; {a.tokens} tokens per answer, "
          f"{a.disconnect:.0%} of requests hung up after 3 chunks")
    print("| server, load | completed | errors | hung up | TTFT p50 s | TTFT p99 s | tok/s | vs 1 client | RSS |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
    port = free_port()
    if not a.no_ds4:
        run("ds4-server", ds4_cmd(gguf, port, a.threads, a.parallel, 4 * a.clients, 2048), port, a)
    if a.peer:
        port = free_port()
        run("llama-cpp-python server", peer_cmd(a.peer_python, gguf, port, a.threads, 2048, a.peer_chat_format), port, a)


if __name__ == "__main__":
    main()
