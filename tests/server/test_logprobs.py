"""ds4-server's token logprobs against the official ``openai`` client on the live server: chat
(``logprobs``, ``top_logprobs``), legacy completions (``logprobs`` 0..5) and Responses
(``include`` / ``top_logprobs``), plain and streamed, each equal to ds4's library generating the
same prompt with ``logprobs=N`` (an end-of-generation token left out), in each API's shape; a
server that runs requests alone and speculates gives the same figures; bad values are 400s."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import live  # noqa: E402
from test_openai import CHAT, _post, solo_chat  # noqa: E402

import ds4  # noqa: E402

openai = pytest.importorskip("openai")

PROMPT = "red green blue yellow, red green blue yellow, red green blue yellow, red"


@pytest.fixture(scope="module")
def client(server: Any) -> Any:
    return openai.OpenAI(base_url=server[0] + "/v1", api_key="none", max_retries=0, timeout=120)


def shown(g: ds4.Generation) -> list[ds4.TokenLogprob]:
    """The library's logprobs as the server reports them: an end-of-generation token left out."""
    lps = g.logprobs or []
    return lps[:-1] if g.stats["stop_reason"] == "eog" else lps


def check_entries(model: ds4.Model, entries: list[Any], want: list[ds4.TokenLogprob], n_top: int) -> None:
    """Chat / Responses entries (objects of the client) against the library's figures."""
    assert len(entries) == len(want)
    for e, w in zip(entries, want):
        assert bytes(e.bytes) == model.token_bytes(w.token)
        assert e.token == model.token_bytes(w.token).decode("utf-8", "backslashreplace")
        assert e.logprob == pytest.approx(w.logprob, abs=1e-5)
        assert len(e.top_logprobs) == n_top
        for t, (tok, lp) in zip(e.top_logprobs, w.top):
            assert bytes(t.bytes) == model.token_bytes(tok) and t.logprob == pytest.approx(lp, abs=1e-5)


@pytest.mark.parametrize("n_top", [0, 3, 20])
def test_chat_plain_and_streamed(client: Any, model: ds4.Model, n_top: int) -> None:
    want = solo_chat(model, CHAT, 16, temperature=0.0, logprobs=n_top)
    r = client.chat.completions.create(model="m", messages=CHAT, max_tokens=16, temperature=0, logprobs=True,
                                       top_logprobs=n_top)
    content = r.choices[0].logprobs.content
    check_entries(model, content, shown(want), n_top)
    assert r.choices[0].message.content == want.text
    if r.choices[0].finish_reason == "length":  # every token shown: their bytes are the text
        assert b"".join(bytes(e.bytes) for e in content).decode() == want.text
    chunks = list(client.chat.completions.create(model="m", messages=CHAT, max_tokens=16, temperature=0,
                                                 logprobs=True, top_logprobs=n_top, stream=True))
    streamed = [e for c in chunks if c.choices and c.choices[0].logprobs for e in c.choices[0].logprobs.content]
    check_entries(model, streamed, shown(want), n_top)
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == want.text


def test_chat_without_logprobs_has_none(client: Any) -> None:
    r = client.chat.completions.create(model="m", messages=CHAT, max_tokens=4, temperature=0)
    assert r.choices[0].logprobs is None
    r = client.chat.completions.create(model="m", messages=CHAT, max_tokens=4, temperature=0, logprobs=True)
    assert all(e.top_logprobs == [] for e in r.choices[0].logprobs.content)


def test_an_end_of_generation_token_is_left_out(client: Any, model: ds4.Model) -> None:
    # The base model rarely ends a turn: a bias on <end_of_turn> makes it, a few tokens in (the
    # figures stay the raw distribution's).
    eot = model.tokenize("<end_of_turn>", add_special=False)[0]
    want = solo_chat(model, CHAT, 40, temperature=0.0, logprobs=1, logit_bias={eot: 16.0})
    assert want.stats["stop_reason"] == "eog" and len(want.tokens) > 1
    r = client.chat.completions.create(model="m", messages=CHAT, max_tokens=40, temperature=0, logprobs=True,
                                       top_logprobs=1, logit_bias={str(eot): 16})
    assert r.choices[0].finish_reason == "stop"
    assert r.usage.completion_tokens == len(want.tokens) == len(r.choices[0].logprobs.content) + 1
    check_entries(model, r.choices[0].logprobs.content, shown(want), 1)


def check_legacy(model: ds4.Model, lp: Any, want: list[ds4.TokenLogprob], n: int, text: str) -> None:
    texts = [model.token_bytes(w.token).decode("utf-8", "backslashreplace") for w in want]
    assert lp.tokens == texts
    assert lp.token_logprobs == pytest.approx([w.logprob for w in want], abs=1e-5)
    for top, w, t in zip(lp.top_logprobs, want, texts):
        assert t in top and len(top) <= n + 1  # the N best and the chosen token
        best = {model.token_bytes(i).decode("utf-8", "backslashreplace"): v for i, v in w.top}
        assert {k: top[k] for k in best} == pytest.approx(best, abs=1e-5)
    assert lp.text_offset == [sum(map(len, texts[:i])) for i in range(len(texts))]  # ASCII text here
    assert "".join(texts) == text


@pytest.mark.parametrize("n", [0, 5])
def test_completions_plain_and_streamed(client: Any, model: ds4.Model, n: int) -> None:
    want = model.session().generate(PROMPT, max_tokens=10, temperature=0.0, logprobs=n)
    r = client.completions.create(model="m", prompt=PROMPT, max_tokens=10, temperature=0, logprobs=n)
    assert r.choices[0].text == want.text
    check_legacy(model, r.choices[0].logprobs, shown(want), n, want.text)
    chunks = list(client.completions.create(model="m", prompt=PROMPT, max_tokens=10, temperature=0, logprobs=n,
                                            stream=True))
    parts = [c.choices[0].logprobs for c in chunks if c.choices and c.choices[0].logprobs]
    assert len(parts) > 1  # token by token, the offsets running on across chunks
    whole = type(parts[0])(tokens=[t for p in parts for t in p.tokens],
                           token_logprobs=[v for p in parts for v in p.token_logprobs],
                           top_logprobs=[d for p in parts for d in p.top_logprobs],
                           text_offset=[o for p in parts for o in p.text_offset])
    check_legacy(model, whole, shown(want), n, want.text)


def test_responses_plain_and_streamed(client: Any, model: ds4.Model) -> None:
    messages = [{"role": "user", "content": "Name a river."}]
    want = solo_chat(model, messages, 12, temperature=0.0, logprobs=2)
    r = client.responses.create(model="m", input="Name a river.", temperature=0, max_output_tokens=12,
                                include=["message.output_text.logprobs"], top_logprobs=2)
    assert r.output_text == want.text and r.top_logprobs == 2
    check_entries(model, r.output[0].content[0].logprobs, shown(want), 2)
    deltas, done, final = [], None, None
    with client.responses.stream(model="m", input="Name a river.", temperature=0, max_output_tokens=12,
                                 include=["message.output_text.logprobs"], top_logprobs=2) as s:
        for ev in s:
            if ev.type == "response.output_text.delta":
                deltas += ev.logprobs
            elif ev.type == "response.output_text.done":
                done = ev.logprobs
            elif ev.type in ("response.completed", "response.incomplete"):
                final = ev.response
    check_entries(model, deltas, shown(want), 2)
    assert done is not None
    check_entries(model, done, shown(want), 2)
    assert final is not None
    check_entries(model, final.output[0].content[0].logprobs, shown(want), 2)
    # include alone: the chosen tokens, no alternatives
    r = client.responses.create(model="m", input="Name a river.", temperature=0, max_output_tokens=4,
                                include=["message.output_text.logprobs"])
    assert [e.top_logprobs for e in r.output[0].content[0].logprobs] == [[]] * len(r.output[0].content[0].logprobs)
    assert client.responses.create(model="m", input="Hi", max_output_tokens=2).output[0].content[0].logprobs is None


def test_a_speculating_server_gives_the_same_figures(model: ds4.Model) -> None:
    want = model.session().generate(PROMPT, max_tokens=24, temperature=0.0, logprobs=2)
    with live.serve(model, parallel=1, spec=ds4.Spec(types=["ngram-simple"])) as (url, srv):
        c = openai.OpenAI(base_url=url + "/v1", api_key="none", max_retries=0, timeout=120)
        r = c.completions.create(model="m", prompt=PROMPT, max_tokens=24, temperature=0, logprobs=2)
        check_legacy(model, r.choices[0].logprobs, shown(want), 2, want.text)
        chunks = list(c.chat.completions.create(model="m", messages=CHAT, max_tokens=16, temperature=0, logprobs=True,
                                                top_logprobs=2, stream=True))
        streamed = [e for ch in chunks if ch.choices and ch.choices[0].logprobs for e in ch.choices[0].logprobs.content]
        check_entries(model, streamed, shown(solo_chat(model, CHAT, 16, temperature=0.0, logprobs=2)), 2)


@pytest.mark.parametrize("path, body, param", [
    ("chat/completions", {"messages": CHAT, "logprobs": True, "top_logprobs": 21}, "top_logprobs"),
    ("chat/completions", {"messages": CHAT, "logprobs": True, "top_logprobs": -1}, "top_logprobs"),
    ("chat/completions", {"messages": CHAT, "top_logprobs": 3}, "top_logprobs"),  # without logprobs: true
    ("chat/completions", {"messages": CHAT, "logprobs": 3}, "logprobs"),
    ("completions", {"prompt": "Hi", "logprobs": 6}, "logprobs"),
    ("completions", {"prompt": "Hi", "logprobs": True}, "logprobs"),
    ("completions", {"prompt": "Hi", "logprobs": 2, "top_logprobs": 2}, "top_logprobs"),
    ("responses", {"input": "Hi", "top_logprobs": 21}, "top_logprobs"),
    ("responses", {"input": "Hi", "include": "message.output_text.logprobs"}, "include"),
])
def test_bad_values_are_openai_errors(server: Any, client: Any, path: str, body: dict[str, Any], param: str) -> None:
    status, err = _post(f"{server[0]}/v1/{path}", {"model": "m", "max_tokens": 2, **body} if path != "responses"
                        else {"model": "m", **body})
    assert status == 400 and set(err["error"]) == {"message", "type", "param", "code"}
    assert err["error"]["type"] == "invalid_request_error" and err["error"]["param"] == param
    with pytest.raises(openai.BadRequestError, match="top_logprobs"):
        client.chat.completions.create(model="m", messages=CHAT, max_tokens=2, logprobs=True, top_logprobs=21)


class _PieceGen:
    """A generation whose tokens are the given text pieces, with a logprob each."""

    def __init__(self, pieces: list[str]) -> None:
        self.pieces, self.n, self.done = pieces, 0, False
        self.stats = {"stop_reason": "max_tokens"}

    def logprobs_from(self, start: int) -> list[ds4.TokenLogprob]:
        return [ds4.TokenLogprob(i, -0.5, []) for i in range(start, self.n)]


@pytest.mark.parametrize("style, pieces, content", [
    ("gemma", ["Let", " me", " look", ".\n", "```", "tool", "_code", "\nget", "_weather", "(city", '="', "Paris",
               '")', "\n```"], [0, 1, 2, 3]),
    ("hermes", ["Sure", "<tool", "_call", '>{"name": "f", "arguments": {}}', "</tool_call>", " done"], [0, 5]),
    ("hermes", ["a", " <", "b", "> c"], [0, 1, 2, 3]),  # held as a possible opener, then shown
])
def test_tool_call_tokens_have_no_logprobs(style: str, pieces: list[str], content: list[int]) -> None:
    """With tools, logprobs follow the content the parser shows: tokens of call syntax are left out
    (OpenAI reports logprobs for the message content), held ones wait for their text."""
    import asyncio

    from ds4.server.worker import Job, post

    loop = asyncio.new_event_loop()
    job = Job(prompt=[], options={"logprobs": 0}, loop=loop, tool_style=style, batched=True)
    gen = _PieceGen(pieces)
    job.gen = gen  # type: ignore[assignment]
    for i, piece in enumerate(pieces):
        gen.n = i + 1
        job.relay(piece)
    gen.done = True
    job.relay("", final=True)
    post([job])
    loop.run_until_complete(asyncio.sleep(0))
    events = []
    while not job.events.empty():
        events.append(job.events.get_nowait())
    loop.close()
    assert [t.token for kind, v in events if kind == "logprobs" for t in v] == content
    text = "".join(v for kind, v in events if kind == "text")
    assert "tool" not in text and "(city" not in text
