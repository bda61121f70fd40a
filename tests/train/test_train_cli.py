"""``ds4 train-drafter`` end to end on the tiny trained target (tests/speculative/block_target.py): data
made by ds4's engine from a jsonl of prompts, a few training steps, stopped by --minutes and resumed
from its checkpoint, calibrated and exported; the drafter it writes loads for its target and drafts."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "speculative"))
import block_target  # noqa: E402

import ds4  # noqa: E402

pytest.importorskip("torch")


def test_train_stop_resume_export(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from ds4.cli import main

    prompts = tmp_path / "p.jsonl"
    prompts.write_text("\n".join(json.dumps({"prompt": p}) for p in ("one two three", "a b c d", "the cat", "x y")))
    out = tmp_path / "d.gguf"
    args = ["train-drafter", str(block_target.target_gguf()), str(out), "--prompts", str(prompts), "--max-new", "24",
            "--target-layers", "0,1,2", "--heads", "4", "--kv-heads", "2", "--head-dim", "16", "--ffn", "64",
            "--draft-vocab", "100", "--markov-rank", "8", "--block-size", "4", "--steps", "6", "--threads", "2",
            "--outtype", "f32"]
    assert main([*args, "--minutes", "1e-9"]) == 0  # stops after a step, resumable
    assert not out.exists() and (tmp_path / "d.gguf.work" / "checkpoint.pt").exists()
    assert "run again to resume" in capsys.readouterr().err
    assert main(args) == 0
    err = capsys.readouterr().err
    assert "resumed at step 1" in err and "held-out acceptance per position" in err
    log = json.loads((tmp_path / "d.gguf.work" / "log.json").read_text())
    assert log["steps"] == 6 and len(log["heldout_acceptance_per_position"]) == 4
    target = ds4.Model(str(block_target.target_gguf()), threads=2)
    d = ds4._core.BlockDrafter(str(out), target._m)
    assert (d.kind, d.block_size, d.layers) == ("dspark", 4, [1, 2, 3])
    g = target.session().generate([1, 5, 6, 7], max_tokens=16, stop_at_eog=False,
                                   spec=ds4.Spec(types=["dspark"], mtp_model=out, n_min=1))
    assert g.stats["n_drafted"] > 0
