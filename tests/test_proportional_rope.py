"""The "proportional" RoPE type (p-RoPE as transformers 5 ships it for Gemma 4's global layers).

The first floor(p d / 2) pairs turn at the whole head's ladder theta_i = base^(-2i/d) (divided by factor),
the rest at frequency 0. Oracle: transformers 5's Gemma 4 rotary module, per layer type.
"""

from __future__ import annotations

import pytest
import torch
from hf_versions import HF_MAJOR, TRANSFORMERS

from mlbook.transformer.hf import hf_head_dim, hf_rope_base, hf_rotary_dim, rope_options_from_hf, rope_scaling_from_hf
from mlbook.transformer.positional import RotaryEmbedding, frequency_ladder
from mlbook.transformer.rope_scaling import RopeScaling

GLOBAL = {"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1_000_000.0}
SLIDING = {"rope_type": "default", "rope_theta": 10_000.0}


def test_the_first_share_of_pairs_turn_on_the_whole_heads_ladder_the_rest_not_at_all() -> None:
    for d, p, turning in [(512, 0.25, 64), (512, 0.3, 76), (64, 1.0, 32), (66, 0.5, 16)]:
        inv_freq, attention = RopeScaling("proportional", rotated_fraction=p).frequencies(d, 1e6)
        assert attention == 1.0 and inv_freq.shape == (d // 2,)
        torch.testing.assert_close(inv_freq[:turning], frequency_ladder(d, 1e6)[:turning])
        assert bool((inv_freq[turning:] == 0).all()), (d, p)


def test_factor_divides_the_turning_pairs() -> None:
    plain, _ = RopeScaling("proportional", rotated_fraction=0.25).frequencies(128, 1e6)
    scaled, _ = RopeScaling("proportional", factor=8.0, rotated_fraction=0.25).frequencies(128, 1e6)
    torch.testing.assert_close(scaled, plain / 8.0)


def test_it_is_page_09s_p_rope_where_the_roundings_agree() -> None:
    """drop_lowest = 1 - p on the full head drops round((1 - p) d/2) pairs; proportional keeps floor(p d/2)."""
    d = 64
    ours = RotaryEmbedding(d, 1e6, rope_scaling=RopeScaling("proportional", rotated_fraction=0.25))
    page_09 = RotaryEmbedding(d, 1e6, drop_lowest=0.75)
    torch.testing.assert_close(ours.inv_freq, page_09.inv_freq)


def test_the_pairs_at_frequency_zero_do_not_move_with_position() -> None:
    rotary = RotaryEmbedding(16, 1e4, rope_scaling=RopeScaling("proportional", rotated_fraction=0.5))
    angles = rotary.angles(torch.arange(50))  # (T, 8)
    assert bool((angles[:, 4:] == 0).all()) and bool((angles[1:, :4] != 0).all())


@pytest.mark.parametrize("p", [0.0, 1.5, -0.25])
def test_a_share_outside_0_1_is_refused_by_name(p: float) -> None:
    with pytest.raises(ValueError, match="rotated_fraction"):
        RopeScaling("proportional", rotated_fraction=p)


def test_proportional_needs_its_share() -> None:
    with pytest.raises(ValueError, match="scaling='proportional' needs rotated_fraction"):
        RopeScaling("proportional")


def test_a_gemma_4_config_is_read_per_layer_type() -> None:
    config = {"model_type": "gemma4_text", "num_hidden_layers": 6, "hidden_size": 2560, "num_attention_heads": 8,
              "head_dim": 256, "global_head_dim": 512, "max_position_embeddings": 131072,
              "layer_types": ["sliding_attention"] * 5 + ["full_attention"],
              "rope_parameters": {"sliding_attention": SLIDING, "full_attention": GLOBAL}}
    assert hf_head_dim(config, "full_attention") == 512 and hf_rotary_dim(config, "full_attention") == 512
    assert rope_scaling_from_hf(config, "full_attention") == RopeScaling("proportional", rotated_fraction=0.25)
    assert rope_scaling_from_hf(config, "sliding_attention").name == "none"
    assert rope_options_from_hf(config, layer_type="full_attention") == {
        "base": 1e6, "pairing": "half", "scaling": "proportional", "rotated_fraction": 0.25}


@pytest.mark.oracle
@pytest.mark.skipif(HF_MAJOR < 5, reason=f"transformers {TRANSFORMERS} has no Gemma 4 (transformers 5 does)")
@pytest.mark.parametrize("full", [GLOBAL, {**GLOBAL, "partial_rotary_factor": 0.3, "factor": 8.0}, None])
def test_frequencies_equal_transformers_gemma_4(full: dict | None) -> None:
    from transformers.models.gemma4.configuration_gemma4 import Gemma4TextConfig
    from transformers.models.gemma4.modeling_gemma4 import Gemma4TextRotaryEmbedding

    kwargs = {} if full is None else {"rope_parameters": {"sliding_attention": SLIDING, "full_attention": full}}
    config = Gemma4TextConfig(num_hidden_layers=6, **kwargs)  # None: the class's own defaults
    module = Gemma4TextRotaryEmbedding(config)
    values = config.to_dict()
    for layer_type in ("sliding_attention", "full_attention"):
        ours, factor = rope_scaling_from_hf(values, layer_type).frequencies(
            hf_rotary_dim(values, layer_type), hf_rope_base(values, layer_type), None)
        theirs = getattr(module, f"{layer_type}_inv_freq")
        assert ours.shape == theirs.shape
        torch.testing.assert_close(ours.double(), theirs.double(), rtol=1e-6, atol=0)
        assert factor == float(getattr(module, f"{layer_type}_attention_scaling"))
