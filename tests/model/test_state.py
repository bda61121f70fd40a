"""Session state as typed per-layer slots (csrc/state/): a checkpoint before a pass and a
rollback after it never re-evaluate the context and leave logits bit-identical to a session
that never went ahead (recurrent slots restore their copy and replay the logged rows through
their layer alone); snapshots cover every slot; a block pass (non-causal rows that see the
committed positions and each other) commits nothing, against transformers with the same mask."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import tiny

import ds4

PREFIX, AHEAD, BACK_TO = 20, 8, 23


@pytest.fixture(scope="module", params=tiny.FAMILIES)
def fam(request: pytest.FixtureRequest) -> dict[str, Any]:
    name = request.param
    model = ds4.Model(str(tiny.convert(name, "f32")), threads=2, kv_type="f32")
    ids = np.random.default_rng(11).integers(3, model.n_vocab, size=48)
    return {"name": name, "model": model, "ids": ids}


def gone_ahead(m: ds4.Model, ids: np.ndarray) -> ds4.Session:
    """A session that evaluated PREFIX tokens, checkpointed, and went AHEAD tokens further."""
    s = m.session()
    s.eval(ids[:PREFIX])
    s._s.checkpoint()
    s.eval(ids[PREFIX : PREFIX + AHEAD])
    return s


@pytest.mark.parametrize("back_to", [PREFIX, BACK_TO, PREFIX + AHEAD - 1])
def test_rollback_replays_nothing_and_is_bit_identical(fam: dict[str, Any], back_to: int) -> None:
    m, ids = fam["model"], fam["ids"]
    s = gone_ahead(m, ids)
    rows = m._m.forward_rows
    s.truncate(back_to)
    assert s.n_past == back_to and m._m.forward_rows == rows  # no row evaluated again
    after = s.eval(ids[back_to:])
    fresh = m.session()
    fresh.eval(ids[:back_to])
    np.testing.assert_array_equal(after, fresh.eval(ids[back_to:]))


def test_truncate_below_the_checkpoint(fam: dict[str, Any]) -> None:
    m, ids = fam["model"], fam["ids"]
    s = gone_ahead(m, ids)
    if fam["name"] in tiny.HYBRID:  # a recurrence holds only its last position: below the checkpoint, a snapshot
        with pytest.raises(ds4.ModelError, match="recurrent layer cannot go back.*use a snapshot"):
            s.truncate(5)
        return
    s.truncate(5)
    fresh = m.session()
    fresh.eval(ids[:5])
    np.testing.assert_array_equal(s.eval(ids[5:12]), fresh.eval(ids[5:12]))
    with pytest.raises(ds4.ModelError, match="n_past must be in"):
        s.truncate(13)


def test_snapshot_covers_every_slot(fam: dict[str, Any]) -> None:
    m, ids = fam["model"], fam["ids"]
    s = m.session()
    s.eval(ids[:PREFIX])
    snap = s.snapshot()
    cfg = tiny.config_dict(fam["name"])
    kv_dim = cfg["num_key_value_heads"] * cfg["head_dim"]
    assert snap.n_past == PREFIX
    types = cfg.get("layer_types") or ["full_attention"] * cfg["num_hidden_layers"]
    want = 0
    for t in types:
        if t == "linear_attention":  # the convolution window and the recurrent matrices, whatever n_past
            conv = 2 * cfg["linear_num_key_heads"] * cfg["linear_key_head_dim"] + cfg["linear_num_value_heads"] * cfg["linear_value_head_dim"]
            want += (cfg["linear_conv_kernel_dim"] - 1) * conv * 4
            want += cfg["linear_num_value_heads"] * cfg["linear_key_head_dim"] * cfg["linear_value_head_dim"] * 4
        else:
            want += PREFIX * 2 * kv_dim * 4  # K and V, f32
    assert snap.nbytes == want
    ahead = s.eval(ids[PREFIX:])
    other = m.session()
    other.restore(snap)
    np.testing.assert_array_equal(other.eval(ids[PREFIX:]), ahead)
    s.restore(snap)
    np.testing.assert_array_equal(s.eval(ids[PREFIX:]), ahead)


def test_block_pass_commits_nothing(fam: dict[str, Any]) -> None:
    m, ids = fam["model"], fam["ids"]
    s = m.session()
    s.eval(ids[:PREFIX])
    block = ids[PREFIX : PREFIX + AHEAD]
    if fam["name"] in tiny.HYBRID:  # rows that see the rows after them have no meaning in a recurrence
        with pytest.raises(ds4.ModelError, match="block pass.*recurrent layers"):
            s._s.eval_block(block)
        assert s.n_past == PREFIX
        return
    rows = s._s.eval_block(block)
    assert s.n_past == PREFIX and s.tokens == [int(t) for t in ids[:PREFIX]]
    causal = s.eval(block)
    assert not np.array_equal(rows[0], causal[0])  # row 0 saw the rows after it
    # a block of one row sees what a causal row sees
    s.truncate(PREFIX)
    np.testing.assert_array_equal(s._s.eval_block(block[:1])[0], causal[0])
    fresh = m.session()
    fresh.eval(ids[:PREFIX])
    np.testing.assert_array_equal(fresh.eval(block), causal)


def block_mask(name: str, n_past: int, n: int, window: int) -> np.ndarray:
    """[n_past + n, n_past + n] visibility: causal for the prefix, the block sees itself whole."""
    total = n_past + n
    q = np.arange(total)[:, None]
    k = np.arange(total)[None, :]
    last = np.where(q < n_past, q, total - 1)
    ok = k <= last
    if window:
        ok &= q - k < window
    return ok


def test_block_pass_matches_transformers_with_the_same_mask(fam: dict[str, Any]) -> None:
    torch = pytest.importorskip("torch")
    m, ids, name = fam["model"], fam["ids"], fam["name"]
    if name in tiny.HYBRID:
        pytest.skip("no block pass through recurrent layers (test_block_pass_commits_nothing)")
    hf = tiny.load_hf(name)
    seq = torch.tensor(ids[None, : PREFIX + AHEAD])

    def additive(ok: np.ndarray) -> Any:
        return torch.from_numpy(np.where(ok, 0.0, -np.inf).astype(np.float32))[None, None]

    full = additive(block_mask(name, PREFIX, AHEAD, 0))
    mask: Any = full
    if name == "gemma3_text":
        mask = {"full_attention": full, "sliding_attention": additive(block_mask(name, PREFIX, AHEAD, tiny.SLIDING_WINDOW))}
    with torch.no_grad():
        ref = hf(seq, attention_mask=mask).logits[0, PREFIX:].float().numpy()
    s = m.session()
    s.eval(ids[:PREFIX])
    got = s._s.eval_block(ids[PREFIX : PREFIX + AHEAD])
    ratio = float(np.abs(got - ref).max() / np.abs(ref).max())
    print(f"{name}: block pass vs transformers with the block mask: {ratio:.2e}")
    assert ratio <= 1e-4
