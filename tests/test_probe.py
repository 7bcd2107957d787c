"""Tests for mlbook.analysis.probe and mlbook.viz.probe, on the tiny random Llama (nothing downloaded).

Oracles: Hugging Face's own rotated q and k (the library must reproduce them, and must fail to when
the pairing or the base is wrong), its attention weights (output_attentions), its loss (labels=),
the complex-number view of a pair for the pair norms. A real model asked for where there is no
GPU or no network fails with a message naming what was asked, what is missing and the way out.
"""

from __future__ import annotations

import json

import numpy as np
import plotly.graph_objects as go
import pytest
import torch

transformers = pytest.importorskip("transformers")

from hf_versions import hf4_only, rope_init_function, rope_theta  # noqa: E402
from mlbook.analysis import probe as P  # noqa: E402
from mlbook.analysis.rope import as_complex  # noqa: E402
from mlbook.transformer.positional import RotaryEmbedding  # noqa: E402

pytestmark = pytest.mark.oracle

T_CAPTURE = 96


@pytest.fixture(scope="module")
def tiny() -> P.ProbeModel:
    return P.load_probe_model(P.TINY_RANDOM)


@pytest.fixture(scope="module")
def ids(tiny: P.ProbeModel) -> torch.Tensor:
    return P.encode_text(P.library_text(), None, vocab_size=tiny.config.vocab_size, max_tokens=4 * 64 + 1)


@pytest.fixture(scope="module")
def capture(tiny: P.ProbeModel, ids: torch.Tensor) -> P.RotaryCapture:
    return P.capture_rotary(tiny.model, ids[:, :T_CAPTURE])


# ---------------------------------------------------------------------------
# Choosing and loading the model
# ---------------------------------------------------------------------------


def test_model_name_env_then_static_then_requested(monkeypatch):
    monkeypatch.delenv(P.PROBE_MODEL_ENV, raising=False)
    monkeypatch.delenv("MLBOOK_STATIC", raising=False)
    assert P.probe_model_name("Qwen/Qwen2.5-0.5B") == "Qwen/Qwen2.5-0.5B"
    monkeypatch.setenv("MLBOOK_STATIC", "1")
    assert P.probe_model_name("Qwen/Qwen2.5-0.5B") == P.TINY_RANDOM  # the site build downloads nothing
    monkeypatch.setenv(P.PROBE_MODEL_ENV, "some/model")
    assert P.probe_model_name("Qwen/Qwen2.5-0.5B") == "some/model"
    with pytest.raises(ValueError, match="model name"):
        P.probe_model_name("  ")


def test_real_model_without_gpu_fails_loudly(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(P.ProbeUnavailable) as info:
        P.load_probe_model(P.DEFAULT_MODEL)
    msg = str(info.value)
    assert P.DEFAULT_MODEL in msg and "no CUDA GPU" in msg  # what was asked, what is missing
    assert f"MODEL_NAME = {P.TINY_RANDOM!r}" in msg and f"{P.PROBE_MODEL_ENV}={P.TINY_RANDOM}" in msg  # the way out


def test_real_model_offline_fails_loudly_under_any_transformers(monkeypatch):
    """Offline as the Hub client reads it (HF_HUB_OFFLINE, checked at call time in transformers 5): the clear
    ProbeUnavailable, at once, not a retry loop."""
    import time

    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    name = "mlbook-tests/no-such-model-anywhere"
    start = time.perf_counter()
    with pytest.raises(P.ProbeUnavailable) as info:
        P.load_probe_model(name, device="cpu")
    assert time.perf_counter() - start < 30
    assert name in str(info.value) and P.TINY_RANDOM in str(info.value)


@hf4_only("transformers.utils.hub._is_offline_mode, which transformers 5 removed")
def test_real_model_without_network_fails_loudly(monkeypatch):
    import huggingface_hub.constants
    import transformers.utils.hub

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(transformers.utils.hub, "_is_offline_mode", True)
    name = "mlbook-tests/no-such-model-anywhere"
    with pytest.raises(P.ProbeUnavailable) as info:
        P.load_probe_model(name, device="cpu")
    msg = str(info.value)
    assert name in msg and "no network" in msg and P.TINY_RANDOM in msg


def test_tiny_model_is_a_rope_llama_built_here(tiny):
    assert type(tiny.model).__name__ == "LlamaForCausalLM" and tiny.tokenizer is None and tiny.is_tiny_random
    assert "tiny random" in tiny.label
    again = P.load_probe_model(P.TINY_RANDOM)
    for a, b in zip(tiny.model.parameters(), again.model.parameters()):
        assert torch.equal(a, b)  # seeded: the same figures every build


def test_encode_text_bytes_and_limits():
    ids = P.encode_text("héllo", None, vocab_size=256, max_tokens=4)
    assert ids.tolist() == [list("héllo".encode("utf-8"))[:4]]
    with pytest.raises(ValueError, match="non-empty"):
        P.encode_text("", None, vocab_size=256, max_tokens=4)
    assert len(P.library_text()) > 100_000  # enough text to go past any trained length the page uses


# ---------------------------------------------------------------------------
# Positional settings
# ---------------------------------------------------------------------------


def test_positional_settings_read_from_config(tiny):
    s = P.positional_settings(tiny.config)
    cfg = tiny.config
    assert (s.n_layers, s.n_heads, s.n_kv_heads, s.d_head) == (cfg.num_hidden_layers, cfg.num_attention_heads,
                                                              cfg.num_key_value_heads, cfg.head_dim)
    assert s.rope_theta == rope_theta(cfg) and s.trained_len == cfg.max_position_embeddings
    hf_inv_freq = tiny.model.model.rotary_emb.inv_freq.double()  # Hugging Face's own frequencies
    np.testing.assert_allclose(s.wavelengths, (2 * np.pi / hf_inv_freq).numpy(), rtol=1e-6)
    assert any("rope_theta" in line for line in s.lines())


def test_trained_length_prefers_original(tiny):
    cfg = tiny.config.__class__(**{**tiny.config.to_dict(), "max_position_embeddings": 256,
                                   "rope_scaling": {"rope_type": "yarn", "factor": 4.0,
                                                    "original_max_position_embeddings": 64}})
    assert P.trained_length(cfg) == 64


def test_rotary_from_config_refuses_keys_transformers_would_not_read(tiny):
    base = tiny.config.to_dict()
    for scaling in ({"rope_type": "linear", "factor": 2.0, "unknown_key": 1},
                    {"rope_type": "yarn", "factor": 4.0, "low_freq_factor": 1.0}):
        cfg = tiny.config.__class__(**{**base, "rope_scaling": scaling})
        with pytest.raises(ValueError, match="not read"):
            P.rotary_from_config(cfg)


# ---------------------------------------------------------------------------
# The rotation check: the library reproduces the model's rotated q and k
# ---------------------------------------------------------------------------


def test_capture_shapes(tiny, capture):
    cfg = tiny.config
    assert capture.n_layers == cfg.num_hidden_layers and capture.T == T_CAPTURE
    assert capture.q_pre[0].shape == (cfg.num_attention_heads, T_CAPTURE, cfg.head_dim)
    assert capture.k_post[0].shape == (cfg.num_key_value_heads, T_CAPTURE, cfg.head_dim)
    assert capture.first_key[0].shape == (cfg.num_attention_heads, T_CAPTURE)
    assert not torch.equal(capture.q_pre[0], capture.q_post[0])  # the model did rotate


def test_capture_restores_the_model(tiny, ids):
    import transformers.models.llama.modeling_llama as ml

    before = ml.apply_rotary_pos_emb
    impl = tiny.model.config._attn_implementation
    P.capture_rotary(tiny.model, ids[:, :16])
    assert ml.apply_rotary_pos_emb is before and tiny.model.config._attn_implementation == impl
    assert not any(m._forward_hooks or m._forward_pre_hooks for m in tiny.model.modules())


def test_library_rotation_reproduces_the_model(tiny, capture):
    check = P.rotation_check(capture, P.rotary_from_config(tiny.config))
    assert check.relative_error < 1e-5, check


def test_rotation_check_fails_when_pairing_is_wrong(tiny, capture):
    pc = P.pairing_check(capture, tiny.config)
    assert pc.right.relative_error < 1e-5
    assert pc.wrong.relative_error > 0.1 and (pc.wrong.error_q > 1e3 * pc.right.error_q.max()).all()
    assert pc.converted.relative_error < 1e-5  # same weights, channels moved: the same model


def test_rotation_check_fails_when_base_is_wrong(tiny, capture):
    wrong = RotaryEmbedding(tiny.config.head_dim, 500.0)
    assert P.rotation_check(capture, wrong).relative_error > 0.1


@pytest.mark.parametrize("scaling", [
    {"rope_type": "linear", "factor": 2.0},
    {"rope_type": "dynamic", "factor": 2.0},
    {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64},
    {"rope_type": "yarn", "factor": 4.0, "beta_fast": 16.0, "beta_slow": 2.0},
    {"rope_type": "yarn", "factor": 4.0, "mscale": 1.0, "mscale_all_dim": 0.5, "truncate": False},
    {"rope_type": "yarn", "factor": 4.0, "attention_factor": 1.3},
    {"rope_type": "llama3", "factor": 8.0, "original_max_position_embeddings": 64, "low_freq_factor": 1.0,
     "high_freq_factor": 4.0},
    {"rope_type": "longrope", "factor": 2.0, "short_factor": [1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7],
     "long_factor": [1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5]},
])
def test_scaled_rotation_reproduced_under_override(tiny, ids, scaling):
    # 128 tokens: past the trained 64, where dynamic scaling changes the frequencies
    with P.rope_override(tiny.model, scaling) as cfg:
        cap = P.capture_rotary(tiny.model, ids[:, :128])
    unscaled = P.rotation_check(cap, RotaryEmbedding(tiny.config.head_dim, rope_theta(tiny.config)))
    assert unscaled.relative_error > 1e-3  # the override did change the model's rotation
    assert P.rotation_check(cap, P.rotary_from_config(cfg)).relative_error < 1e-5


@hf4_only("config.rope_scaling is None for plain RoPE in 4.x; 5 gives the rope_parameters dict")
def test_rope_override_restores_on_error(tiny):
    before = tiny.model.model.rotary_emb
    with pytest.raises(RuntimeError, match="boom"):
        with P.rope_override(tiny.model, {"rope_type": "linear", "factor": 2.0}):
            assert tiny.model.model.rotary_emb is not before
            raise RuntimeError("boom")
    assert tiny.model.model.rotary_emb is before and tiny.model.config.rope_scaling is None
    with pytest.raises(ValueError, match="rope_scaling type 'nonsense'"):
        with P.rope_override(tiny.model, {"rope_type": "nonsense", "factor": 2.0}):
            pass


# ---------------------------------------------------------------------------
# Sink mass, pair norms, loss by position
# ---------------------------------------------------------------------------


def test_sink_mass_is_hf_attention_on_first_token(tiny, ids, capture):
    with torch.no_grad():
        tiny.model.set_attn_implementation("eager")
        try:
            out = tiny.model(ids[:, :T_CAPTURE], output_attentions=True)
        finally:
            tiny.model.set_attn_implementation("sdpa")
    sink = P.sink_mass(capture, q_start=10)
    expected = np.stack([a[0, :, 10:, 0].mean(-1).numpy() for a in out.attentions])  # (L, H)
    np.testing.assert_allclose(sink.mass, expected, rtol=1e-5)
    assert sink.uniform == pytest.approx(np.mean([1 / (i + 1) for i in range(10, T_CAPTURE)]))


def test_sink_mass_of_uniform_attention_is_the_baseline(ids):
    flat = P.load_probe_model(P.TINY_RANDOM)
    with torch.no_grad():
        for layer in flat.model.model.layers:
            layer.self_attn.q_proj.weight.zero_()  # every score 0: softmax spreads evenly over the keys
    sink = P.sink_mass(P.capture_rotary(flat.model, ids[:, :64]))
    np.testing.assert_allclose(sink.ratio, 1.0, rtol=1e-5)


def test_pair_norms_match_complex_view_and_ignore_rotation(tiny, capture):
    norms = P.pair_norms(capture, tiny.config)
    cfg = tiny.config
    assert norms.q.shape == (cfg.num_hidden_layers, cfg.num_attention_heads, cfg.head_dim // 2)
    expected = np.stack([as_complex(q.double(), "half").abs().mean(-2).numpy() for q in capture.q_pre])
    np.testing.assert_allclose(norms.q, expected, rtol=1e-10)
    rotated = np.stack([as_complex(q.double(), "half").abs().mean(-2).numpy() for q in capture.q_post])
    np.testing.assert_allclose(norms.q, rotated, rtol=1e-4)  # a rotation keeps each pair's norm
    assert norms.mean_k.shape == (cfg.head_dim // 2,) and np.all(np.diff(norms.wavelengths) > 0)


def test_loss_by_position_matches_hf_loss(tiny, ids):
    T = 4 * 64 + 1  # 256 predictions: 8 windows of 32
    with torch.no_grad():
        hf = tiny.model(ids[:, :T], labels=ids[:, :T]).loss.item()
    pl = P.loss_by_position(tiny.model, ids[:, :T], 32, chunk=50)
    assert pl.starts.tolist() == list(range(0, 256, 32)) and pl.trained_len == 64
    assert pl.loss.mean() == pytest.approx(hf, rel=1e-5)
    with pytest.raises(ValueError, match="tokens"):
        P.loss_by_position(tiny.model, ids[:, :10], 32)


def test_scaling_override_changes_the_loss(tiny, ids):
    with P.rope_override(tiny.model, {"rope_type": "linear", "factor": 4.0}):
        scaled = P.loss_by_position(tiny.model, ids, 64, label="linear 4")
    plain = P.loss_by_position(tiny.model, ids, 64)
    assert not np.allclose(scaled.loss, plain.loss, rtol=0, atol=1e-7)


YARN_2 = {"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 64}
DYNAMIC_2 = {"rope_type": "dynamic", "factor": 2.0}


@pytest.mark.parametrize("scaling", [{"rope_type": "linear", "factor": 1.0},
                                     {"rope_type": "yarn", "factor": 1.0, "original_max_position_embeddings": 64}])
def test_rope_override_refuses_an_override_that_changes_nothing(tiny, scaling):
    before = tiny.model.get_decoder().rotary_emb
    with pytest.raises(ValueError, match="change nothing"):
        with P.rope_override(tiny.model, scaling):
            pass
    assert tiny.model.get_decoder().rotary_emb is before


def test_override_effect_is_the_change_in_hf_logits_and_frequencies(tiny, ids):
    x = ids[:, :129]
    with torch.no_grad():
        shipped = tiny.model(x).logits[0]  # (T, vocab) transformers' own forward, output head included
        with P.rope_override(tiny.model, YARN_2) as cfg:
            scaled = tiny.model(x).logits[0]
    effect = P.override_effect(tiny.model, x, YARN_2, label="YaRN 2", chunk=50)
    assert effect.took_effect and effect.T == 129 and effect.rescale_above is None
    assert effect.max_logit_change == pytest.approx((scaled - shipped).abs().max().item(), rel=1e-5)
    assert effect.logit_scale == pytest.approx(shipped.abs().max().item(), rel=1e-6)
    inv_yarn, attention = rope_init_function("yarn")(cfg, "cpu")  # transformers' YaRN frequencies and factor
    inv_plain, _ = rope_init_function("default")(tiny.config, "cpu")
    np.testing.assert_allclose(effect.divisor, (inv_plain / inv_yarn).double().numpy(), rtol=1e-6)
    assert effect.attention_scaling == pytest.approx(attention) and effect.shipped_attention_scaling == 1.0
    assert "YaRN 2" in effect.line() and "x 1.069" in effect.line()
    with pytest.raises(ValueError, match="override"):
        P.override_effect(tiny.model, x, None)
    with pytest.raises(ValueError, match=r"\(1, T\)"):
        P.override_effect(tiny.model, x[0], YARN_2)


def test_dynamic_ntk_changes_nothing_until_the_pass_passes_max_position_embeddings(tiny, ids):
    # transformers' dynamic_rope_update rescales once max(position_ids) + 1 > max_position_embeddings (64 here)
    below = P.override_effect(tiny.model, ids[:, :64], DYNAMIC_2)
    assert not below.took_effect and below.max_logit_change == 0.0 and below.max_cos_sin_change == 0.0
    np.testing.assert_array_equal(below.divisor, 1.0)
    assert below.rescale_above == 64 and "changed nothing" in below.line() and "not above" in below.line()
    above = P.override_effect(tiny.model, ids[:, :65], DYNAMIC_2)
    assert above.took_effect and above.max_logit_change > 0.0 and "rescaled: 65 tokens" in above.line()
    # dynamic NTK (emozilla, 2023): base b (factor T / M - (factor - 1))^(d / (d - 2)), frequency b^(-2i/d), float64
    d, M, b = tiny.config.head_dim, 64, rope_theta(tiny.config)
    grown = b * (2.0 * 65 / M - 1.0) ** (d / (d - 2))
    i = np.arange(d // 2)
    np.testing.assert_allclose(above.divisor, (grown / b) ** (2 * i / d), rtol=1e-5)


def test_dynamic_ntk_with_a_kv_cache_is_not_one_pass_per_step(tiny, ids):
    # transformers caches keys after rotating them; under dynamic NTK each decoding step past
    # max_position_embeddings grows the base for the new query and key only (transformers#25104)
    def cached(prefill: int, T: int) -> torch.Tensor:
        with torch.no_grad():
            out, rows = tiny.model(ids[:, :prefill], use_cache=True), []
            for t in range(prefill, T):
                out = tiny.model(ids[:, t : t + 1], past_key_values=out.past_key_values, use_cache=True)
                rows.append(out.logits[0, -1])
        return torch.stack(rows)  # (T - prefill, vocab)

    def one_pass_each(prefill: int, T: int) -> torch.Tensor:  # lengths increase: each pass grows the base to its own
        with torch.no_grad():
            return torch.stack([tiny.model(ids[:, : t + 1]).logits[0, -1] for t in range(prefill, T)])

    gaps = {}
    for name, scaling in (("shipped", None), ("yarn", YARN_2), ("dynamic", DYNAMIC_2)):
        with P.rope_override(tiny.model, scaling):  # a fresh rotary module for each way of running
            a = cached(64, 96)
        with P.rope_override(tiny.model, scaling):
            b = one_pass_each(64, 96)
        gaps[name] = (a - b).abs().max().item()
    assert gaps["shipped"] < 1e-5 and gaps["yarn"] < 1e-5  # a static rotation: the cache changes nothing
    assert gaps["dynamic"] > 1e-4 and gaps["dynamic"] > 100 * max(gaps["shipped"], gaps["yarn"])


# ---------------------------------------------------------------------------
# Figures
# ---------------------------------------------------------------------------


def test_figures_build_label_and_serialise(tiny, ids, capture):
    from mlbook.viz import probe as V

    pc = P.pairing_check(capture, tiny.config)
    sink = P.sink_mass(capture)
    norms = P.pair_norms(capture, tiny.config)
    losses = [P.loss_by_position(tiny.model, ids, 64)]
    figs = [V.fig_rotation_check(pc, tiny.label), V.fig_sink_mass(sink, tiny.label),
            V.fig_pair_norms(norms, tiny.label), V.fig_position_loss(losses, tiny.label)]
    for fig in figs:
        assert tiny.label in fig.layout.title.text  # a figure of the tiny random model says so
        go.Figure(json.loads(fig.to_json()))
    rot = figs[0]
    assert np.all(np.asarray(rot.data[0].y) >= V.ERROR_FLOOR)  # rounding drawn at the floor, not at its CPU's digits
    np.testing.assert_allclose(np.asarray(rot.data[1].y), np.maximum(pc.wrong.error_q, pc.wrong.error_k) / pc.wrong.scale,
                               rtol=1e-12)
    np.testing.assert_allclose(np.asarray(figs[1].data[0].z), sink.mass, atol=5e-4)


def test_pair_norm_slider_frames_are_layers(tiny, capture):
    from figure_checks import _assert_distinct_frames
    from mlbook.viz import probe as V

    norms = P.pair_norms(capture, tiny.config)
    fig = V.fig_pair_norms(norms, tiny.label)
    _assert_distinct_frames(fig, tiny.config.num_hidden_layers + 1)
    frames = {f.name: f for f in fig.frames}
    np.testing.assert_allclose(np.asarray(frames["2"].data[0].y), norms.q[2].mean(0), atol=5e-4)
    with pytest.raises(ValueError, match="layer"):
        V.fig_pair_norms(norms, tiny.label, layer=99)
    with pytest.raises(ValueError, match="label"):
        V.fig_pair_norms(norms, "")


def test_a_config_whose_layer_types_rotate_differently_is_refused_not_misread() -> None:
    """Gemma 3's sliding layers rotate at base 10,000 unscaled, its global ones at 1,000,000 with linear 8: one
    RotaryEmbedding cannot reproduce both, and before, the probe reported the sliding layers as a porting bug.
    Without a layer type the config is refused; with one, that type's rotation is built."""
    from mlbook.analysis.model_config import load_config
    from mlbook.analysis.probe import rotary_from_config

    config = load_config("gemma-3-4b")
    with pytest.raises(ValueError, match="layer types rotate differently.*pass layer_type"):
        rotary_from_config(config)
    assert rotary_from_config(config, layer_type="sliding_attention").base == 10000.0
    assert rotary_from_config(config, layer_type="full_attention").base == 1000000.0
    assert rotary_from_config(load_config("gpt-oss-20b")).base == 150000.0  # two layer types, one rotation


# ---------------------------------------------------------------------------
# Other families: the checkpoint's own layout, layer types, partial rotary, sliding windows
# ---------------------------------------------------------------------------

_SMALL = dict(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=4, num_attention_heads=4,
              num_key_value_heads=2, max_position_embeddings=64)
_GEMMA3_TYPES = ["sliding_attention", "sliding_attention", "sliding_attention", "full_attention"]
_HF5 = int(transformers.__version__.split(".")[0]) >= 5
hf5_layer_types = pytest.mark.skipif(not _HF5, reason="per-layer-type rope_parameters (Gemma 3, Cohere 2, OLMo 3) is "
                                     "transformers 5's layout; 4.x's config classes read top-level rope_theta")


def _tiny(kind: str):
    """A tiny random model of another family, built from its transformers 5 config class (nothing downloaded)."""
    torch.manual_seed(0)
    if kind == "cohere":  # interleaved pairs (repeat_interleave of cos and sin)
        return transformers.CohereForCausalLM(transformers.CohereConfig(**_SMALL, pad_token_id=0, bos_token_id=1,
                                                                        eos_token_id=2)).eval()
    if kind == "helium":  # interleaved pairs, its own modeling file
        return transformers.HeliumForCausalLM(transformers.HeliumConfig(**_SMALL, head_dim=16)).eval()
    if kind == "gemma3":  # sliding layers at 10,000 unscaled, the global one at 1e6 with linear 8
        return transformers.Gemma3ForCausalLM(transformers.Gemma3TextConfig(
            **_SMALL, head_dim=16, sliding_window=16, layer_types=_GEMMA3_TYPES,
            rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                             "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6}})).eval()
    if kind == "stablelm":  # passes only its 4 rotated channels of 16 to apply_rotary_pos_emb
        return transformers.StableLmForCausalLM(transformers.StableLmConfig(
            **_SMALL, partial_rotary_factor=0.25, attn_implementation="eager")).eval()  # 4.x: class fixed when built
    if kind == "phi":
        return transformers.PhiForCausalLM(transformers.PhiConfig(**_SMALL, partial_rotary_factor=0.5,
                                                                   attn_implementation="eager")).eval()
    ids = dict(pad_token_id=0, bos_token_id=1, eos_token_id=2)
    if kind == "phi3":  # one fused qkv_proj, no q_proj or k_proj
        return transformers.Phi3ForCausalLM(transformers.Phi3Config(**_SMALL, partial_rotary_factor=0.75, **ids)).eval()
    if kind == "gpt_neox":  # fused query_key_value; rotates the first rotary_pct of each head inside apply_rotary_pos_emb
        return transformers.GPTNeoXForCausalLM(transformers.GPTNeoXConfig(
            vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=4, num_attention_heads=4,
            max_position_embeddings=64, rotary_pct=0.25)).eval()
    if kind == "falcon":  # returns its attention weights only when asked; eager from the start (it cannot switch)
        return transformers.FalconForCausalLM(transformers.FalconConfig(
            vocab_size=256, hidden_size=64, num_hidden_layers=4, num_attention_heads=4, new_decoder_architecture=True,
            num_kv_heads=2, max_position_embeddings=64, attn_implementation="eager")).eval()
    if kind == "smollm3":  # every fourth layer NoPE
        return transformers.SmolLM3ForCausalLM(transformers.SmolLM3Config(**_SMALL, head_dim=16,
                                                                          no_rope_layer_interval=4, **ids)).eval()
    if kind == "cohere2":  # sliding layers rotate (interleaved), global layers NoPE
        return transformers.Cohere2ForCausalLM(transformers.Cohere2Config(
            **_SMALL, head_dim=16, sliding_window=16, layer_types=["sliding_attention", "full_attention"] * 2,
            **ids)).eval()
    if kind == "olmo3":  # transformers 5 keeps its RoPE per layer type, the types agreeing
        return transformers.Olmo3ForCausalLM(transformers.Olmo3Config(**_SMALL, sliding_window=16, **ids)).eval()
    raise AssertionError(kind)


@pytest.mark.parametrize("kind, own", [("cohere", "interleaved"), ("helium", "interleaved"),
                                       pytest.param("gemma3", "half", marks=hf5_layer_types),
                                       ("stablelm", "half"), ("phi", "half")])
def test_pairing_check_names_the_checkpoints_own_layout_as_the_models(kind, own, ids):
    """Cohere and Helium rotate interleaved pairs: the check must call that layout the model's and rotate_half's
    the porting bug, not the other way round; Gemma 3 is checked layer by layer with each type's own rotation."""
    model = _tiny(kind)
    check = P.pairing_check(P.capture_rotary(model, ids[:, :T_CAPTURE]), model.config)
    assert check.model_pairing == own and check.right.pairing == own
    assert check.other_pairing == ("half" if own == "interleaved" else "interleaved")
    assert check.right.within_rounding and check.converted.within_rounding
    assert check.wrong.relative_error > 0.1 and not check.wrong.within_rounding
    assert check.right.reading().startswith("rounding")


def test_partial_rotary_models_are_compared_on_the_channels_they_rotate(ids):
    """StableLM and Phi hand apply_rotary_pos_emb only their r rotated channels: the capture holds r channels and
    the library's rotation of a head's first r channels must equal the model's exactly there."""
    for kind, r in (("stablelm", 4), ("phi", 8)):
        model = _tiny(kind)
        capture = P.capture_rotary(model, ids[:, :T_CAPTURE])
        assert capture.q_pre[0].shape[-1] == r
        assert P.rotation_check(capture, P.rotary_from_config(model.config)).within_rounding
        assert P.pair_norms(capture, model.config).q.shape[-1] == r // 2


@hf5_layer_types
def test_gemma3_loss_by_position_runs_and_equals_hf_loss(ids):
    """transformers 5's Gemma 3 rotary module keeps one inv_freq per layer type, no `inv_freq`: the loss must not
    depend on it, and must equal the model's own loss."""
    model = _tiny("gemma3")
    T = 2 * 64 + 1
    with torch.no_grad():
        hf = model(ids[:, :T], labels=ids[:, :T]).loss.item()
    assert P.loss_by_position(model, ids[:, :T], 32).loss.mean() == pytest.approx(hf, rel=1e-5)
    with pytest.raises(ValueError, match="layer types rotate differently"):
        with P.rope_override(model, {"rope_type": "linear", "factor": 2.0}):
            pass


@hf5_layer_types
def test_sink_baseline_of_a_sliding_layer_counts_only_the_keys_in_its_window(ids):
    """A sliding layer of window w: query i sees keys max(0, i - w + 1)..i, so under uniform attention key 0 gets
    1/(i + 1) while i < w and nothing after; full layers keep 1/(i + 1)."""
    model = _tiny("gemma3")
    capture = P.capture_rotary(model, ids[:, :T_CAPTURE])
    assert capture.windows == (16, 16, 16, None)
    sink = P.sink_mass(capture, q_start=8)
    shares = [1 / (i + 1) if i < 16 else 0.0 for i in range(8, T_CAPTURE)]
    np.testing.assert_allclose(sink.baseline[:3], np.mean(shares))
    assert sink.baseline[3] == pytest.approx(np.mean([1 / (i + 1) for i in range(8, T_CAPTURE)]))
    with torch.no_grad():  # the mass itself is the model's own attention on key 0
        model.set_attn_implementation("eager")
        out = model(ids[:, :T_CAPTURE], output_attentions=True)
    np.testing.assert_allclose(sink.mass, np.stack([a[0, :, 8:, 0].mean(-1).numpy() for a in out.attentions]),
                               rtol=1e-5)
    assert "window of 16 keys" in sink.summary()


def test_rounding_bound_is_the_stated_formula_and_holds_at_long_lengths(tiny, ids):
    assert P.rounding_bound(512, 1.0) == pytest.approx(2.0**-21 * 512)
    assert P.rounding_bound(1, 1.0) == pytest.approx(2.0**-21)
    capture = P.capture_rotary(tiny.model, ids)  # 257 positions: the fastest pair turns 256 rad
    check = P.rotation_check(capture, P.rotary_from_config(tiny.config))
    assert check.bound == pytest.approx(P.rounding_bound(capture.T, 1.0))
    assert check.relative_error <= check.bound
    for bad, error in ((0, ValueError), (1.5, TypeError)):
        with pytest.raises(error, match="T must"):
            P.rounding_bound(bad, 1.0)
    for bad, error in ((float("nan"), ValueError), ("1", TypeError), (0.0, ValueError)):
        with pytest.raises(error, match="max_inv_freq"):
            P.rounding_bound(10, bad)


def test_an_mrope_default_dict_is_not_a_scaling():
    from mlbook.analysis.model_config import load_config

    settings = P.positional_settings(load_config("qwen3.5-27b"))  # default RoPE with mrope_section beside it
    assert settings.rope_scaling is None
    assert settings.partial_rotary_factor == 0.25 and settings.rope_theta == 1e7


@pytest.mark.parametrize("call, match", [
    (lambda: P.trained_length("HuggingFaceTB/SmolLM2-135M"), "load it first"),
    (lambda: P.trained_length(None), "config must be"),
    (lambda: P.positional_settings(3), "config must be"),
    (lambda: P.trained_length({}), "max_position_embeddings"),
    (lambda: P.load_probe_model(P.TINY_RANDOM, device="gpu"), "unknown device 'gpu'"),
    (lambda: P.load_probe_model(P.TINY_RANDOM, dtype=torch.int32), "floating-point torch.dtype"),
    (lambda: P.load_probe_model(P.TINY_RANDOM, dtype="float32"), "floating-point torch.dtype"),
    (lambda: P.load_probe_model(P.TINY_RANDOM, seed=1.5), "seed must be an int"),
    (lambda: P.load_probe_model(P.TINY_RANDOM, seed=-1), "seed must be >= 0"),
    (lambda: P.load_probe_model(P.TINY_RANDOM, attn_implementation="flash"), "attn_implementation"),
])
def test_probe_bad_input_is_refused_by_name(call, match):
    with pytest.raises((TypeError, ValueError), match=match):
        call()


def test_cuda_asked_for_where_there_is_none_is_refused(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ValueError, match="device 'cuda' was asked for"):
        P.load_probe_model(P.TINY_RANDOM, device="cuda")


@pytest.mark.parametrize("factors, error, match", [
    ([1.0] * 3, ValueError, "has 3 entries; LongRoPE needs one per rotated frequency pair, r/2 = 8"),
    ({1: 2.0}, TypeError, "must be a list of positive numbers"),
    ([1.0] * 7 + [float("nan")], TypeError, "must be a list of positive numbers"),
])
def test_longrope_factor_lists_are_checked_before_the_pass(tiny, factors, error, match):
    scaling = {"rope_type": "longrope", "short_factor": factors, "long_factor": [1.0] * 8,
               "original_max_position_embeddings": 32}
    with pytest.raises(error, match=match):
        with P.rope_override(tiny.model, scaling):
            pass



@pytest.mark.skipif(not _HF5, reason="transformers 5 builds sdpa's boolean mask, which Falcon's eager branch adds; "
                    "4.x's fallback masks correctly, so there is nothing to refuse")
def test_attention_that_does_not_mask_later_keys_is_refused(ids):
    """Falcon cannot switch attention after it is built: loaded with sdpa, its eager branch adds sdpa's boolean
    mask (True = 1.0) and masks nothing, so a third of each row's weight lands on later keys. The capture must
    refuse that rather than report a sink measured on non-causal attention."""
    torch.manual_seed(0)
    sdpa = transformers.FalconForCausalLM(transformers.FalconConfig(
        vocab_size=256, hidden_size=64, num_hidden_layers=4, num_attention_heads=4, new_decoder_architecture=True,
        num_kv_heads=2, max_position_embeddings=64, attn_implementation="sdpa")).eval()
    with pytest.raises(ValueError, match="on later keys.*attn_implementation='eager'"):
        P.capture_rotary(sdpa, ids[:, :T_CAPTURE])


@pytest.mark.parametrize("kind", ["phi3", "gpt_neox", "falcon"])
def test_fused_qkv_families_are_captured_and_checked(kind, ids):
    """Phi-3, GPT-NeoX and Falcon project q, k and v in one matrix and still rotate through apply_rotary_pos_emb:
    the probe captures them, its rotation matches theirs, and the sink mass is the model's own attention."""
    model = _tiny(kind)
    capture = P.capture_rotary(model, ids[:, :T_CAPTURE])
    check = P.pairing_check(capture, model.config)
    assert check.right.within_rounding and check.converted.within_rounding and check.wrong.relative_error > 0.1
    sink = P.sink_mass(capture, q_start=8)
    with torch.no_grad():
        model.set_attn_implementation("eager")
        out = model(ids[:, :T_CAPTURE], output_attentions=True)
    np.testing.assert_allclose(sink.mass, np.stack([a[0, :, 8:, 0].mean(-1).numpy() for a in out.attentions]),
                               rtol=1e-5)


@pytest.mark.parametrize("kind, nope", [("smollm3", (3,)), pytest.param("cohere2", (1, 3), marks=hf5_layer_types)])
def test_nope_layers_are_left_out_and_named_not_refused(kind, nope, ids):
    """SmolLM3's every fourth layer and Cohere 2's global layers do not rotate: the capture lists them in
    nope_layers, and every check, figure and label uses the model's own index of the layers that do."""
    from mlbook.viz import probe as V

    model = _tiny(kind)
    capture = P.capture_rotary(model, ids[:, :T_CAPTURE])
    assert capture.nope_layers == nope
    rotating = tuple(i for i in range(4) if i not in nope)
    assert capture.layers == rotating and capture.n_layers == len(rotating)
    check = P.pairing_check(capture, model.config)
    assert check.right.within_rounding and check.right.layers == rotating
    norms = P.pair_norms(capture, model.config)
    fig = V.fig_rotation_check(check, "tiny")
    assert list(fig.data[0].x) == list(rotating)
    assert [f.name for f in V.fig_pair_norms(norms, "tiny").frames] == ["all", *map(str, rotating)]
    sink = P.sink_mass(capture)  # NoPE layers' attention is the model's too: every layer, in the model's order
    assert sink.layers == (0, 1, 2, 3) and list(V.fig_sink_mass(sink, "tiny").data[0].y) == [0, 1, 2, 3]
    with torch.no_grad():
        model.set_attn_implementation("eager")
        out = model(ids[:, :T_CAPTURE], output_attentions=True)
    q0 = max(1, T_CAPTURE // 8)
    np.testing.assert_allclose(sink.mass, np.stack([a[0, :, q0:, 0].mean(-1).numpy() for a in out.attentions]),
                               rtol=1e-5)


@hf5_layer_types
def test_override_refusal_names_what_an_override_cannot_carry():
    from transformers import Qwen3VLTextConfig

    olmo3 = _tiny("olmo3")
    assert "keeps its RoPE per layer type" in P.override_refusal(olmo3.config)
    with pytest.raises(ValueError, match="keeps its RoPE per layer type"):
        with P.rope_override(olmo3, {"rope_type": "linear", "factor": 2.0}):
            pass
    assert "layer types rotate differently" in P.override_refusal(_tiny("gemma3").config)
    mrope = Qwen3VLTextConfig(rope_parameters={"rope_type": "default", "rope_theta": 5e6,
                                               "mrope_section": [24, 20, 20], "mrope_interleaved": True})
    assert "M-RoPE keys ['mrope_interleaved', 'mrope_section']" in P.override_refusal(mrope)
    assert P.override_refusal(P.tiny_random_config()) is None


def test_the_tiny_models_name_misspelled_is_refused_before_any_download():
    with pytest.raises(ValueError, match="spelled 'tiny-random'"):
        P.load_probe_model("Tiny-Random")


@pytest.mark.parametrize("config, error", [({"max_position_embeddings": 0}, ValueError),
                                           ({"max_position_embeddings": True}, TypeError),
                                           ({"max_position_embeddings": "4096"}, TypeError),
                                           ({"max_position_embeddings": 64, "original_max_position_embeddings": 0.5},
                                            TypeError)])
def test_trained_length_refuses_lengths_that_are_not_positive_ints(config, error):
    with pytest.raises(error, match="max_position_embeddings must"):
        P.trained_length(config)


@pytest.mark.parametrize("dtype, below", [(torch.bfloat16, 0.05), (torch.float16, 0.01)])
def test_half_precision_keeps_float32_frequencies_and_reads_its_own_rounding(dtype, below, ids):
    """As from_pretrained(dtype=...) leaves a model: weights in half precision, inv_freq in float32. The check
    then reads the half precision's rounding (above the float32 bound, far below the wrong layout's O(1));
    rounding inv_freq itself to bfloat16 would put the angle out by ~1 rad by position 500."""
    probe = P.load_probe_model(P.TINY_RANDOM, dtype=dtype)
    assert probe.model.model.rotary_emb.inv_freq.dtype == torch.float32
    assert next(probe.model.parameters()).dtype == dtype
    check = P.pairing_check(P.capture_rotary(probe.model, ids[:, :T_CAPTURE]), probe.config)
    assert check.right.bound < check.right.relative_error < below < check.wrong.relative_error


def test_the_tiny_model_loads_eager_when_asked(ids):
    probe = P.load_probe_model(P.TINY_RANDOM, attn_implementation="eager")
    assert probe.model.config._attn_implementation == "eager"
    assert P.pairing_check(P.capture_rotary(probe.model, ids[:, :T_CAPTURE]), probe.config).right.within_rounding
