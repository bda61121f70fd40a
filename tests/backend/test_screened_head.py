"""The screened greedy head (backend/cpu/screened_head.h): on packed Q8_0 heads of two or more
rows, the argmax is bit for bit the unscreened head's and the argmax of exactly what matmul
writes, ties included (lowest id), on inputs built to make the screen's bound work hard."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from ds4 import _core

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "quant"))
import qdata  # noqa: E402


def _backends() -> tuple[_core.Backend, _core.Backend]:
    return _core.Backend("cpu", threads=2, int16=True), _core.Backend("cpu", threads=2, int16=True, screen=False)


def _check(data: bytes, n_out: int, x: np.ndarray) -> np.ndarray:
    screened, full = _backends()
    got = screened.argmax("Q8_0", data, n_out, x, pack=True)
    np.testing.assert_array_equal(got, full.argmax("Q8_0", data, n_out, x, pack=True))
    np.testing.assert_array_equal(got, full.matmul("Q8_0", data, n_out, x, pack=True).argmax(axis=1))
    return got


def _near_ties(n_in: int, n_out: int, rng: np.random.Generator) -> tuple[bytes, np.ndarray]:
    """Rows in groups: a row, its exact copies (ties: the lowest id wins) and copies with one
    quant moved by one step (logits a hair apart), under activations with outlier dimensions."""
    blocks = np.frombuffer(qdata.random_blocks("Q8_0", n_out * n_in // 32, rng), np.uint8).reshape(n_out, -1).copy()
    for g in range(0, n_out - 8, 97):
        for c in range(1, 6):
            blocks[g + c] = blocks[g]
        blocks[g + 6, 2 + 5] = (int(blocks[g, 2 + 5]) + 1) % 256
        blocks[g + 7, 2 + 9] = (int(blocks[g, 2 + 9]) - 1) % 256
    x = rng.standard_normal((16, n_in)) * np.where(rng.random(n_in) < 0.05, 30.0, 1.0)
    return blocks.tobytes(), x.astype(np.float32)


@pytest.mark.parametrize("n_in", [256, 384, 640])
def test_same_argmax_as_the_full_head(n_in: int) -> None:
    rng = np.random.default_rng(n_in)
    n_out = 3001  # odd: a last unpaired row
    data, x = _near_ties(n_in, n_out, rng)
    for rows in (1, 2, 5, 12, 13, 16):
        _check(data, n_out, x[:rows])
    # the winners' own rows: x along a weight row makes it and its copies the top scores
    w = qdata.gguf_dequantize("Q8_0", data, n_out * n_in).reshape(n_out, n_in)
    top = np.stack([w[g] for g in range(0, n_out - 8, 97)][:8]).astype(np.float32)
    got = _check(data, n_out, top)
    # mostly the first of the group of exact copies (a far larger row elsewhere may still win)
    assert np.mean(got % 97 == 0) >= 0.5


def test_all_rows_equal_overflows_to_the_full_head() -> None:
    """Every row a candidate: the candidate buffers overflow and those rows take the full head."""
    rng = np.random.default_rng(3)
    row = qdata.random_blocks("Q8_0", 20, rng)
    n_out = 6000
    got = _check(row * n_out, n_out, rng.standard_normal((3, 640)).astype(np.float32))
    assert np.all(got == 0)


def test_non_finite_activations_are_reported() -> None:
    rng = np.random.default_rng(4)
    data = qdata.random_blocks("Q8_0", 500 * 20, rng)
    x = rng.standard_normal((4, 640)).astype(np.float32)
    x[2, 7] = np.inf
    for b in _backends():
        with pytest.raises(ValueError, match="NaN or \\+inf"):
            b.argmax("Q8_0", data, 500, x, pack=True)


@pytest.mark.parametrize("margin", [0.0, 2.0, 6.0, 1e9])
def test_shortlist_holds_the_full_heads_values(margin: float) -> None:
    """The sampling head's shortlist (backend.h's Shortlist) of two or more rows: ids ascending
    with exactly matmul's values, every id left out below thr, everything within the margin of the
    row's largest listed unless the floor rose at capacity (thr then above that margin's floor),
    and matmul_ids of every id equal to matmul's row. A huge margin fills the buffers: the floor
    rises and keeps the best by bound."""
    screened, full = _backends()
    rng = np.random.default_rng(int(margin) % 1000)
    n_in, n_out = 640, 5001
    data, x = _near_ties(n_in, n_out, rng)
    if not screened.shortlist("Q8_0", data, n_out, x[:2], [margin] * 2, pack=True)[0]["ok"]:
        pytest.skip("no screen kernel on this CPU (the caller computes full rows)")
    for rows in (2, 5, 8):
        want = full.matmul("Q8_0", data, n_out, x[:rows], pack=True)
        got = screened.shortlist("Q8_0", data, n_out, x[:rows], [margin] * rows, pack=True)
        for r, d in enumerate(got):
            assert d["ok"]
            ids = d["ids"]
            assert np.all(np.diff(ids) > 0)
            np.testing.assert_array_equal(d["logits"], want[r, ids])
            left = np.ones(n_out, bool)
            left[ids] = False
            assert not left.any() or want[r, left].max() < d["thr"]
            assert d["thr"] <= np.float32(want[r].max() - margin) or len(ids) >= 1024
            np.testing.assert_array_equal(d["every"], want[r])
    assert not screened.shortlist("Q8_0", data, n_out, x[:1], [margin], pack=True)[0]["ok"]  # one row: the full head


@pytest.mark.parametrize("keep", [1, 40, 300])
def test_a_top_k_shortlist_holds_the_k_largest(keep: int) -> None:
    """With keep (a top-k), thr may rise to the keep-th largest lower bound: the k largest values
    are all listed, at or above thr, with matmul's values; everything left out is below thr."""
    screened, full = _backends()
    rng = np.random.default_rng(keep)
    n_in, n_out = 640, 5001
    data, x = _near_ties(n_in, n_out, rng)
    got = screened.shortlist("Q8_0", data, n_out, x[:6], [1e9] * 6, keep=[keep] * 6, pack=True)
    if not got[0]["ok"]:
        pytest.skip("no screen kernel on this CPU (the caller computes full rows)")
    want = full.matmul("Q8_0", data, n_out, x[:6], pack=True)
    for r, d in enumerate(got):
        ids = d["ids"]
        np.testing.assert_array_equal(d["logits"], want[r, ids])
        assert np.count_nonzero(d["logits"] >= d["thr"]) >= keep
        top = np.argsort(-want[r], kind="stable")[:keep]
        assert np.isin(top, ids).all()
        left = np.ones(n_out, bool)
        left[ids] = False
        assert want[r, left].max() < d["thr"]
        assert len(ids) < n_out // 2  # the floor rose


def test_a_flat_rows_shortlist_stops_at_what_the_sampler_needs() -> None:
    """A flat row (every id within the margin) with the screened sampler's keep (256): thr ends at
    or below the 256th largest value, so the sampler draws from the list without the row whole,
    and the exact values stop there (taken by upper bound, descending): far fewer than the ids
    above the screen's floor, every one left out below thr."""
    screened, full = _backends()
    rng = np.random.default_rng(7)
    n_in, n_out, keep = 640, 12001, 256
    data = qdata.random_blocks("Q8_0", n_out * n_in // 32, rng)
    x = (rng.standard_normal((4, n_in)) * 0.003).astype(np.float32)  # logits within ~3 of each other
    margin = 0.7 * (np.log(262144) - 2)
    got = screened.shortlist("Q8_0", data, n_out, x, [margin] * 4, keep=[keep] * 4, pack=True)
    if not got[0]["ok"]:
        pytest.skip("no screen kernel on this CPU (the caller computes full rows)")
    want = full.matmul("Q8_0", data, n_out, x, pack=True)
    for r, d in enumerate(got):
        row = want[r]
        assert (row >= row.max() - margin).sum() > 2 * keep  # flat
        ids = d["ids"]
        np.testing.assert_array_equal(d["logits"], row[ids])
        assert d["thr"] <= np.sort(row)[-keep]
        left = np.ones(n_out, bool)
        left[ids] = False
        assert row[left].max() < d["thr"]
        assert keep <= len(ids) < 2 * keep
