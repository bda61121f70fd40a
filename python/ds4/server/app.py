"""The HTTP side of ``ds4-server``: a Starlette app (ASGI) over the generation thread (worker.py).

Bodies are read up to ``max_body`` bytes (413 past it) and parsed as JSON (400 otherwise); a
refused request gets the API's error shape and the server keeps serving the others. A streamed
response sends server-sent events as the worker decodes, and an SSE comment every
``keepalive`` seconds while there is nothing to send (a long prefill), so that clients and proxies
do not time out; a client that goes away cancels its generation, which frees its slot at the next
step.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request as HttpRequest
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from ds4.model import Model
from ds4.server import anthropic_api, openai_api, responses_api
from ds4.server.errors import ApiError
from ds4.server.served import Served
from ds4.server.worker import Busy, Job, Worker

log = logging.getLogger("ds4.server")


class Server:
    def __init__(self, served: Served, worker: Worker, max_body: int = 8 << 20, keepalive: float = 10.0) -> None:
        self.served, self.worker, self.max_body, self.keepalive = served, worker, max_body, keepalive

    async def body(self, request: HttpRequest) -> Any:
        # A body over the limit is read to its end (up to 8x the limit, then the connection is
        # dropped) so that the client, still sending, gets the 413 rather than a broken pipe.
        size = request.headers.get("content-length")
        if size is not None and size.isdigit() and int(size) > 8 * self.max_body:
            raise ApiError(f"the request body is {size} bytes; the limit is {self.max_body}", status=413)
        data = bytearray()
        seen = 0
        async for part in request.stream():
            seen += len(part)
            if seen <= self.max_body:
                data += part
            elif seen > 8 * self.max_body:
                break
        if seen > self.max_body:
            raise ApiError(f"the request body is over the limit of {self.max_body} bytes", status=413)
        try:
            return json.loads(data)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise ApiError(f"the request body is not valid JSON: {e}") from None

    async def models(self, request: HttpRequest) -> Response:
        return JSONResponse({"object": "list", "data": [
            {"id": self.served.name, "object": "model", "created": int(time.time()), "owned_by": "ds4"}]})

    async def chat(self, request: HttpRequest) -> Response:
        req = openai_api.parse("chat", self.served, await self.body(request))
        return await self.serve(request, req, lambda *a: openai_api.response(req, *a), openai_api.Events(req))

    async def completions(self, request: HttpRequest) -> Response:
        req = openai_api.parse("completion", self.served, await self.body(request))
        return await self.serve(request, req, lambda *a: openai_api.response(req, *a), openai_api.Events(req))

    async def messages(self, request: HttpRequest) -> Response:
        req = anthropic_api.parse(self.served, await self.body(request))
        def respond(gen: Any, text: str, calls: list[Any], cached: int, _logprobs: list[Any]) -> dict[str, Any]:
            return anthropic_api.response(req, gen, text, calls, cached)  # the Messages API has no logprobs

        return await self.serve(request, req, respond, anthropic_api.Events(req))

    async def responses(self, request: HttpRequest) -> Response:
        req = responses_api.parse(self.served, await self.body(request))
        return await self.serve(request, req, lambda *a: responses_api.response(req, *a), responses_api.Events(req))

    async def serve(self, request: HttpRequest, req: openai_api.Request, respond: Callable[..., dict[str, Any]],
                    events: Any) -> Response:
        """Runs `req`: its answer through respond(gen, text, calls, cached, logprobs), or streamed as
        `events` make it."""
        job = Job(req.prompt, req.options, asyncio.get_running_loop(), req.tool_style, req.prefix)
        try:
            self.worker.submit(job)
        except Busy as e:
            raise ApiError(str(e), status=429, type="rate_limit_error") from None
        if req.stream:
            return StreamingResponse(self._stream(job, events), media_type="text/event-stream",
                                     headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
        text, calls, logprobs = [], [], []
        try:
            while True:
                try:
                    kind, value = await _next_event(job, 1.0)
                except asyncio.TimeoutError:
                    if await request.is_disconnected():
                        self.worker.cancel(job)
                        return Response(status_code=499)
                    continue
                if kind == "text":
                    text.append(value)
                elif kind == "call":
                    calls.append(value)
                elif kind == "logprobs":
                    logprobs += value
                elif kind == "error":
                    raise ApiError(value)
                else:
                    return JSONResponse(respond(value, "".join(text), calls, job.cached, logprobs))
        except asyncio.CancelledError:
            self.worker.cancel(job)
            raise

    async def _stream(self, job: Job, events: Any) -> AsyncIterator[bytes]:
        calls = []
        try:
            for b in events.start():
                yield b
            while True:
                try:
                    kind, value = await _next_event(job, self.keepalive)
                except asyncio.TimeoutError:
                    yield b": keepalive\n\n"
                    continue
                if kind == "text":
                    out = events.text(value)
                elif kind == "logprobs":
                    out = events.logprobs(value)
                elif kind == "call":
                    calls.append(value)
                    out = events.call(value)
                elif kind == "error":
                    for b in events.error(ApiError(value)):
                        yield b
                    return
                else:
                    out = events.end(value, calls, job.cached)
                for b in out:
                    yield b
                if kind == "done":
                    return
        finally:
            if not job.gen or not job.gen.done:
                self.worker.cancel(job)


async def _next_event(job: Job, timeout: float) -> tuple[str, Any]:
    """The job's next event; asyncio.TimeoutError after `timeout` seconds without one. A step's
    events arrive together: those already queued are taken without a timed wait (a task each)."""
    try:
        return job.events.get_nowait()
    except asyncio.QueueEmpty:
        return await asyncio.wait_for(job.events.get(), timeout=timeout)


def _errors(handler: Callable[[HttpRequest], Awaitable[Response]], shape: str = "openai"
            ) -> Callable[[HttpRequest], Awaitable[Response]]:
    """The handler, its refusals answered in the error shape of its API (``openai`` or ``anthropic``)."""
    async def wrapped(request: HttpRequest) -> Response:
        try:
            return await handler(request)
        except ApiError as e:
            return JSONResponse(getattr(e, shape)(), status_code=e.status)
        except Exception as e:  # a bug: answered, logged, and the server goes on
            log.exception("error serving %s", request.url.path)
            err = ApiError(f"internal error: {e}", status=500, type="server_error")
            return JSONResponse(getattr(err, shape)(), status_code=500)
    return wrapped


def create_app(model: Model, name: str | None = None, worker: Worker | None = None, **options: Any) -> Starlette:
    """The ASGI app serving `model` (through `worker`, else a new one with its defaults)."""
    s = Server(Served.of(model, name), worker or Worker(model), **options)
    routes = [
        Route("/v1/models", _errors(s.models), methods=["GET"]),
        Route("/v1/chat/completions", _errors(s.chat), methods=["POST"]),
        Route("/v1/completions", _errors(s.completions), methods=["POST"]),
        Route("/v1/responses", _errors(s.responses), methods=["POST"]),
        Route("/v1/messages", _errors(s.messages, "anthropic"), methods=["POST"]),
    ]

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        s.worker.close()

    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.server = s
    return app
