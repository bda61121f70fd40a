"""Chunked prefill on ``ds4-server``: what a long prompt joining costs the streams already running.

Per server (ds4-server at each ``--batch-sizes`` value; with ``--peer`` llama-cpp-python's too):
``--streams`` clients stream long answers; after ``--after`` seconds one more client sends a prompt
of ``--prompt-tokens`` tokens (8 tokens answered). Printed: the streams' gap between chunks
(p50 before the long prompt arrives; p50 and max while it is fed, from its arrival to its first
token), its time to first token, and the streams' tokens/s over the whole run.

Usage: python bench/fairness.py [--streams 4] [--prompt-tokens 1500] [--batch-sizes 512,128] [--peer --peer-python PY]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from load import ROOT, ds4_cmd, free_port, peer_cmd, start  # noqa: E402

STORY = "Write a long, detailed story about a lighthouse keeper and the storm that changed his life."
LONG = ("The lighthouse keeper climbed the spiral stairs every evening at dusk, counting the steps as his "
        "father had taught him, and lit the great lamp that warned the fishing boats away from the rocks. ")


async def stream(client: object, url: str, content: str, tokens: int, stamps: list[float]) -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": content}], "max_tokens": tokens,
            "temperature": 0.7, "stream": True}
    async with client.stream("POST", url + "/v1/chat/completions", json=body, timeout=600) as r:  # type: ignore[attr-defined]
        async for line in r.aiter_lines():
            if line.startswith("data: {") and json.loads(line[6:])["choices"][0]["delta"].get("content"):
                stamps.append(time.perf_counter())


async def scenario(url: str, a: argparse.Namespace) -> dict[str, float]:
    import httpx2 as httpx

    streams: list[list[float]] = [[] for _ in range(a.streams)]
    long_stamps: list[float] = []
    async with httpx.AsyncClient(limits=httpx.Limits(max_connections=a.streams + 4)) as client:
        tasks = [asyncio.create_task(stream(client, url, STORY, a.answer_tokens, s)) for s in streams]
        await asyncio.sleep(a.after)
        sent = time.perf_counter()
        await stream(client, url, LONG * (a.prompt_tokens // 40), 8, long_stamps)
        first = long_stamps[0] if long_stamps else float("nan")
        await asyncio.gather(*tasks)
    before, during = [], []
    for s in streams:
        for t0, t1 in zip(s, s[1:]):
            (during if t1 > sent and t0 < first else before if t1 <= sent else []).append(t1 - t0)
    span = max(s[-1] for s in streams if s) - min(s[0] for s in streams if s)
    return {"gap p50 before": statistics.median(before or [float("nan")]),
            "gap p50 during": statistics.median(during or [float("nan")]), "gap max during": max(during or [float("nan")]),
            "long TTFT": first - sent, "streams tok/s": sum(len(s) for s in streams) / span}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--streams", type=int, default=4)
    ap.add_argument("--answer-tokens", type=int, default=400)
    ap.add_argument("--prompt-tokens", type=int, default=1500)
    ap.add_argument("--after", type=float, default=3.0)
    ap.add_argument("--batch-sizes", default="512,128", help="ds4-server -b values")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--peer", action="store_true")
    ap.add_argument("--peer-python", default=sys.executable)
    a = ap.parse_args()
    sys.path.insert(0, str(ROOT / "python"))
    from ds4.default_model import default_model_path

    gguf = str(default_model_path())
    runs = [(f"ds4-server -b {b}", lambda port, b=b: ds4_cmd(gguf, port, a.threads, 8, 64, 4096) + ["-b", b])
            for b in a.batch_sizes.split(",")]
    if a.peer:
        runs.append(("llama-cpp-python server", lambda port: peer_cmd(a.peer_python, gguf, port, a.threads, 4096)))
    print(f"# {a.streams} streams of up to {a.answer_tokens} tokens; a {a.prompt_tokens}-token prompt after {a.after} s")
    print("| server | gap p50 before s | gap p50 during s | gap max during s | long prompt TTFT s | streams tok/s |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, cmd in runs:
        port = free_port()
        proc = start(cmd(port), port)
        try:
            r = asyncio.run(scenario(f"http://127.0.0.1:{port}", a))
        finally:
            proc.terminate()
            proc.wait(30)
        print(f"| {name} | " + " | ".join(f"{v:.3f}" if "gap" in k else f"{v:.2f}" for k, v in r.items()) + " |",
              flush=True)


if __name__ == "__main__":
    main()
