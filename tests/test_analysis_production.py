"""Tests for mlbook.analysis.production: KV-cache sizes per layer kind, device budgets.

Oracles: Hugging Face's LlamaConfig for the 7B-class cache; the caches transformers 4.57 really
fills on tiny random models (grouped-query heads, Gemma 2's sliding layers, Llama 4's chunked
layers); transformers' config classes for the layer kinds a config.json implies; and the
DeepSeek-V2 paper's per-token formula for latent attention ((d_c + d_h^R) l = 4.5 d_h l values).
"""

from __future__ import annotations

import json

import pytest
import torch

from mlbook.analysis import production as P
from mlbook.data.model_families import MODEL_FAMILIES, family

transformers = pytest.importorskip("transformers")

# ---------------------------------------------------------------------------
# KV cache
# ---------------------------------------------------------------------------


def test_kv_cache_7b_class_against_hf_llama_config() -> None:
    from transformers import LlamaConfig

    c = LlamaConfig()  # its defaults are LLaMA-7B's
    d_head = c.hidden_size // c.num_attention_heads
    per_token = 2 * c.num_hidden_layers * c.num_key_value_heads * d_head * 2  # K and V, fp16
    assert P.kv_cache_bytes(c.num_hidden_layers, c.num_key_value_heads, d_head, 2.0) == per_token == 2**19  # 0.5 MiB
    assert P.kv_cache_bytes(32, 32, 128, 2.0, context_len=131072) == per_token * 131072 == 64 * 2**30
    assert P.kv_cache_bytes(32, 32, 128, 2.0, context_len=1000, batch=3) == 3 * 1000 * per_token


def test_kv_cache_options_gqa_and_quantisation() -> None:
    opts = P.kv_cache_options(32, 32, 128, context_len=4096, batch=2, kv_heads=(32, 8, 1), bytes_per_value=(2.0, 1.0))
    by = {(o.n_kv_heads, o.bytes_per_value): o for o in opts}
    assert [o.label for o in opts] == ["MHA, 16-bit", "MHA, 8-bit", "GQA-8, 16-bit", "GQA-8, 8-bit", "MQA, 16-bit",
                                       "MQA, 8-bit"]
    for (h, b), o in by.items():
        assert o.total == P.kv_cache_bytes(32, h, 128, b, 4096, 2)
        assert o.per_token == P.kv_cache_bytes(32, h, 128, b)
    assert by[(8, 2.0)].relative == pytest.approx(1 / 4)  # GQA divides by n_heads / n_kv_heads
    assert by[(32, 1.0)].relative == pytest.approx(1 / 2)  # an 8-bit cache halves it
    assert by[(1, 1.0)].relative == pytest.approx(1 / 64)
    with pytest.raises(ValueError, match=r"each kv_heads entry must divide n_heads \(32\), got 6"):
        P.kv_cache_options(kv_heads=(6,))
    with pytest.raises(ValueError, match="must each list at least one value"):
        P.kv_cache_options(kv_heads=())


def test_kv_cache_bytes_bad_input() -> None:
    with pytest.raises(ValueError, match="bytes_per_value must be a finite number > 0"):
        P.kv_cache_bytes(1, 1, 1, 0.0)
    with pytest.raises(TypeError, match="n_layers must be an int"):
        P.kv_cache_bytes(1.5, 1, 1)  # type: ignore[arg-type]



def test_device_fit_reads_the_label_both_ways() -> None:
    fit = P.device_fit({"cache": 2**36, "weights": 2**33}, label=80)
    assert fit.total == 72 * 2**30
    assert fit.headroom_binary == 8 * 2**30  # 80 GiB - 72 GiB
    assert fit.headroom_decimal == pytest.approx(80e9 - 72 * 2**30)  # 80 GB is only 74.5 GiB
    tight = P.device_fit({"cache": 77 * 2**30}, label=80)
    assert tight.headroom_decimal < 0 < tight.headroom_binary  # fits or not depending on the unit
    assert "over by" in repr(tight) and "left for everything else" in repr(tight)
    with pytest.raises(ValueError, match="parts must be a non-empty dict"):
        P.device_fit({})
    with pytest.raises(ValueError, match=r"parts\['cache'\] must be a finite number of bytes >= 0"):
        P.device_fit({"cache": -1})
    with pytest.raises(TypeError, match=r"parts\['cache'\] must be a number of bytes"):
        P.device_fit({"cache": "64 GiB"})  # type: ignore[dict-item]




# ---------------------------------------------------------------------------
# Per-layer plans: hand-derivable cases
# ---------------------------------------------------------------------------


def test_plan_of_uniform_full_layers_is_kv_cache_bytes() -> None:
    for h in (32, 8, 1):
        plan = P.kv_cache_plan(32, h, 128, bytes_per_value=2.0)
        assert plan.per_token == P.kv_cache_bytes(32, h, 128, 2.0)
        assert plan.bytes(131072, batch=3) == P.kv_cache_bytes(32, h, 128, 2.0, 131072, 3)


def test_sliding_and_chunked_layers_stop_growing_at_their_window() -> None:
    kinds = ("sliding_attention", "full_attention") * 2 + ("chunked_attention",) * 2
    plan = P.kv_cache_plan(6, 2, 8, layer_types=kinds, sliding_window=4, chunk_size=16, bytes_per_value=1.0)
    per_layer = 2 * 2 * 8  # K and V of 2 KV heads of width 8, 1 byte each
    assert plan.per_token == 6 * per_layer
    # 3 tokens: every layer still grows
    assert plan.bytes(3) == 6 * 3 * per_layer
    # 100 tokens: 2 sliding layers hold 4, 2 full layers hold 100, 2 chunked layers hold 16
    assert plan.bytes(100) == per_layer * (2 * 4 + 2 * 100 + 2 * 16)
    assert {p.kind: (p.layers, p.cap) for p in plan.parts} == {
        "full_attention": (2, None), "sliding_attention": (2, 4), "chunked_attention": (2, 16)}
    assert "2 sliding_attention" in plan.breakdown(100) and "at most 4 tokens" in plan.breakdown(100)


def test_latent_attention_caches_the_latent_and_one_rotary_key() -> None:
    v3 = family("DeepSeek-V3")
    plan = P.family_kv_plan(v3)
    assert plan.latent and plan.parts[0].values_per_token == 512 + 64
    assert plan.per_token == 61 * 576 * 2  # 70,272 bytes in bf16
    # DeepSeek-V2 (arXiv 2405.04434) Table 1: MLA caches (d_c + d_h^R) l = 4.5 d_h l values per token,
    # with d_c = 4 d_h and d_h^R = d_h / 2 (d_h = 128, the per-head width without rotation)
    d_h = v3.qk_nope_head_dim
    assert plan.per_token == 4.5 * d_h * v3.n_layers * 2
    # against multi-head attention over the same 128 heads of 192-wide keys and 128-wide values
    mha = v3.n_layers * v3.n_heads * (192 + 128) * 2
    assert mha / plan.per_token == pytest.approx(40960 / 576)


def test_plan_refuses_what_it_cannot_size() -> None:
    with pytest.raises(ValueError, match="sliding_attention layers: give their sliding_window"):
        P.kv_cache_plan(2, 1, 8, layer_types=("sliding_attention", "full_attention"))
    with pytest.raises(ValueError, match="chunked_attention layers: give their chunk_size"):
        P.kv_cache_plan(1, 1, 8, layer_types=("chunked_attention",))
    with pytest.raises(ValueError, match="layer_types has 1 entries but the model has n_layers=2"):
        P.kv_cache_plan(2, 1, 8, layer_types=("full_attention",))
    with pytest.raises(ValueError, match="unknown layer_types entry 'mamba'"):
        P.kv_cache_plan(1, 1, 8, layer_types=("mamba",))
    with pytest.raises(ValueError, match="linear_attention layers: give linear_state_values"):
        P.kv_cache_plan(1, 1, 8, layer_types=("linear_attention",))
    with pytest.raises(ValueError, match="linear_state_values=5 is given but layer_types has no linear_attention"):
        P.kv_cache_plan(1, 1, 8, linear_state_values=5)
    with pytest.raises(ValueError, match="full_kv_heads and full_d_head are head shapes"):
        P.kv_cache_plan(1, 1, 8, kv_lora_rank=512, qk_rope_head_dim=64, full_d_head=512)
    with pytest.raises(ValueError, match="full_d_head must be"):
        P.kv_cache_plan(1, 1, 8, full_d_head=0)
    with pytest.raises(ValueError, match="give qk_rope_head_dim with kv_lora_rank"):
        P.kv_cache_plan(1, 1, 8, kv_lora_rank=512)
    with pytest.raises(ValueError, match="give kv_lora_rank as well, or neither"):
        P.kv_cache_plan(1, 1, 8, qk_rope_head_dim=64)
    with pytest.raises(ValueError, match="ModernBERT is not a decoder-only model"):
        P.family_kv_plan(family("ModernBERT"))
    with pytest.raises(TypeError, match="config must be a dict read from config.json"):
        P.config_kv_plan([("num_hidden_layers", 2)])  # type: ignore[arg-type]


# ---------------------------------------------------------------------------
# Oracle: the cache transformers really fills
# ---------------------------------------------------------------------------


def _hf_cache_tokens(model, T: int) -> list[tuple[int, int]]:
    """(tokens held, values per token) of each layer of transformers' cache after a T-token prefill."""
    with torch.no_grad():
        out = model(torch.randint(0, 64, (1, T)), use_cache=True)
    return [(layer.keys.shape[-2], 2 * layer.keys.shape[1] * layer.keys.shape[-1]) for layer in out.past_key_values.layers]


TINY = dict(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=4, num_attention_heads=4,
            num_key_value_heads=2, head_dim=8, max_position_embeddings=128)


@pytest.mark.parametrize("kind", ["llama", "gemma2", "llama4"])
def test_plan_matches_the_cache_transformers_fills(kind: str) -> None:
    """transformers keeps W - 1 tokens of a windowed layer between steps and attends over them plus the
    new token: the plan counts the W a step attends over; a full layer holds every token in both."""
    torch.manual_seed(0)
    if kind == "llama":
        cfg = transformers.LlamaConfig(**TINY)
        model = transformers.LlamaForCausalLM(cfg)
        raw = {**TINY, "model_type": "llama"}
        window = None
    elif kind == "gemma2":
        cfg = transformers.Gemma2Config(**TINY, sliding_window=5)
        model = transformers.Gemma2ForCausalLM(cfg)
        raw = {**TINY, "model_type": "gemma2", "sliding_window": 5}
        window = 5
    else:
        cfg = transformers.Llama4TextConfig(**TINY, intermediate_size_mlp=64, attention_chunk_size=5,
                                            num_local_experts=2, no_rope_layer_interval=4)
        model = transformers.Llama4ForCausalLM(cfg)
        raw = {**TINY, "model_type": "llama4_text", "attention_chunk_size": 5, "no_rope_layer_interval": 4}
        window = 5
    plan = P.config_kv_plan(raw, bytes_per_value=4.0)
    kinds = P.config_layer_types(raw)
    assert kinds == tuple(getattr(cfg, "layer_types", None) or ("full_attention",) * 4)
    for T in (3, 12):
        hf = _hf_cache_tokens(model.eval(), T)
        ours = []
        for k in kinds:
            part = next(p for p in plan.parts if p.kind == k)
            ours.append((part.tokens(T), part.values_per_token))
        for (hf_tokens, hf_values), (our_tokens, our_values), k in zip(hf, ours, kinds):
            assert hf_values == our_values
            if k == "full_attention":
                assert hf_tokens == our_tokens == T
            else:
                assert our_tokens == min(T, window) and hf_tokens == min(T, window - 1)


# ---------------------------------------------------------------------------
# Layer kinds from a config.json, against transformers' config classes
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("cls,extra", [
    ("Gemma2Config", {"model_type": "gemma2", "sliding_window": 8}),
    ("Gemma3TextConfig", {"model_type": "gemma3_text", "sliding_window": 8, "sliding_window_pattern": 3}),
    ("Cohere2Config", {"model_type": "cohere2", "sliding_window": 8, "sliding_window_pattern": 4}),
    ("Llama4TextConfig", {"model_type": "llama4_text", "no_rope_layer_interval": 3, "attention_chunk_size": 8}),
    ("Qwen2Config", {"model_type": "qwen2", "sliding_window": 8, "use_sliding_window": True, "max_window_layers": 4}),
    ("Qwen3Config", {"model_type": "qwen3", "sliding_window": 8, "use_sliding_window": False}),
    ("GptOssConfig", {"model_type": "gpt_oss", "sliding_window": 8}),
])
def test_config_layer_types_as_transformers_derives_them(cls: str, extra: dict) -> None:
    raw = {**TINY, "num_hidden_layers": 6, **extra}
    hf = getattr(transformers, cls)(**{k: v for k, v in raw.items() if k != "model_type"})
    if raw["model_type"] == "gpt_oss":
        raw["layer_types"] = hf.layer_types  # gpt-oss configs list them
    assert P.config_layer_types(raw) == tuple(hf.layer_types)


def test_config_layer_types_mistral_and_multimodal() -> None:
    assert P.config_layer_types({"num_hidden_layers": 3, "sliding_window": 4096}) == ("sliding_attention",) * 3
    assert P.config_layer_types({"num_hidden_layers": 3, "sliding_window": None}) == ("full_attention",) * 3
    nested = {"model_type": "gemma3", "text_config": {**TINY, "model_type": "gemma3_text", "sliding_window": 4,
                                                      "sliding_window_pattern": 2}}
    assert P.config_layer_types(nested) == ("sliding_attention", "full_attention") * 2
    with pytest.raises(ValueError, match="layer_types has 2 entries but num_hidden_layers is 4"):
        P.config_layer_types({**TINY, "layer_types": ["full_attention"] * 2})


# ---------------------------------------------------------------------------
# The families' caches
# ---------------------------------------------------------------------------


def test_every_decoder_family_has_a_plan() -> None:
    for row in MODEL_FAMILIES:
        if row.encoder or row.scheme == "t5":
            continue
        plan = P.family_kv_plan(row)
        assert plan.n_layers == row.n_layers
        if row.kv_lora_rank is None:  # per token, while every window still grows: each attention layer's K and V
            kinds = row.layer_kinds
            n_full, n_linear = kinds.count("full_attention"), kinds.count("linear_attention")
            full = P.kv_cache_bytes(n_full, row.global_kv_heads or row.n_kv_heads,
                                    row.global_d_head or row.d_head) if n_full else 0
            rest = P.kv_cache_bytes(row.n_layers - n_full - n_linear, row.n_kv_heads, row.d_head) if (
                row.n_layers - n_full - n_linear) else 0
            assert plan.per_token == full + rest


def test_windows_cap_the_families_caches() -> None:
    T = 131072
    gemma3 = P.family_kv_plan(family("Gemma 3"))  # 8 global layers, 40 local layers of window 1,024
    per_layer = 2 * 8 * 256 * 2
    assert gemma3.bytes(T) == per_layer * (8 * T + 40 * 1024)
    llama4 = P.family_kv_plan(family("Llama 4"))  # 12 NoPE global layers, 36 chunked layers of 8,192
    assert llama4.bytes(T) == 2 * 8 * 128 * 2 * (12 * T + 36 * 8192)
    gpt_oss = P.family_kv_plan(family("gpt-oss"))  # 12 full, 12 banded layers of 128
    assert gpt_oss.bytes(T) == 2 * 8 * 64 * 2 * (12 * T + 12 * 128)
    mistral = P.family_kv_plan(family("Mistral"))  # every layer sliding, 4,096
    assert mistral.bytes(T) == P.kv_cache_bytes(32, 8, 128, 2.0, 4096)


# ---------------------------------------------------------------------------
# The shipped config.json extracts (src/mlbook/data/configs/)
# ---------------------------------------------------------------------------

from pathlib import Path  # noqa: E402

import mlbook.data  # noqa: E402

# the extracts with every field written out; a published file that leaves fields to its class (Google's Gemma 3,
# "_published": true) is read through the class, and its refusal here is tested below
SHIPPED = sorted(p for p in (Path(mlbook.data.__file__).resolve().parent / "configs").glob("*.json")
                 if not json.loads(p.read_text()).get("_published"))


@pytest.mark.skipif(not SHIPPED, reason="no config.json extracts shipped under src/mlbook/data/configs/")
@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_shipped_configs_layer_kinds_and_cache(path: Path) -> None:
    """Each shipped config (a multimodal one through its text_config): its layer kinds as transformers' config
    class derives them, and a cache whose size is the hand formula over those kinds. An attention layer adds
    2 x KV heads x head_dim values per token (kv_lora_rank + qk_rope_head_dim under latent attention) up to its
    window or chunk; a linear-attention layer (Qwen3.5's Gated DeltaNet) adds none and holds a fixed state:
    linear_num_value_heads x linear_key_head_dim x linear_value_head_dim (the recurrent state) plus
    linear_conv_kernel_dim x (2 x linear_num_key_heads x linear_key_head_dim + linear_num_value_heads x
    linear_value_head_dim) (the causal convolution's last inputs of q, k and v)."""
    import json

    raw = json.loads(path.read_text())
    c = raw.get("text_config", raw)
    fields = {k: v for k, v in c.items() if not k.startswith("_")}
    if fields.get("model_type") in ("modernbert", "bert", "t5"):
        with pytest.raises(ValueError, match="not a decoder-only model"):
            P.config_kv_plan(fields)
        return
    hf = transformers.AutoConfig.for_model(fields["model_type"], **{k: v for k, v in fields.items() if k != "model_type"})
    kinds = P.config_layer_types(raw)
    assert kinds == P.config_layer_types(fields)  # the wrapper is read through its text config
    if getattr(hf, "layer_types", None) is not None:
        assert kinds == tuple(hf.layer_types)
    n_layers = fields["num_hidden_layers"]
    n_linear = kinds.count("linear_attention")
    if n_linear:  # transformers' rule where layer_types is absent: layer i is full when (i + 1) % interval == 0
        interval = fields["full_attention_interval"]
        assert kinds == tuple("full_attention" if (i + 1) % interval == 0 else "linear_attention"
                              for i in range(n_layers))
    plan = P.config_kv_plan(raw)
    assert plan == P.config_kv_plan(fields)
    n_heads = fields["num_attention_heads"]
    if fields.get("kv_lora_rank") is not None:
        per_layer = fields["kv_lora_rank"] + fields["qk_rope_head_dim"]
    else:
        d_head = fields.get("head_dim") or fields["hidden_size"] // n_heads
        per_layer = 2 * (fields.get("num_key_value_heads") or n_heads) * d_head
    state_bytes = 0  # one linear layer's: the recurrent state in float32, the convolution window at 2 bytes
    if n_linear:
        v_heads, k_heads = fields["linear_num_value_heads"], fields["linear_num_key_heads"]
        d_k, d_v = fields["linear_key_head_dim"], fields["linear_value_head_dim"]
        kernel = fields["linear_conv_kernel_dim"]
        state_bytes = 4 * v_heads * d_k * d_v + 2 * kernel * (2 * k_heads * d_k + v_heads * d_v)
    assert plan.per_token == (n_layers - n_linear) * per_layer * 2
    T = 1 << 20
    caps = {"full_attention": T, "sliding_attention": fields.get("sliding_window"),
            "chunked_attention": fields.get("attention_chunk_size"), "linear_attention": 0}
    assert plan.bytes(T) == sum(per_layer * 2 * min(T, caps[k]) for k in kinds) + n_linear * state_bytes
    assert plan.bytes(0) == n_linear * state_bytes  # the fixed state is there before the first token


def test_linear_attention_state_is_what_transformers_caches() -> None:
    """A tiny random Qwen3.5 text model (transformers 5): after a prefill of T tokens each linear-attention
    layer's cache holds the values `config_kv_plan` counts as its fixed state, whatever T, and each full layer
    2 x KV heads x head_dim per token. In a bf16 model transformers 5.15's torch path keeps the recurrent
    state in float32, and the plan's bytes for a linear layer are the cache tensors' own."""
    Qwen = getattr(transformers, "Qwen3_5ForCausalLM", None)
    if Qwen is None:
        pytest.skip(f"transformers {transformers.__version__} has no Qwen3.5 (added in 5)")
    raw = {**TINY, "model_type": "qwen3_5_text", "linear_num_value_heads": 4, "linear_num_key_heads": 2,
           "linear_key_head_dim": 8, "linear_value_head_dim": 6, "linear_conv_kernel_dim": 4,
           "layer_types": ["linear_attention"] * 3 + ["full_attention"],
           "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5}}
    torch.manual_seed(0)
    model = Qwen(transformers.Qwen3_5TextConfig(**{k: v for k, v in raw.items() if k != "model_type"}))
    model = model.to(torch.bfloat16).eval()
    plan = P.config_kv_plan(raw)
    linear = next(p for p in plan.parts if p.kind == "linear_attention")
    full = next(p for p in plan.parts if p.kind == "full_attention")
    assert (linear.layers, full.layers) == (3, 1)
    for T in (3, 12):
        with torch.no_grad():
            cache = model(torch.randint(0, 64, (1, T)), use_cache=True).past_key_values
        for kind, layer in zip(P.config_layer_types(raw), cache.layers):
            if kind == "linear_attention":
                conv, recurrent = layer.conv_states[0], layer.recurrent_states[0]
                assert conv.numel() + recurrent.numel() == linear.fixed_values
                assert recurrent.numel() == linear.recurrent_values
                assert (conv.dtype, recurrent.dtype) == (torch.bfloat16, torch.float32)
                nbytes = conv.numel() * conv.element_size() + recurrent.numel() * recurrent.element_size()
                assert plan.part_bytes(linear, T) == linear.layers * nbytes
            else:
                assert layer.keys.shape[-2] == full.tokens(T) == T
                assert 2 * layer.keys.shape[1] * layer.keys.shape[-1] == full.values_per_token


# Gemma 4's full layers: their own heads and width, as a published config and as transformers 5 saves one
_GEMMA4_TEXT = {"model_type": "gemma4_text", "num_hidden_layers": 6, "num_attention_heads": 32,
                "num_key_value_heads": 16, "head_dim": 256, "sliding_window": 1024,
                "layer_types": ["sliding_attention"] * 5 + ["full_attention"]}


def test_gemma4_full_layers_read_from_either_form() -> None:
    T = 8192
    # the full layer every token of 4 KV heads of 512, the sliding ones at most 1,024 tokens of 16 x 256
    expected = 2 * (1 * 2 * 4 * 512 * T + 5 * 2 * 16 * 256 * min(T, 1024))
    published = {**_GEMMA4_TEXT, "global_head_dim": 512, "num_global_key_value_heads": 4, "attention_k_eq_v": True}
    saved = {**_GEMMA4_TEXT, "per_layer_config": {"05": {"head_dim": 512, "num_key_value_heads": 4}}}
    assert P.config_kv_plan(published).bytes(T) == P.config_kv_plan(saved).bytes(T) == expected
    # without attention_k_eq_v (Gemma4TextConfig's default False) the global KV heads are not used
    unset = {k: v for k, v in published.items() if k != "attention_k_eq_v"}
    assert P.config_kv_plan(unset).bytes(T) == 2 * (2 * 16 * 512 * T + 5 * 2 * 16 * 256 * 1024)


def test_gemma4_saved_form_equals_transformers_own() -> None:
    transformers = pytest.importorskip("transformers")
    cls = getattr(transformers, "Gemma4TextConfig", None)
    if cls is None:
        pytest.skip(f"transformers {transformers.__version__} has no Gemma 4")
    config = cls(num_hidden_layers=6, num_attention_heads=32, num_key_value_heads=16, head_dim=256,
                 global_head_dim=384, num_global_key_value_heads=2, attention_k_eq_v=True, sliding_window=1024)
    saved = config.to_dict()
    from mlbook.transformer.hf import hf_head_dim, hf_layer_overrides

    assert "global_head_dim" not in saved and "num_global_key_value_heads" not in saved
    assert hf_layer_overrides(saved) == {5: {"head_dim": 384, "num_key_value_heads": 2}}

    assert hf_head_dim(saved, "full_attention") == 384  # not the 512 default
    assert P.config_kv_plan(saved).bytes(100) == 2 * (2 * 2 * 384 * 100 + 5 * 2 * 16 * 256 * 100)


def test_per_layer_config_of_the_wrong_shape_is_refused_by_name() -> None:
    with pytest.raises(TypeError, match="per_layer_config must map layer indices to dicts"):
        P.config_kv_plan({**_GEMMA4_TEXT, "per_layer_config": [512]})
    with pytest.raises(ValueError, match="per_layer_config key 'last' is not a layer index"):
        P.config_kv_plan({**_GEMMA4_TEXT, "per_layer_config": {"last": {"head_dim": 512}}})


def test_a_nemotron_h_block_pattern_is_refused_not_counted_as_attention() -> None:
    config = {"model_type": "nemotron_h", "num_hidden_layers": 4, "num_attention_heads": 32,
              "num_key_value_heads": 2, "head_dim": 128, "hybrid_override_pattern": "M-M*"}
    with pytest.raises(ValueError, match="hybrid_override_pattern='M-M\\*'.*does not read"):
        P.config_kv_plan(config)


@pytest.mark.parametrize("cls, kwargs, match", [
    ("JambaConfig", {}, "attn_layer_period=8 \\(Jamba"),
    ("BambaConfig", {"attn_layer_indices": [3, 7]}, "attn_layer_indices=\\[3, 7\\] \\(Bamba"),
    ("BambaConfig", {}, "Mamba mixers \\(mamba_d_state=.*Bamba without attn_layer_indices"),
    ("Zamba2Config", {}, "layers_block_type=.*Zamba2"),
    ("FalconH1Config", {}, "Mamba mixers .*Falcon-H1 runs one beside the attention"),
])
def test_an_attention_and_mamba_hybrid_is_refused_not_counted_as_attention(cls: str, kwargs: dict, match: str) -> None:
    """Each transformers 5.15 config class that places attention among Mamba layers (or beside a Mamba mixer in
    every layer) is refused by the field that says so: before, Jamba's and Bamba's were counted as 32 attention
    layers (Jamba: 8x its 4 attention layers' cache, and no Mamba state)."""
    transformers = pytest.importorskip("transformers")
    config = getattr(transformers, cls)(**kwargs).to_dict()
    with pytest.raises(ValueError, match=match):
        P.config_kv_plan(config)


def test_qwen35_s_mamba_ssm_dtype_is_not_taken_for_a_mamba_mixer() -> None:
    """Qwen3.5's text config carries mamba_ssm_dtype (the dtype vLLM keeps its Gated DeltaNet state in): that is no
    Mamba mixer, and its plan is still made."""
    from mlbook.analysis.model_config import load_config

    text = load_config("qwen3.5-27b")["text_config"]
    assert "mamba_ssm_dtype" in text
    assert P.config_kv_plan(text).per_token == 16 * 2 * 4 * 256 * 2


def test_the_recurrent_state_has_its_own_bytes_per_value() -> None:
    """state_bytes_per_value prices the recurrent state alone (vLLM's mamba_ssm_cache_dtype): 2 gives the bf16 count."""
    kw = dict(layer_types=("linear_attention", "full_attention"), linear_state_values=100, linear_recurrent_values=60)
    plan32 = P.kv_cache_plan(2, 1, 8, **kw)
    plan16 = P.kv_cache_plan(2, 1, 8, state_bytes_per_value=2.0, **kw)
    assert plan32.bytes(0) == 40 * 2 + 60 * 4 and plan16.bytes(0) == 100 * 2
    assert plan32.bytes(10) - plan32.bytes(0) == plan16.bytes(10) - plan16.bytes(0) == 2 * 8 * 10 * 2
    with pytest.raises(ValueError, match="linear_recurrent_values=101 is part of linear_state_values=100"):
        P.kv_cache_plan(2, 1, 8, layer_types=("linear_attention", "full_attention"), linear_state_values=100,
                        linear_recurrent_values=101)
    with pytest.raises(ValueError, match="state_bytes_per_value"):
        P.kv_cache_plan(1, 1, 8, state_bytes_per_value=0)


_KIMI_LINEAR = {  # the layout of Kimi-Linear-48B-A3B's config.json (kimi_linear; vLLM's kimi_linear.py reads it)
    "model_type": "kimi_linear", "num_hidden_layers": 27, "num_attention_heads": 32, "num_key_value_heads": 1,
    "hidden_size": 2304, "head_dim": 72, "kv_lora_rank": 512, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128,
    "v_head_dim": 128, "mla_use_nope": True, "rope_theta": 10000.0, "model_max_length": 1048576,
    "linear_attn_config": {"kda_layers": [1, 2, 3, 5, 6, 7, 9, 10, 11, 13, 14, 15, 17, 18, 19, 21, 22, 23, 25, 26],
                           "full_attn_layers": [4, 8, 12, 16, 20, 24, 27], "num_heads": 32, "head_dim": 128,
                           "short_conv_kernel_size": 4},
}


def test_kimi_linear_is_refused_not_priced_as_27_latent_layers() -> None:
    """Kimi Linear places 7 NoPE MLA layers among 20 Kimi Delta Attention layers by linear_attn_config: counted as
    attention it was 27 MLA layers (3.9x the 7 layers' cache) and no state; now refused by that field, and its RoPE
    reader says no layer rotates (mla_use_nope) instead of reading base 10,000."""
    from mlbook.transformer.hf import hf_rotating_layers, rope_options_from_hf

    with pytest.raises(ValueError, match="linear_attn_config=.*Kimi Linear, Kimi K3"):
        P.config_kv_plan(_KIMI_LINEAR)
    assert hf_rotating_layers(_KIMI_LINEAR) == (False,) * 27
    with pytest.raises(ValueError, match="no layer of this config rotates \\(mla_use_nope=True"):
        rope_options_from_hf(_KIMI_LINEAR)


@pytest.mark.parametrize("config, match", [
    ({"model_type": "granitemoehybrid", "layer_types": ["mamba", "mamba", "attention", "mamba"]},
     r"layer_types has \['mamba'\] layers \(Mamba-2 mixers.*the config is not at fault"),
    ({"model_type": "lfm2", "layer_types": ["conv", "attention", "conv", "conv"]},
     r"layer_types has \['conv'\] layers \(short-convolution blocks"),
    ({"model_type": "lfm2", "full_attn_idxs": [1]}, r"full_attn_idxs=\[1\] \(LFM2"),
    ({"model_type": "minimax", "layer_types": ["linear_attention", "full_attention", "linear_attention",
                                               "full_attention"]},
     r"counts the fixed-size state of Gated DeltaNet.*lightning attention"),
])
def test_layers_the_calculator_does_not_model_are_refused_by_what_they_are(config, match) -> None:
    """Mamba, short-convolution and lightning-attention layers are refused with that reason, not as a config that
    lacks Gated DeltaNet's keys; LFM2's full_attn_idxs without layer_types is not counted as all attention."""
    base = {"num_hidden_layers": 4, "num_attention_heads": 32, "num_key_value_heads": 8, "hidden_size": 2048,
            "max_position_embeddings": 4096}
    with pytest.raises(ValueError, match=match):
        P.config_kv_plan({**base, **config})


def _vllm_gdn_block_bytes(text: dict, n: int) -> int:
    """One layer's block as vLLM allocates it, counted off tensors (on the meta device) at the shapes of
    `MambaStateShapeCalculator.gated_delta_net_state_shape` (vllm/model_executor/layers/mamba/mamba_utils.py,
    tensor parallel 1): conv (kernel - 1 + n, 2 key heads' width + the value heads' width) in bf16 and the
    temporal state (value heads, value width, key width) in float32 (Qwen3.5's mamba_ssm_dtype)."""
    conv_dim = 2 * text["linear_num_key_heads"] * text["linear_key_head_dim"] + (
        text["linear_num_value_heads"] * text["linear_value_head_dim"])
    conv = torch.empty((text["linear_conv_kernel_dim"] - 1 + n, conv_dim), dtype=torch.bfloat16, device="meta")
    temporal = torch.empty((text["linear_num_value_heads"], text["linear_value_head_dim"], text["linear_key_head_dim"]),
                           dtype=torch.float32, device="meta")
    return conv.nbytes + temporal.nbytes


def test_vllm_s_linear_state_is_the_bytes_of_its_blocks_in_each_cache_mode() -> None:
    """Qwen3.5-27B's 48 Gated DeltaNet layers in vLLM: the bytes of the tensors one block holds, times the blocks
    `MambaSpec.max_memory_usage_bytes` (vllm/v1/kv_cache_interface.py) charges a sequence: 1 + n without prefix
    caching ("none"), 2 + n in "align", vLLM's default (prefix caching on, Qwen3.5 without
    SupportsMambaPrefixCaching), ceil(max_model_len / block) + n in "all"."""
    from mlbook.analysis.model_config import load_config

    text = load_config("qwen3.5-27b")["text_config"]
    for n in range(4):
        block = _vllm_gdn_block_bytes(text, n)
        assert P.vllm_linear_state_bytes(text, 48, n, mamba_cache_mode="none") == 48 * (1 + n) * block
        assert P.vllm_linear_state_bytes(text, 48, n, mamba_cache_mode="align") == 48 * (2 + n) * block
        assert P.vllm_linear_state_bytes(text, 48, n) == 48 * (2 + n) * block  # the default is "align"
    every = P.vllm_linear_state_bytes(text, 48, mamba_cache_mode="all", max_model_len=4097, mamba_block_size=1024)
    assert every == 48 * 5 * _vllm_gdn_block_bytes(text, 0)  # blocks at 0, 1,024, ..., 4,096
    every = P.vllm_linear_state_bytes(text, 48, 2, mamba_cache_mode="all", max_model_len=4097, mamba_block_size=1024)
    assert every == 48 * (5 + 2) * _vllm_gdn_block_bytes(text, 2)  # and one per draft token
    # by hand, one block without speculation: 48 x 128 x 128 x 4 + 3 x 10,240 x 2 = 3,145,728 + 61,440 bytes
    assert P.vllm_linear_state_bytes(text, 48, mamba_cache_mode="none") == 48 * 3_207_168 == 153_944_064
    assert P.vllm_linear_state_bytes(text, 48) == 2 * 153_944_064  # 293.62 MiB in "align"


def test_vllm_s_linear_state_refuses_bad_input_by_name() -> None:
    from mlbook.analysis.model_config import load_config

    text = load_config("qwen3.5-27b")["text_config"]
    with pytest.raises(ValueError, match="num_speculative_tokens must be >= 0, got -1"):
        P.vllm_linear_state_bytes(text, 48, -1)
    with pytest.raises(ValueError, match="the config lacks"):
        P.vllm_linear_state_bytes({"linear_num_value_heads": 48}, 48)
    with pytest.raises(ValueError, match="unknown mamba_cache_mode 'prefix'; valid values are 'align', 'none', 'all'"):
        P.vllm_linear_state_bytes(text, 48, mamba_cache_mode="prefix")
    with pytest.raises(ValueError, match="mamba_cache_mode='all' .* give max_model_len and mamba_block_size"):
        P.vllm_linear_state_bytes(text, 48, mamba_cache_mode="all")
    with pytest.raises(ValueError, match="size the 'all' mode only"):
        P.vllm_linear_state_bytes(text, 48, mamba_cache_mode="none", max_model_len=4096)


def test_an_h100_80gb_holds_less_than_80_gib() -> None:
    """nvidia-smi's memory.total: H100 80GB HBM3 81,559 MiB, A100-SXM4-80GB 81,920 MiB."""
    assert P.ACCELERATOR_BYTES["H100 80GB"] == 85_520_809_984 < 80 * 2**30 == P.ACCELERATOR_BYTES["A100 80GB"]
    fit = P.device_fit({"cache": 64 * 2**30, "weights": 12 * 2**30}, devices=P.ACCELERATOR_BYTES)
    assert fit.headroom_on("A100 80GB") == 4 * 2**30
    assert fit.headroom_on("H100 80GB") == 85_520_809_984 - 76 * 2**30
    assert "on an H100 80GB (79.65 GiB): 3.65 GiB left" in repr(fit)
    with pytest.raises(ValueError, match="unknown device 'H200'"):
        fit.headroom_on("H200")
    with pytest.raises(TypeError, match="devices must be a dict"):
        P.device_fit({"cache": 1}, devices=[("H100", 1)])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"devices\['H100'\]"):
        P.device_fit({"cache": 1}, devices={"H100": 0})


# ---------------------------------------------------------------------------
# DeepSeek-V4: refused by name, in the published form and in transformers' saved form
# ---------------------------------------------------------------------------


def _deepseek_v4_published() -> dict:
    """DeepSeek-V4-Flash's config.json in its published, legacy form: DeepseekV4Config's defaults (transformers 5.15)
    with the fields its __post_init__ folds away put back as the checkpoint ships them (compress_ratios per layer,
    0 a window only, 4 compressed sparse, 128 heavily compressed, in the review's reading [0, 0, 4, 128, ..., 4, 0], one
    entry more than the 43 layers, which transformers truncates; qk_rope_head_dim; rope_theta with rope_scaling) and
    none of the fields it derives (layer_types, compress_rates, rope_parameters, partial_rotary_factor)."""
    saved = transformers.DeepseekV4Config().to_dict()
    raw = {k: v for k, v in saved.items() if k not in (
        "layer_types", "compress_rates", "rope_parameters", "partial_rotary_factor", "mlp_layer_types")}
    raw.update(compress_ratios=[0, 0] + [4, 128] * 20 + [4, 0], qk_rope_head_dim=64, rope_theta=10000.0,
               compress_rope_theta=160000.0, num_hash_layers=3,
               rope_scaling={"type": "yarn", "factor": 16, "original_max_position_embeddings": 65536,
                             "beta_fast": 32, "beta_slow": 1})
    return raw


def test_deepseek_v4_published_config_is_refused_not_priced_as_sliding_layers() -> None:
    """The published form has no layer_types, so it was read as 43 sliding layers of 2 x 512 values (10.75 MiB at
    1M tokens): no compressed entries, K and V counted twice for one shared tensor, no indexer keys. It is now refused
    by the fields that say so, and so is the form transformers 5.15 saves."""
    raw = _deepseek_v4_published()
    # transformers reads this form: compress_ratios becomes layer_types, Flash's first two layers window-only
    folded = transformers.DeepseekV4Config(**{k: v for k, v in raw.items() if k not in ("model_type",
                                                                                      "transformers_version")})
    assert folded.layer_types[:3] == ["sliding_attention", "sliding_attention", "compressed_sparse_attention"]
    assert len(folded.layer_types) == 43 and folded.layer_types.count("sliding_attention") == 2
    match = (r"DeepSeek-V4's compressed attention \(model_type='deepseek_v4', compress_ratios \(44 entries, each of "
             r"\[0, 4, 128\]\), compress_rope_theta=160000.0, index_topk=512.*compressed entries.*read as both key "
             r"and value.*indexer keeps keys")
    with pytest.raises(ValueError, match=match):
        P.config_kv_plan(raw)
    with pytest.raises(ValueError, match=r"model_type='deepseek_v4', compress_rates="):
        P.config_kv_plan(transformers.DeepseekV4Config().to_dict())
    anonymous = {k: v for k, v in raw.items() if k != "model_type"}  # no model_type: still refused by its fields
    with pytest.raises(ValueError, match=r"model_type=None, compress_ratios"):
        P.config_kv_plan(anonymous)


def test_an_indexer_alone_is_not_taken_for_deepseek_v4() -> None:
    """DeepSeek-V3.2 and GLM-5 carry index_topk for their sparse-attention indexer and are still priced (latent and
    rotary key per token; the indexer's key is left out, as the page says): V3.2 as its config.json states it, without
    the layer_types transformers 5.15 saves."""
    published = {k: v for k, v in transformers.DeepseekV32Config().to_dict().items() if k != "layer_types"}
    assert published["index_topk"] == 2048
    plan = P.config_kv_plan(published)
    assert plan.latent and plan.parts[0].values_per_token == 512 + 64


# ---------------------------------------------------------------------------
# OLMo Hybrid with its Gated DeltaNet widths left to OlmoHybridConfig's defaults
# ---------------------------------------------------------------------------


def test_olmo_hybrid_widths_left_to_the_class_defaults_are_filled_as_transformers_fills_them() -> None:
    saved = transformers.OlmoHybridConfig().to_dict()
    trimmed = {k: v for k, v in saved.items() if not k.startswith("linear_")}
    assert P.config_kv_plan(trimmed).bytes(131072) == P.config_kv_plan(saved).bytes(131072)
    linear = next(p for p in P.config_kv_plan(trimmed).parts if p.kind == "linear_attention")
    cfg = transformers.OlmoHybridConfig()
    conv = 2 * cfg.linear_num_key_heads * cfg.linear_key_head_dim + cfg.linear_num_value_heads * cfg.linear_value_head_dim
    assert linear.recurrent_values == cfg.linear_num_value_heads * cfg.linear_key_head_dim * cfg.linear_value_head_dim
    assert linear.fixed_values == linear.recurrent_values + conv * cfg.linear_conv_kernel_dim
    with pytest.raises(ValueError, match="model_type='olmo_hybrid' with no layer_types: OlmoHybridConfig fills them"):
        P.config_kv_plan({k: v for k, v in trimmed.items() if k != "layer_types"})


def test_a_gated_deltanet_family_missing_its_widths_is_told_so_not_called_another_kind() -> None:
    from mlbook.analysis.model_config import load_config

    text = {k: v for k, v in load_config("qwen3.5-27b")["text_config"].items() if k != "linear_key_head_dim"}
    with pytest.raises(ValueError, match=r"model_type='qwen3_5_text' has Gated DeltaNet layers, and the config lacks "
                                         r"their widths \['linear_key_head_dim'\]"):
        P.config_kv_plan(text)


# ---------------------------------------------------------------------------
# vLLM's pages: the attention block, the padded state, tensor parallelism
# ---------------------------------------------------------------------------


def test_vllm_pads_the_state_to_the_attention_page_as_its_log_reports() -> None:
    """Oracle: vLLM's own log for Qwen3.5-0.8B at TP 1 in bf16 (24 layers, 2 KV heads of 256, 16 + 16 linear heads
    of 128, kernel 4, float32 state), "Setting attention block size to 544 tokens" and "Padding mamba page size by
    2.64%"; and Qwen3.5-27B's 784-token block from a deployment of it."""
    small = {"model_type": "qwen3_5_text", "num_hidden_layers": 24, "hidden_size": 1024, "num_attention_heads": 8,
             "num_key_value_heads": 2, "head_dim": 256, "linear_num_key_heads": 16, "linear_num_value_heads": 16,
             "linear_key_head_dim": 128, "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4,
             "full_attention_interval": 4, "mamba_ssm_dtype": "float32"}
    pages = P.vllm_hybrid_pages(small)
    assert pages.block_size == 544 and f"{100 * pages.padding:.2f}%" == "2.64%"
    assert pages.page >= pages.state_page > pages.page - 16 * pages.attention_bytes_per_token  # the least 16-multiple
    from mlbook.analysis.model_config import load_config

    big = load_config("qwen3.5-27b")
    pages = P.vllm_hybrid_pages(big)
    assert pages.block_size == 784 and pages.attention_bytes_per_token == 2 * 4 * 256 * 2
    assert pages.unpadded_state_bytes() == P.vllm_linear_state_bytes(big["text_config"], 48)
    assert pages.state_bytes() == 2 * 48 * 784 * 4096 == 294 * 2**20  # 293.62 MiB before padding
    assert pages.kv_bytes(4096) == 16 * 6 * 784 * 4096 == 294 * 2**20  # whole blocks: ceil(4096 / 784) = 6
    assert pages.kv_bytes(784) == pages.kv_bytes(1) == 16 * 784 * 4096
    for n, tokens, align_mib, none_mib in ((1, 800, 450, 300), (2, 800, 600, 450), (3, 800, 750, 600)):
        pages = P.vllm_hybrid_pages(big, n)
        assert pages.block_size == tokens and pages.state_bytes() == align_mib * 2**20
        assert P.vllm_hybrid_pages(big, n, mamba_cache_mode="none").state_bytes() == none_mib * 2**20
        assert pages.unpadded_state_bytes() == P.vllm_linear_state_bytes(big["text_config"], 48, n)


def test_tensor_parallel_ranks_split_the_state_and_pad_it_each() -> None:
    """Each rank holds 1/TP of the value heads and channels; the KV heads split until each rank has one, then
    replicate (vLLM's get_num_kv_heads: max(1, heads // TP)); the padding is per rank."""
    from mlbook.analysis.model_config import load_config

    big = load_config("qwen3.5-27b")
    one = P.vllm_hybrid_pages(big)
    for tp in (2, 4, 8):
        pages = P.vllm_hybrid_pages(big, tensor_parallel=tp)
        assert pages.state_page * tp == one.state_page
        assert pages.unpadded_state_bytes() == one.unpadded_state_bytes()
        assert pages.attention_bytes_per_token == 2 * max(1, 4 // tp) * 256 * 2
    eight = P.vllm_hybrid_pages(big, tensor_parallel=8)
    assert eight.block_size == 400 and eight.state_bytes() > one.state_bytes()  # 4 KV heads on 8 ranks: replicated
    with pytest.raises(ValueError, match=r"tensor_parallel=3 must divide the convolution's channels \(10240\)"):
        P.vllm_hybrid_pages(big, tensor_parallel=3)


def test_vllm_hybrid_pages_refuses_what_it_does_not_lay_out() -> None:
    from mlbook.analysis.model_config import load_config

    with pytest.raises(ValueError, match=r"full-attention and Gated DeltaNet layers only; this config has "
                                         r"\['full_attention'\]"):
        P.vllm_hybrid_pages(load_config("llama-3.1-8b"))
    big = load_config("qwen3.5-27b")
    with pytest.raises(ValueError, match="prefill_checkpoint_blocks=1 counts in mamba_cache_mode 'align' only"):
        P.vllm_hybrid_pages(big, mamba_cache_mode="none", prefill_checkpoint_blocks=1)
    assert P.vllm_hybrid_pages(big, prefill_checkpoint_blocks=1).state_blocks == 3
    with pytest.raises(ValueError, match="size the 'all' mode only"):
        P.vllm_hybrid_pages(big, max_model_len=4096)
    with pytest.raises(ValueError, match="tensor_parallel must be"):
        P.vllm_hybrid_pages(big, tensor_parallel=0)
    every = P.vllm_hybrid_pages(big, 1, mamba_cache_mode="all", max_model_len=8192, mamba_block_size=1024)
    assert every.block_size == 1024 and every.state_blocks == 8 + 1  # ceil(8192 / 1024) + n


def test_a_serving_engine_plans_within_its_share_of_the_device() -> None:
    """vLLM plans within gpu_memory_utilization (0.92 by default) of the device: 76.55 GiB fits on the whole of
    either card and within 0.92 of neither (73.60 and 73.28 GiB at most)."""
    fit = P.device_fit({"cache": 64 * 2**30, "weights": 12.55 * 2**30}, devices=P.ACCELERATOR_BYTES,
                       utilization=P.VLLM_GPU_MEMORY_UTILIZATION)
    assert fit.headroom_on("A100 80GB") > 0 and fit.headroom_on("H100 80GB") > 0
    assert fit.headroom_within("A100 80GB") == pytest.approx(0.92 * 80 * 2**30 - fit.total)
    assert fit.headroom_within("H100 80GB") < fit.headroom_within("A100 80GB") < 0
    assert "within 0.92 of an H100 80GB (at most 73.28 GiB): over by" in repr(fit)
    with pytest.raises(ValueError, match="headroom_within needs the fit's utilization"):
        P.device_fit({"cache": 1}, devices=P.ACCELERATOR_BYTES).headroom_within("H100 80GB")
    with pytest.raises(ValueError, match="utilization must be a share of the devices"):
        P.device_fit({"cache": 1}, devices=P.ACCELERATOR_BYTES, utilization=1.5)
    with pytest.raises(ValueError, match="utilization must be a share of the devices"):
        P.device_fit({"cache": 1}, utilization=0.9)


def test_a_config_that_leaves_fields_to_its_class_is_refused_by_name() -> None:
    """Google's published gemma-3-4b-it config.json states no heads (Gemma3TextConfig fills 8): the calculator
    names the field instead of failing on a None; GPT-J's own spellings (n_head, n_layer) are read."""
    from mlbook.analysis.model_config import load_config
    from mlbook.analysis.production import config_kv_heads, config_kv_plan

    with pytest.raises(ValueError, match="states no num_attention_heads"):
        config_kv_plan(load_config("gemma-3-4b-it"))
    gptj = {"model_type": "gptj", "n_head": 16, "n_layer": 28, "n_embd": 4096, "n_positions": 2048, "rotary_dim": 64}
    assert config_kv_heads(gptj) == 16


def test_vllm_keeps_a_gated_deltanet_state_in_the_dtype_its_default_picks() -> None:
    """vLLM's mamba_ssm_cache_dtype 'auto': Qwen3.5's config class copies mamba_ssm_dtype (float32); Qwen3-Next's
    config sets none, so the state is in the model's dtype (bf16). vllm_hybrid_pages reads that by default."""
    from mlbook.analysis.model_config import load_config
    from mlbook.analysis.production import vllm_hybrid_pages, vllm_state_bytes_per_value

    qwen35 = load_config("qwen3.5-27b")
    assert vllm_state_bytes_per_value(qwen35) == 4.0
    assert vllm_hybrid_pages(qwen35).block_size == 784
    assert vllm_state_bytes_per_value({"model_type": "qwen3_next", "torch_dtype": "bfloat16"}) == 2.0
    assert vllm_state_bytes_per_value({"model_type": "qwen3_next", "torch_dtype": "bfloat16",
                                       "mamba_ssm_dtype": "float32"}) == 2.0  # vLLM's Qwen3-Next class ignores it
    with pytest.raises(ValueError, match="states no dtype"):
        vllm_state_bytes_per_value({"model_type": "qwen3_next"})


def test_values_of_their_own_width_are_refused_not_overcounted() -> None:
    from mlbook.analysis.production import config_kv_plan

    mimo_like = {"model_type": "llama", "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 4,
                 "hidden_size": 1536, "head_dim": 192, "v_head_dim": 128, "max_position_embeddings": 4096}
    with pytest.raises(ValueError, match="v_head_dim=128"):
        config_kv_plan(mimo_like)
