"""ds4.chat.apply_chat_template against transformers' apply_chat_template on the same GGUF."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import jinja2
import pytest

import ds4
from ds4.chat import apply_chat_template
from ds4.default_model import cache_dir

CONVERSATIONS: list[list[dict[str, Any]]] = [
    [{"role": "user", "content": "Hello"}],
    [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Write <b>bold</b> & 'quotes' ü 🙂"}],
    [
        {"role": "system", "content": "Answer in French."},
        {"role": "user", "content": "What is 2+2?"},
        {"role": "assistant", "content": "Quatre."},
        {"role": "user", "content": "  And 3+3?\n"},
    ],
]

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather in a city (°C) — <fast>",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "City name"},
                           "unit": {"type": "string", "enum": ["c", "f"]}},
            "required": ["city"],
        },
    },
}
TOOL_CONVERSATION: list[dict[str, Any]] = [
    {"role": "user", "content": "Weather in Zürich?"},
    {"role": "assistant", "content": None,
     "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Zürich"}}}]},
    {"role": "tool", "name": "get_weather", "content": '{"temp": 21, "sky": "clear & sunny"}'},
]


def hf_tokenizer(gguf_path: Path) -> Any:
    """transformers' tokenizer built from the GGUF (AutoTokenizer.from_pretrained(dir, gguf_file=...)),
    saved once to the cache: building it from a 152k-token GGUF takes ~25 s, reloading ~1 s."""
    from transformers import AutoTokenizer

    saved = cache_dir() / "hf-tokenizers" / gguf_path.name
    if not (saved / "tokenizer_config.json").exists():
        tok = AutoTokenizer.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name)
        tok.save_pretrained(saved)
    return AutoTokenizer.from_pretrained(saved)


@pytest.fixture(scope="module", params=["smollm", "qwen05"])
def model_and_tokenizer(request: pytest.FixtureRequest) -> tuple[dict[str, Any], Any, str]:
    path: Path = request.getfixturevalue(f"{request.param}_path")
    return ds4.inspect(path)["metadata"], hf_tokenizer(path), request.param


@pytest.mark.parametrize("add_generation_prompt", [True, False])
@pytest.mark.parametrize("conversation", range(len(CONVERSATIONS)))
def test_matches_transformers(model_and_tokenizer: tuple[dict[str, Any], Any, str], conversation: int,
                              add_generation_prompt: bool) -> None:
    md, tok, _ = model_and_tokenizer
    assert md.get("tokenizer.chat_template"), "these files carry their own template"
    msgs = CONVERSATIONS[conversation]
    want = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=add_generation_prompt)
    assert apply_chat_template(md, msgs, add_generation_prompt=add_generation_prompt) == want


def test_tools_match_transformers(model_and_tokenizer: tuple[dict[str, Any], Any, str]) -> None:
    md, tok, name = model_and_tokenizer
    if name != "qwen05":
        pytest.skip("SmolLM2's template ignores tools")
    for msgs in (TOOL_CONVERSATION[:1], TOOL_CONVERSATION):
        want = tok.apply_chat_template(msgs, tools=[WEATHER_TOOL], tokenize=False, add_generation_prompt=True)
        got = apply_chat_template(md, msgs, tools=[WEATHER_TOOL])
        assert got == want
        assert '"description": "Current weather in a city (°C) — <fast>"' in got  # tojson as transformers'


def test_model_and_path_sources(smollm_path: Path) -> None:
    msgs = CONVERSATIONS[1]
    want = apply_chat_template(ds4.inspect(smollm_path), msgs)
    assert apply_chat_template(smollm_path, msgs) == want
    assert apply_chat_template(ds4.Model(smollm_path), msgs) == want


def test_builtin_gemma_template(gemma_path: Path) -> None:
    md = ds4.inspect(gemma_path)["metadata"]
    assert "tokenizer.chat_template" not in md  # the base model ships none
    msgs = CONVERSATIONS[2]
    assert apply_chat_template(md, msgs) == (
        "<bos><start_of_turn>user\nAnswer in French.\n\nWhat is 2+2?<end_of_turn>\n"
        "<start_of_turn>model\nQuatre.<end_of_turn>\n"
        "<start_of_turn>user\nAnd 3+3?<end_of_turn>\n"
        "<start_of_turn>model\n"
    )
    assert apply_chat_template(md, msgs[:1] + msgs[1:2], add_generation_prompt=False) == (
        "<bos><start_of_turn>user\nAnswer in French.\n\nWhat is 2+2?<end_of_turn>\n")
    with pytest.raises(jinja2.TemplateError, match="alternate"):
        apply_chat_template(md, [{"role": "assistant", "content": "hi"}])


@pytest.mark.parametrize("tokens, start", [
    (["<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"],
     "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant"),
    (["<|endoftext|>", "<|im_start|>", "<|im_end|>"], "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"),
])
def test_builtin_llama3_and_chatml(tokens: list[str], start: str) -> None:
    md = {"general.architecture": "llama", "tokenizer.ggml.tokens": tokens, "tokenizer.ggml.bos_token_id": 0}
    assert apply_chat_template(md, [{"role": "user", "content": "Hi"}]).startswith(start)


def test_no_template_and_no_builtin() -> None:
    with pytest.raises(ValueError, match="no tokenizer.chat_template"):
        apply_chat_template({"general.architecture": "llama", "tokenizer.ggml.tokens": ["a"]}, [])


def test_environment_semantics() -> None:
    """The pieces of transformers' environment a template can observe."""
    def render(template: str, **kwargs: Any) -> str:
        md = {"tokenizer.chat_template": template, "tokenizer.ggml.tokens": ["<s>", "</s>"],
              "tokenizer.ggml.bos_token_id": 0, "tokenizer.ggml.eos_token_id": 1}
        return apply_chat_template(md, kwargs.pop("messages", []), **kwargs)

    assert render("{{ x | tojson }}", x={"b": "<&'ü>", "a": 1}) == '{"b": "<&\'ü>", "a": 1}'
    assert render("{{ x | tojson(indent=2) }}", x=[1]) == "[\n  1\n]"
    assert render("{{ bos_token }}|{{ eos_token }}|{{ add_generation_prompt }}") == "<s>|</s>|True"
    assert render("{{ bos_token }}", bos_token="X") == "X"  # kwargs override the vocabulary's
    assert render("{% for i in [1, 2, 3] %}{% if i == 2 %}{% break %}{% endif %}{{ i }}{% endfor %}") == "1"
    assert render("  {% if true %}\nA\n  {% endif %}\nB") == "A\nB"  # trim_blocks + lstrip_blocks
    assert render("{{ strftime_now('%Y') }}") == str(datetime.now().year)
    assert render("{{ messages[0] | tojson }}", messages=[{"role": "user", "content": None, "thinking": "t"}]) == \
        '{"thinking": "t", "role": "user", "reasoning_content": "t"}'
    with pytest.raises(jinja2.TemplateError, match="nope"):
        render("{{ raise_exception('nope') }}")
    with pytest.raises(jinja2.exceptions.SecurityError):
        render("{{ messages.append(1) }}")  # immutable sandbox
