"""ds4.convert on tiny random models: metadata, tensor directory, values, vocabulary, errors."""

from __future__ import annotations

import json
import warnings
import shutil
import sys
from pathlib import Path

import gguf
import numpy as np
import pytest
import tiny
from safetensors.numpy import load_file, save_file

import ds4
from llamacpp_layout import GGUF_ARCH, add_mtp, hf_tensors, reference, stack_experts

Q = gguf.GGMLQuantizationType
QTYPE = {"f32": Q.F32, "f16": Q.F16, "bf16": Q.BF16, "q8_0": Q.Q8_0}
F32_ALWAYS = (".ffn_gate_inp", ".ssm_conv1d.")  # routers and convolutions stay f32 (llama.cpp's policy)


def read_tensor(path: Path, name: str) -> np.ndarray:
    """A GGUF tensor as float32 through gguf.GGUFReader (the reference reader)."""
    t = next(t for t in gguf.GGUFReader(path).tensors if t.name == name)
    return gguf.quants.dequantize(t.data, t.tensor_type)


def expected_data(ref: np.ndarray, qtype: Q) -> np.ndarray:
    if qtype == Q.F32:
        return ref
    if qtype == Q.F16:
        return ref.astype(np.float16).astype(np.float32)
    return gguf.quants.dequantize(gguf.quants.quantize(ref, qtype), qtype)


@pytest.mark.parametrize("outtype", tiny.OUTTYPES)
@pytest.mark.parametrize("family", tiny.FAMILIES)
def test_tensors(family: str, outtype: str) -> None:
    path = tiny.convert(family, outtype)
    ref = reference(family)
    info = ds4.inspect(path)
    reader = gguf.GGUFReader(path)
    assert {t["name"] for t in info["tensors"]} == set(ref)
    assert {t.name for t in reader.tensors} == set(ref)
    for t in reader.tensors:
        r = ref[t.name]
        want_type = Q.F32 if r.ndim == 1 or any(f in t.name for f in F32_ALWAYS) else QTYPE[outtype]
        assert t.tensor_type == want_type, t.name
        data = gguf.quants.dequantize(t.data, t.tensor_type)
        assert data.shape == r.shape, t.name
        np.testing.assert_array_equal(data, expected_data(r, want_type), err_msg=t.name)
        # and the rounding is the type's, not something coarser
        tol = {Q.F32: 0.0, Q.F16: 1e-3, Q.BF16: 8e-3, Q.Q8_0: 1.5e-2}[want_type]
        assert np.abs(data - r).max() <= tol * max(np.abs(r).max(), 1e-6), t.name
    for t in info["tensors"]:
        assert tuple(t["shape"]) == ref[t["name"]].shape
        f32 = ref[t["name"]].ndim == 1 or any(f in t["name"] for f in F32_ALWAYS)
        assert t["type"] == (Q.F32 if f32 else QTYPE[outtype]).name


@pytest.mark.parametrize("family", tiny.FAMILIES)
def test_metadata(family: str) -> None:
    cfg = tiny.config_dict(family)
    arch = GGUF_ARCH[family]
    md = ds4.inspect(tiny.convert(family, "q8_0"))["metadata"]
    K = gguf.Keys
    want = {
        K.General.ARCHITECTURE: arch,
        K.General.FILE_TYPE: gguf.LlamaFileType.MOSTLY_Q8_0,
        K.LLM.VOCAB_SIZE.format(arch=arch): cfg["vocab_size"],
        K.LLM.CONTEXT_LENGTH.format(arch=arch): cfg["max_position_embeddings"],
        K.LLM.EMBEDDING_LENGTH.format(arch=arch): cfg["hidden_size"],
        K.LLM.BLOCK_COUNT.format(arch=arch): cfg["num_hidden_layers"],
        K.LLM.FEED_FORWARD_LENGTH.format(arch=arch): cfg["intermediate_size"],
        K.Attention.HEAD_COUNT.format(arch=arch): cfg["num_attention_heads"],
        K.Attention.HEAD_COUNT_KV.format(arch=arch): cfg["num_key_value_heads"],
        K.Attention.KEY_LENGTH.format(arch=arch): cfg["head_dim"],
        K.Attention.VALUE_LENGTH.format(arch=arch): cfg["head_dim"],
        K.Rope.DIMENSION_COUNT.format(arch=arch): int(cfg["head_dim"] * cfg.get("rope_parameters", {}).get("partial_rotary_factor", 1)),
        K.Tokenizer.MODEL: "llama",
        K.Tokenizer.BOS_ID: cfg["bos_token_id"],
        K.Tokenizer.EOS_ID: cfg["eos_token_id"],
    }
    for key, value in want.items():
        assert md[key] == value, key
    assert md[K.Attention.LAYERNORM_RMS_EPS.format(arch=arch)] == pytest.approx(cfg["rms_norm_eps"], rel=1e-6)
    assert len(md[K.Tokenizer.LIST]) == cfg["vocab_size"]
    if family == "qwen3_moe":
        assert md[K.LLM.EXPERT_COUNT.format(arch=arch)] == cfg["num_experts"]
        assert md[K.LLM.EXPERT_USED_COUNT.format(arch=arch)] == cfg["num_experts_per_tok"]
        assert md[K.LLM.EXPERT_FEED_FORWARD_LENGTH.format(arch=arch)] == cfg["moe_intermediate_size"]
        assert md[K.LLM.EXPERT_WEIGHTS_NORM.format(arch=arch)] is True
        assert md[K.LLM.EXPERT_GATING_FUNC.format(arch=arch)] == gguf.ExpertGatingFuncType.SOFTMAX
    if family in tiny.HYBRID:
        assert md[K.SSM.CONV_KERNEL.format(arch=arch)] == cfg["linear_conv_kernel_dim"]
        assert md[K.SSM.STATE_SIZE.format(arch=arch)] == cfg["linear_key_head_dim"]
        assert md[K.SSM.GROUP_COUNT.format(arch=arch)] == cfg["linear_num_key_heads"]
        assert md[K.SSM.TIME_STEP_RANK.format(arch=arch)] == cfg["linear_num_value_heads"]
        assert md[K.SSM.INNER_SIZE.format(arch=arch)] == cfg["linear_num_value_heads"] * cfg["linear_value_head_dim"]
        assert md[K.LLM.FULL_ATTENTION_INTERVAL.format(arch=arch)] == 4
        if "shared_expert_intermediate_size" in cfg:
            assert md[K.LLM.EXPERT_SHARED_FEED_FORWARD_LENGTH.format(arch=arch)] == cfg["shared_expert_intermediate_size"]
        if family != "qwen3_next":
            assert md[K.Rope.DIMENSION_SECTIONS.format(arch=arch)] == [2, 1, 1, 0]
    if family == "gemma3_text":
        rp = cfg["rope_parameters"]
        assert md["gemma3.rope.freq_base"] == rp["full_attention"]["rope_theta"]
        assert md[K.Rope.FREQ_BASE_SWA.format(arch=arch)] == rp["sliding_attention"]["rope_theta"]
        assert md[K.Attention.SLIDING_WINDOW.format(arch=arch)] == tiny.SLIDING_WINDOW < tiny.TEST_LEN
        assert md[K.Attention.SLIDING_WINDOW_PATTERN.format(arch=arch)] == [
            t == "sliding_attention" for t in cfg["layer_types"]]
        assert md[K.Attention.SCALE.format(arch=arch)] == pytest.approx(cfg["query_pre_attn_scalar"] ** -0.5)
        assert md[K.LLM.FINAL_LOGIT_SOFTCAPPING.format(arch=arch)] == cfg["final_logit_softcapping"]
        assert K.LLM.ATTN_LOGIT_SOFTCAPPING.format(arch=arch) not in md
        assert md[K.Tokenizer.ADD_PREFIX] is False
    else:
        theta = cfg["rope_parameters"]["rope_theta"] if "rope_parameters" in cfg else cfg["rope_theta"]
        assert md[K.Rope.FREQ_BASE.format(arch=arch)] == theta
        assert not any("sliding" in k for k in md)


def test_llama_permutation_preserves_attention_scores() -> None:
    """HF's rotate_half RoPE on HF q/k and interleaved RoPE on the GGUF's q/k give the same q·k:
    the permutation goes the way llama.cpp's normal RoPE needs."""
    cfg = tiny.config_dict("llama")
    hd, theta = cfg["head_dim"], cfg["rope_theta"]
    hf = hf_tensors("llama")
    path = tiny.convert("llama", "f32")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, cfg["hidden_size"])).astype(np.float64)
    inv = theta ** -(np.arange(0, hd, 2) / hd)

    def rope_half(v: np.ndarray, pos: int) -> np.ndarray:
        c, s = np.cos(pos * inv), np.sin(pos * inv)
        a, b = v[: hd // 2], v[hd // 2 :]
        return np.concatenate([a * c - b * s, b * c + a * s])

    def rope_pairs(v: np.ndarray, pos: int) -> np.ndarray:
        c, s = np.cos(pos * inv), np.sin(pos * inv)
        out = np.empty_like(v)
        out[0::2], out[1::2] = v[0::2] * c - v[1::2] * s, v[1::2] * c + v[0::2] * s
        return out

    group = cfg["num_attention_heads"] // cfg["num_key_value_heads"]

    def scores(rope, wq: np.ndarray, wk: np.ndarray) -> list[float]:  # type: ignore[no-untyped-def]
        q = (wq @ x[0]).reshape(-1, hd)
        k = (wk @ x[1]).reshape(-1, hd)
        return [float(rope(q[h], 7) @ rope(k[h // group], 3)) for h in range(len(q))]

    want = scores(rope_half, hf["model.layers.0.self_attn.q_proj.weight"], hf["model.layers.0.self_attn.k_proj.weight"])
    got = scores(rope_pairs, read_tensor(path, "blk.0.attn_q.weight"), read_tensor(path, "blk.0.attn_k.weight"))
    np.testing.assert_allclose(got, want, rtol=1e-5)
    assert not np.allclose(hf["model.layers.0.self_attn.q_proj.weight"], read_tensor(path, "blk.0.attn_q.weight"))


def test_placeholder_vocabulary_warns_and_loads(tmp_path: Path) -> None:
    out = tmp_path / "llama.gguf"
    with pytest.warns(UserWarning, match="placeholder vocabulary of 320 tokens"):
        ds4.convert(tiny.build("llama"), out)
    m = ds4.Model(out)
    assert (m.arch, m.vocab_size) == ("llama", 320)
    ids = m.tokenize("héllo, wörld ✓", add_special=False)
    assert m.detokenize(ids) == "héllo, wörld ✓"
    assert m.tokenize("x")[0] == tiny.config_dict("llama")["bos_token_id"]


def copy_model(family: str, dst: Path) -> Path:
    shutil.copytree(tiny.build(family), dst)
    return dst


def assert_fails(hf_dir: Path, tmp_path: Path, exc: type[Exception], match: str) -> None:
    out_dir = tmp_path / "out"
    out_dir.mkdir(exist_ok=True)
    with pytest.raises(exc, match=match):
        ds4.convert(hf_dir, out_dir / "m.gguf", "q8_0")
    assert list(out_dir.iterdir()) == []  # neither the target nor a temporary file


def test_error_not_a_directory(tmp_path: Path) -> None:
    assert_fails(tmp_path / "nope", tmp_path, FileNotFoundError, "not a directory")


def test_error_no_config(tmp_path: Path) -> None:
    d = copy_model("qwen3", tmp_path / "m")
    (d / "config.json").unlink()
    assert_fails(d, tmp_path, FileNotFoundError, "no config.json")


def edit_config(d: Path, **changes: object) -> None:
    cfg = json.loads((d / "config.json").read_text())
    cfg.update(changes)
    (d / "config.json").write_text(json.dumps(cfg))


def test_error_unknown_architecture(tmp_path: Path) -> None:
    d = copy_model("qwen3", tmp_path / "m")
    edit_config(d, model_type="mamba", architectures=["MambaForCausalLM"])
    assert_fails(d, tmp_path, ds4.ConvertError, r"model_type 'mamba'.*MambaForCausalLM.*supported: llama \(LlamaForCausalLM\)"
                 r".*gemma3_text \(Gemma3ForCausalLM\)")


def test_error_missing_tensor(tmp_path: Path) -> None:
    d = copy_model("qwen2", tmp_path / "m")
    t = load_file(d / "model.safetensors")
    del t["model.layers.2.self_attn.k_proj.bias"]
    save_file(t, d / "model.safetensors")
    assert_fails(d, tmp_path, ds4.ConvertError, r"missing tensor\(s\) blk\.2\.attn_k\.bias")


def test_error_unexpected_tensor(tmp_path: Path) -> None:
    d = copy_model("llama", tmp_path / "m")
    t = load_file(d / "model.safetensors")
    t["model.layers.0.self_attn.q_norm.weight"] = np.ones(16, np.float32)  # llama has no q_norm
    save_file(t, d / "model.safetensors")
    assert_fails(d, tmp_path, ds4.ConvertError, r"unexpected tensor 'model\.layers\.0\.self_attn\.q_norm\.weight'")


def test_error_shape_mismatch(tmp_path: Path) -> None:
    d = copy_model("gemma3_text", tmp_path / "m")
    edit_config(d, intermediate_size=96)
    assert_fails(d, tmp_path, ds4.ConvertError, r"'model\.layers\.0\.mlp\.down_proj\.weight' has shape \[64, 128\], config.json implies \[64, 96\]")


def test_error_during_write_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*args: object, **kwargs: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(gguf.GGUFWriter, "write_tensor_data", boom)
    warnings.simplefilter("ignore")  # the placeholder-vocabulary warning
    assert_fails(tiny.build("qwen3"), tmp_path, OSError, "disk full")


def test_sharded_bf16_checkpoint(tmp_path: Path) -> None:
    """Two shards with an index, stored as bf16 (read by widening, exactly) and f16."""
    import torch
    from safetensors.torch import save_file as save_torch

    src = hf_tensors("qwen3")
    d = tmp_path / "sharded"
    d.mkdir()
    shutil.copy(tiny.build("qwen3") / "config.json", d / "config.json")
    names = sorted(src)
    halves = {"model-00001-of-00002.safetensors": names[::2], "model-00002-of-00002.safetensors": names[1::2]}
    for i, (fname, part) in enumerate(halves.items()):
        dtype = torch.bfloat16 if i == 0 else torch.float16
        save_torch({n: torch.from_numpy(src[n]).to(dtype) for n in part}, str(d / fname))
    (d / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {}, "weight_map": {n: f for f, part in halves.items() for n in part}}))
    with pytest.warns(UserWarning, match="placeholder"):
        out = ds4.convert(d, tmp_path / "q.gguf", "f32")
    names_map = gguf.TensorNameMap(gguf.MODEL_ARCH.QWEN3, 4)
    for fname, part in halves.items():
        dtype = torch.bfloat16 if fname.startswith("model-00001") else torch.float16
        for n in part:
            want = torch.from_numpy(src[n]).to(dtype).float().numpy()
            got = read_tensor(out, names_map.get_name(n, try_suffixes=(".weight", ".bias")))
            np.testing.assert_array_equal(got, want, err_msg=n)


def test_cli_convert(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from ds4.cli import main

    out = tmp_path / "g.gguf"
    with pytest.warns(UserWarning, match="placeholder"):
        assert main(["convert", str(tiny.build("gemma3_text")), str(out), "--outtype", "bf16"]) == 0
    assert str(out) in capsys.readouterr().out
    assert ds4.inspect(out)["metadata"]["general.file_type"] == gguf.LlamaFileType.MOSTLY_BF16
    assert main(["convert", str(tmp_path / "missing"), str(out)]) == 1
    assert "not a directory" in capsys.readouterr().err


def test_q8_0_row_not_multiple_of_32_falls_back_to_f16() -> None:
    from ds4.convert import _out_qtype

    assert _out_qtype("q8_0", "blk.0.ffn_down.weight", (64, 48)) == Q.F16
    assert _out_qtype("q8_0", "blk.0.ffn_down.weight", (64, 64)) == Q.Q8_0


TOKENIZER_TEXTS = ["Hello world", "  indented\n\tcode = 12345 + 6789;", "Zürich ü 🙂 日本語", "<|im_start|>user\nhi<|im_end|>"]


@pytest.mark.parametrize("source, family", [("smollm_path", "llama"), ("qwen05_path", "qwen2")])
def test_tokenizer_json(source: str, family: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """A checkpoint with tokenizer files (transformers' tokenizer of a real GGUF, saved) converts to
    that GGUF's vocabulary, merges, special ids and chat template, and tokenizes as HF does."""
    sys.path.insert(0, str(Path(__file__).parents[1]))
    from test_chat import hf_tokenizer

    original: Path = request.getfixturevalue(source)
    tok = hf_tokenizer(original)
    orig_md = ds4.inspect(original)["metadata"]
    n_vocab = len(orig_md["tokenizer.ggml.tokens"])

    d = copy_model(family, tmp_path / "m")
    for f in tok.save_pretrained(d):
        assert Path(f).exists()
    edit_config(d, vocab_size=n_vocab, tie_word_embeddings=True)
    t = load_file(d / "model.safetensors")
    t.pop("lm_head.weight")
    t["model.embed_tokens.weight"] = np.random.default_rng(0).standard_normal((n_vocab, 64), dtype=np.float32)
    save_file(t, d / "model.safetensors")

    out = ds4.convert(d, tmp_path / "t.gguf", "f16")  # q8_0 of a 152k-row embedding is slow in gguf.quants
    md = ds4.inspect(out)["metadata"]
    K = gguf.Keys.Tokenizer
    assert md[K.MODEL] == "gpt2"
    assert md[K.PRE] == {"llama": "default", "qwen2": "qwen2"}[family]  # transformers' SmolLM loader drops the digit split
    for key in (K.LIST, K.TOKEN_TYPE, K.MERGES, K.BOS_ID, K.EOS_ID, K.CHAT_TEMPLATE):
        assert md[key] == orig_md[key], key
    m = ds4.Model(out)
    for text in TOKENIZER_TEXTS:
        assert m.tokenize(text, add_special=False) == tok.encode(text, add_special_tokens=False), text


def test_rope_scaling(tmp_path: Path) -> None:
    """linear / yarn become llama.cpp's scaling keys; llama3 becomes rope_freqs, whose divisors
    turn the base frequencies into the ones transformers computes."""
    import torch
    from transformers import LlamaConfig
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    base = {"rope_theta": 50000.0}
    cases = {
        "linear": {"rope_type": "linear", "factor": 4.0},
        "yarn": {"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 32, "beta_fast": 16.0},
        "llama3": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                   "original_max_position_embeddings": 16},
    }
    for kind, params in cases.items():
        d = copy_model("llama", tmp_path / kind)
        edit_config(d, rope_parameters={**base, **params})
        with pytest.warns(UserWarning, match="placeholder"):
            out = ds4.convert(d, tmp_path / f"{kind}.gguf")
        md = ds4.inspect(out)["metadata"]
        names = {t["name"] for t in ds4.inspect(out)["tensors"]}
        assert md["llama.rope.freq_base"] == 50000.0
        if kind == "llama3":
            assert "llama.rope.scaling.type" not in md
            cfg = LlamaConfig(**{**tiny.config_dict("llama"), "rope_parameters": {**base, **params}})
            scaled, _ = ROPE_INIT_FUNCTIONS["llama3"](cfg, torch.device("cpu"))
            hd = cfg.head_dim
            plain = 50000.0 ** -(np.arange(0, hd, 2, dtype=np.float64) / hd)
            np.testing.assert_allclose(plain / read_tensor(out, "rope_freqs.weight"), scaled.numpy(), rtol=1e-5)
        else:
            assert "rope_freqs.weight" not in names
            assert md["llama.rope.scaling.type"] == kind
            assert md["llama.rope.scaling.factor"] == params["factor"]
        if kind == "yarn":
            assert md["llama.rope.scaling.original_context_length"] == 32
            assert md["llama.rope.scaling.yarn_beta_fast"] == 16.0
    d = copy_model("llama", tmp_path / "dynamic")
    edit_config(d, rope_parameters={**base, "rope_type": "dynamic", "factor": 2.0})
    assert_fails(d, tmp_path, ds4.ConvertError, "rope type 'dynamic' is not supported")


@pytest.mark.parametrize("family", ["llama", "qwen2"])
def test_transformers_reads_the_gguf_back(family: str) -> None:
    """transformers' own GGUF loader (which undoes llama.cpp's conventions) gives the original
    model's logits exactly. qwen3 (transformers ignores key_length, so head_dim != hidden/heads
    fails to load) and gemma3 (it ignores the sliding-window pattern, local base and scale) are
    left to the forward-pass oracle tests."""
    import torch
    from transformers import AutoModelForCausalLM

    path = tiny.convert(family, "f32")
    back = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32).eval()
    ids = torch.randint(0, tiny.config_dict(family)["vocab_size"], (1, 24), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        torch.testing.assert_close(back(ids).logits, tiny.load_hf(family)(ids).logits, rtol=0, atol=0)


def test_moe_checkpoint_layouts(tmp_path: Path) -> None:
    """transformers 5's fused expert stacks (gate_up_proj, down_proj) give the GGUF of the hub's
    per-expert matrices (the tiny checkpoint's layout)."""
    t = hf_tensors("qwen3_moe")
    fused = {}
    for name, a in stack_experts(t).items():
        prefix, _, proj = name.rpartition(".experts.")
        if proj == "gate_proj.weight":
            fused[f"{prefix}.experts.gate_up_proj"] = np.concatenate([a, stack_experts(t)[f"{prefix}.experts.up_proj.weight"]], 1)
        elif proj == "down_proj.weight":
            fused[f"{prefix}.experts.down_proj"] = a
        elif proj != "up_proj.weight":
            fused[name] = a
    d = tmp_path / "fused"
    d.mkdir()
    shutil.copy(tiny.build("qwen3_moe") / "config.json", d / "config.json")
    save_file(fused, d / "model.safetensors")
    with pytest.warns(UserWarning, match="placeholder"):
        out = ds4.convert(d, tmp_path / "m.gguf", "f32")
    ref = tiny.convert("qwen3_moe", "f32")
    for r in gguf.GGUFReader(ref).tensors:
        np.testing.assert_array_equal(read_tensor(out, r.name), read_tensor(ref, r.name), err_msg=r.name)


def test_error_moe_missing_expert(tmp_path: Path) -> None:
    d = tmp_path / "m"
    d.mkdir()
    shutil.copy(tiny.build("qwen3_moe") / "config.json", d / "config.json")
    t = hf_tensors("qwen3_moe")
    del t["model.layers.1.mlp.experts.5.up_proj.weight"]
    save_file(t, d / "model.safetensors")
    assert_fails(d, tmp_path, ds4.ConvertError, r"model\.layers\.1\.mlp\.experts lacks up_proj of expert\(s\) \[5\]")


def test_error_moe_dense_layers(tmp_path: Path) -> None:
    d = copy_model("qwen3_moe", tmp_path / "m")
    edit_config(d, mlp_only_layers=[0])
    assert_fails(d, tmp_path, ds4.ConvertError, r"dense layers among MoE ones")


def test_mtp_block_in_llamacpp_layout(tmp_path: Path) -> None:
    """Qwen3-Next's built-in MTP block (mtp.*, dropped by transformers on load) is kept as
    llama.cpp stores it: layer n_layer with nextn.* tensors, zero-centered norms with 1 added,
    block_count counting it and nextn_predict_layers 1; the trunk loads and runs as before."""
    d = copy_model("qwen3_next", tmp_path / "m")
    mtp = add_mtp(d)
    n = tiny.config_dict("qwen3_next")["num_hidden_layers"]
    with pytest.warns(UserWarning, match="placeholder"):
        out = ds4.convert(d, tmp_path / "m.gguf", "f32")
    md = ds4.inspect(out)["metadata"]
    assert md["qwen3next.block_count"] == n + 1 and md["qwen3next.nextn_predict_layers"] == 1
    np.testing.assert_array_equal(read_tensor(out, f"blk.{n}.nextn.eh_proj.weight"), mtp["mtp.fc.weight"])
    for norm, gguf_name in (("pre_fc_norm_embedding", "enorm"), ("pre_fc_norm_hidden", "hnorm"), ("norm", "shared_head_norm")):
        np.testing.assert_array_equal(read_tensor(out, f"blk.{n}.nextn.{gguf_name}.weight"), mtp[f"mtp.{norm}.weight"] + 1)
    np.testing.assert_array_equal(read_tensor(out, f"blk.{n}.attn_q.weight"), mtp["mtp.layers.0.self_attn.q_proj.weight"])
    np.testing.assert_array_equal(read_tensor(out, f"blk.{n}.attn_norm.weight"), mtp["mtp.layers.0.input_layernorm.weight"] + 1)
    ids = np.random.default_rng(2).integers(3, 320, size=24)
    with_mtp = ds4.Model(str(out), threads=2, kv_type="f32", precision="f32")
    plain = ds4.Model(str(tiny.convert("qwen3_next", "f32")), threads=2, kv_type="f32", precision="f32")
    np.testing.assert_array_equal(with_mtp.session().eval(ids), plain.session().eval(ids))
