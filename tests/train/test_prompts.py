"""The trainer's prompt sets (ds4.train.prompts): the default set is fixed, and the corpus prompts
depend only on the seed and the Python version (not on the packages installed), a longer draw
extending a shorter one."""

from __future__ import annotations

import sys
from pathlib import Path

from ds4.train.prompts import corpus_prompts, default_prompts


def test_default_set_is_fixed_and_distinct() -> None:
    prompts = default_prompts()
    assert prompts == default_prompts() and len(set(prompts)) == len(prompts) == 1538
    assert prompts[0] == "Write a function that reverses a linked list in Python."  # the first families keep their order:
    assert prompts[475] == "Write a recipe about a talking dog."                   # their data shards stay valid


def test_default_set_holds_out_the_bench_prompts() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    from spec_dspark import CHAT, CODE

    assert not set(default_prompts()) & set(CHAT + CODE)


def test_corpus_prompts_extend_and_depend_on_the_seed() -> None:
    longer = corpus_prompts(40, seed=3)
    assert len(longer) == 40 and all(len(p) >= 200 for p in longer)
    assert corpus_prompts(15, seed=3) == longer[:15]
    assert corpus_prompts(15, seed=4) != longer[:15]
