"""Weights repacked at load (Model(repack=True), the default; csrc/quant/packed.h): the embedded
Gemma 3 270M's Q5_0 and Q8_0 matrices (the head among them) take the packed kernels for a few
rows and are decoded row by row from the packed copy for the GEMM, and every logit is bit for bit
what the GGUF layout gives, for prompts, verify-sized blocks and single tokens, with 1 and 2
threads. Weights copied onto huge pages (Model(huge_pages=True)) give the same logits again.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import ds4
from huge_pages import anon_huge_kib, thp_available

IDS = np.random.default_rng(21).integers(0, 262_000, size=45)


@pytest.fixture(scope="module")
def reference() -> np.ndarray:
    return ds4.Model(threads=2, n_ctx=128, repack=False).session().eval(IDS)


@pytest.mark.parametrize("threads", [1, 2])
def test_repacked_logits_identical(reference: np.ndarray, threads: int) -> None:
    model = ds4.Model(threads=threads, n_ctx=128)
    assert np.array_equal(model.session().eval(IDS), reference)  # 45 rows: the GEMM over packed rows
    for chunk in (1, 3, 6, 7, 13):  # the packed few-rows kernels, 6 rows per pass and a rest
        s = model.session()
        got = np.concatenate([s.eval(IDS[i:i + chunk]) for i in range(0, len(IDS), chunk)])
        assert np.array_equal(got, reference), f"chunks of {chunk}"


def test_float_precision_ignores_packing(reference: np.ndarray) -> None:
    # precision="f32" reads the GGUF bytes (nothing is packed): the same logits either way
    a = ds4.Model(threads=2, n_ctx=128, precision="f32").session().eval(IDS[:8])
    b = ds4.Model(threads=2, n_ctx=128, precision="f32", repack=False).session().eval(IDS[:8])
    assert np.array_equal(a, b)


def test_huge_pages_logits_identical(reference: np.ndarray) -> None:
    # int16: the packed head's copy on huge pages; f32: the head copied as it is (staged)
    before = anon_huge_kib()
    model = ds4.Model(threads=2, n_ctx=128, huge_pages=True)
    if thp_available():
        assert anon_huge_kib() - before >= 100_000  # most of the 178 MB packed head
    s = model.session()
    assert np.array_equal(np.concatenate([s.eval(IDS[:13]), s.eval(IDS[13:16]), s.eval(IDS[16:])]), reference)
    a = ds4.Model(threads=2, n_ctx=128, precision="f32", huge_pages=True).session().eval(IDS[:8])
    b = ds4.Model(threads=2, n_ctx=128, precision="f32").session().eval(IDS[:8])
    assert np.array_equal(a, b)


def test_huge_pages_staged_k_quants(qwen05_path: Path) -> None:
    # Qwen2.5-Coder 0.5B's Q4_K / Q6_K feed-forward matrices (2.4 MB) are copied as they are
    ids = IDS[:20] % 150_000
    ref = ds4.Model(qwen05_path, threads=2, n_ctx=64).session().eval(ids)
    s = ds4.Model(qwen05_path, threads=2, n_ctx=64, huge_pages=True).session()
    assert np.array_equal(np.concatenate([s.eval(ids[:17]), s.eval(ids[17:18]), s.eval(ids[18:])]), ref)
