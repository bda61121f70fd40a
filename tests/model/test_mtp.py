"""The built-in MTP block (Qwen3-Next's mtp.*) against an independent torch reference written here
from the published structure: x = fc([norm_e(embed(token)), norm_h(hidden)]) with the embedding
first and zero-centered norms, one full-attention decoder layer (transformers' own layer class,
given the block's weights) over the MTP positions, then mtp.norm and the shared output head. The
hidden state fed at position p is the target's after its final norm at p - 1 (zeros at 0)."""

from __future__ import annotations

import shutil
from typing import Any

import numpy as np
import pytest
import tiny
from llamacpp_layout import add_mtp

import ds4

REL_TOL = 1e-4


@pytest.fixture(scope="module")
def mtp_model(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    d = tmp_path_factory.mktemp("mtp") / "hf"
    shutil.copytree(tiny.build("qwen3_next"), d)
    weights = add_mtp(d)
    with pytest.warns(UserWarning, match="placeholder"):
        path = ds4.convert(d, d.parent / "m.gguf", "f32")
    return {"model": ds4.Model(str(path), threads=2, kv_type="f32", precision="f32"), "weights": weights}


def reference(weights: dict[str, np.ndarray], ids: np.ndarray, hidden: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Logits and post-norm hidden states of the MTP block over rows at positions 0..n-1."""
    torch = pytest.importorskip("torch")
    from transformers.models.qwen3_next.modeling_qwen3_next import Qwen3NextDecoderLayer

    hf = tiny.load_hf("qwen3_next")
    cfg = hf.config
    eps = cfg.rms_norm_eps

    def norm(x: Any, w: np.ndarray) -> Any:  # zero-centered RMSNorm
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * (1.0 + torch.from_numpy(w))

    layer = Qwen3NextDecoderLayer(cfg, layer_idx=cfg.num_hidden_layers - 1).float().eval()  # a full-attention layer
    sd = {k[len("mtp.layers.0."):]: torch.from_numpy(v) for k, v in weights.items() if k.startswith("mtp.layers.0.")}
    n_exp = cfg.num_experts
    fused = {"mlp.experts.gate_up_proj": torch.stack([torch.cat([sd.pop(f"mlp.experts.{e}.gate_proj.weight"),
                                                                 sd.pop(f"mlp.experts.{e}.up_proj.weight")]) for e in range(n_exp)]),
             "mlp.experts.down_proj": torch.stack([sd.pop(f"mlp.experts.{e}.down_proj.weight") for e in range(n_exp)])}
    layer.load_state_dict({**sd, **fused})
    n = len(ids)
    with torch.no_grad():
        e = hf.model.embed_tokens(torch.tensor(ids))
        h = torch.from_numpy(hidden)
        x = torch.cat([norm(e, weights["mtp.pre_fc_norm_embedding.weight"]),
                       norm(h, weights["mtp.pre_fc_norm_hidden.weight"])], -1) @ torch.from_numpy(weights["mtp.fc.weight"]).T
        pos = torch.arange(n)[None]
        cos_sin = hf.model.rotary_emb(x[None], pos)
        mask = torch.full((n, n), float("-inf")).triu(1)[None, None]
        x = layer(x[None], position_embeddings=cos_sin, attention_mask=mask, position_ids=pos)[0]
        out = norm(x, weights["mtp.norm.weight"])
        logits = hf.lm_head(out)
    return logits.numpy(), out.numpy()


def test_mtp_step_matches_the_reference(mtp_model: dict[str, Any]) -> None:
    m = mtp_model["model"]
    assert m._m.has_mtp
    ids = np.random.default_rng(3).integers(3, m.n_vocab, size=24)
    s = m.session()
    n_layer = m._m.n_layer
    trunk = s.eval_hidden(ids, [n_layer])[0]  # the target's hidden states after its final norm
    hidden = np.concatenate([np.zeros((1, trunk.shape[1]), np.float32), trunk[:-1]])  # position p takes h_{p-1}
    logits, out = s._s.mtp_step(0, ids, hidden)
    ref_logits, ref_out = reference(mtp_model["weights"], ids, hidden)
    for what, got, ref in (("logits", logits, ref_logits), ("hidden", out, ref_out)):
        rel = np.abs(got - ref).max() / np.abs(ref).max()
        print(f"MTP {what}: max|err|/max = {rel:.2e}")
        assert rel <= REL_TOL
    assert (logits.argmax(1) == ref_logits.argmax(1)).all()
    # the session's own positions are untouched, and rows one at a time give the same bits
    assert s.n_past == len(ids)
    other = m.session()
    rows = [other._s.mtp_step(p, ids[p : p + 1], hidden[p : p + 1]) for p in range(len(ids))]
    np.testing.assert_array_equal(np.concatenate([r[0] for r in rows]), logits)
    np.testing.assert_array_equal(np.concatenate([r[1] for r in rows]), out)


def test_no_mtp_block_is_a_clear_error() -> None:
    m = ds4.Model(str(tiny.convert("qwen3_next", "f32")), threads=2)
    assert not m._m.has_mtp
    with pytest.raises(ds4.ModelError, match="no MTP block"):
        m.session()._s.mtp_step(0, np.array([5]), np.zeros((1, m._m.n_embd), np.float32))
