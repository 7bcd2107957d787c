"""mlbook.analysis.model_config on every shipped config: the summary's numbers against
transformers (frequencies, bands, layer patterns) and the KV formula; the pitfalls named."""

from __future__ import annotations

import copy
import logging
import math

import pytest
import torch

transformers = pytest.importorskip("transformers")
from transformers import LlamaConfig  # noqa: E402

from hf_versions import rope_fields, rope_init_function  # noqa: E402
from mlbook.analysis.model_config import (  # noqa: E402
    SHIPPED_CONFIGS, context_lengths, layer_plan, load_config, read_rope_type, rotary_width, scaling_bands,
    serving_override, summarize_config, vllm_max_model_len,
)
from mlbook.transformer.hf import hf_rope_type  # noqa: E402

logging.getLogger("transformers.modeling_rope_utils").setLevel(logging.ERROR)


def longest(c: dict) -> int:
    text, _, rs = rope_fields(c)
    return text.get("max_position_embeddings") or rs["original_max_position_embeddings"]


def hf_frequencies(c: dict, rope_scaling, seq_len=None) -> tuple[torch.Tensor, float]:
    d = rotary_width(c)
    cfg = LlamaConfig(hidden_size=4 * d, num_attention_heads=4, head_dim=d, rope_theta=rope_fields(c)[1],
                      max_position_embeddings=longest(c), rope_scaling=copy.deepcopy(rope_scaling))
    return rope_init_function(hf_rope_type(rope_scaling))(cfg, "cpu", seq_len=seq_len)


@pytest.mark.parametrize("name", SHIPPED_CONFIGS)
def test_summary_wavelengths_and_factor_match_transformers(name: str) -> None:
    c = load_config(name)
    s = summarize_config(c, name)
    trained, _ = hf_frequencies(c, None)
    scaled, factor = hf_frequencies(c, rope_fields(c)[2], longest(c))
    for got, inv in ((s.wavelength_trained, trained), (s.wavelength_scaled, scaled)):
        wl = 2 * math.pi / inv.double()
        assert got == pytest.approx((float(wl.min()), float(wl.max())), rel=1e-6)
    assert s.attention_factor == pytest.approx(factor, rel=1e-12)
    L = s.lengths.original
    assert s.pairs_without_a_turn == (int((2 * math.pi / trained.double() > L).sum()),
                                      int((2 * math.pi / scaled.double() > L).sum()))
    text = s.text()
    assert name in text and len(text.splitlines()) <= 12


@pytest.mark.parametrize("name", SHIPPED_CONFIGS)
def test_bands_match_which_frequencies_transformers_divides(name: str) -> None:
    """keep: HF's scaled frequency equals the trained one; interpolate: equals it divided by the factor."""
    c = load_config(name)
    bands = scaling_bands(c)
    rs = rope_fields(c)[2]
    if rs is None:
        assert bands == {"method": "none", "pairs": rotary_width(c) // 2}
        return
    trained, _ = hf_frequencies(c, None)
    scaled, _ = hf_frequencies(c, rs)
    keep = int(torch.isclose(scaled, trained, rtol=1e-6, atol=0).sum())
    divided = int(torch.isclose(scaled, trained / rs["factor"], rtol=1e-6, atol=0).sum())
    assert (bands["keep"], bands["interpolate"], bands["blend"]) == (keep, divided, len(trained) - keep - divided)


def test_kv_bytes_per_token_and_at_the_longest_context() -> None:
    """2 x layers x KV heads x head_dim x 2 bytes (GQA), layers x (kv_lora_rank + qk_rope_head_dim) x 2 (MLA);
    sliding layers stop at their window."""
    expect = {"llama-3.2-1b": 2 * 16 * 8 * 64 * 2, "gpt-oss-20b": 2 * 24 * 8 * 64 * 2,
              "gemma-3-4b": 2 * 34 * 4 * 256 * 2, "deepseek-v3": 61 * (512 + 64) * 2}
    for name, per_token in expect.items():
        assert summarize_config(load_config(name)).kv_per_token == per_token
    g = load_config("gemma-3-4b")
    T = g["max_position_embeddings"]
    assert summarize_config(g).kv_at_max == 2 * 4 * 256 * 2 * (5 * T + 29 * 1024)
    o = load_config("gpt-oss-20b")
    assert summarize_config(o).kv_at_max == 2 * 8 * 64 * 2 * (12 * 131072 + 12 * 128)


def test_layer_plans() -> None:
    gemma = layer_plan(load_config("gemma-3-4b"))
    assert gemma.counts() == {"sliding_attention": 29, "full_attention": 5}
    assert {b for k, b in zip(gemma.kinds, gemma.bases) if k == "sliding_attention"} == {10000.0}
    assert {b for k, b in zip(gemma.kinds, gemma.bases) if k == "full_attention"} == {1e6}
    assert gemma.scaled == tuple(k == "full_attention" for k in gemma.kinds)
    g2 = load_config("gemma-2-9b")
    assert layer_plan(g2).kinds == tuple(transformers.Gemma2Config(num_hidden_layers=g2["num_hidden_layers"]).layer_types)
    oss = layer_plan(load_config("gpt-oss-20b"))
    assert oss.windows == (128, None) * 12 and all(oss.rotates)


def test_llama4_scout_layers_and_temperature() -> None:
    """The shipped Scout config: NoPE every fourth layer and chunked RoPE layers, as transformers derives them."""
    c = load_config("llama-4-scout")
    ref = transformers.Llama4TextConfig(num_hidden_layers=c["num_hidden_layers"],
                                        no_rope_layer_interval=c["no_rope_layer_interval"])
    s = summarize_config(c)
    assert s.layers.rotates == tuple(bool(r) for r in ref.no_rope_layers)
    assert s.layers.kinds == tuple(ref.layer_types)
    assert s.layers.counts() == {"chunked_attention": 36, "full_attention (NoPE)": 12}
    # 1 + 0.1 ln(1 + floor((p + 1) / 8192)), transformers' Llama4TextAttention formula, at the listed positions
    assert s.temperature == tuple((p, 1 + 0.1 * math.log1p(math.floor((p + 1) / 8192))) for p, _ in s.temperature)
    # the Instruct config's 10,485,760 positions: 8,192 x 1,280, not x the factor; at that length only the 12 NoPE
    # layers' cache grows, the 36 chunked ones stop at 8,192 (8 KV heads x 128, keys and values, bf16)
    assert "= original 8,192 x 1280, not x factor 16" in s.lengths.note
    per_layer_token = 2 * 8 * 128 * 2
    assert s.kv_at_max == 12 * per_layer_token * 10_485_760 + 36 * per_layer_token * 8192


def test_smollm3_nope_layers_follow_transformers() -> None:
    c = load_config("smollm3-3b")
    ref = transformers.SmolLM3Config(num_hidden_layers=c["num_hidden_layers"],
                                     no_rope_layer_interval=c["no_rope_layer_interval"])
    assert layer_plan(c).rotates == tuple(bool(r) for r in ref.no_rope_layers)


def test_hybrid_nope_layers_follow_transformers() -> None:
    """Llama 4's rule when no_rope_layers is absent: layer i is NoPE when (i + 1) % interval == 0."""
    ref = transformers.Llama4TextConfig()
    c = {"model_type": "llama4_text", "num_hidden_layers": ref.num_hidden_layers, "attention_chunk_size": 8192,
         "rope_theta": 500000.0}
    plan = layer_plan(c)
    assert plan.rotates == tuple(bool(r) for r in ref.no_rope_layers)
    assert plan.kinds == tuple(ref.layer_types)
    assert all(w == 8192 for w, k in zip(plan.windows, plan.kinds) if k == "chunked_attention")


def test_context_length_pitfalls() -> None:
    assert "already multiplied" in context_lengths(load_config("gpt-oss-20b")).note
    llama = context_lengths(load_config("llama-3.2-1b"))
    assert (llama.original, llama.factor, llama.ratio) == (8192, 32.0, 16.0) and "not x factor" in llama.note
    bare = {"max_position_embeddings": 32768, "rope_scaling": {"rope_type": "yarn", "factor": 4.0}}
    assert "anchors the scaling at max_position_embeddings (32,768)" in context_lengths(bare).note


def test_rope_type_pitfalls() -> None:
    assert read_rope_type({"type": "yarn", "factor": 4.0})[0] == "yarn"
    assert "legacy key" in read_rope_type({"type": "yarn", "factor": 4.0})[1]
    for name, match in (("su", "longrope"), ("ntk", "vLLM")):
        with pytest.raises(ValueError, match=match):
            read_rope_type({"rope_type": name})
    # transformers' Qwen2-VL config reads "mrope" as default RoPE with M-RoPE sections
    assert read_rope_type({"type": "mrope", "mrope_section": [16, 24, 24]})[0] == "default"


def test_serving_override_changes_every_length() -> None:
    c = load_config("gpt-oss-20b")
    new, changes = serving_override(c, {"rope_type": "yarn", "rope_theta": 150000.0, "factor": 2.0,
                                        "original_max_position_embeddings": 4096}, 8192)
    assert new["rope_scaling"]["factor"] == 2.0 and c["rope_scaling"]["factor"] == 32.0
    assert "at every length" in changes[0] and "8192" in changes[1]
    # the override replaces the dict whole: the shipped keys it leaves out are named
    assert "the override drops ['beta_fast', 'beta_slow', 'truncate']" in changes[0]
    before = summarize_config(c).attention_factor
    after = summarize_config(new).attention_factor
    assert before == pytest.approx(0.1 * math.log(32) + 1) and after == pytest.approx(0.1 * math.log(2) + 1)


def test_a_config_without_max_position_embeddings_says_so() -> None:
    """A config that states only its scaling's original length (as the reference code's args do): the note says
    that is all it states, and no cache at max_position_embeddings is computed."""
    c = {k: v for k, v in load_config("llama-4-scout").items() if k != "max_position_embeddings"}
    s = summarize_config(c)
    assert "no max_position_embeddings" in s.lengths.note and s.kv_at_max is None


def test_a_multimodal_override_is_merged_into_the_text_config_as_vllm_merges_it() -> None:
    """vLLM's _apply_dict_overrides merges {"text_config": {"rope_parameters": {...}}} into the text config's dict
    key by key: an override without rope_theta keeps the shipped base there, and nothing is written at the wrapper's top
    level (where no layer would read it)."""
    c = load_config("qwen3.5-27b")
    new, changes = serving_override(c, {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 262144})
    assert "rope_parameters" not in new and new["text_config"]["rope_parameters"] == {
        **c["text_config"]["rope_parameters"], "rope_type": "yarn", "factor": 4.0,
        "original_max_position_embeddings": 262144}
    assert changes[0].startswith("text_config.rope_parameters") and "merged" in changes[0] and "drops" not in changes[0]
    assert summarize_config(new).base == 1e7
    assert summarize_config(new).attention_factor == pytest.approx(0.1 * math.log(4) + 1)


def test_linear_attention_layers_are_counted_as_not_rotating_not_as_nope_attention() -> None:
    s = summarize_config(load_config("qwen3.5-27b"))
    assert s.layers.counts() == {"linear_attention (no RoPE)": 48, "full_attention": 16}
    assert "NoPE" not in s.text().split("layers: ")[1].splitlines()[0]


def test_the_m_rope_order_is_reported_as_each_engine_reads_it() -> None:
    """transformers 5.15's Qwen3.5 code interleaves whatever mrope_interleaved says; vLLM's get_rope reads the flag,
    False when absent: with the flag the summary says both interleave, without it that they differ."""
    c = load_config("qwen3.5-27b")
    assert "interleaved (transformers 5.15: its qwen3_5_text code always; vLLM: mrope_interleaved=True)" in \
        summarize_config(c).type_note
    absent = copy.deepcopy(c)
    del absent["text_config"]["rope_parameters"]["mrope_interleaved"]
    assert ("interleaved in transformers 5.15 (its qwen3_5_text code ignores mrope_interleaved), in blocks in vLLM "
            "(mrope_interleaved=absent, so false)") in summarize_config(absent).type_note


def test_a_dynamic_override_is_not_reported_as_a_fixed_change() -> None:
    """Dynamic NTK has no fixed frequencies: the sentence says what each engine does past max_position_embeddings
    (transformers grows the base, vLLM keeps it) rather than "at every length"."""
    _, changes = serving_override(load_config("llama-3.1-8b"), {"rope_type": "dynamic", "factor": 2.0,
                                                                "rope_theta": 500000.0})
    assert "at every length" not in changes[0].split("vLLM gives")[0]
    assert "transformers grows the base" in changes[0] and "vLLM gives a decoder the plain base" in changes[0]


@pytest.mark.parametrize("kind, extra", [("yarn", {}), ("llama3", {"low_freq_factor": 1.0, "high_freq_factor": 4.0})])
def test_an_override_vllm_would_read_by_key_without_its_original_length_is_refused(kind, extra) -> None:
    """vLLM's get_rope reads original_max_position_embeddings by key for yarn and llama3 (transformers would fill
    it from max_position_embeddings): an override without it would fail at load, so it is refused here."""
    with pytest.raises(ValueError, match=f"{kind} dict has no original_max_position_embeddings.*vLLM's get_rope"):
        serving_override(load_config("llama-3.1-8b"), {"rope_type": kind, "factor": 4.0, "rope_theta": 500000.0,
                                                       **extra})


def test_vllm_max_model_len_follows_vllm_s_rule() -> None:
    """vLLM's derived limit since vllm#56446: the length key, times the factor for linear and dynamic only; a YaRN
    config's max_position_embeddings is taken as already scaled; llama3, longrope and Gemma 3 are not multiplied."""
    assert vllm_max_model_len(load_config("gpt-oss-20b"))[0] == 131072  # max_position_embeddings, = 4,096 x 32
    assert vllm_max_model_len(load_config("deepseek-v3"))[0] == 163840
    assert vllm_max_model_len(load_config("llama-3.1-8b"))[0] == 131072  # llama3: max_position_embeddings as stated
    assert vllm_max_model_len(load_config("gemma-3-4b"))[0] == 131072  # Gemma 3's length is already scaled
    recipe = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 262144}
    served, _ = serving_override(load_config("qwen3.5-27b"), recipe)
    assert vllm_max_model_len(served) == (262144, "max_position_embeddings 262,144, not multiplied by the YaRN "
                                                  "factor since vllm#56446")
    linear = {"max_position_embeddings": 4096, "rope_scaling": {"rope_type": "linear", "factor": 4.0}}
    assert vllm_max_model_len(linear)[0] == 16384  # linear still multiplies
    dynamic = {"max_position_embeddings": 4096, "rope_scaling": {"rope_type": "dynamic", "factor": 2.0}}
    assert vllm_max_model_len(dynamic)[0] == 8192


def test_vllm_max_model_len_before_56446_reset_yarn_to_its_anchor_times_the_factor() -> None:
    """Before vllm#56446: every type but llama3 and longrope multiplied, and "yarn" counted from
    original_max_position_embeddings. Hand-derived: Qwen3.5's recipe 262,144 x 4 = 1,048,576 (now 262,144);
    Qwen3 with Qwen's YaRN 4 from 32,768: 131,072 (now its max_position_embeddings, 40,960); gpt-oss with factor 2
    from 4,096: 8,192 (now 131,072)."""
    recipe = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 262144}
    served, _ = serving_override(load_config("qwen3.5-27b"), recipe)
    assert vllm_max_model_len(served, rule="before-56446") == (1048576, "original_max_position_embeddings 262,144 x "
                                                                        "factor 4")
    qwen3 = {"model_type": "qwen3", "max_position_embeddings": 40960,
             "rope_parameters": {"rope_type": "yarn", "rope_theta": 1000000.0, "factor": 4.0,
                                 "original_max_position_embeddings": 32768}}
    assert vllm_max_model_len(qwen3, rule="before-56446")[0] == 131072
    assert vllm_max_model_len(qwen3)[0] == 40960
    gpt_oss = load_config("gpt-oss-20b")
    gpt_oss["rope_scaling"] = {**gpt_oss["rope_scaling"], "factor": 2.0}
    assert vllm_max_model_len(gpt_oss, rule="before-56446")[0] == 8192
    assert vllm_max_model_len(gpt_oss)[0] == 131072
    for name in ("llama-3.1-8b", "gemma-3-4b", "smollm3-3b"):  # no YaRN: the two rules agree
        assert vllm_max_model_len(load_config(name)) == vllm_max_model_len(load_config(name), rule="before-56446")


def test_vllm_max_model_len_gives_the_after_column_of_56446_s_table() -> None:
    """vllm#56446's table: TeleChat3-36B-Thinking (max_position_embeddings 32,768, YaRN 4 from 8,192, vllm#55116)
    32,768 after; sarvam-105b 131,072 after (5,242,880 = 131,072 x 40 before). Their vendor type names
    (telechat3-yarn, deepseek_yarn) are not transformers', and #56446 reads TeleChat3's as plain YaRN: given as
    "yarn" here. Before the PR, plain "yarn" was already reset to its anchor: TeleChat3 as "yarn" gave 32,768."""
    telechat3 = {"max_position_embeddings": 32768,
                 "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 8192}}
    assert vllm_max_model_len(telechat3)[0] == 32768
    assert vllm_max_model_len(telechat3, rule="before-56446")[0] == 8192 * 4
    sarvam = {"max_position_embeddings": 131072, "rope_scaling": {"rope_type": "yarn", "factor": 40.0}}
    assert vllm_max_model_len(sarvam)[0] == 131072


@pytest.mark.parametrize("bad", ["old", "v0.29.0", None, 56446])
def test_vllm_max_model_len_rule_is_validated(bad) -> None:
    with pytest.raises((ValueError, TypeError), match="rule"):
        vllm_max_model_len(load_config("gpt-oss-20b"), rule=bad)
    with pytest.raises((ValueError, TypeError), match="vllm_rule"):
        serving_override(load_config("gpt-oss-20b"), max_model_len=4096, vllm_rule=bad)


def test_the_qwen35_recipe_needs_max_position_embeddings_or_the_variable_since_56446() -> None:
    """The card's override leaves max_position_embeddings at 262,144: since #56446 --max-model-len 1010000 is refused
    unless the same override raises it (1,048,576 = 262,144 x 4) or VLLM_ALLOW_LONG_MAX_MODEL_LEN=1; before it, the
    derived 1,048,576 let it pass. With max_position_embeddings raised, both rules accept it."""
    recipe = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 262144}
    qwen = load_config("qwen3.5-27b")
    with pytest.raises(ValueError, match=r"1,010,000 is past .* 262,144 .*raise max_position_embeddings"):
        serving_override(qwen, recipe, 1010000)
    serving_override(qwen, recipe, 1010000, allow_long_max_model_len=True)
    serving_override(qwen, recipe, 1010000, vllm_rule="before-56446")
    for rule in ("current", "before-56446"):
        served, changes = serving_override(qwen, recipe, 1010000, max_position_embeddings=1048576, vllm_rule=rule)
        assert served["text_config"]["max_position_embeddings"] == 1048576 and "max_position_embeddings" not in served
        assert changes[0] == ("text_config.max_position_embeddings 262144 -> 1048576 (set by the same override: the "
                              "length vLLM builds its limit from)")
        assert "vLLM's own limit here is 1,048,576" in changes[-1]
    with pytest.raises(ValueError, match="max_position_embeddings"):
        serving_override(qwen, recipe, max_position_embeddings=0)


def test_a_max_model_len_vllm_refuses_is_refused_unless_allowed() -> None:
    c = load_config("gpt-oss-20b")
    with pytest.raises(ValueError, match=r"max_model_len=10,000,000 is past what vLLM derives from this config, "
                                         r"131,072 .*VLLM_ALLOW_LONG_MAX_MODEL_LEN=1"):
        serving_override(c, max_model_len=10_000_000)
    _, changes = serving_override(c, max_model_len=10_000_000, allow_long_max_model_len=True)
    assert "passed with VLLM_ALLOW_LONG_MAX_MODEL_LEN=1" in changes[0]
    _, changes = serving_override(c, max_model_len=65536)
    assert "vLLM's own limit here is 131,072" in changes[0]


def test_the_ntk_refusal_gives_vllm_s_formula_and_its_transformers_equivalent() -> None:
    """'ntk' is vLLM's NTKScalingRotaryEmbedding (base * s, every frequency / s^(2/d)), which transformers cannot
    build: the message gives the exact linear translation, and says it is not NTK-aware scaling's larger base."""
    with pytest.raises(ValueError, match=r"vLLM's NTKScalingRotaryEmbedding.*rope_type='linear' with factor "
                                         r"s \*\* \(2 / d\) at rope_theta base \* s.*not NTK-aware.*vllm#55910"):
        read_rope_type({"rope_type": "ntk", "factor": 4.0})


def test_vllm_s_fixed_ntk_is_the_linear_translation_the_message_gives() -> None:
    """vLLM's fixed NTK frequencies, (b s)^(-2i/d) / s^(2/d) (ntk_scaling_rope.py, written out), equal the library's
    linear scaling by s^(2/d) at base b s, and differ from NTK-aware's larger base."""
    from mlbook.transformer.rope_scaling import RopeScaling, ntk_base

    d, b, s_ = 128, 10000.0, 4.0
    i = torch.arange(0, d, 2, dtype=torch.float64)
    vllm = (b * s_) ** (-i / d) / s_ ** (2 / d)
    linear, _ = RopeScaling("linear", factor=s_ ** (2 / d)).frequencies(d, b * s_, None)
    torch.testing.assert_close(linear.double(), vllm, rtol=1e-6, atol=0)
    aware = ntk_base(d, b, s_) ** (-i / d)
    assert (aware / vllm).max() > 1.02  # the fastest pair: NTK-aware keeps it, vLLM's divides it by s^(2/d)


def test_a_gemma_3_override_is_per_layer_type_as_transformers_5_loads_the_file() -> None:
    """The shipped 4.x Gemma 3 file loads in transformers 5 (which vLLM runs on) as one dict per layer type: a flat
    override, which would wipe the sliding layers' own base, is refused; one dict per layer type is applied."""
    c = load_config("gemma-3-4b")
    with pytest.raises(ValueError, match=r"per layer type \(\['full_attention', 'sliding_attention'\]\) as "
                                         r"transformers 5 loads it"):
        serving_override(c, {"rope_type": "linear", "factor": 4.0, "rope_theta": 1e6})
    new, _ = serving_override(c, {"full_attention": {"rope_type": "linear", "factor": 4.0, "rope_theta": 1e6},
                                  "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}})
    assert summarize_config(new).lengths.factor == 4.0 and "rope_scaling" not in new


def test_a_dynamic_override_served_past_its_table_is_refused() -> None:
    """vLLM accepts max_position_embeddings x factor at start-up for dynamic, but its table ends at
    max_position_embeddings (vllm#55910): a longer serving length is refused unless allowed."""
    c, dyn = load_config("llama-3.1-8b"), {"rope_type": "dynamic", "factor": 2.0, "rope_theta": 500000.0}
    with pytest.raises(ValueError, match=r"dynamic NTK table stops at max_position_embeddings \(131,072\)"):
        serving_override(c, dyn, 200_000)
    assert serving_override(c, dyn, 131_072)[1]
    assert serving_override(c, dyn, 200_000, allow_long_max_model_len=True)[1]


def test_a_longrope_override_without_its_original_length_is_refused_even_with_a_top_level_one() -> None:
    """vLLM moves Phi-3's top-level original_max_position_embeddings into the dict when it loads the config, before
    the override replaces the dict: the override's own dict must state it."""
    c = {"model_type": "phi3", "num_hidden_layers": 2, "hidden_size": 96, "num_attention_heads": 1,
         "max_position_embeddings": 131072, "original_max_position_embeddings": 4096, "rope_theta": 10000.0}
    with pytest.raises(ValueError, match="longrope dict has no original_max_position_embeddings"):
        serving_override(c, {"rope_type": "longrope", "rope_theta": 10000.0, "short_factor": [1.0] * 48,
                             "long_factor": [2.0] * 48})


def test_a_per_layer_type_override_reports_each_layer_type() -> None:
    """Gemma 3: an override that rescales only the sliding layers changes their frequencies, and the summary says
    so per layer type (comparing the full-attention layers alone would report nothing changed)."""
    from mlbook.transformer.hf import hf_rope_parameters

    config = load_config("gemma-3-4b")
    per = hf_rope_parameters(config)
    override = {"full_attention": dict(per["full_attention"]),
                "sliding_attention": {"rope_type": "linear", "factor": 2.0,
                                      "rope_theta": per["sliding_attention"]["rope_theta"]}}
    _, changes = serving_override(config, rope_scaling=override)
    assert "full_attention 0 of 128 pairs" in changes[0] and "sliding_attention 128 of 128 pairs" in changes[0]


def test_an_override_without_rope_theta_is_refused_flat_or_per_layer_type() -> None:
    """The same rule for both forms: every dict the override replaces must give its base."""
    from mlbook.transformer.hf import hf_rope_parameters

    config = load_config("gemma-3-4b")
    per = hf_rope_parameters(config)
    no_base = {"full_attention": dict(per["full_attention"]), "sliding_attention": {"rope_type": "default"}}
    with pytest.raises(ValueError, match=r"give rope_theta.*entries for \['sliding_attention'\] have none"):
        serving_override(config, rope_scaling=no_base)
    with pytest.raises(ValueError, match="give rope_theta"):
        serving_override(load_config("gpt-oss-20b"), rope_scaling={"rope_type": "yarn", "factor": 2.0,
                                                                   "original_max_position_embeddings": 4096})


def test_gptj_is_summarised_under_its_own_key_names() -> None:
    """GPT-J states n_positions, n_head, n_embd and n_layer (GPTJConfig.attribute_map): the summary reads them, the
    rotary width from rotary_dim."""
    gptj = {"model_type": "gptj", "n_embd": 4096, "n_head": 16, "n_layer": 28, "n_positions": 2048, "rotary_dim": 64,
            "vocab_size": 50400}
    summary = summarize_config(gptj)
    hf = transformers.GPTJConfig(**{k: v for k, v in gptj.items() if k != "model_type"})
    assert summary.lengths.max_position_embeddings == hf.max_position_embeddings == 2048
    assert summary.rotary_dim == hf.rotary_dim and summary.head_dim == hf.n_embd // hf.n_head
    assert summary.kv_per_token == 2 * hf.n_layer * hf.n_embd * 2  # multi-head: K and V of every head, bf16


@pytest.mark.parametrize("config, key, default", [
    ({"model_type": "gemma3_text", "num_hidden_layers": 34, "hidden_size": 2560, "sliding_window": 1024,
      "rope_scaling": {"rope_type": "linear", "factor": 8.0}}, "num_attention_heads", 8),
    ({"model_type": "falcon", "num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 64,
      "rope_theta": 10000.0}, "max_position_embeddings", 2048),
])
def test_a_field_left_to_the_class_is_refused_by_name_with_the_class_default(config, key, default) -> None:
    """The summary does not guess what a file leaves to its config class: it names the field and the class's value,
    read from transformers' class itself."""
    assert getattr(transformers.AutoConfig.for_model(**config), key) == default
    with pytest.raises(ValueError, match=rf"states no {key}.*fills its default \({default}\)"):
        summarize_config(config)


# Phi-3-mini-128k-instruct's lengths (its published config.json); the factors do not enter vLLM's length rule
PHI3_LONGROPE = {"model_type": "phi3", "hidden_size": 3072, "num_attention_heads": 32, "num_hidden_layers": 32,
                 "max_position_embeddings": 131072, "original_max_position_embeddings": 4096, "rope_theta": 10000.0,
                 "rope_scaling": {"rope_type": "longrope", "short_factor": [1.0] * 48, "long_factor": [2.0] * 48}}


@pytest.mark.parametrize("rule", ["current", "before-56446"])
def test_vllm_defaults_a_longrope_model_to_its_original_length(rule):
    """vllm/config/model.py: without --max-model-len, a longrope config runs at original_max_position_embeddings
    (the short factors); the limit an explicit --max-model-len may reach stays max_position_embeddings."""
    from mlbook.analysis.model_config import vllm_default_max_model_len, vllm_max_model_len

    assert vllm_max_model_len(PHI3_LONGROPE, rule=rule)[0] == 131072
    default, why = vllm_default_max_model_len(PHI3_LONGROPE, rule=rule)
    assert default == 4096 and "short factors" in why and "131,072" in why
    plain = {"model_type": "qwen3", "max_position_embeddings": 40960, "rope_theta": 1e6, "head_dim": 128}
    assert vllm_default_max_model_len(plain, rule=rule) == vllm_max_model_len(plain, rule=rule)


def test_vllm_length_is_capped_by_the_tokenizer_before_the_factor():
    """tokenizer_config.json's model_max_length caps the derived length (min), and a linear factor then multiplies
    the capped length, in that order in _get_and_verify_max_len."""
    from mlbook.analysis.model_config import vllm_max_model_len

    linear = {"model_type": "qwen3", "max_position_embeddings": 40960, "rope_theta": 1e6, "head_dim": 128,
              "rope_scaling": {"rope_type": "linear", "factor": 4.0}}
    assert vllm_max_model_len(linear)[0] == 163840
    limit, why = vllm_max_model_len(linear, tokenizer_model_max_length=32768)
    assert limit == 131072 and "tokenizer_config.json" in why
    assert vllm_max_model_len(linear, tokenizer_model_max_length=10 ** 6)[0] == 163840  # a larger cap: no effect
    with pytest.raises((TypeError, ValueError), match="tokenizer_model_max_length"):
        vllm_max_model_len(linear, tokenizer_model_max_length=0)
    top = {**linear, "model_max_length": 65536}  # a top-level model_max_length wins outright, not by being smallest
    assert vllm_max_model_len(top)[1].startswith("model_max_length 65,536")
