"""Tool calls parsed from a streamed answer (ds4.server.tools): whatever the pieces' boundaries, the
text shown is the answer without its calls, never a piece of a call; calls are found in each
syntax; text that only looks like a call is shown as it is."""

from __future__ import annotations

import json

import pytest

from ds4.server.tools import ToolParser, style_of


def run(style: str, answer: str, cut: int) -> tuple[str, list[tuple[str, dict]], bool]:
    p = ToolParser(style)
    shown = [p.feed(answer[i:i + cut]) for i in range(0, len(answer), cut)]
    shown.append(p.finish())
    return "".join(shown), [(c.name, json.loads(c.arguments)) for c in p.calls], p.entered


CASES = [
    ("hermes", 'Let me check.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>',
     "Let me check.\n", [("get_weather", {"city": "Paris"})]),
    ("hermes", '<tool_call>{"name": "a", "arguments": {}}</tool_call><tool_call>{"name": "b", "arguments": '
               '"{\\"x\\": 1}"}</tool_call>', "", [("a", {}), ("b", {"x": 1})]),
    ("hermes", "I use <tool_ and <b>tags</b> freely.", "I use <tool_ and <b>tags</b> freely.", []),
    ("hermes", "<tool_call>not json</tool_call> after", "<tool_call>not json</tool_call> after", []),
    ("hermes", "cut off <tool_call>{\"name\": \"a\"", "cut off <tool_call>{\"name\": \"a\"", []),
    ("llama3", '{"name": "search", "parameters": {"q": "ds4"}}', "", [("search", {"q": "ds4"})]),
    ("llama3", '<|python_tag|>{"name": "a", "parameters": {}}; {"name": "b", "parameters": {"n": 2}}', "",
     [("a", {}), ("b", {"n": 2})]),
    ("llama3", "{ this is a set, not a call }", "{ this is a set, not a call }", []),
    ("llama3", "Plain answer with {braces} later.", "Plain answer with {braces} later.", []),
    ("gemma", 'Sure.\n```tool_code\nget_weather(city="Paris", days=3)\n```\n', "Sure.\n\n",
     [("get_weather", {"city": "Paris", "days": 3})]),
    ("gemma", "```tool_code\nprint(open('x').read())\n```", "```tool_code\nprint(open('x').read())\n```", []),
    ("gemma", "Code:\n```python\nx = 1\n```", "Code:\n```python\nx = 1\n```", []),
]


@pytest.mark.parametrize("style, answer, text, calls", CASES)
@pytest.mark.parametrize("cut", [1, 3, 7, 1000])
def test_calls_and_text(style: str, answer: str, text: str, calls: list, cut: int) -> None:
    shown, got, entered = run(style, answer, cut)
    assert shown == text and got == calls
    assert entered or not calls


def test_style_of() -> None:
    assert style_of({"tokenizer.chat_template": "{% if tools %}<tool_call>{% endif %}"}) == "hermes"
    assert style_of({"tokenizer.chat_template": "<|python_tag|>", "general.architecture": "llama"}) == "llama3"
    assert style_of({"general.architecture": "gemma3"}) == "gemma"
    with pytest.raises(ValueError, match="style"):
        ToolParser("xml")
