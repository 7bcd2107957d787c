"""Which channels a checkpoint rotates together, against transformers' own model code.

`hf_rope_pairing` says "interleaved" for DeepSeek-V3 (its rope_interleave, True by default) and Llama 4
(complex multiplication), "half" for Llama; `rope_options_from_hf` prints it. The oracle: the library's
rotation at that pairing gives the attention scores q_m . k_n that transformers' own rotation function
gives the same q and k (the scores, because DeepSeek's function returns the channels reordered), and the
other pairing does not.
"""

from __future__ import annotations

import pytest
import torch

from mlbook.transformer.hf import hf_rope_pairing, rope_options_from_hf
from mlbook.transformer.positional import RotaryEmbedding, apply_rotary

transformers = pytest.importorskip("transformers")
pytestmark = pytest.mark.oracle

T, H, D = 12, 2, 16  # positions, heads, rotary width


def _qk() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return torch.randn(1, H, T, D, generator=g), torch.randn(1, H, T, D, generator=g)


def _ours(q: torch.Tensor, k: torch.Tensor, base: float, pairing: str) -> torch.Tensor:
    cos, sin = RotaryEmbedding(D, base, pairing=pairing)(T)
    return apply_rotary(q, cos, sin, pairing) @ apply_rotary(k, cos, sin, pairing).transpose(-1, -2)


def test_deepseek_v3_rotates_interleaved_pairs_unless_rope_interleave_is_false() -> None:
    from transformers.models.deepseek_v3 import modeling_deepseek_v3 as m

    base = 10000.0
    for stated, expect in ((None, "interleaved"), (True, "interleaved"), (False, "half")):
        config = {"model_type": "deepseek_v3", "num_hidden_layers": 2, "rope_theta": base}
        if stated is not None:
            config["rope_interleave"] = stated
        assert hf_rope_pairing(config) == expect
        assert rope_options_from_hf(config)["pairing"] == expect
    inv = 1.0 / base ** (torch.arange(0, D, 2).float() / D)
    freqs = torch.arange(T).float()[:, None] * inv[None, :]
    emb = torch.cat([freqs, freqs], dim=-1)
    cos, sin = emb.cos()[None], emb.sin()[None]
    q, k = _qk()
    qe, ke = m.apply_rotary_pos_emb_interleave(q, k, cos, sin)
    theirs = qe @ ke.transpose(-1, -2)
    assert torch.allclose(_ours(q, k, base, "interleaved"), theirs, atol=1e-5)
    assert not torch.allclose(_ours(q, k, base, "half"), theirs, atol=1e-2)  # the test can fail
    qh, kh = m.apply_rotary_pos_emb(q, k, cos, sin)  # rope_interleave False: rotate_half
    assert torch.allclose(_ours(q, k, base, "half"), qh @ kh.transpose(-1, -2), atol=1e-5)


def test_llama4_rotates_interleaved_pairs() -> None:
    from transformers.models.llama4 import modeling_llama4 as m

    base = 500000.0
    config = {"model_type": "llama4", "text_config": {"model_type": "llama4_text", "num_hidden_layers": 4,
                                                      "rope_theta": base, "no_rope_layers": [1, 1, 1, 1]}}
    assert hf_rope_pairing(config) == "interleaved"
    inv = 1.0 / base ** (torch.arange(0, D, 2).float() / D)
    freqs_cis = torch.polar(torch.ones(T, D // 2), torch.arange(T).float()[:, None] * inv[None, :])[None]
    q, k = _qk()
    # modeling_llama4 takes (batch, seq, heads, dim)
    qe, ke = m.apply_rotary_emb(q.transpose(1, 2), k.transpose(1, 2), freqs_cis)  # it adds the heads axis
    theirs = qe.transpose(1, 2) @ ke.transpose(1, 2).transpose(-1, -2)
    assert torch.allclose(_ours(q, k, base, "interleaved"), theirs, atol=1e-4)
    assert not torch.allclose(_ours(q, k, base, "half"), theirs, atol=1e-2)


def test_llama_rotates_half_pairs() -> None:
    config = {"model_type": "llama", "num_hidden_layers": 2, "rope_theta": 10000.0}
    assert hf_rope_pairing(config) == "half" and rope_options_from_hf(config)["pairing"] == "half"
    # an explicit pairing is the caller's, for weights permuted to it (gpt_from_hf_llama)
    assert rope_options_from_hf(config, "interleaved")["pairing"] == "interleaved"


@pytest.mark.parametrize("model_type, stated", [("llama", True), ("glm_moe_dsa", False), ("llama4_text", False)])
def test_rope_interleave_a_family_does_not_read_is_refused_where_it_contradicts_the_code(model_type, stated) -> None:
    config = {"model_type": model_type, "num_hidden_layers": 2, "rope_theta": 10000.0, "rope_interleave": stated}
    with pytest.raises(ValueError, match=rf"rope_interleave={stated}.*model_type='{model_type}' does not read it"):
        hf_rope_pairing(config)


def test_rope_interleave_must_be_a_bool() -> None:
    with pytest.raises((TypeError, ValueError), match="rope_interleave"):
        hf_rope_pairing({"model_type": "deepseek_v3", "num_hidden_layers": 2, "rope_interleave": "false"})


@pytest.mark.parametrize("config, expect", [
    ({"model_type": "kimi_k2", "architectures": ["DeepseekV3ForCausalLM"]}, "interleaved"),  # Kimi K2's published
    ({"model_type": "some_port", "architectures": ["DeepseekV3ForCausalLM"]}, "interleaved"),
    ({"model_type": "glm4v_text"}, "interleaved"), ({"model_type": "glm_ocr_text"}, "interleaved"),
    ({"model_type": "ernie4_5_vl_moe_text"}, "interleaved"), ({"model_type": "qwen3"}, "half"),
])
def test_families_found_by_name_or_architecture(config, expect) -> None:
    """Kimi K2's config names model_type kimi_k2 (unknown to transformers; its code is DeepSeek-V3's); a model type
    transformers does not know is read by its architecture; GLM-4.1V, GLM-OCR and ERNIE-4.5-VL interleave."""
    assert hf_rope_pairing({"num_hidden_layers": 2, "rope_theta": 10000.0, **config}) == expect


def test_kimi_k2_s_published_config_is_interleaved() -> None:
    import json
    import os
    from pathlib import Path

    path = Path(os.environ.get("MLBOOK_REALCONFIGS", Path(__file__).resolve().parents[2] / "shared" / "realconfigs"
                               / "configs")) / "kimi-k2-instruct.json"
    if not path.exists():
        pytest.skip(f"no published config at {path} (the corpus is outside the repository)")
    assert rope_options_from_hf(json.load(open(path)))["pairing"] == "interleaved"


# ---------------------------------------------------------------------------
# Every family in the pairing tables, against its own transformers model code
# ---------------------------------------------------------------------------

from mlbook.transformer.hf import (  # noqa: E402
    INTERLEAVED_PAIRING_FAMILIES,
    ROPE_INTERLEAVE_FAMILIES,
    hf_head_dim,
    hf_rope_base,
    hf_rotary_dim,
)

# half-pair families the tables must not list, among them the GLM ones that rotate halves (GLM-4.5/4.6: glm4_moe,
# GLM-4.5V: glm4v_moe_text, GLM-Image) and OLMo Hybrid
HALF_FAMILIES = ("llama", "qwen3", "glm4_moe", "glm4v_moe_text", "glm_image_text", "olmo_hybrid", "gpt_neox", "phi")
# Families in the tables whose rotary module this generic harness cannot call as their attention does (left to the
# hand-checked tests above and to the per-family reading in hf.py; a gap, named): M-RoPE text modules (their
# sections, sized by the config class for the real head, must be resized and fed three position rows), DeepSeek-V2's
# complex freqs_cis laid (batch, T, heads, dim) differently from Llama 4's, and latent-attention families whose
# tiny config the class rejects or builds at another width
NOT_DRIVEN: dict[str, str] = {
    **{m: "M-RoPE text rotary module (mrope_section sized for the real head)" for m in (
        "ernie4_5_vl_moe", "ernie4_5_vl_moe_text", "glm4v", "glm4v_text", "glm4v_moe_text", "glm_image_text", "glm_ocr",
        "glm_ocr_text")},
    "deepseek_v2": "complex freqs_cis in its own layout",
    **{m: "its tiny latent-attention config builds the rotary module at another width" for m in (
        "axk2", "deepseek_v32", "longcat_flash")},
}
# tiny sizes; latent-attention families get a decoupled rotary key of 16 channels
TINY = dict(vocab_size=32, hidden_size=64, intermediate_size=32, num_attention_heads=2, num_key_value_heads=2,
            num_hidden_layers=2, head_dim=32, max_position_embeddings=64)
LATENT = dict(qk_rope_head_dim=16, kv_lora_rank=16, qk_nope_head_dim=16, v_head_dim=16, q_lora_rank=16)


def _tiny_config(model_type: str, **extra):
    import importlib
    import logging

    from transformers import AutoConfig
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    logging.getLogger("transformers").setLevel(logging.ERROR)
    if model_type not in CONFIG_MAPPING_NAMES:
        pytest.skip(f"transformers {transformers.__version__} has no {model_type!r} model code (remote code only)")
    cls = transformers.models.auto.configuration_auto.CONFIG_MAPPING[model_type]
    import inspect

    # 5.x declares its fields as annotations, 4.x as __init__ arguments
    fields = {k for c in cls.__mro__ for k in getattr(c, "__annotations__", {})} | set(
        inspect.signature(cls.__init__).parameters)
    latent = "kv_lora_rank" in fields  # latent attention: the rotary key is qk_rope_head_dim wide (head_dim copies it)
    kwargs = {**({k: v for k, v in TINY.items() if k != "head_dim"} if latent else TINY), **(LATENT if latent else {}),
              **extra}
    cfg = AutoConfig.for_model(model_type, **kwargs)
    text = cfg.get_text_config()
    rope = getattr(text, "rope_parameters", None)
    if isinstance(rope, dict) and rope.get("mrope_section"):  # M-RoPE: sections sized to the tiny head's pairs
        pairs = hf_rotary_dim(text) // 2
        rope["mrope_section"] = [pairs - 2 * (pairs // 3), pairs // 3, pairs // 3]
    package = type(text).__module__.rsplit(".", 1)[0]
    module = importlib.import_module(f"{package}.modeling_{package.rsplit('.', 1)[1]}")
    return text, module


def _their_scores(text, module, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """q.k after the family's own rotary module and apply function, as its attention calls them."""
    names = [n for n in dir(module) if n.endswith("RotaryEmbedding") and "Vision" not in n and not n.startswith("_")]
    rotary = getattr(module, names[0])(text)
    T = q.shape[-2]
    x = torch.zeros(1, T, q.shape[-1])
    positions = torch.arange(T)[None]
    try:
        out = rotary(x, positions)
    except Exception:  # M-RoPE modules take (3, batch, T) position ids; text tokens: three equal rows
        out = rotary(x, positions[None].expand(3, 1, T))
    if not isinstance(out, tuple):  # Llama 4 and DeepSeek-V2: complex freqs_cis and (batch, T, heads, dim)
        apply = getattr(module, "apply_rotary_emb")
        qe, ke = apply(q.transpose(1, 2), k.transpose(1, 2), out)
        return qe.transpose(1, 2).float() @ ke.transpose(1, 2).float().transpose(-1, -2)
    cos, sin = out
    interleave = getattr(text, "rope_interleave", False) and hasattr(module, "apply_rotary_pos_emb_interleave")
    apply = module.apply_rotary_pos_emb_interleave if interleave or not hasattr(module, "apply_rotary_pos_emb") else (
        module.apply_rotary_pos_emb)
    c = cos.shape[-1]  # the rotary width the module built; some attentions slice q and k to it before applying
    qe, ke = apply(q[..., :c], k[..., :c], cos, sin)
    qe, ke = torch.cat([qe, q[..., c:]], dim=-1), torch.cat([ke, k[..., c:]], dim=-1)
    return qe @ ke.transpose(-1, -2)


def _our_scores(q: torch.Tensor, k: torch.Tensor, rotary: int, base: float, pairing: str) -> torch.Tensor:
    T = q.shape[-2]
    cos, sin = RotaryEmbedding(rotary, base, pairing=pairing)(T)

    def rot(x: torch.Tensor) -> torch.Tensor:
        return torch.cat([apply_rotary(x[..., :rotary], cos, sin, pairing), x[..., rotary:]], dim=-1)

    return rot(q) @ rot(k).transpose(-1, -2)


@pytest.mark.parametrize("model_type, extra", [
    *[(m, {}) for m in INTERLEAVED_PAIRING_FAMILIES + ROPE_INTERLEAVE_FAMILIES + HALF_FAMILIES],
    *[(m, {"rope_interleave": False}) for m in ROPE_INTERLEAVE_FAMILIES],
])
def test_the_pairing_tables_reproduce_each_family_s_own_rotation(model_type: str, extra: dict) -> None:
    """For each family in the tables (and half-pair families beside them), a tiny random config built by
    transformers: q and k rotated by the family's own rotary module and apply function give the scores the
    library's rotation gives at the pairing, rotary width and base it reads from the same config, and the other
    pairing does not."""
    if model_type == "kimi_k2":
        pytest.skip("kimi_k2 is not a transformers model type: its code is DeepSeek-V3's (deepseek_v3 is tested)")
    if model_type in NOT_DRIVEN:
        pytest.skip(f"this generic harness does not drive {model_type}'s rotary module: {NOT_DRIVEN[model_type]}")
    text, module = _tiny_config(model_type, **extra)
    try:
        pairing, rotary, base = hf_rope_pairing(text), hf_rotary_dim(text), hf_rope_base(text)
    except ValueError as err:  # a family the library refuses to read: not this test's subject
        pytest.skip(f"the library refuses this config: {err}")
    d = hf_head_dim(text)
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(1, 2, T, d, generator=g), torch.randn(1, 2, T, d, generator=g)
    theirs = _their_scores(text, module, q, k)
    assert torch.allclose(_our_scores(q, k, rotary, base, pairing), theirs, atol=1e-4), (pairing, rotary, base)
    other = "half" if pairing == "interleaved" else "interleaved"
    assert not torch.allclose(_our_scores(q, k, rotary, base, other), theirs, atol=1e-2)


@pytest.mark.parametrize("model_type", ["gptj", "codegen"])
def test_gptj_and_codegen_rotate_rotary_dim_in_adjacent_pairs(model_type: str) -> None:
    """GPT-J and CodeGen: the first rotary_dim channels of each head (a quarter of the head here, as GPT-J-6B's 64
    of 256) turn in adjacent pairs at base 10,000; checked against the model module's own create_sinusoidal_positions
    and apply_rotary_pos_emb, sliced as its attention slices them."""
    import importlib

    module = importlib.import_module(f"transformers.models.{model_type}.modeling_{model_type}")
    config = {"model_type": model_type, "n_embd": 128, "n_head": 2, "n_layer": 2, "rotary_dim": 16, "n_positions": 64}
    assert hf_rope_pairing(config) == "interleaved" and hf_rotary_dim(config) == 16 and hf_rope_base(config) == 1e4
    hf = transformers.AutoConfig.for_model(**config)
    assert hf_rotary_dim(hf) == 16 and hf_rope_pairing(hf) == "interleaved"
    g = torch.Generator().manual_seed(0)
    d = 64
    q, k = torch.randn(1, T, 2, d, generator=g), torch.randn(1, T, 2, d, generator=g)  # (batch, T, heads, d) as theirs
    sincos = module.create_sinusoidal_positions(T, 16)[torch.arange(T)][None]  # (1, T, 16)
    sin, cos = torch.split(sincos, 8, dim=-1)

    def theirs(x: torch.Tensor) -> torch.Tensor:
        return torch.cat([module.apply_rotary_pos_emb(x[..., :16], sin, cos), x[..., 16:]], dim=-1).transpose(1, 2)

    expect = theirs(q) @ theirs(k).transpose(-1, -2)
    qh, kh = q.transpose(1, 2), k.transpose(1, 2)
    assert torch.allclose(_our_scores(qh, kh, 16, 1e4, "interleaved"), expect, atol=1e-4)
    assert not torch.allclose(_our_scores(qh, kh, 16, 1e4, "half"), expect, atol=1e-2)
    assert not torch.allclose(_our_scores(qh, kh, d, 1e4, "interleaved"), expect, atol=1e-2)  # the whole head: wrong


@pytest.mark.parametrize("model_type, types, window, rotates", [
    ("cohere2", ["sliding_attention", "sliding_attention", "sliding_attention", "full_attention"], 4096,
     (True, True, True, False)),
    ("afmoe", ["sliding_attention", "sliding_attention", "sliding_attention", "full_attention"], 1024,
     (True, True, True, False)),
    ("exaone4", ["sliding_attention", "sliding_attention", "sliding_attention", "full_attention"], 4096,
     (True, True, True, False)),
    ("exaone4", ["full_attention"] * 4, None, (True,) * 4),
])
def test_global_nope_families_rotate_only_their_sliding_layers(model_type, types, window, rotates):
    """Cohere 2 (`if self.sliding_window is not None`), AFMoE (`if self.is_local_attention`) and a windowed
    EXAONE 4 (`if self.sliding_window is None or self.is_sliding`) apply RoPE in their sliding layers only."""
    from mlbook.transformer.hf import hf_rotating_layers

    config = {"model_type": model_type, "num_hidden_layers": 4, "layer_types": types, "sliding_window": window,
              "num_attention_heads": 4, "hidden_size": 64}
    assert hf_rotating_layers(config) == rotates
