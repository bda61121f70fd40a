"""``ds4-server``: the model over HTTP, OpenAI's API (``/v1/models``, ``/v1/chat/completions``,
``/v1/completions``: openai_api.py; ``/v1/responses``: responses_api.py) and Anthropic's (``/v1/messages``: anthropic_api.py), streamed
as server-sent events, many sessions decoded together in one batched step (worker.py). The ``server`` extra installs its ASGI stack: Starlette (routing, requests and
streaming responses, nothing more) and uvicorn (the HTTP server): small, well kept and the base of
most Python API servers, so the server adds no framework of its own."""

from ds4.server.app import create_app
from ds4.server.worker import Worker

__all__ = ["Worker", "create_app"]
