"""Tool calls through the server with the official clients: a scripted worker plays the model's
answer (so that the call is certain; what a 270M model writes is not), the server's own parsing,
prompt rendering and API shapes do the rest. A call is returned as OpenAI tool_calls / Anthropic
tool_use blocks, plain and streamed; the result sent back reaches the prompt; a forced call makes
the answer start inside call syntax. Then the real model with tools: a well-formed answer."""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import live  # noqa: E402

import ds4  # noqa: E402
from ds4.server.worker import post  # noqa: E402

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")

WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
OPENAI_TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather of a city",
                                                  "parameters": WEATHER}}]
ANTHROPIC_TOOLS = [{"name": "get_weather", "description": "Weather of a city", "input_schema": WEATHER}]
CALL = '```tool_code\nget_weather(city="Paris")\n```'  # Gemma's syntax (the served model is Gemma)


class FakeGen:
    def __init__(self, text: str) -> None:
        self.text, self.tokens, self.done = text, [1] * 5, True
        self.stats = {"n_generated": 5, "stop_reason": "eog"}

    def cancel(self) -> None:
        pass


class ScriptedWorker:
    """Answers each job with the next scripted text, in pieces of 4 characters; keeps each prompt."""

    def __init__(self, model: ds4.Model, answers: list[str]) -> None:
        self.model, self.answers, self.prompts, self.running = model, answers, [], 0

    def submit(self, job: Any) -> None:
        self.prompts.append(self.model.detokenize(list(job.prompt)))
        answer = self.answers.pop(0)

        def play() -> None:
            job.gen = FakeGen(answer)
            for i in range(0, len(answer), 4):
                job.relay(answer[i:i + 4])
                post([job])
            job.relay("", final=True)
            job.emit("done", job.gen)
            post([job])
        threading.Thread(target=play).start()

    def cancel(self, job: Any) -> None:
        pass

    def close(self) -> None:
        pass


@pytest.fixture
def scripted(model: ds4.Model) -> Any:
    def serve(answers: list[str]) -> Any:
        return live.serve(model, worker=ScriptedWorker(model, answers))
    return serve


def test_openai_tool_call_round_trip(scripted: Any) -> None:
    with scripted(["Let me look.\n" + CALL, "It is sunny in Paris.", CALL]) as (url, srv):
        c = openai.OpenAI(base_url=url + "/v1", api_key="none", max_retries=0)
        ask = [{"role": "user", "content": "Weather in Paris?"}]
        r = c.chat.completions.create(model="m", messages=ask, tools=OPENAI_TOOLS)
        msg = r.choices[0].message
        assert r.choices[0].finish_reason == "tool_calls" and msg.content == "Let me look.\n"
        assert [(t.function.name, json.loads(t.function.arguments)) for t in msg.tool_calls] == [
            ("get_weather", {"city": "Paris"})]
        assert "get_weather" in srv.worker.prompts[0] and "tool_code" in srv.worker.prompts[0]  # tools described
        follow = [*ask, msg.model_dump(exclude_none=True),
                  {"role": "tool", "tool_call_id": msg.tool_calls[0].id, "content": "sunny, 24 C"}]
        r = c.chat.completions.create(model="m", messages=follow, tools=OPENAI_TOOLS)
        assert r.choices[0].message.content == "It is sunny in Paris." and r.choices[0].finish_reason == "stop"
        assert "sunny, 24 C" in srv.worker.prompts[1] and 'get_weather(city=\'Paris\')' in srv.worker.prompts[1]
        chunks = list(c.chat.completions.create(model="m", messages=ask, tools=OPENAI_TOOLS, stream=True))
        calls = [t for ch in chunks if ch.choices for t in (ch.choices[0].delta.tool_calls or [])]
        assert [(t.index, t.function.name, json.loads(t.function.arguments)) for t in calls] == [
            (0, "get_weather", {"city": "Paris"})]
        assert chunks[-1].choices[0].finish_reason == "tool_calls"
        assert not "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)


def test_a_forced_call_starts_the_answer_in_call_syntax(scripted: Any) -> None:
    with scripted(['city="Rome")\n```']) as (url, srv):
        c = openai.OpenAI(base_url=url + "/v1", api_key="none", max_retries=0)
        r = c.chat.completions.create(model="m", messages=[{"role": "user", "content": "Rome?"}], tools=OPENAI_TOOLS,
                                      tool_choice={"type": "function", "function": {"name": "get_weather"}})
        assert srv.worker.prompts[0].endswith("```tool_code\nget_weather(")
        assert [(t.function.name, json.loads(t.function.arguments)) for t in r.choices[0].message.tool_calls] == [
            ("get_weather", {"city": "Rome"})]


def test_anthropic_tool_use_round_trip(scripted: Any) -> None:
    with scripted([CALL, "Sunny.", "I will check. " + CALL]) as (url, srv):
        c = anthropic.Anthropic(base_url=url, api_key="none", max_retries=0)
        ask = [{"role": "user", "content": "Weather in Paris?"}]
        r = c.messages.create(model="m", max_tokens=50, messages=ask, tools=ANTHROPIC_TOOLS)
        assert r.stop_reason == "tool_use" and [b.type for b in r.content] == ["tool_use"]
        use = r.content[0]
        assert (use.name, use.input) == ("get_weather", {"city": "Paris"})
        follow = [*ask, {"role": "assistant", "content": [use.model_dump()]},
                  {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "sunny"}]}]
        r = c.messages.create(model="m", max_tokens=50, messages=follow, tools=ANTHROPIC_TOOLS)
        assert r.content[0].text == "Sunny." and r.stop_reason == "end_turn"
        assert "sunny" in srv.worker.prompts[1]
        with c.messages.stream(model="m", max_tokens=50, messages=ask, tools=ANTHROPIC_TOOLS) as s:
            final = s.get_final_message()
        assert [b.type for b in final.content] == ["text", "tool_use"] and final.content[0].text == "I will check. "
        assert final.content[1].input == {"city": "Paris"} and final.stop_reason == "tool_use"


def test_the_real_model_makes_a_forced_call(server: Any) -> None:
    c = openai.OpenAI(base_url=server[0] + "/v1", api_key="none", max_retries=0, timeout=120)
    r = c.chat.completions.create(model="m", messages=[{"role": "user", "content": "What is the weather in Paris?"}],
                                  tools=OPENAI_TOOLS, tool_choice="required", temperature=0, max_tokens=40)
    calls = r.choices[0].message.tool_calls
    assert r.choices[0].finish_reason == "tool_calls" and [t.function.name for t in calls] == ["get_weather"]
    assert json.loads(calls[0].function.arguments) == {"city": "Paris"}
