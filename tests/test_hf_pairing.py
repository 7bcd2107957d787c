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
