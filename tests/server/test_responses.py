"""ds4-server's ``/v1/responses`` against the official ``openai`` client: output equal to ds4's
library generating the same conversation (greedy), plain and streamed (the client rebuilds the
response from the typed events), instructions, usage and the incomplete status; function calls
as output items and their outputs fed back (scripted worker); stateless requests refused clearly."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import live  # noqa: E402
from test_tool_calls import CALL, ScriptedWorker  # noqa: E402

import ds4  # noqa: E402
from ds4.chat import apply_chat_template  # noqa: E402

openai = pytest.importorskip("openai")

TOOLS = [{"type": "function", "name": "get_weather", "description": "Weather of a city",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}]


@pytest.fixture(scope="module")
def client(server: Any) -> Any:
    return openai.OpenAI(base_url=server[0] + "/v1", api_key="none", max_retries=0, timeout=120)


def solo(model: ds4.Model, messages: list[dict[str, str]], n: int) -> ds4.Generation:
    ids = model.tokenize(apply_chat_template(model, messages), add_special=False)
    return model.session().generate(ids, max_tokens=n, temperature=0.0)


def test_plain_and_streamed(client: Any, model: ds4.Model) -> None:
    want = solo(model, [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Name a river."}], 12)
    r = client.responses.create(model="m", instructions="Be brief.", input="Name a river.", temperature=0,
                                max_output_tokens=12)
    assert r.object == "response" and r.output_text == want.text and r.output[0].role == "assistant"
    assert r.status == ("incomplete" if want.stats["stop_reason"] == "max_tokens" else "completed")
    assert r.usage.input_tokens == want.stats["n_prompt"] and r.usage.output_tokens == want.stats["n_generated"]
    events = list(client.responses.create(model="m", instructions="Be brief.", input="Name a river.", temperature=0,
                                          max_output_tokens=12, stream=True))
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert "".join(e.delta for e in events if e.type == "response.output_text.delta") == want.text
    assert events[-1].type == f"response.{r.status}" and events[-1].response.output_text == want.text


def test_function_calls_and_their_outputs(model: ds4.Model) -> None:
    with live.serve(model, worker=ScriptedWorker(model, [CALL, "Sunny in Paris."])) as (url, srv):
        c = openai.OpenAI(base_url=url + "/v1", api_key="none", max_retries=0)
        r = c.responses.create(model="m", input="Weather in Paris?", tools=TOOLS)
        calls = [o for o in r.output if o.type == "function_call"]
        assert [(o.name, json.loads(o.arguments)) for o in calls] == [("get_weather", {"city": "Paris"})]
        items = [{"role": "user", "content": "Weather in Paris?"}, calls[0].model_dump(exclude_none=True),
                 {"type": "function_call_output", "call_id": calls[0].call_id, "output": "sunny, 24 C"}]
        r = c.responses.create(model="m", input=items, tools=TOOLS)
        assert r.output_text == "Sunny in Paris." and "sunny, 24 C" in srv.worker.prompts[1]


def test_stateless(client: Any) -> None:
    with pytest.raises(openai.BadRequestError, match="keeps no responses"):
        client.responses.create(model="m", input="hi", previous_response_id="resp_123")
