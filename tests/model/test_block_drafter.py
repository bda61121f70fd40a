"""Block drafters (csrc/model/block_drafter.cpp): the network against z-lab's reference (the `dflash`
package's DFlashDraftModel, a random drafter converted by `ds4 convert`) and against the trainer's
torch model (DFlash, DSpark with its Markov and confidence heads, over the target's vocabulary or
a reduced one); the context kept with the session through verify-pass rewinds, snapshots and a
lost track; files refused with a message that names what is wrong."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
import tiny  # noqa: E402

import ds4  # noqa: E402

torch = pytest.importorskip("torch")
LAYERS = (2, 3)  # capture indices: after target layers 1 and 2


def close(got: np.ndarray, want: np.ndarray) -> float:
    """max |got - want| / max |want| over the finite entries; the -inf ones must agree."""
    fin = np.isfinite(want)
    assert (np.isfinite(got) == fin).all()
    return float(np.abs(got[fin] - want[fin]).max() / np.abs(want[fin]).max())


@pytest.fixture(scope="module")
def target() -> ds4.Model:
    return ds4.Model(str(tiny.convert("qwen3", "f32")), threads=2, kv_type="f32", precision="f32")


def features(target: ds4.Model, tokens: list[int]) -> Any:
    h = target.session().eval_hidden(tokens, list(LAYERS))
    return torch.from_numpy(np.concatenate(list(h), -1))


def drafted(target: ds4.Model, drafter: Any, tokens: list[int], anchor: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    s = target.session()
    s._s.track_block(drafter)
    s.eval(tokens)
    return s._s.block_draft(anchor, n)


@pytest.fixture(scope="module")
def zlab(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Path]:
    """A random z-lab DFlash drafter for the tiny Qwen3 and its `ds4 convert` output."""
    dflash = pytest.importorskip("dflash.model")
    from transformers import Qwen3Config

    cfg = Qwen3Config(**{**tiny._COMMON, "num_hidden_layers": 2})
    cfg.num_target_layers = 4
    cfg.dflash_config = {"target_layer_ids": [i - 1 for i in LAYERS], "block_size": 8, "mask_token_id": 5}
    cfg.architectures = ["DFlashDraftModel"]
    torch.manual_seed(0)
    d = dflash.DFlashDraftModel(cfg)
    with torch.no_grad():
        for name, p in d.named_parameters():  # norms around 1, so that an offset or a swap shows
            p.copy_(0.1 * torch.randn(p.shape) + (1.0 if "norm" in name else 0.0))
    d.eval()
    root = tmp_path_factory.mktemp("zlab")
    d.save_pretrained(root / "hf")
    gguf = ds4.convert(root / "hf", root / "drafter.gguf", target=tiny.convert("qwen3", "f32"))
    return d, gguf


def test_logits_match_zlab_reference(target: ds4.Model, zlab: tuple[Any, Path]) -> None:
    from dflash.model import extract_context_feature

    d, gguf = zlab
    drafter = ds4._core.BlockDrafter(str(gguf), target._m)
    assert (drafter.kind, drafter.block_size, drafter.mask_token, drafter.layers) == ("dflash", 8, 5, list(LAYERS))
    hf = tiny.load_hf("qwen3")
    rng = np.random.default_rng(0)
    for length in (1, 7, 30):
        tokens = [int(t) for t in rng.integers(3, 320, length)]
        anchor = int(rng.integers(3, 320))
        got, conf = drafted(target, drafter, tokens, anchor, 7)
        with torch.no_grad():
            out = hf(torch.tensor([tokens]), output_hidden_states=True)
            ctx = extract_context_feature(out.hidden_states, d.target_layer_ids)
            block = torch.tensor([[anchor] + [5] * 7])
            h = d(target_hidden=ctx, noise_embedding=hf.get_input_embeddings()(block),
                  position_ids=torch.arange(length + 8)[None])
            want = d.compute_logits(h[:, 1:], hf.lm_head)[0].numpy()
        assert close(got, want) < 1e-4, length
        assert (conf == 1).all()  # no confidence head


def _net(target_path: Path, kind: str, seed: int) -> Any:
    from ds4.train.drafter_net import DrafterConfig, DrafterNet
    from ds4.train.trainer import target_parts

    dspark = kind != "dflash"
    cfg = DrafterConfig(n_embd=64, target_layers=LAYERS, mask_token=5, n_layer=2, n_head=4, n_head_kv=2, head_dim=16,
                        n_ff=96, block_size=8, rope_base=10000.0, markov_rank=8 if dspark else 0,
                        d2t=tuple(range(3, 200, 2)) if kind == "dspark-reduced" else ())
    net = DrafterNet(cfg, target_parts(target_path), init_scale=0.1, seed=seed)
    with torch.no_grad():
        for p in net.w.values():  # norms and the zero-initialised heads away from their start
            p.add_(0.1 * torch.randn(p.shape, generator=torch.Generator().manual_seed(seed + 1)))
    return net


@pytest.mark.parametrize("kind", ["dflash", "dspark", "dspark-reduced"])
def test_forward_matches_the_trainers_model(target: ds4.Model, tmp_path: Path, kind: str) -> None:
    from ds4.train.export import export_drafter

    path = tiny.convert("qwen3", "f32")
    net = _net(path, kind, seed=3)
    drafter = ds4._core.BlockDrafter(str(export_drafter(net, path, tmp_path / "d.gguf")), target._m)
    assert drafter.kind == ("dflash" if kind == "dflash" else "dspark")
    rng = np.random.default_rng(1)
    tokens = [int(t) for t in rng.integers(3, 320, 25)]
    got, conf = drafted(target, drafter, tokens, 77, net.cfg.max_draft)
    want, want_conf = net.draft(features(target, tokens), 77, net.cfg.max_draft)
    assert got.shape == (net.cfg.max_draft, 320)
    assert close(got, want.numpy()) < 1e-4
    assert np.abs(conf - want_conf.numpy()).max() < 1e-5
    if kind == "dspark-reduced":
        assert np.isinf(got[:, 200:]).all() and np.isfinite(got[:, 3:200:2]).all()


def copy_drafter(src: Path, dst: Path, n_vocab: int | None = None, target_keys: dict[str, str] | None = None) -> Path:
    """A copy of a ds4 drafter file as llama.cpp's converter lays it out (n_vocab given: no
    dflash.target.* keys, and a Markov W1 row for every target token instead of ds4's compact
    rows), or with some dflash.target.* values replaced (target_keys)."""
    import gguf

    r = gguf.GGUFReader(src)
    w = gguf.GGUFWriter(dst, arch="dflash")
    for f in r.fields.values():
        if f.name.startswith(("GGUF.", "general.architecture")) or (n_vocab and f.name.startswith("dflash.target.")):
            continue
        v = (target_keys or {}).get(f.name, f.contents())
        if isinstance(v, list):
            w.add_array(f.name, v)
        elif isinstance(v, str):
            w.add_string(f.name, v)
        elif isinstance(v, bool):
            w.add_bool(f.name, v)
        elif isinstance(v, float):
            w.add_float32(f.name, v)
        else:
            w.add_uint32(f.name, int(v))
    tensors = {t.name: np.array(t.data) for t in r.tensors}
    if n_vocab and "d2t" in tensors:
        row = np.full(n_vocab, len(tensors["d2t"]))
        row[tensors["d2t"]] = np.arange(len(tensors["d2t"]))
        tensors["markov_w1.weight"] = tensors["markov_w1.weight"][row]
    for name, a in tensors.items():
        w.add_tensor(name, a)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return dst


def test_a_drafter_checks_the_targets_fingerprints(target: ds4.Model, zlab: tuple[Any, Path], tmp_path: Path) -> None:
    _, gguf = zlab
    # the loaded model's fingerprints (computed once, what the drafter checks) are the file's
    assert ds4._core.target_identity(target._m) == ds4._core.target_identity(str(target.path))
    for key, why in (("vocab", "its vocabulary differs"), ("weights", "its weights' shapes differ")):
        bad = copy_drafter(gguf, tmp_path / f"{key}.gguf", target_keys={f"dflash.target.{key}_fingerprint": "0" * 16})
        with pytest.raises(ValueError, match=f"not for .*\\({why}\\): do not mix"):
            ds4._core.BlockDrafter(str(bad), target._m)
    assert ds4._core.BlockDrafter(str(copy_drafter(gguf, tmp_path / "same.gguf", target_keys={})), target._m).kind == "dflash"


def test_llamacpp_layout_loads_the_same(target: ds4.Model, tmp_path: Path) -> None:
    from ds4.train.export import export_drafter

    path = tiny.convert("qwen3", "f32")
    net = _net(path, "dspark-reduced", seed=4)
    ours = export_drafter(net, path, tmp_path / "d.gguf")
    theirs = copy_drafter(ours, tmp_path / "llamacpp.gguf", n_vocab=320)
    tokens = [int(t) for t in np.random.default_rng(3).integers(3, 320, 12)]
    a = drafted(target, ds4._core.BlockDrafter(str(ours), target._m), tokens, 9, 8)
    b = drafted(target, ds4._core.BlockDrafter(str(theirs), target._m), tokens, 9, 8)
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])


def test_context_follows_the_session(target: ds4.Model, tmp_path: Path) -> None:
    """Verify-pass rewinds, a long prompt fed at once, a snapshot restored, a track lost (a batched
    step) and recovered: the drafter's block is always that of the context the session holds."""
    from ds4.train.export import export_drafter

    path = tiny.convert("qwen3", "f32")
    net = _net(path, "dspark", seed=5)
    drafter = ds4._core.BlockDrafter(str(export_drafter(net, path, tmp_path / "d.gguf")), target._m)
    rng = np.random.default_rng(2)

    def check(s: ds4.Session, anchor: int) -> None:
        got, conf = s._s.block_draft(anchor, 8)
        want, want_conf = net.draft(features(target, s.tokens), anchor, 8)
        assert close(got, want.numpy()) < 1e-4
        assert np.abs(conf - want_conf.numpy()).max() < 1e-5

    s = target.session()
    s._s.track_block(drafter)
    s.eval([int(t) for t in rng.integers(3, 320, 40)])  # more than BlockFeed::kEager rows
    assert s._s.block_lag == 0
    check(s, 9)
    for keep in (3, 0, 5):  # a verify pass of 6 rows, `keep` of the drafts accepted
        n = s.n_past
        s._s.checkpoint()
        s.eval([int(t) for t in rng.integers(3, 320, 6)])
        s.truncate(n + 1 + keep)
        check(s, int(rng.integers(3, 320)))
    snap = s.snapshot()
    s.eval([11, 12, 13])
    check(s, 14)
    s.restore(snap)
    check(s, 15)
    target.generate_batch([s.tokens[:4]], max_tokens=2)  # another session's batched pass: no effect here
    b = target.batch()
    b.add([16, 17], session=s, max_tokens=3)  # this one's: hidden states not kept, the feed resyncs
    b.run()
    s.eval([18])  # the token the batch left pending, and one more
    assert s._s.block_stale
    check(s, 19)
    assert not s._s.block_stale


def test_a_drafter_for_another_model_is_refused(target: ds4.Model, zlab: tuple[Any, Path]) -> None:
    _, gguf = zlab
    # another architecture of the same geometry: named in the message
    llama = ds4.Model(str(tiny.convert("llama", "f32")), threads=1)
    with pytest.raises(ValueError, match="is a drafter for .*not for .*llama.*do not mix the two checkpoints"):
        ds4._core.BlockDrafter(str(gguf), llama._m)
    with pytest.raises(ValueError, match="do not mix"):
        llama.session().generate([1, 2, 3], max_tokens=2, spec=ds4.Spec(mtp_model=gguf))
    # another quantisation of the same model is the same target
    q8 = ds4.Model(str(tiny.convert("qwen3", "q8_0")), threads=1)
    assert ds4._core.BlockDrafter(str(gguf), q8._m).kind == "dflash"
    # a model is not a drafter
    with pytest.raises(ValueError, match="not a block drafter"):
        ds4._core.BlockDrafter(str(tiny.convert("qwen3", "f32")), target._m)


def test_convert_refuses_what_it_cannot_run(tmp_path: Path, zlab: tuple[Any, Path]) -> None:
    import json
    import shutil

    d, _ = zlab
    src = tmp_path / "hf"
    d.save_pretrained(src)
    with pytest.raises(ValueError, match="converted for its target"):
        ds4.convert(src, tmp_path / "x.gguf")
    cfg = json.loads((src / "config.json").read_text())
    for change, message in (({"layer_types": ["sliding_attention"] * 2}, "sliding-window"),
                            ({"dflash_config": {**cfg["dflash_config"], "mask_token_id": 10**6}}, "mask_token_id"),
                            ({"dflash_config": {**cfg["dflash_config"], "target_layer_ids": [1, 9]}}, "target_layer_ids"),
                            ({"hidden_size": 32}, "hidden size")):
        bad = tmp_path / "bad"
        shutil.copytree(src, bad, dirs_exist_ok=True)
        (bad / "config.json").write_text(json.dumps({**cfg, **change}))
        with pytest.raises(ValueError, match=message):
            ds4.convert(bad, tmp_path / "x.gguf", target=tiny.convert("qwen3", "f32"))
        assert not (tmp_path / "x.gguf").exists()
