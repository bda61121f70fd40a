"""Training data made in shards (ds4.train.data.generate_to): an interrupted run resumes at the
first missing shard with the same samples, and a work directory refuses data of other arguments."""

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
    with pytest.raises(SystemExit, match="other prompts, --max-new"):
        data.generate_to(tmp_path, model, prompts, (1, 2), 16, shard=2)
