"""Digests of what the forward pass computes, to compare two builds bit for bit (a reshaping of
the core must not change a single logit): every tiny family on the exact path and on the
defaults, whole and one token at a time, and the embedded Gemma's logits and greedy tokens.

    PYTHONPATH=python python scripts/logits_digest.py > before.txt   # one build
    PYTHONPATH=python python scripts/logits_digest.py > after.txt    # the other
    diff before.txt after.txt
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "model"))
import tiny  # noqa: E402

import ds4  # noqa: E402
from ds4 import known_models  # noqa: E402


def digest(a: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()[:16]


def main() -> None:
    ids = np.random.default_rng(7).integers(3, 320, size=tiny.TEST_LEN)
    for fam in tiny.FAMILIES:
        for out in ("f32", "q8_0"):
            for opts in ({"kv_type": "f32", "precision": "f32"}, {}):
                try:
                    m = ds4.Model(str(tiny.convert(fam, out)), threads=2, **opts)
                except ds4.ModelError as e:  # a family newer than the build
                    print(fam, out, opts or "defaults", "not loaded:", str(e).split(": ")[-1])
                    continue
                whole = m.session().eval(ids)
                s = m.session()
                steps = np.concatenate([s.eval(ids[i : i + 1]) for i in range(len(ids))])
                print(fam, out, opts or "defaults", digest(whole), digest(steps))
    gemma = ds4.Model(str(known_models.model_path("gemma")), threads=2, n_ctx=1024)
    prompt = gemma.tokenize("The history of the printing press begins in")
    print("gemma eval", digest(gemma.session().eval(prompt)))
    g = gemma.session().generate(prompt, max_tokens=48, stop_at_eog=False)
    print("gemma greedy", g.tokens)
    g = gemma.session().generate(prompt, max_tokens=48, stop_at_eog=False, temperature=0.8, seed=3)
    print("gemma sampled", g.tokens)


if __name__ == "__main__":
    main()
