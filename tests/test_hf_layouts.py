"""transformer.hf reads a config's RoPE settings from either layout, per layer type, as transformers does."""

from __future__ import annotations

import pytest

from mlbook.analysis.model_config import layer_plan, load_config, summarize_config
from mlbook.transformer.hf import (
    HF_DEFAULT_PARTIAL_ROTARY,
    HF_DEFAULT_THETA,
    hf_layer_types,
    hf_rope_base,
    hf_rope_layout,
    hf_rope_parameters,
    hf_rotary_dim,
    hf_text_config,
    rope_scaling_from_hf,
)


def _v5(config: dict) -> dict:
    """config rewritten as transformers 5 saves it: rope_parameters per layer type where they differ."""
    per = hf_rope_parameters(config)
    first = next(iter(per.values()))
    new = {k: v for k, v in config.items()
           if k not in ("rope_theta", "rope_scaling", "rope_local_base_freq", "partial_rotary_factor")}
    new["rope_parameters"] = first if all(p == first for p in per.values()) else per
    return new


@pytest.mark.parametrize("name", ["gemma-3-4b", "gpt-oss-20b", "llama-3.1-8b", "deepseek-v3", "llama-4-scout",
                                  "smollm3-3b", "gemma-2-9b", "llama-3.2-1b"])
def test_each_shipped_config_reads_the_same_in_transformers_5s_layout(name: str) -> None:
    old = load_config(name)
    if hf_rope_layout(old).startswith("transformers 5"):
        pytest.skip(f"{name} ships in transformers 5's layout already")
    new = _v5(old)
    assert hf_rope_layout(new).startswith("transformers 5")
    assert hf_rope_parameters(new) == hf_rope_parameters(old)
    for layer_type in hf_rope_parameters(old):
        a, b = (rope_scaling_from_hf(c, layer_type).frequencies(hf_rotary_dim(c, layer_type),
                                                                  hf_rope_base(c, layer_type), 4096) for c in (old, new))
        assert a[0].equal(b[0]) and a[1] == b[1]
    assert layer_plan(new) == layer_plan(old)
    assert summarize_config(new).text().splitlines()[2:] == summarize_config(old).text().splitlines()[2:]


def test_gemma3_sliding_layers_have_their_own_base_in_both_layouts() -> None:
    old = load_config("gemma-3-4b")
    per = hf_rope_parameters(old)
    assert per["sliding_attention"] == {"rope_type": "default", "rope_theta": 10000.0}
    assert per["full_attention"]["rope_type"] == "linear" and per["full_attention"]["rope_theta"] == 1e6
    assert isinstance(_v5(old)["rope_parameters"]["sliding_attention"], dict)


def test_a_config_without_a_base_takes_its_class_default() -> None:
    base = {"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "max_position_embeddings": 64}
    assert hf_rope_base({**base, "model_type": "llama"}) == 10000.0
    assert hf_rope_base({**base, "model_type": "mixtral"}) == HF_DEFAULT_THETA["mixtral"] == 1e6
    gemma = {**base, "model_type": "gemma3_text", "sliding_window": 16, "layer_types":
             ["sliding_attention", "full_attention"]}
    assert hf_rope_base(gemma, "sliding_attention") == 10000.0 and hf_rope_base(gemma, "full_attention") == 1e6
    with pytest.raises(ValueError, match=r"default for model_type 'olmo3' changed: 10000 in 4.57, 500000 in 5.15"):
        hf_rope_base({**base, "model_type": "olmo3"})


def test_multimodal_configs_are_read_through_their_text_config() -> None:
    text = {"model_type": "qwen3_5_text", "num_hidden_layers": 4, "hidden_size": 64, "num_attention_heads": 2,
            "head_dim": 32, "max_position_embeddings": 64, "layer_types": ["linear_attention"] * 3 + ["full_attention"],
            "rope_parameters": {"rope_type": "default", "rope_theta": 1e7, "partial_rotary_factor": 0.25,
                                "mrope_section": [2, 1, 1], "mrope_interleaved": True}}
    config = {"model_type": "qwen3_5", "text_config": text, "vision_config": {"depth": 2}}
    assert hf_text_config(config) is text
    assert hf_rope_base(config) == 1e7 and hf_rotary_dim(config) == 8
    assert hf_layer_types(config) == ("linear_attention",) * 3 + ("full_attention",)
    assert list(hf_rope_parameters(config)) == ["full_attention"]  # linear attention does not rotate
    with pytest.raises(ValueError, match=r"mrope_section \[2, 1, 2\] covers 5 pairs but the head rotates 4"):
        rope_scaling_from_hf({**text, "rope_parameters": {**text["rope_parameters"], "mrope_section": [2, 1, 2]}})


@pytest.mark.oracle
def test_a_transformers_5_config_object_is_read_from_rope_parameters() -> None:
    transformers = pytest.importorskip("transformers")
    if int(transformers.__version__.split(".")[0]) < 5:
        pytest.skip(f"config objects keep rope_parameters from transformers 5; installed {transformers.__version__}")
    config = transformers.LlamaConfig(hidden_size=64, num_attention_heads=4, num_hidden_layers=2,
                                      max_position_embeddings=4096, rope_theta=500000.0,
                                      rope_scaling={"rope_type": "yarn", "factor": 4.0,
                                                    "original_max_position_embeddings": 1024})
    assert not hasattr(config, "rope_theta") or config.rope_parameters["rope_theta"] == 500000.0
    assert hf_rope_layout(config).startswith("transformers 5")
    assert hf_rope_base(config) == 500000.0
    scaling = rope_scaling_from_hf(config)
    assert scaling.name == "yarn" and scaling.factor == 4.0 and scaling.original_max_len == 1024


@pytest.mark.oracle
@pytest.mark.parametrize("model_type", sorted(HF_DEFAULT_PARTIAL_ROTARY))
def test_a_config_without_a_partial_factor_takes_its_class_default(model_type: str) -> None:
    """Qwen3-Next, Qwen3.5, Phi-2, GLM-4.5, GPT-NeoX ... rotate part of each head even when the config states no
    partial_rotary_factor: the library takes transformers' class default, as transformers does."""
    transformers = pytest.importorskip("transformers")
    try:
        hf = transformers.AutoConfig.for_model(model_type, num_hidden_layers=2, hidden_size=256, num_attention_heads=2,
                                               head_dim=128)
    except ValueError:
        pytest.skip(f"transformers {transformers.__version__} has no {model_type}")
    params = getattr(hf, "rope_parameters", None)
    default = (params.get("partial_rotary_factor") if isinstance(params, dict) else None) or getattr(
        hf, "partial_rotary_factor", None) or getattr(hf, "rotary_pct", None)
    assert default == HF_DEFAULT_PARTIAL_ROTARY[model_type]
    config = {"model_type": model_type, "num_hidden_layers": 2, "hidden_size": 256, "num_attention_heads": 2,
              "head_dim": 128, "max_position_embeddings": 64}
    assert hf_rotary_dim(config) == int(128 * default)
    assert hf_rotary_dim({**config, "partial_rotary_factor": 1.0}) == 128  # a stated factor wins
