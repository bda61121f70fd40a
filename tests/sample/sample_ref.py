"""NumPy reference for csrc/sample/sampler.h: the same chain, written plainly.

bias -> penalties (float32, as the C++ does) -> top-k -> top-p -> min-p -> temperature (float64).
Best-first order is (logit descending, id ascending); the filters see untempered logits.
"""

from __future__ import annotations

from collections import Counter

import numpy as np


def xoshiro256ss(seed: int, n: int) -> list[int]:
    """xoshiro256** seeded by splitmix64, straight from https://prng.di.unimi.it/ (64-bit)."""
    m = (1 << 64) - 1
    x = seed & m
    s = []
    for _ in range(4):
        x = (x + 0x9E3779B97F4A7C15) & m
        z = x
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & m
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & m
        s.append(z ^ (z >> 31))

    def rotl(v: int, k: int) -> int:
        return ((v << k) | (v >> (64 - k))) & m

    out = []
    for _ in range(n):
        out.append((rotl((s[1] * 5) & m, 7) * 9) & m)
        t = (s[1] << 17) & m
        s[2] ^= s[0]
        s[3] ^= s[1]
        s[1] ^= s[2]
        s[0] ^= s[3]
        s[2] ^= t
        s[3] = rotl(s[3], 45)
    return out


def adjust(logits, *, logit_bias=(), history=(), repeat_last_n=64, repeat_penalty=1.0,
           presence_penalty=0.0, frequency_penalty=0.0) -> np.ndarray:
    l = np.array(logits, dtype=np.float32, copy=True)
    for i, b in (logit_bias.items() if isinstance(logit_bias, dict) else logit_bias):
        l[i] = np.float32(l[i] + np.float32(b))
    window = list(history)[-repeat_last_n:] if repeat_last_n > 0 else []
    rp, pp, fp = np.float32(repeat_penalty), np.float32(presence_penalty), np.float32(frequency_penalty)
    for t, c in Counter(window).items():
        v = l[t]
        v = v / rp if v > 0 else v * rp
        l[t] = np.float32(v - (np.float32(c) * fp + pp))
    return l


def best_first(l: np.ndarray, ids: np.ndarray) -> np.ndarray:
    return ids[np.lexsort((ids, -l[ids].astype(np.float64)))]


def kept(l: np.ndarray, *, top_k=0, top_p=1.0, min_p=0.0) -> np.ndarray:
    """Ids surviving top-k -> top-p -> min-p, ascending."""
    ids = np.nonzero(l != -np.inf)[0]
    if 0 < top_k < len(ids):
        ids = best_first(l, ids)[:top_k]
    if np.float32(top_p) < 1:
        order = best_first(l, ids)
        x = l[order].astype(np.float64)
        e = np.exp(x - x.max())
        cum = np.cumsum(e / e.sum())
        hit = np.nonzero(cum >= np.float32(top_p))[0]
        ids = order[: hit[0] + 1] if len(hit) else order
    if np.float32(min_p) > 0:
        x = l[ids].astype(np.float64)
        ids = ids[np.exp(x - x.max()) >= np.float32(min_p)]
    return np.sort(ids)


def probs(l: np.ndarray, *, temperature: float, top_k=0, top_p=1.0, min_p=0.0) -> np.ndarray:
    p = np.zeros(len(l), dtype=np.float64)
    if temperature == 0:
        p[int(np.argmax(l))] = 1.0
        return p
    ids = kept(l, top_k=top_k, top_p=top_p, min_p=min_p)
    x = l[ids].astype(np.float64)
    w = np.exp((x - x.max()) / np.float64(np.float32(temperature)))
    p[ids] = w / w.sum()
    return p


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max())
    return e / e.sum()
