"""What a rejected draft costs on a hybrid model, against the verify pass it follows.

A gated DeltaNet layer's state holds only its last position, so before a verify pass ds4 copies
it (the checkpoint) and logs each row's inputs to the recurrence; a rejection restores the copy
and replays the accepted rows through the DeltaNet layers alone (csrc/state/recurrent_slot.h).
This prints, for a model whose DeltaNet layers have Qwen3-Next-80B's and Qwen3.5's shape (hidden
2048; 16 key and 32 value heads of 128; a 4-tap convolution: 2 MiB of state per layer) and a
small vocabulary and FFN (the cost that matters here is the state's, not the weights'):

- the checkpoint (copying every DeltaNet layer's state) against a verify pass of k rows;
- a rollback replaying j accepted rows, against the same verify pass;
- what replaying the whole context instead would cost (one forward pass over it).

The model is random (transformers, built and converted once into a temporary directory).

Usage: python bench/rewind.py [--layers 8] [--context 512] [--threads 2]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import ds4


def build(tmp: Path, layers: int) -> Path:
    import torch
    import transformers

    cfg = transformers.Qwen3_5TextConfig(
        vocab_size=512, hidden_size=2048, intermediate_size=256, num_hidden_layers=layers, num_attention_heads=16,
        num_key_value_heads=2, head_dim=256, linear_num_key_heads=16, linear_num_value_heads=32,
        linear_key_head_dim=128, linear_value_head_dim=128, linear_conv_kernel_dim=4,
        layer_types=["full_attention" if (i + 1) % 4 == 0 else "linear_attention" for i in range(layers)],
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25},
        tie_word_embeddings=True, max_position_embeddings=4096)
    torch.manual_seed(0)
    model = transformers.Qwen3_5ForCausalLM(cfg).float().eval()
    model.save_pretrained(tmp / "hf")
    return ds4.convert(tmp / "hf", tmp / "m.gguf", "q8_0")


def best(f, reps: int = 5) -> float:
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        f()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--context", type=int, default=512)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = build(Path(tmp), a.layers)
        m = ds4.Model(str(path), threads=a.threads, n_ctx=a.context + 64)
        ids = np.random.default_rng(1).integers(3, 500, size=a.context + 32)
        s = m.session()
        s.eval(ids[: a.context])
        n_delta = sum((i + 1) % 4 != 0 for i in range(a.layers))
        state_mib = n_delta * (32 * 128 * 128 + 3 * (2 * 16 * 128 + 32 * 128)) * 4 / 2**20
        print(f"{a.layers} layers ({n_delta} DeltaNet, {state_mib:.1f} MiB of recurrent state), context {a.context}, "
              f"{a.threads} threads, Q8_0\n")
        print("| k | verify pass (ms) | checkpoint (ms) | rollback keeping 0 / k-1 rows (ms) | rollback / verify |")
        print("|---:|---:|---:|---:|---:|")
        base = a.context
        for k in (1, 4, 8, 16):
            block = ids[base : base + k]

            def checkpoint() -> None:
                s._s.checkpoint()

            def verify() -> None:
                s._s.checkpoint()
                s._s.eval_argmax(block)
                s.truncate(base)

            def rollback(keep: int) -> float:
                times = []
                for _ in range(5):
                    s._s.checkpoint()
                    s._s.eval_argmax(block)
                    t0 = time.perf_counter()
                    s.truncate(base + keep)
                    times.append(time.perf_counter() - t0)
                    s.truncate(base)  # back to the checkpoint: a replay of nothing
                return min(times)

            t_verify = best(verify) - best(lambda: (checkpoint(), s.truncate(base)))
            t_ckpt = best(checkpoint)
            r0, rk = rollback(0), rollback(k - 1)
            print(f"| {k} | {t_verify * 1e3:.1f} | {t_ckpt * 1e3:.2f} | {r0 * 1e3:.2f} / {rk * 1e3:.2f} | "
                  f"{rk / t_verify:.2f} |")
        whole = best(lambda: m.session()._s.eval_argmax(ids[: a.context]), reps=2)
        print(f"\nRe-evaluating the {a.context}-token context instead: {whole * 1e3:.0f} ms")


if __name__ == "__main__":
    sys.exit(main())
