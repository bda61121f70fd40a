"""``ds4-server [-m FILE] [--host H] [--port P] [--ctx N] [--parallel N] [--max-queue N]
[--kv-disk-dir DIR --kv-disk-space-mb N] [--huge-pages]`` plus the speculative flags of ``ds4``: serves the model
(the embedded one without -m) over OpenAI's and Anthropic's APIs."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def build_parser() -> argparse.ArgumentParser:
    from ds4.cli_generate import HUGE_PAGES_HELP, add_spec_arguments

    p = argparse.ArgumentParser(prog="ds4-server", description="ds4's OpenAI-compatible HTTP server")
    p.add_argument("-m", "--model", help="GGUF file (default: the embedded Gemma 3 270M)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8080, help="port (default 8080)")
    p.add_argument("-c", "--ctx", "--ctx-size", dest="ctx", type=int, default=None,
                   help="context length of each session (default: the model's trained context)")
    p.add_argument("-t", "--threads", type=int, default=None, help="threads (default: all cores)")
    p.add_argument("--parallel", "-np", type=int, default=4,
                   help="sessions decoded together in one batched step (default 4); 1 runs requests one at a time, "
                        "with the speculative flags")
    p.add_argument("-b", "--batch-size", type=int, default=128,
                   help="rows of one batched forward pass at most (default 128): decoding rows first, chunks of new "
                        "prompts fill the rest; smaller keeps streams smoother while a long prompt is fed (a 2-core "
                        "CPU: 0.2 s between tokens at 128, 0.8 s at 512), larger feeds it a little faster")
    p.add_argument("--max-queue", type=int, default=64, help="requests waiting for a slot before 429 (default 64)")
    p.add_argument("--prompt-cache", type=int, default=8,
                   help="idle sessions kept for their prompts (default 8; 0: none): a request continues the one "
                        "sharing the longest prefix with it, evaluating only the rest")
    p.add_argument("--kv-disk-dir", help="keep finished sessions' states in this directory (a prompt cache on disk that "
                                         "survives restarts); none by default")
    p.add_argument("--kv-disk-space-mb", type=float, default=4096.0,
                   help="the disk cache's budget (default 4096 MB): the least recently used states go first")
    p.add_argument("--kv-disk-min-tokens", type=int, default=256,
                   help="save states of at least this many positions (default 256)")
    p.add_argument("--max-body-mb", type=float, default=8.0, help="largest request body (default 8 MB)")
    p.add_argument("--alias", help="the model name /v1/models reports (default: the file's name)")
    p.add_argument("--huge-pages", action="store_true", help=HUGE_PAGES_HELP)
    add_spec_arguments(p)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        import uvicorn

        from ds4.server.app import create_app
    except ImportError as e:
        raise SystemExit(f"ds4-server needs the server extra ({e.name} is missing): pip install 'ds4[server]'") from None
    from ds4 import Model
    from ds4.cli_generate import spec_from_args
    from ds4.server.worker import Worker

    model = Model(args.model, threads=args.threads, n_ctx=args.ctx, huge_pages=args.huge_pages)
    spec = spec_from_args(args, model)
    if spec is not None and args.parallel != 1:
        print("ds4-server: speculative decoding serves one request at a time: use --parallel 1 "
              "(batched sessions decode plainly, as the seeds' serving does)", file=sys.stderr)
        return 2
    disk = None
    if args.kv_disk_dir:
        from ds4.server.kv_disk import DiskCache

        disk = DiskCache(model, args.kv_disk_dir, int(args.kv_disk_space_mb * (1 << 20)), args.kv_disk_min_tokens)
    worker = Worker(model, parallel=args.parallel, max_queue=args.max_queue, spec=spec, cache_slots=args.prompt_cache,
                    max_rows=args.batch_size, disk=disk)
    app = create_app(model, args.alias, worker, max_body=int(args.max_body_mb * (1 << 20)))
    uvicorn.run(app, host=args.host, port=args.port, log_level="info")
    return 0


if __name__ == "__main__":
    sys.exit(main())
