"""A GGUF written with the ``gguf`` package to llama.cpp's layout (its tensor names, its
converter's transforms, only the metadata keys its converter writes for the architecture), not
by ds4.convert, loads and gives the logits of ds4.convert's file of the same model bit for bit:
the files users download load as well as ours."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gguf
import numpy as np
import pytest
import tiny
from llamacpp_layout import GGUF_ARCH, reference

import ds4

FAMILIES = ("qwen3_moe", "qwen3_next", "qwen3_5_text", "qwen3_5_moe_text")


def metadata(w: gguf.GGUFWriter, family: str) -> None:
    """The keys llama.cpp's converter writes for these architectures (no ds4 extras)."""
    cfg = tiny.config_dict(family)
    rp = cfg.get("rope_parameters", {})
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_block_count(cfg["num_hidden_layers"])
    if family != "qwen3_5_moe_text":
        w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(cfg["num_attention_heads"])
    w.add_head_count_kv(cfg["num_key_value_heads"])
    w.add_key_length(cfg["head_dim"])
    w.add_value_length(cfg["head_dim"])
    w.add_rope_freq_base(rp.get("rope_theta", cfg.get("rope_theta", 10000.0)))
    w.add_rope_dimension_count(int(cfg["head_dim"] * rp.get("partial_rotary_factor", 1.0)))
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    if "num_experts" in cfg:
        w.add_expert_count(cfg["num_experts"])
        w.add_expert_used_count(cfg["num_experts_per_tok"])
        w.add_expert_feed_forward_length(cfg["moe_intermediate_size"])
        if "shared_expert_intermediate_size" in cfg:
            w.add_expert_shared_feed_forward_length(cfg["shared_expert_intermediate_size"])
    if family in tiny.HYBRID:
        w.add_ssm_conv_kernel(cfg["linear_conv_kernel_dim"])
        w.add_ssm_state_size(cfg["linear_key_head_dim"])
        w.add_ssm_group_count(cfg["linear_num_key_heads"])
        w.add_ssm_time_step_rank(cfg["linear_num_value_heads"])
        w.add_ssm_inner_size(cfg["linear_num_value_heads"] * cfg["linear_value_head_dim"])
        w.add_full_attention_interval(4)
    if family.startswith("qwen3_5"):
        w.add_rope_dimension_sections([*rp["mrope_section"], 0])


def copy_tokenizer(w: gguf.GGUFWriter, src: Path) -> None:
    r = gguf.GGUFReader(src)

    def field(name: str) -> Any:
        return r.fields[name].contents()

    w.add_tokenizer_model(field("tokenizer.ggml.model"))
    w.add_token_list(field("tokenizer.ggml.tokens"))
    w.add_token_scores(field("tokenizer.ggml.scores"))
    w.add_token_types(field("tokenizer.ggml.token_type"))
    w.add_bos_token_id(field("tokenizer.ggml.bos_token_id"))
    w.add_eos_token_id(field("tokenizer.ggml.eos_token_id"))


@pytest.mark.parametrize("family", FAMILIES)
def test_llamacpp_layout_loads_and_matches(family: str, tmp_path: Path) -> None:
    ours = tiny.convert(family, "f32")
    path = tmp_path / "llamacpp.gguf"
    w = gguf.GGUFWriter(path, arch=GGUF_ARCH[family])
    metadata(w, family)
    copy_tokenizer(w, ours)
    for name, a in sorted(reference(family).items()):
        w.add_tensor(name, np.ascontiguousarray(a, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    ids = np.random.default_rng(3).integers(3, 320, size=40)
    theirs = ds4.Model(str(path), threads=2, kv_type="f32", precision="f32")
    mine = ds4.Model(str(ours), threads=2, kv_type="f32", precision="f32")
    assert theirs.arch == mine.arch == GGUF_ARCH[family]
    np.testing.assert_array_equal(theirs.session().eval(ids), mine.session().eval(ids))
