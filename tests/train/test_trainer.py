"""The trainer's mixed precision (ds4.train.trainer, TrainConfig.bf16): matrix products in bfloat16
under torch.autocast, weights, optimiser and loss in float32, must learn as float32 does: on the
tiny target's own data, the same DSpark drafter trained from the same seed both ways ends within a
10 % of the same held-out loss, well below where it started."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "speculative"))
import block_target  # noqa: E402

torch = pytest.importorskip("torch")


def test_bf16_training_learns_as_f32_does(tmp_path: Path) -> None:
    import ds4
    from ds4.train import data
    from ds4.train.drafter_net import DrafterConfig, DrafterNet
    from ds4.train.trainer import TrainConfig, Trainer, anchors_of, loss_of, reduced_vocab, target_parts

    target = block_target.target_gguf()
    model = ds4.Model(str(target), threads=2, kv_type="f32", precision="f32")
    samples = list(data.generate(model, block_target.prompts(48, 3), block_target.LAYERS, 48, progress=False))
    train, heldout = samples[:40], samples[40:]
    parts = target_parts(target)
    cfg = DrafterConfig(n_embd=64, target_layers=block_target.LAYERS, mask_token=block_target.MASK, n_layer=1, n_head=4,
                        n_head_kv=2, head_dim=16, n_ff=128, block_size=8, rope_base=10000.0, markov_rank=16,
                        d2t=reduced_vocab(train, 200, parts.n_vocab))
    rng = np.random.default_rng(5)
    batch = [(s, anchors_of(s, 16, rng)) for s in heldout]

    def heldout_loss(net: DrafterNet) -> float:
        with torch.no_grad():
            return float(loss_of(net, batch, 4.0))

    losses = {}
    for bf16 in (False, True):
        torch.manual_seed(0)
        net = DrafterNet(cfg, parts, seed=0)
        start = heldout_loss(net)
        work = tmp_path / ("bf16" if bf16 else "f32")
        work.mkdir()
        Trainer(net, train, heldout, TrainConfig(steps=150, eval_every=150, lr=3e-3, bf16=bf16), work,
                log=open(os.devnull, "w")).run()
        losses[bf16] = heldout_loss(net)
        assert losses[bf16] < 0.6 * start
    assert abs(losses[True] - losses[False]) < 0.1 * losses[False]
