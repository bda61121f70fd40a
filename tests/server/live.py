"""A ds4-server app on 127.0.0.1 in a background thread (uvicorn), for tests with real HTTP clients."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def serve(model: Any, worker: Any = None, **options: Any) -> Iterator[tuple[str, Any]]:
    """(base URL, the app's Server) of `model` served (by `worker`, else a Worker with `options`)
    until the block ends."""
    import uvicorn

    from ds4.server import Worker, create_app

    w = worker or Worker(model, **options)
    app = create_app(model, "gemma-test", w, max_body=1 << 20, keepalive=0.2)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.time() + 30
    while not server.started:
        if time.time() > deadline or not thread.is_alive():
            raise RuntimeError("the test server did not start")
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}", app.state.server
    finally:
        server.should_exit = True
        thread.join(30)
