"""ds4-server's OpenAI endpoints against the official ``openai`` client on a live server (the
embedded Gemma 3 270M): every answer is checked against ds4's own library generating the same
prompt (greedy: the same tokens, streamed or not, alone or batched with others), with the API's
shapes, usage, stop sequences and seeds; bad requests get 4xx with OpenAI's error body and the
server goes on serving; a full queue answers 429; a client that goes away frees its slot."""

from __future__ import annotations

import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import live  # noqa: E402

import ds4  # noqa: E402
from ds4.chat import apply_chat_template  # noqa: E402

openai = pytest.importorskip("openai")

CHAT = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Name three colors."}]


@pytest.fixture(scope="module")
def client(server: Any) -> Any:
    return openai.OpenAI(base_url=server[0] + "/v1", api_key="none", max_retries=0, timeout=120)


def solo_chat(model: ds4.Model, messages: list[dict[str, str]], n: int, **kw: Any) -> ds4.Generation:
    ids = model.tokenize(apply_chat_template(model, messages), add_special=False)
    return model.session().generate(ids, max_tokens=n, **kw)


def test_models(client: Any) -> None:
    assert [m.id for m in client.models.list().data] == ["gemma-test"]


def test_chat_is_the_librarys_greedy_generation(client: Any, model: ds4.Model) -> None:
    want = solo_chat(model, CHAT, 12, temperature=0.0)
    r = client.chat.completions.create(model="gemma-test", messages=CHAT, max_tokens=12, temperature=0)
    assert r.object == "chat.completion" and r.choices[0].message.role == "assistant"
    assert r.choices[0].message.content == want.text
    assert r.choices[0].finish_reason == ("length" if want.stats["stop_reason"] == "max_tokens" else "stop")
    assert r.usage.prompt_tokens == want.stats["n_prompt"] and r.usage.completion_tokens == want.stats["n_generated"]
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens


def test_chat_stream_is_the_same_text(client: Any, model: ds4.Model) -> None:
    want = solo_chat(model, CHAT, 16, temperature=0.0)
    chunks = list(client.chat.completions.create(model="gemma-test", messages=CHAT, max_tokens=16, temperature=0,
                                                 stream=True, stream_options={"include_usage": True}))
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == want.text
    finals = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finals == ["length"]
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == want.stats["n_generated"]


def test_completions_plain_and_streamed(client: Any, model: ds4.Model) -> None:
    prompt = "The three primary colors are"
    want = model.session().generate(prompt, max_tokens=10, temperature=0.0)
    r = client.completions.create(model="gemma-test", prompt=prompt, max_tokens=10, temperature=0)
    assert r.object == "text_completion" and r.choices[0].text == want.text
    assert r.usage.prompt_tokens == len(model.tokenize(prompt))
    streamed = client.completions.create(model="gemma-test", prompt=prompt, max_tokens=10, temperature=0, stream=True)
    assert "".join(c.choices[0].text for c in streamed if c.choices) == want.text


def test_stop_sequences(client: Any, model: ds4.Model) -> None:
    full = solo_chat(model, CHAT, 24, temperature=0.0).text
    stop = full.strip().split()[1][:3]  # a piece of the second word: cut there
    r = client.chat.completions.create(model="gemma-test", messages=CHAT, max_tokens=24, temperature=0, stop=[stop])
    assert r.choices[0].message.content == full[:full.index(stop)]
    assert r.choices[0].finish_reason == "stop"


def test_a_seeded_request_is_reproducible(client: Any) -> None:
    def ask(seed: int) -> str:
        return client.chat.completions.create(model="gemma-test", messages=CHAT, max_tokens=24, temperature=1.0,
                                              seed=seed).choices[0].message.content
    assert ask(7) == ask(7)


def test_concurrent_requests_get_their_solo_tokens(client: Any, model: ds4.Model, server: Any) -> None:
    asks = [[{"role": "user", "content": q}] for q in
            ("What is rain?", "Count to five.", "Say hello.", "Name a fruit.", "What is 2+2?", "Name a planet.")]
    want = [solo_chat(model, m, 20, temperature=0.0).text for m in asks]
    with ThreadPoolExecutor(6) as ex:
        got = list(ex.map(lambda m: client.chat.completions.create(model="gemma-test", messages=m, max_tokens=20,
                                                                    temperature=0).choices[0].message.content, asks))
    assert got == want


def test_a_conversations_next_turn_reuses_its_cached_prefix(client: Any, model: ds4.Model) -> None:
    first = [{"role": "user", "content": "Tell me about the moon."}]
    a = client.chat.completions.create(model="m", messages=first, max_tokens=24, temperature=0).choices[0].message
    turn = [*first, {"role": "assistant", "content": a.content}, {"role": "user", "content": "And the sun?"}]
    r = client.chat.completions.create(model="m", messages=turn, max_tokens=16, temperature=0)
    n_first = len(model.tokenize(apply_chat_template(model, first), add_special=False))
    assert r.usage.prompt_tokens_details.cached_tokens >= n_first  # the first turn was not evaluated again
    assert r.choices[0].message.content == solo_chat(model, turn, 16, temperature=0.0).text


def _post(url: str, body: bytes | str | dict[str, Any], headers: dict[str, str] | None = None) -> tuple[int, Any]:
    import urllib.error
    import urllib.request

    data = body if isinstance(body, bytes) else (body if isinstance(body, str) else json.dumps(body)).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


@pytest.mark.parametrize("body, param", [
    ("{not json", None),
    ([1, 2], None),
    ({"model": "m", "messages": CHAT, "temperature": "hot"}, "temperature"),
    ({"model": "m", "messages": CHAT, "max_tokens": -5}, "max_tokens"),
    ({"model": "m", "messages": CHAT, "frobnicate": 1}, "frobnicate"),
    ({"model": "m", "messages": []}, "messages"),
    ({"model": "m", "messages": [{"role": "wizard", "content": "hi"}]}, "messages[0].role"),
    ({"model": "m", "messages": CHAT, "n": 2}, "n"),
    ({"model": "m", "messages": CHAT, "stop": ["a", "b", "c", "d", "e"]}, "stop"),
    ({"model": "m", "messages": CHAT, "logit_bias": {"-1": 5}}, "logit_bias"),
    ({"model": "m", "messages": CHAT, "tool_choice": "required", "tools": [{"type": "function"}]}, "tools[0]"),
    ({"model": "m", "messages": CHAT, "tool_choice": "required"}, "tool_choice"),
    ({"model": "m", "messages": CHAT, "tools": [{"type": "function", "function": {"name": "f"}}],
      "tool_choice": {"type": "function", "function": {"name": "g"}}}, "tool_choice"),
    ({"model": "m", "messages": [{"role": "tool", "content": "x"}]}, "messages[0].tool_call_id"),
    ({"model": "m", "messages": [{"role": "user", "content": "word " * 600}]}, "messages"),
])
def test_bad_requests_get_openai_errors(server: Any, client: Any, body: Any, param: str | None) -> None:
    status, err = _post(server[0] + "/v1/chat/completions", body)
    assert status == 400 and set(err["error"]) == {"message", "type", "param", "code"}
    assert err["error"]["type"] == "invalid_request_error" and err["error"]["param"] == param
    assert client.chat.completions.create(model="m", messages=CHAT, max_tokens=2, temperature=0).choices


def test_prompt_over_the_context_and_body_over_the_limit(server: Any) -> None:
    status, err = _post(server[0] + "/v1/completions", {"model": "m", "prompt": "word " * 600})
    assert status == 400 and err["error"]["code"] == "context_length_exceeded"
    status, err = _post(server[0] + "/v1/completions", {"model": "m", "prompt": "x" * (2 << 20)})
    assert status == 413 and "limit" in err["error"]["message"]


def test_a_full_queue_answers_429_and_a_gone_client_frees_its_slot(model: ds4.Model) -> None:
    with live.serve(model, parallel=1, max_queue=0) as (url, srv):
        c = openai.OpenAI(base_url=url + "/v1", api_key="none", max_retries=0, timeout=60)
        stream = c.chat.completions.create(model="m", messages=CHAT, max_tokens=400, temperature=0, stream=True,
                                           extra_body={"stop": None})
        next(iter(stream))  # generating: the one slot is taken
        with pytest.raises(openai.RateLimitError) as e:
            c.chat.completions.create(model="m", messages=CHAT, max_tokens=2)
        assert e.value.status_code == 429 and "retry later" in str(e.value)
        stream.close()  # the client goes away mid-stream
        deadline = time.time() + 10
        while srv.worker.running and time.time() < deadline:
            time.sleep(0.02)
        assert srv.worker.running == 0
        assert c.chat.completions.create(model="m", messages=CHAT, max_tokens=2, temperature=0).choices
