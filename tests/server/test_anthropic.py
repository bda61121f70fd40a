"""ds4-server's Anthropic ``/v1/messages`` against the official ``anthropic`` client on a live
server: answers equal to ds4's library generating the same prompt (greedy), plain and streamed,
with the API's stop reasons, stop sequences, usage, a system prompt and an assistant prefill;
bad requests get 4xx with Anthropic's error body."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest

import ds4
from ds4.chat import apply_chat_template

anthropic = pytest.importorskip("anthropic")

ASK = [{"role": "user", "content": "Name three colors."}]
GREEDY = {"temperature": 0}  # the client no longer names the sampling parameters; the server takes them


@pytest.fixture(scope="module")
def client(server: Any) -> Any:
    return anthropic.Anthropic(base_url=server[0], api_key="none", max_retries=0, timeout=120)


def solo(model: ds4.Model, messages: list[dict[str, str]], n: int, prefill: str = "") -> ds4.Generation:
    ids = model.tokenize(apply_chat_template(model, messages) + prefill, add_special=False)
    return model.session().generate(ids, max_tokens=n, temperature=0.0)


def test_messages_plain_and_streamed(client: Any, model: ds4.Model) -> None:
    system = "You answer in lowercase."
    want = solo(model, [{"role": "system", "content": system}, *ASK], 14)
    r = client.messages.create(model="gemma-test", max_tokens=14, system=system, messages=ASK, extra_body=GREEDY)
    assert r.type == "message" and r.role == "assistant" and r.content[0].type == "text"
    assert r.content[0].text == want.text
    assert r.stop_reason == ("max_tokens" if want.stats["stop_reason"] == "max_tokens" else "end_turn")
    assert r.usage.input_tokens + r.usage.cache_read_input_tokens == want.stats["n_prompt"]
    assert r.usage.output_tokens == want.stats["n_generated"]
    with client.messages.stream(model="gemma-test", max_tokens=14, system=system, messages=ASK,
                                extra_body=GREEDY) as s:
        text = "".join(s.text_stream)
        final = s.get_final_message()
    assert text == want.text and final.content[0].text == want.text and final.stop_reason == r.stop_reason
    assert final.usage.output_tokens == want.stats["n_generated"]


def test_stop_sequence_and_prefill(client: Any, model: ds4.Model) -> None:
    full = solo(model, ASK, 24).text
    stop = full.strip().split()[1][:3]
    r = client.messages.create(model="gemma-test", max_tokens=24, messages=ASK, extra_body=GREEDY, stop_sequences=[stop])
    assert r.content[0].text == full[:full.index(stop)]
    assert r.stop_reason == "stop_sequence" and r.stop_sequence == stop
    prefill = "The three colors are"
    want = solo(model, ASK, 10, prefill)
    r = client.messages.create(model="gemma-test", max_tokens=10, extra_body=GREEDY,
                               messages=[*ASK, {"role": "assistant", "content": prefill}])
    assert r.content[0].text == want.text


@pytest.mark.parametrize("body, status", [
    ({"model": "m", "messages": ASK}, 400),                          # max_tokens is required
    ({"model": "m", "max_tokens": 5, "messages": ASK, "bogus": 1}, 400),
    ({"model": "m", "max_tokens": 5, "messages": [{"role": "system", "content": "x"}]}, 400),
    ({"model": "m", "max_tokens": 5, "messages": ASK, "temperature": 1.5}, 400),
    ({"model": "m", "max_tokens": -1, "messages": ASK}, 400),
])
def test_bad_requests_get_anthropic_errors(server: Any, body: dict[str, Any], status: int) -> None:
    req = urllib.request.Request(server[0] + "/v1/messages", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req, timeout=60)
    err = json.loads(e.value.read())
    assert e.value.code == status and err["type"] == "error" and err["error"]["type"] == "invalid_request_error"
    assert err["error"]["message"]
