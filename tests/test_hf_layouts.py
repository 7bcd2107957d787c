"""transformer.hf reads a config's RoPE settings from either layout, per layer type, as transformers does."""

from __future__ import annotations

import pytest

from mlbook.analysis.model_config import layer_plan, load_config, summarize_config
from mlbook.transformer.hf import (
    HF_DEFAULT_PARTIAL_ROTARY, WHOLE_HEAD_ROTARY_FAMILIES,
    HF_DEFAULT_THETA,
    PER_LAYER_TYPE_ROPE_FAMILIES,
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
@pytest.mark.parametrize("model_type", sorted(set(HF_DEFAULT_PARTIAL_ROTARY) - set(WHOLE_HEAD_ROTARY_FAMILIES)))
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


@pytest.mark.oracle
@pytest.mark.parametrize("model_type", ["qwen3_5_text", "qwen3_next", "llama", "qwen3"])
def test_a_per_layer_type_dict_is_read_as_one_dict_at_the_class_base_and_refused(model_type: str) -> None:
    """{"full_attention": {...}} in a family whose model code rotates with one dict: transformers 5.15 adds rope_type
    'default' and the class's base beside the entry and rotates at that base; the library refuses it by name."""
    transformers = pytest.importorskip("transformers")
    if int(transformers.__version__.split(".")[0]) < 5:
        pytest.skip(f"rope_parameters is read from transformers 5; installed {transformers.__version__}")
    entry = {"rope_type": "default", "rope_theta": 123456.0}
    fields = {"num_hidden_layers": 4, "hidden_size": 64, "num_attention_heads": 2, "head_dim": 32,
              "max_position_embeddings": 64}
    try:
        hf = transformers.AutoConfig.for_model(model_type, **fields, rope_parameters={"full_attention": dict(entry)})
    except ValueError:
        pytest.skip(f"transformers {transformers.__version__} has no {model_type}")
    assert hf.rope_parameters["full_attention"] == entry  # kept, and unread:
    assert hf.rope_parameters["rope_type"] == "default" and hf.rope_parameters["rope_theta"] != 123456.0
    config = {"model_type": model_type, **fields, "rope_parameters": {"full_attention": dict(entry)}}
    with pytest.raises(ValueError, match=rf"model_type '{model_type}' .* never reading the entries"):
        hf_rope_base(config)
    assert hf_rope_base({**config, "rope_parameters": dict(entry)}) == 123456.0  # one dict: read


@pytest.mark.oracle
@pytest.mark.parametrize("model_type", PER_LAYER_TYPE_ROPE_FAMILIES)
def test_the_families_read_per_layer_type_keep_and_read_each_entry(model_type: str) -> None:
    """Each family the library reads a per-layer-type dict for keeps it in transformers 5.15's config, and its model
    code indexes rope_parameters by layer type."""
    transformers = pytest.importorskip("transformers")
    if int(transformers.__version__.split(".")[0]) < 5:
        pytest.skip(f"rope_parameters is read from transformers 5; installed {transformers.__version__}")
    import copy
    import importlib
    import inspect

    try:
        cls = transformers.CONFIG_MAPPING[model_type]
    except KeyError:
        pytest.skip(f"transformers {transformers.__version__} has no {model_type}")
    default = cls()
    kinds = sorted(set(getattr(default, "_rope_type_labels", None) or getattr(default, "layer_types", None)
                       or ("full_attention", "sliding_attention")))
    nested = {k: {"rope_type": "default", "rope_theta": 123456.0} for k in kinds}
    assert cls.from_dict({"rope_parameters": copy.deepcopy(nested)}).rope_parameters == nested
    modeling = importlib.import_module(cls.__module__.replace(".configuration_", ".modeling_"))
    assert "rope_parameters[layer_type]" in inspect.getsource(modeling)


@pytest.mark.oracle
def test_a_partial_factor_in_the_dict_and_at_the_top_level_is_read_as_each_version_reads_it() -> None:
    """The premise of the library's refusal: with partial_rotary_factor 0.25 in the dict and 0.5 at the top level,
    transformers 5.15 rotates Phi's default RoPE at the dict's 0.25 (setdefault on loading) but builds a scaled type
    at the top level's 0.5 (the scaling's init re-runs standardize_rope_params), and 4.57 takes the top level's in
    both: three readings of one config."""
    transformers = pytest.importorskip("transformers")
    from hf_versions import HF_MAJOR

    fields = {"hidden_size": 256, "num_attention_heads": 2, "num_hidden_layers": 2, "max_position_embeddings": 64,
              "vocab_size": 16, "intermediate_size": 8, "rope_theta": 10000.0, "partial_rotary_factor": 0.5}
    readings = (({"rope_type": "default"}, HF_MAJOR >= 5), ({"rope_type": "linear", "factor": 2.0}, False))
    for scaling, dict_wins in readings:
        hf = transformers.PhiConfig(**fields, rope_scaling={**scaling, "partial_rotary_factor": 0.25})
        rotary = transformers.PhiModel(hf).rotary_emb
        assert 2 * rotary.inv_freq.numel() == 128 * (0.25 if dict_wins else 0.5), scaling
        config = {"model_type": "phi", **fields, "rope_scaling": {**scaling, "partial_rotary_factor": 0.25}}
        with pytest.raises(ValueError, match=r"transformers 5.15 loads the dict's .* a scaled rope_type's init re-runs "
                                             r"standardize_rope_params .*4.57 reads only the top level's"):
            rope_scaling_from_hf(config)


@pytest.mark.oracle
def test_a_partial_factor_in_the_dict_alone_other_than_the_class_default_is_refused() -> None:
    """Qwen3-Next with partial_rotary_factor 0.5 in a YaRN dict and none at the top level: 4.57 and 5.15's YaRN both
    rotate the class default 0.25 (5.15 writes its attribute over the dict's when the module is built), only 5.15's
    default RoPE the dict's 0.5; the library refuses it and reads it once the top level states it too."""
    transformers = pytest.importorskip("transformers")
    from hf_versions import rope_init_function

    rope = {"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 32, "partial_rotary_factor": 0.5}
    fields = {"hidden_size": 256, "num_attention_heads": 2, "head_dim": 128, "max_position_embeddings": 64}
    try:
        hf = transformers.Qwen3NextConfig(**fields, rope_theta=10000.0, rope_scaling=dict(rope))
    except AttributeError:
        pytest.skip(f"transformers {transformers.__version__} has no Qwen3-Next")
    inv_freq, _ = rope_init_function("yarn")(hf, "cpu")
    assert 2 * inv_freq.numel() == 128 * 0.25
    config = {"model_type": "qwen3_next", "num_hidden_layers": 4, **fields,
              "rope_parameters": {**rope, "rope_theta": 1e4}}
    with pytest.raises(ValueError, match=r"defaults it to 0.25: 4.57 rotates the class default .*State "
                                         r"partial_rotary_factor=0.5 at the top level too"):
        hf_rotary_dim(config)
    assert hf_rotary_dim({**config, "partial_rotary_factor": 0.5}) == 64


@pytest.mark.oracle
@pytest.mark.parametrize("model_type, cls", [("llama", "LlamaRotaryEmbedding"),
                                             ("recurrent_gemma", "RecurrentGemmaRotaryEmbedding")])
def test_a_partial_factor_a_family_s_default_rope_ignores_is_refused(model_type: str, cls: str) -> None:
    """Llama's and RecurrentGemma's default RoPE in transformers 5.15 turns the whole head whatever
    partial_rotary_factor says (4.57: half of RecurrentGemma's head; Llama failed on the width): the versions
    disagree, so the library refuses the factor (before, it reported half the channels rotating)."""
    transformers = pytest.importorskip("transformers")
    config = {"model_type": model_type, "num_hidden_layers": 2, "hidden_size": 256, "num_attention_heads": 2,
              "head_dim": 128, "max_position_embeddings": 64, "partial_rotary_factor": 0.5, "rope_theta": 10000.0}
    with pytest.raises(ValueError, match=f"partial_rotary_factor=0.5 for model_type='{model_type}'.*versions "
                                         "disagree"):
        hf_rotary_dim(config)
    if model_type == "recurrent_gemma":
        # stated 0.5 (as RecurrentGemma's published configs do) or left to the class default 0.5: one refusal, naming
        # the one value that reads (1.0), never "drop the factor", which would lead to the other refusal
        unstated = {k: v for k, v in config.items() if k != "partial_rotary_factor"}
        for given, said in ((config, "the config states 0.5"), (unstated, "its config class defaults it to 0.5")):
            with pytest.raises(ValueError) as err:
                hf_rotary_dim(given)
            assert said in str(err.value) and "Only partial_rotary_factor 1.0, stated" in str(err.value)
            assert "drop the factor" not in str(err.value)
        assert hf_rotary_dim({**config, "partial_rotary_factor": 1.0}) == 128
    if int(transformers.__version__.split(".")[0]) >= 5:
        module = __import__(f"transformers.models.{model_type}.modeling_{model_type}", fromlist=[cls])
        hf = transformers.AutoConfig.for_model(**config)
        assert getattr(module, cls)(hf).inv_freq.numel() == 64  # the whole 128-channel head turns in 5.15


def test_dual_chunk_attention_is_refused_as_an_engine_difference() -> None:
    """Qwen2.5-1M's dual_chunk_attention_config: vLLM routes it to DualChunkRotaryEmbedding before any rope_type,
    transformers never reads it; the library refuses it by name rather than read one engine's positions."""
    config = {"model_type": "qwen2", "num_hidden_layers": 2, "hidden_size": 256, "num_attention_heads": 2,
              "rope_theta": 10000000.0, "dual_chunk_attention_config": {"chunk_size": 262144, "local_size": 8192}}
    with pytest.raises(ValueError, match="dual_chunk_attention_config is set.*DualChunkRotaryEmbedding"):
        hf_rope_base(config)


@pytest.mark.oracle
def test_a_config_object_built_with_a_partial_factor_is_read_with_it() -> None:
    """PhiConfig(partial_rotary_factor=0.4), Phi-2's published value: the object's attribute and its rope_parameters
    agree, so the factor is the stated one, not a dict disagreeing with the class default 0.5 (it was refused)."""
    transformers = pytest.importorskip("transformers")
    config = transformers.PhiConfig(partial_rotary_factor=0.4, hidden_size=2560, num_attention_heads=32,
                                    num_hidden_layers=2)
    assert hf_rotary_dim(config) == 32  # int(0.4 * 80)
