"""Training data made in shards (ds4.train.data.generate_to): an interrupted run resumes at the
first missing shard with the same samples, a longer prompt set reuses the shards it starts with, a
shard whose prompts changed is made again, and a work directory refuses data of other arguments."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "speculative"))
import block_target  # noqa: E402

import ds4  # noqa: E402
from ds4.train import data  # noqa: E402


def test_shards_resume_and_refuse_other_recipes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = ds4.Model(str(block_target.target_gguf()), threads=2)
    prompts = ["one two three", "a b c d", "the cat", "x y", "five six"]
    first = data.generate_to(tmp_path, model, prompts, (1, 2), 12, shard=2)
    assert sorted(p.name for p in tmp_path.glob("data-*.npz")) == ["data-0000.npz", "data-0001.npz", "data-0002.npz"]
    (tmp_path / "data-0001.npz").unlink()
    (tmp_path / "data-0002.npz").unlink()
    capsys.readouterr()
    again = data.generate_to(tmp_path, model, prompts, (1, 2), 12, shard=2)
    assert capsys.readouterr().err.count("data resumed at prompt") == 1
    assert len(again) == len(first) == 5
    for a, b in zip(first, again):
        assert a.start == b.start and np.array_equal(a.tokens, b.tokens) and np.array_equal(a.features, b.features)
    with pytest.raises(SystemExit, match="another target, --target-layers or --max-new"):
        data.generate_to(tmp_path, model, prompts, (1, 2), 16, shard=2)


def test_shards_grow_with_the_prompt_set(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = ds4.Model(str(block_target.target_gguf()), threads=2)
    prompts = ["one two three", "a b c d", "the cat"]
    first = data.generate_to(tmp_path, model, prompts, (1, 2), 12, shard=2)
    stamp = {p.name: p.stat().st_mtime_ns for p in tmp_path.glob("data-*.npz")}
    capsys.readouterr()
    longer = data.generate_to(tmp_path, model, prompts + ["x y", "five six"], (1, 2), 12, shard=2)
    assert "data resumed at prompt 2" in capsys.readouterr().err
    assert (tmp_path / "data-0000.npz").stat().st_mtime_ns == stamp["data-0000.npz"]  # reused, not made again
    assert len(longer) == 5 and np.array_equal(longer[0].tokens, first[0].tokens)
    assert (tmp_path / "data-0001.npz").stat().st_mtime_ns != stamp["data-0001.npz"]  # its prompts grew: made again
    assert np.array_equal(longer[2].tokens, first[2].tokens)
    changed = data.generate_to(tmp_path, model, ["one two", "a b c d", "x y", "x y", "five six"], (1, 2), 12, shard=2)
    assert len(changed) == 5 and len(changed[0].tokens) < len(longer[0].tokens)  # shard 0 made again from its new prompts
    assert np.array_equal(changed[4].tokens, longer[4].tokens)


def test_teacher_rows_give_the_targets_logits(tmp_path: Path) -> None:
    """The final hidden state a sample keeps is what the target's head reads: its output projection
    over each position's teacher row gives the engine's logits there (the distribution the
    trainer distils), and their argmax the next token the target chose."""
    from ds4.train.trainer import target_parts

    path = block_target.target_gguf()
    model = ds4.Model(str(path), threads=2)
    (s,) = data.generate_to(tmp_path, model, ["one two three"], (1, 2), 12, shard=2)
    assert s.teacher.shape == (len(s.tokens), s.features.shape[1] // 2)
    parts = target_parts(path)
    got = s.teacher @ parts.output.numpy().T
    want = np.asarray(model.session().eval(s.tokens.tolist())).reshape(len(s.tokens), -1)
    assert np.abs(got - want).max() <= 1e-4 * np.abs(want).max()
    assert np.array_equal(got[s.start:-1].argmax(-1), s.tokens[s.start + 1:])
