"""Hugging Face's own RoPE tests, re-expressed against mlbook.

Source: huggingface/transformers tests/utils/test_modeling_rope_utils.py (RopeTest; the version
stored at commit 087e800256786f75d7392f947c17dfb5fac2dc3b) and the shared causal-LM rope tests
(test_model_rope_scaling_from_config, test_model_rope_scaling_frequencies). Each case keeps the
original's setting and claim; the configs go through mlbook.transformer.hf as a config.json
would, and the oracle is transformers 4.57.6's ROPE_INIT_FUNCTIONS where the original pins a
snapshot. Where 4.57.6 itself behaves differently from that stored version (longrope picks
long_factor by sequence length, not by factor), the case follows 4.57.6 and says so. The
kwargs-based "_bc" cases of the stored version have no equivalent: transformers 4.57 and mlbook
take a config only.
"""

from __future__ import annotations

import logging
import math

import pytest
import torch

pytest.importorskip("transformers")
from transformers import LlamaConfig  # noqa: E402

from hf_versions import rope_init_function, rope_theta  # noqa: E402
from mlbook.transformer.hf import gpt_config_from_hf, rope_scaling_from_hf  # noqa: E402
from mlbook.transformer.models import GPT  # noqa: E402

logging.getLogger("transformers.modeling_rope_utils").setLevel(logging.ERROR)

LLAMA = LlamaConfig()  # the stored tests' inputs: hidden 4096, 32 heads (d = 128), rope_theta 10000, 2048 positions
D = LLAMA.hidden_size // LLAMA.num_attention_heads
ROPE_TYPES = ("linear", "dynamic", "yarn", "longrope", "llama3")


def config(rope_scaling: dict | None = None, **extra) -> dict:
    return {"hidden_size": LLAMA.hidden_size, "num_attention_heads": LLAMA.num_attention_heads,
            "rope_theta": rope_theta(LLAMA), "max_position_embeddings": LLAMA.max_position_embeddings,
            "rope_scaling": rope_scaling, **extra}


def ours(rope_scaling: dict | None, seq_len: int | None = None, **extra) -> tuple[torch.Tensor, float]:
    return rope_scaling_from_hf(config(rope_scaling, **extra)).frequencies(D, rope_theta(LLAMA), seq_len)


def theirs(rope_scaling: dict | None, seq_len: int | None = None) -> tuple[torch.Tensor, float]:
    c = LlamaConfig(rope_scaling=rope_scaling)
    return rope_init_function((rope_scaling or {}).get("rope_type", "default"))(c, "cpu", seq_len=seq_len)


DEFAULT_INV_FREQ = ours(None)[0]


# --- test_rope_validation ---------------------------------------------------------------------

@pytest.mark.parametrize("rope_type", ROPE_TYPES)
def test_validation_type_alone_is_refused(rope_type: str) -> None:
    """The original: {"rope_type": t} alone raises KeyError for every non-default type (required keys missing)."""
    with pytest.raises(ValueError, match=r"needs"):
        rope_scaling_from_hf(config({"rope_type": rope_type}))


REQUIRED = {
    "linear": {"factor": 2.0}, "dynamic": {"factor": 2.0}, "yarn": {"factor": 2.0},
    "longrope": {"short_factor": [1.0] * (D // 2), "long_factor": [2.0] * (D // 2), "factor": 2.0},
    "llama3": {"factor": 2.0, "original_max_position_embeddings": 1024, "low_freq_factor": 1.0,
               "high_freq_factor": 4.0},
}
VALID_PARAM_MAPPING = {  # the original's table: which types read which key
    "factor": ["linear", "dynamic", "yarn", "longrope", "llama3"],
    "attention_factor": ["yarn", "longrope"],
    "beta_fast": ["yarn"], "beta_slow": ["yarn"],
    "short_factor": ["longrope"], "long_factor": ["longrope"],
}


@pytest.mark.parametrize("param", list(VALID_PARAM_MAPPING))
@pytest.mark.parametrize("rope_type", ROPE_TYPES)
def test_validation_parameters_are_exclusive_to_their_type(rope_type: str, param: str) -> None:
    """A key another type reads is refused (the original expects KeyError; transformers 4.57 only warns
    when the required keys are present, mlbook refuses and names the key)."""
    rs = {"rope_type": rope_type, **REQUIRED[rope_type]}
    if rope_type in VALID_PARAM_MAPPING[param]:
        rope_scaling_from_hf(config(rs))  # accepted
        return
    rs[param] = 1.0
    with pytest.raises(ValueError, match=rf"'{param}'.*not read by transformers' '{rope_type}'"):
        rope_scaling_from_hf(config(rs))


# --- numerical tests ---------------------------------------------------------------------------

def test_default_rope_numerically() -> None:
    inv_freq, attention = ours(None)
    assert attention == 1.0
    torch.testing.assert_close(inv_freq, theirs(None)[0])
    # three entries of the original's snapshot
    torch.testing.assert_close(inv_freq[[1, 16, 63]], torch.tensor([8.6596e-01, 1.0000e-01, 1.1548e-04]),
                               rtol=1e-4, atol=0)


@pytest.mark.parametrize("factor", [2.0, 10.0, 20.0])
def test_linear_rope_numerically(factor: float) -> None:
    inv_freq, attention = ours({"rope_type": "linear", "factor": factor})
    assert attention == 1.0
    torch.testing.assert_close(inv_freq, DEFAULT_INV_FREQ / factor)


@pytest.mark.parametrize("factor", [2.0, 10.0, 20.0])
def test_dynamic_rope_does_not_scale_inside_the_trained_length(factor: float) -> None:
    rs = {"rope_type": "dynamic", "factor": factor}
    for seq_len in (None, 1):
        inv_freq, attention = ours(rs, seq_len)
        assert attention == 1.0
        torch.testing.assert_close(inv_freq, DEFAULT_INV_FREQ)


def test_dynamic_rope_scales_past_it_and_not_linearly() -> None:
    rs = {"rope_type": "dynamic", "factor": 10.0}
    inv_freq, _ = ours(rs, 16384)
    assert not torch.allclose(inv_freq, DEFAULT_INV_FREQ / 10.0)
    torch.testing.assert_close(inv_freq, theirs(rs, 16384)[0])


@pytest.mark.parametrize("factor", [2.0, 10.0, 20.0])
def test_yarn_attention_factor_default_and_override(factor: float) -> None:
    assert ours({"rope_type": "yarn", "factor": factor})[1] == 0.1 * math.log(factor) + 1.0
    assert ours({"rope_type": "yarn", "factor": factor, "attention_factor": 0.5}, 1)[1] == 0.5


def test_yarn_frequencies_bounded_by_factor() -> None:
    factor, margin = 10.0, 1e-8
    inv_freq, _ = ours({"rope_type": "yarn", "factor": factor, "beta_fast": 32, "beta_slow": 1})
    assert bool(((DEFAULT_INV_FREQ / factor - margin <= inv_freq) & (inv_freq <= DEFAULT_INV_FREQ + margin)).all())


def test_yarn_high_beta_fast_interpolates_all_but_the_first() -> None:
    factor, margin = 10.0, 1e-8
    inv_freq, _ = ours({"rope_type": "yarn", "factor": factor, "beta_fast": 1000, "beta_slow": 1})
    interpolating = (inv_freq < DEFAULT_INV_FREQ + margin).tolist()
    assert not interpolating[0] and all(interpolating[1:])
    torch.testing.assert_close(inv_freq[-20:], DEFAULT_INV_FREQ[-20:] / factor)


def test_yarn_rope_numerically() -> None:
    rs = {"rope_type": "yarn", "factor": 10.0, "beta_fast": 32, "beta_slow": 1}
    torch.testing.assert_close(ours(rs)[0], theirs(rs)[0])


@pytest.mark.parametrize("beta", [1.0, 4.0])
def test_yarn_equal_betas_are_a_one_pair_ramp_as_in_transformers(beta: float) -> None:
    """Kimi K2 ships beta_fast = beta_slow = 1: transformers widens the zero-width ramp by 0.001, so do we."""
    rs = {"rope_type": "yarn", "factor": 32.0, "beta_fast": beta, "beta_slow": beta}
    torch.testing.assert_close(ours(rs)[0], theirs(rs)[0])


SHORT = [2.0] * (D // 2)
LONG = torch.ones(D // 2).cumsum(0).tolist()


@pytest.mark.parametrize("factor", [2.0, 10.0, 20.0])
def test_longrope_attention_factor(factor: float) -> None:
    rs = {"rope_type": "longrope", "factor": factor, "short_factor": SHORT, "long_factor": LONG}
    assert ours(rs)[1] == math.sqrt(1 + math.log(factor) / math.log(LLAMA.max_position_embeddings))
    assert ours({**rs, "attention_factor": 0.5}, 1)[1] == 0.5


def test_longrope_without_attention_factor_is_valid() -> None:
    rs = {"rope_type": "longrope", "factor": 2.0, "short_factor": SHORT, "long_factor": LONG}
    gpt_config_from_hf({**config(rs), "num_hidden_layers": 1, "vocab_size": 11, "intermediate_size": 8})


def test_longrope_short_factor_inside_the_trained_length() -> None:
    rs = {"rope_type": "longrope", "factor": 1.0, "short_factor": SHORT, "long_factor": LONG}
    torch.testing.assert_close(ours(rs)[0], DEFAULT_INV_FREQ / torch.tensor(SHORT))


def test_longrope_long_factor_past_it() -> None:
    """The stored version applies long_factor whenever factor > 1; transformers 4.57.6 (and mlbook) apply it when
    the sequence is longer than the trained length, short_factor otherwise."""
    rs = {"rope_type": "longrope", "factor": 10.0, "short_factor": SHORT, "long_factor": LONG}
    past = LLAMA.max_position_embeddings + 1
    torch.testing.assert_close(ours(rs, past)[0], DEFAULT_INV_FREQ / torch.tensor(LONG))
    torch.testing.assert_close(ours(rs, past)[0], theirs(rs, past)[0])
    torch.testing.assert_close(ours(rs)[0], theirs(rs)[0])


LLAMA3 = {"rope_type": "llama3", "original_max_position_embeddings": 2048, "low_freq_factor": 1.0,
          "high_freq_factor": 4.0}


@pytest.mark.parametrize("factor", [2.0, 10.0, 20.0])
def test_llama3_attention_factor_is_one(factor: float) -> None:
    assert ours({**LLAMA3, "factor": factor})[1] == 1.0


def test_llama3_bounded_by_factor_and_high_freq_factor_moves_the_bands() -> None:
    factor = 10.0
    inv_freq, _ = ours({**LLAMA3, "factor": factor})
    assert bool(((DEFAULT_INV_FREQ / factor <= inv_freq) & (inv_freq <= DEFAULT_INV_FREQ)).all())
    inv_freq, _ = ours({**LLAMA3, "factor": factor, "high_freq_factor": 1000.0})
    assert bool((inv_freq < DEFAULT_INV_FREQ).all())


def test_llama3_rope_numerically() -> None:
    rs = {**LLAMA3, "factor": 10.0}
    torch.testing.assert_close(ours(rs)[0], theirs(rs)[0])


# --- the shared causal-LM rope tests -----------------------------------------------------------

def tiny_gpt(rope_scaling: dict | None) -> GPT:
    torch.manual_seed(0)
    c = {"hidden_size": 32, "num_attention_heads": 4, "num_hidden_layers": 2, "vocab_size": 99,
         "intermediate_size": 37, "max_position_embeddings": 512, "rope_theta": 10000.0, "rope_scaling": rope_scaling}
    return GPT(gpt_config_from_hf(c)).eval()


@pytest.mark.parametrize("rope_type", ["linear", "dynamic"])
def test_model_rope_scaling_from_config(rope_type: str) -> None:
    """Same weights, with and without {type, factor 10}: a short input changes only under static
    scaling (dynamic waits for the length); an input past max_position_embeddings changes under both."""
    short = torch.randint(0, 99, (1, 10), generator=torch.Generator().manual_seed(0))
    long = torch.randint(0, 99, (1, 512 + 16), generator=torch.Generator().manual_seed(1))
    plain, scaled = tiny_gpt(None), tiny_gpt({"rope_type": rope_type, "factor": 10.0})
    scaled.load_state_dict(plain.state_dict())
    with torch.no_grad():
        same_short = torch.allclose(plain(short), scaled(short), atol=1e-5)
        assert same_short == (rope_type == "dynamic")
        assert not torch.allclose(plain(long), scaled(long), atol=1e-5)


def test_model_rope_scaling_frequencies() -> None:
    """Linear scaling: the scaled cos/sin at position m equal the unscaled ones at m / factor; dynamic:
    equal to the unscaled inside the trained length, different past it."""
    factor, L = 10.0, 512
    linear = rope_scaling_from_hf(config({"rope_type": "linear", "factor": factor}, max_position_embeddings=L))
    default = rope_scaling_from_hf(config(None, max_position_embeddings=L))
    positions = torch.arange(0, 40, dtype=torch.float32) * factor
    lin, _ = linear.frequencies(D, 10000.0)
    base, _ = default.frequencies(D, 10000.0)
    torch.testing.assert_close(torch.outer(positions, lin).cos(), torch.outer(positions / factor, base).cos())
    dynamic = rope_scaling_from_hf(config({"rope_type": "dynamic", "factor": factor}, max_position_embeddings=L))
    torch.testing.assert_close(dynamic.frequencies(D, 10000.0, L)[0], base)
    assert not torch.allclose(dynamic.frequencies(D, 10000.0, 2 * L)[0], base)
