"""The embedded Gemma 3 270M with the DSpark drafter shipped for it (python/ds4/drafters/), on
held-out prompts unlike its training prompts: chat requests (through the chat template) and code
to continue (plain text, as ``ds4 -p``). Settings: plain greedy decoding; DSpark as a user gets it
(the scheduler deciding whether a draft pays), drafting at every step, with --dspark-confidence
0.3 / 0.5 / 0.7; ngram-mod alone and chained with DSpark both ways. Per setting: decode tokens/s
over the set (end to end after each prefill, drafting and catch-up included), the median over
rounds of its ratio to the same round's plain run, acceptance per draft position and tokens per
verify pass (the bonus token included). Greedy output is checked identical to plain on every
prompt.

Run through ``bench/spec.py --dspark [--rounds 3] [--tokens 128] [--threads 2]``.
"""

from __future__ import annotations

import argparse

import ds4
from ds4.chat import apply_chat_template

CHAT = [
    "How do I make a good cup of tea?",
    "What is the difference between a list and a tuple in Python?",
    "Give me three tips for a job interview.",
    "Why is the sky blue?",
    "Write a limerick about a cat who loves boxes.",
    "What should I pack for a weekend of hiking?",
    "Explain what an API is in simple terms.",
    "How can I improve my sleep?",
]
CODE = [
    "def is_prime(n):\n    \"\"\"Return True if n is a prime number.\"\"\"\n",
    "import json\n\n\ndef load_users(path):\n    \"\"\"Read a JSON file of users and return those older than 18.\"\"\"\n",
    "class Vector2:\n    def __init__(self, x, y):\n        self.x = x\n        self.y = y\n\n    def __add__(self, other):\n",
    "// Returns the index of target in the sorted array, or -1.\nint binary_search(const int *a, int n, int target) {\n",
    "function debounce(fn, ms) {\n",
    "def word_count(text):\n    counts = {}\n",
    "#!/bin/bash\n# Back up every .txt file in the current directory to ./backup\n",
    "fn fibonacci(n: u64) -> u64 {\n",
]


def prompt_sets(model: ds4.Model) -> dict[str, list[list[int]]]:
    md = ds4.inspect(model.path)["metadata"]
    chat = [model.tokenize(apply_chat_template(md, [{"role": "user", "content": p}]), add_special=False) for p in CHAT]
    return {"chat (chat template)": chat, "code (plain continuation)": [model.tokenize(p) for p in CODE]}


def dspark(args: argparse.Namespace) -> None:
    from spec import cpu_line
    from spec_mtp import tables

    model = ds4.Model(threads=args.threads, n_ctx=1024)
    settings: dict[str, ds4.Spec | None] = {
        "plain": None,
        "dspark (the default: the scheduler deciding)": ds4.Spec(types=["dspark"]),
        "dspark, every step": ds4.Spec(types=["dspark"], n_min=1),
        "dspark --dspark-confidence 0.3": ds4.Spec(types=["dspark"], confidence=0.3),
        "dspark --dspark-confidence 0.5": ds4.Spec(types=["dspark"], confidence=0.5),
        "dspark --dspark-confidence 0.7": ds4.Spec(types=["dspark"], confidence=0.7),
        "ngram-mod": ds4.Spec(types=["ngram-mod"]),
        "dspark,ngram-mod": ds4.Spec(types=["dspark", "ngram-mod"]),
        "ngram-mod,dspark": ds4.Spec(types=["ngram-mod", "dspark"]),
    }
    drafter = ds4.Spec(types=["dspark"]).block_drafter(model)
    print(f"# {cpu_line()}\n# Gemma 3 270M Q4_K_M with {drafter.path.split('/')[-1]} (block {drafter.block_size}), "
          f"{args.tokens} tokens per prompt, {args.threads} threads, median of {args.rounds} rounds")
    tables(model, prompt_sets(model), settings, args, stop_at_eog=True)
