"""``ds4-server --kv-disk-dir``: a long prompt's time before and after a restart.

Per round, in a fresh directory: a server starts and answers a long completion prompt (``--tokens``
tokens of prose, one token generated: the time is the prefill's), its state is saved to the
directory; the server stops and a new one starts on the same directory (its start-up scan
included in "start s") and answers the same prompt: the state is loaded from the disk and only the
last prompt token is evaluated; then the prompt again (the session in RAM). Printed: the medians
over rounds of each request's wall time, the saved file's size and the cached tokens usage reported.

Usage: python bench/kv_disk.py [--tokens 2000] [--rounds 3] [--threads 2] [-m FILE]
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from load import ROOT, ds4_cmd, free_port, start  # noqa: E402

TEXT = ("The lighthouse keeper climbed the spiral stairs every evening at dusk, counting the steps as his "
        "father had taught him, and lit the great lamp that warned the fishing boats away from the rocks. ")


def complete(port: int, prompt: str) -> tuple[float, dict[str, object]]:
    body = json.dumps({"model": "m", "prompt": prompt, "max_tokens": 1, "temperature": 0}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", body, {"Content-Type": "application/json"})
    t0 = time.perf_counter()
    with urllib.request.urlopen(req, timeout=600) as r:
        out = json.loads(r.read())
    return time.perf_counter() - t0, out["usage"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=2000, help="prompt length (approximate, in tokens)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("-m", "--model", help="GGUF (default: the embedded model)")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT / "python"))
    from ds4.default_model import default_model_path

    gguf = args.model or str(default_model_path())
    prompt = TEXT * (args.tokens // 40 + 1)
    rows: dict[str, list[float]] = {"cold s": [], "start s": [], "after restart s": [], "in RAM s": [], "file MB": []}
    cached = []
    for _ in range(args.rounds):
        with tempfile.TemporaryDirectory() as d:
            port = free_port()
            cmd = ds4_cmd(gguf, port, args.threads, 1, 4, args.tokens * 2) + ["--kv-disk-dir", d]
            p = start(cmd, port)
            t, _ = complete(port, prompt)
            rows["cold s"].append(t)
            for _ in range(600):  # the background writer
                if list(Path(d).glob("*.ds4kv")):
                    break
                time.sleep(0.1)
            p.send_signal(signal.SIGINT)
            p.wait(60)
            rows["file MB"].append(sum(f.stat().st_size for f in Path(d).glob("*.ds4kv")) / 1e6)
            port = free_port()
            cmd[cmd.index("--port") + 1] = str(port)
            t0 = time.perf_counter()
            p = start(cmd, port)
            rows["start s"].append(time.perf_counter() - t0)
            t, usage = complete(port, prompt)
            rows["after restart s"].append(t)
            cached.append((usage["prompt_tokens"], usage["prompt_tokens_details"]["cached_tokens"]))  # type: ignore[index]
            rows["in RAM s"].append(complete(port, prompt)[0])
            p.send_signal(signal.SIGINT)
            p.wait(60)
    print(f"prompt {cached[0][0]} tokens; cached after the restart {[c for _, c in cached]}")
    print("| " + " | ".join(rows) + " |")
    print("|" + "---:|" * len(rows))
    print("| " + " | ".join(f"{statistics.median(v):.2f}" for v in rows.values()) + " |")


if __name__ == "__main__":
    main()
