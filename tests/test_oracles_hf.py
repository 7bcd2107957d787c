"""Oracle tests: mlbook.transformer.positional against Hugging Face transformers (test-only dependency).

Every comparison records the largest absolute difference it saw in ORACLE_MAX_DIFF; the
module prints the table at teardown (`pytest -s tests/test_oracles_hf.py` shows it).
Nothing is downloaded: the models are tiny, randomly initialised configs.

Numerics to expect: HF computes base ** (2i/d) in float32, we compute it in float64 and round
once, so inv_freq agrees to a few float32 ulps (relative ~1e-7), and the angles m * theta_i at
position m inherit that relative difference; cos/sin tolerances below scale with the position.
"""

from __future__ import annotations

import math

import pytest
import torch

transformers = pytest.importorskip("transformers")

from transformers import LlamaConfig  # noqa: E402
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS  # noqa: E402
from transformers.models.bloom.modeling_bloom import build_alibi_tensor  # noqa: E402
from transformers.models.gptj import modeling_gptj  # noqa: E402
from transformers.models.llama import modeling_llama  # noqa: E402
from transformers.models.mpt.modeling_mpt import build_mpt_alibi_tensor  # noqa: E402
from transformers.models.t5.modeling_t5 import T5Attention  # noqa: E402

from hf_versions import rope_init_function, with_rope_theta  # noqa: E402
from mlbook.transformer.positional import (  # noqa: E402
    RotaryEmbedding,
    alibi_slopes,
    apply_rotary,
    relative_position_bucket,
    rotate_half,
    rotate_interleaved,
)
from mlbook.transformer.rope_scaling import RopeScaling  # noqa: E402

pytestmark = pytest.mark.oracle

ORACLE_MAX_DIFF: dict[str, float] = {}


def record(name: str, diff: torch.Tensor | float) -> float:
    value = float(diff.abs().max().item()) if isinstance(diff, torch.Tensor) else float(abs(diff))
    ORACLE_MAX_DIFF[name] = max(ORACLE_MAX_DIFF.get(name, 0.0), value)
    return value


@pytest.fixture(scope="module", autouse=True)
def _print_oracle_table():
    yield
    print("\nlargest absolute difference per oracle (mlbook vs transformers %s):" % transformers.__version__)
    for name, value in sorted(ORACLE_MAX_DIFF.items()):
        print(f"  {name:<48s} {value:.3e}")


def angle_tol(max_pos: int) -> float:
    """Allowed |cos/sin difference| at positions <= max_pos: both sides' float32 rounding of theta and m * theta."""
    return max_pos * 2.0**-21 + 2e-6


# ---------------------------------------------------------------------------
# RoPE frequencies: ROPE_INIT_FUNCTIONS
# ---------------------------------------------------------------------------

# (name, hf rope_scaling, hf max_position_embeddings, our RopeScaling fields) for L = original length.
# HF's yarn reads the original length from rope_scaling["original_max_position_embeddings"] and the
# factor from rope_scaling["factor"] (it only warns if max_position_embeddings / original != factor),
# so we set max_position_embeddings = factor * L to make both readings agree. HF's dynamic takes the
# original length from max_position_embeddings; llama3 from rope_scaling.
def rope_cases(L: int, s: float) -> list[tuple[str, dict | None, int, dict]]:
    return [
        ("default", None, L, {}),
        ("linear", {"rope_type": "linear", "factor": s}, L, {"name": "linear", "factor": s}),
        ("dynamic", {"rope_type": "dynamic", "factor": s}, L, {"name": "dynamic", "factor": s, "original_max_len": L}),
        (
            "yarn",
            {"rope_type": "yarn", "factor": s, "original_max_position_embeddings": L, "beta_fast": 32.0, "beta_slow": 1.0},
            int(s * L),
            {"name": "yarn", "factor": s, "original_max_len": L, "beta_fast": 32.0, "beta_slow": 1.0},
        ),
        (
            "llama3",
            {"rope_type": "llama3", "factor": s, "original_max_position_embeddings": L, "low_freq_factor": 1.0, "high_freq_factor": 4.0},
            int(s * L),
            {"name": "llama3", "factor": s, "original_max_len": L, "low_freq_factor": 1.0, "high_freq_factor": 4.0},
        ),
    ]


def llama_config(d_head: int, base: float, rope_scaling: dict | None, max_pos: int, n_heads: int = 2) -> LlamaConfig:
    return LlamaConfig(
        vocab_size=64, hidden_size=d_head * n_heads, num_attention_heads=n_heads, num_key_value_heads=n_heads,
        head_dim=d_head, num_hidden_layers=1, intermediate_size=32, rope_theta=base,
        rope_scaling=None if rope_scaling is None else dict(rope_scaling), max_position_embeddings=max_pos,
    )


CONFIGS = [(64, 10000.0, 256, 4.0), (128, 500000.0, 1024, 8.0), (16, 10000.0, 64, 2.0), (32, 10000.0, 2048, 16.0)]


@pytest.mark.parametrize("d_head,base,L,s", CONFIGS)
def test_inv_freq_and_attention_factor_match_hf(d_head: int, base: float, L: int, s: float) -> None:
    for name, scaling, max_pos, ours_kw in rope_cases(L, s):
        cfg = llama_config(d_head, base, scaling, max_pos)
        hf_inv, hf_af = rope_init_function(name)(cfg, "cpu")
        rope = RotaryEmbedding(d_head, base, RopeScaling(**ours_kw))
        assert rope.inv_freq.shape == hf_inv.shape == (d_head // 2,)
        rel = (rope.inv_freq.double() - hf_inv.double()) / hf_inv.double()
        record(f"inv_freq[{name}] (relative)", rel)
        record(f"inv_freq[{name}]", rope.inv_freq - hf_inv)
        torch.testing.assert_close(rope.inv_freq, hf_inv, rtol=1e-6, atol=0)
        record(f"attention_factor[{name}]", rope.attention_factor - hf_af)
        assert math.isclose(rope.attention_factor, hf_af, rel_tol=1e-12)
        if name == "yarn":
            assert hf_af > 1.0  # the temperature correction is really being compared


@pytest.mark.parametrize("d_head,base,L,s", CONFIGS)
def test_dynamic_inv_freq_beyond_original_length_matches_hf(d_head: int, base: float, L: int, s: float) -> None:
    cfg = llama_config(d_head, base, {"rope_type": "dynamic", "factor": s}, L)
    rope = RotaryEmbedding(d_head, base, RopeScaling("dynamic", s, original_max_len=L))
    for seq_len in (L // 2, L, L + 1, 3 * L, 10 * L + 7):
        hf_inv, _ = ROPE_INIT_FUNCTIONS["dynamic"](cfg, "cpu", seq_len=seq_len)
        ours = rope.inv_freq_at(seq_len)
        record("inv_freq_at[dynamic] (relative)", (ours.double() - hf_inv.double()) / hf_inv.double())
        torch.testing.assert_close(ours, hf_inv, rtol=1e-6, atol=0)
        if seq_len > L:
            assert (hf_inv[1:] < rope.inv_freq[1:]).all()  # the base really grew


# ---------------------------------------------------------------------------
# RoPE tables and rotation: LlamaRotaryEmbedding, apply_rotary_pos_emb
# ---------------------------------------------------------------------------


def rotate_abs(x: torch.Tensor) -> torch.Tensor:
    return modeling_llama.rotate_half(x).abs()


def test_rotate_half_matches_llama() -> None:
    x = torch.randn(2, 3, 5, 16)
    assert torch.equal(rotate_half(x), modeling_llama.rotate_half(x))


@pytest.mark.parametrize("name", ["default", "linear", "dynamic", "yarn", "llama3"])
def test_cos_sin_and_rotation_match_llama(name: str) -> None:
    d_head, base, L, s, H = 64, 10000.0, 256, 4.0, 3
    _, scaling, max_pos, ours_kw = next(c for c in rope_cases(L, s) if c[0] == name)
    g = torch.Generator().manual_seed(0)
    for T, offset in ((L, 0), (16, 3 * L)):  # a prefill inside L, then a cached-decoding chunk past L
        cfg = llama_config(d_head, base, scaling, max_pos, n_heads=H)
        hf_rope = modeling_llama.LlamaRotaryEmbedding(cfg)  # fresh: HF's dynamic variant is stateful
        rope = RotaryEmbedding(d_head, base, RopeScaling(**ours_kw))
        q = torch.randn(2, H, T, d_head, generator=g)  # (B, H, T, d_head)
        k = torch.randn(2, H, T, d_head, generator=g)
        pos = torch.arange(offset, offset + T)[None].expand(2, T)  # (B, T)
        hf_cos, hf_sin = hf_rope(q, pos)  # (B, T, d_head) each, times attention_scaling
        cos, sin = rope(T, offset=offset)  # (T, d_head)
        assert cos.dtype == sin.dtype == torch.float32 and cos.shape == (T, d_head)
        tol = angle_tol(offset + T) * rope.attention_factor
        record(f"cos/sin LlamaRotaryEmbedding[{name}]", torch.cat([cos - hf_cos[0], sin - hf_sin[0]]))
        torch.testing.assert_close(cos, hf_cos[0], atol=tol, rtol=0)
        torch.testing.assert_close(sin, hf_sin[0], atol=tol, rtol=0)
        # the rotation itself, on identical tables: isolates rotate_half / apply_rotary
        hf_q, hf_k = modeling_llama.apply_rotary_pos_emb(q, k, cos[None], sin[None])
        ours_q, ours_k = apply_rotary(q, cos, sin, "half"), apply_rotary(k, cos, sin, "half")
        record("apply_rotary vs apply_rotary_pos_emb (same tables)", torch.cat([ours_q - hf_q, ours_k - hf_k]))
        torch.testing.assert_close(ours_q, hf_q, atol=1e-6, rtol=1e-6)
        torch.testing.assert_close(ours_k, hf_k, atol=1e-6, rtol=1e-6)
        # end to end: our module's rotation vs HF's tables and rotation
        hf_q, hf_k = modeling_llama.apply_rotary_pos_emb(q, k, hf_cos, hf_sin)
        ours_q, ours_k = rope.rotate(q, offset=offset), rope.rotate(k, offset=offset)
        bound = tol * (q.abs() + rotate_abs(q)).max().item()
        record(f"rotated q,k vs Llama[{name}]", torch.cat([ours_q - hf_q, ours_k - hf_k]))
        torch.testing.assert_close(ours_q, hf_q, atol=bound, rtol=0)
        torch.testing.assert_close(ours_k, hf_k, atol=bound, rtol=0)


# ---------------------------------------------------------------------------
# Interleaved layout: GPT-J
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("d_head", [16, 64])
def test_interleaved_rotation_matches_gptj(d_head: int) -> None:
    T, H, offset = 40, 2, 100
    n_pos = offset + T
    sincos = modeling_gptj.create_sinusoidal_positions(n_pos, d_head)  # (n_pos, d_head): [sin | cos]
    gj_sin, gj_cos = sincos[offset:, : d_head // 2], sincos[offset:, d_head // 2 :]  # (T, d_head/2)
    rope = RotaryEmbedding(d_head, pairing="interleaved")
    cos, sin = rope(T, offset=offset)  # (T, d_head), pair i at columns 2i, 2i + 1
    assert torch.equal(cos[:, 0::2], cos[:, 1::2]) and torch.equal(sin[:, 0::2], sin[:, 1::2])
    tol = angle_tol(n_pos)
    record("cos/sin GPT-J create_sinusoidal_positions", torch.cat([cos[:, 0::2] - gj_cos, sin[:, 0::2] - gj_sin]))
    torch.testing.assert_close(cos[:, 0::2], gj_cos, atol=tol, rtol=0)
    torch.testing.assert_close(sin[:, 0::2], gj_sin, atol=tol, rtol=0)

    g = torch.Generator().manual_seed(1)
    x = torch.randn(2, T, H, d_head, generator=g)  # GPT-J layout (B, T, H, d_head)
    x_bhtd = x.transpose(1, 2)  # ours (B, H, T, d_head)
    hf = modeling_gptj.apply_rotary_pos_emb(x, gj_sin[None].expand(2, T, -1), gj_cos[None].expand(2, T, -1))
    # rotation alone, identical tables
    same = apply_rotary(x_bhtd, cos, sin, "interleaved").transpose(1, 2)
    hf_same = modeling_gptj.apply_rotary_pos_emb(x, sin[None, :, 0::2].expand(2, T, -1), cos[None, :, 0::2].expand(2, T, -1))
    record("apply_rotary interleaved vs GPT-J (same tables)", same - hf_same)
    torch.testing.assert_close(same, hf_same, atol=1e-6, rtol=1e-6)
    assert torch.equal(rotate_interleaved(x_bhtd), modeling_gptj.rotate_every_two(x_bhtd))
    # end to end
    ours = rope.rotate(x_bhtd, offset=offset).transpose(1, 2)
    record("rotated x vs GPT-J", ours - hf)
    torch.testing.assert_close(ours, hf, atol=tol * 2 * x.abs().max().item(), rtol=0)


# ---------------------------------------------------------------------------
# T5 buckets: exact integer equality
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("num_buckets,max_distance", [(32, 128), (32, 32), (16, 64), (64, 256), (8, 20), (10, 50), (128, 1000)])
@pytest.mark.parametrize("bidirectional", [True, False])
def test_t5_buckets_equal_hf_for_every_offset(num_buckets: int, max_distance: int, bidirectional: bool) -> None:
    rel = torch.arange(-2000, 2001)  # key - query
    ours = relative_position_bucket(rel, bidirectional, num_buckets, max_distance)
    hf = T5Attention._relative_position_bucket(rel, bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance)
    record("T5 relative_position_bucket", (ours - hf).float())
    assert torch.equal(ours, hf.long())
    # also in the 2-D (T_q, T_k) form the attention layer uses
    ctx, mem = torch.arange(50)[:, None], torch.arange(300)[None, :]
    assert torch.equal(
        relative_position_bucket(mem - ctx, bidirectional, num_buckets, max_distance),
        T5Attention._relative_position_bucket(mem - ctx, bidirectional, num_buckets, max_distance).long(),
    )


# ---------------------------------------------------------------------------
# ALiBi slopes: Bloom (the paper's recipe) and MPT (alibi_bias_max = 8)
# ---------------------------------------------------------------------------


def bloom_slopes(n_heads: int) -> torch.Tensor:
    # alibi = slope_h * position for an all-ones mask: position 1 reads the slope
    alibi = build_alibi_tensor(torch.ones(1, 2), n_heads, torch.float32)  # (H, 1, 2)
    return alibi[:, 0, 1]


def mpt_slopes(n_heads: int) -> torch.Tensor:
    alibi = build_mpt_alibi_tensor(n_heads, 2)  # (H, 1, 2) = slope_h * [-1, 0]
    return -alibi[:, 0, 0]


@pytest.mark.parametrize("n_heads", range(1, 65))
def test_alibi_slopes_match_bloom(n_heads: int) -> None:
    ours, hf = alibi_slopes(n_heads), bloom_slopes(n_heads)
    record("ALiBi slopes vs Bloom build_alibi_tensor", ours - hf)
    torch.testing.assert_close(ours, hf, rtol=1e-6, atol=0)


@pytest.mark.parametrize("n_heads", range(1, 65))
def test_alibi_slopes_match_mpt(n_heads: int) -> None:
    """MPT builds slopes 2^(-alibi_bias_max * h / N) for N = the next power of two >= H and, when H
    is not a power of two, takes the even-numbered slopes (h = 2, 4, ..., N: exactly the slopes
    for N/2 heads) followed by the odd-numbered ones (h = 1, 3, ...), cut to H. That is the
    paper's (and Bloom's) recipe, in the same head order: with the default alibi_bias_max = 8
    the two coincide for every head count. MPT differs only when alibi_bias_max != 8, which
    changes the 8 in 2^(-8h/H); we have no such parameter. Remaining differences are float32
    rounding (MPT computes 1 / 2^x, Bloom powers a float32 base)."""
    ours, hf = alibi_slopes(n_heads), mpt_slopes(n_heads)
    record("ALiBi slopes vs MPT build_mpt_alibi_tensor", ours - hf)
    torch.testing.assert_close(ours, hf, rtol=1e-6, atol=0)
    if n_heads in (8, 16):  # with another alibi_bias_max MPT's slopes are a different sequence
        other = -build_mpt_alibi_tensor(n_heads, 2, alibi_bias_max=16)[:, 0, 0]
        assert not torch.allclose(ours, other)


# ---------------------------------------------------------------------------
# Model level: a tiny random Llama vs our GPT with copied weights (needs models.py)
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("pairing", ["half", "interleaved"])
@pytest.mark.parametrize(
    "rope_scaling",
    [None, {"rope_type": "linear", "factor": 2.0}, {"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 64}],
    ids=["default", "linear", "yarn"],
)
def test_gpt_from_hf_llama_logits_match(pairing: str, rope_scaling: dict | None) -> None:
    models = pytest.importorskip("mlbook.transformer.models")
    GPT = models.GPT
    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=97, hidden_size=64, num_attention_heads=4, num_key_value_heads=4, num_hidden_layers=2,
        intermediate_size=96, max_position_embeddings=128, rope_theta=10000.0, rope_scaling=rope_scaling,
        tie_word_embeddings=False, initializer_range=0.1, attn_implementation="eager",
    )
    hf = transformers.LlamaForCausalLM(cfg).eval()
    idx = torch.randint(0, cfg.vocab_size, (2, 48))
    with torch.no_grad():
        hf_logits = hf(idx).logits  # (B, T, vocab)
        ours = GPT.from_hf_llama(hf, pairing=pairing).eval()
        logits = ours(idx)
    assert logits.shape == hf_logits.shape == (2, 48, cfg.vocab_size)
    assert hf_logits.abs().max() > 1.0  # logits of order 1: an absolute 1e-5 is a relative ~1e-5
    diff = record(f"GPT.from_hf_llama logits [{pairing}, {(rope_scaling or {}).get('rope_type', 'default')}]", logits - hf_logits)
    assert diff <= 1e-5, f"max |logits - HF| = {diff:.3e}"
    # the comparison can fail: the same weights with RoPE frequencies 1% off move the logits far past 1e-5
    off = transformers.LlamaForCausalLM(with_rope_theta(cfg, 10100.0)).eval()
    off.load_state_dict(hf.state_dict())
    with torch.no_grad():
        assert (off(idx).logits - hf_logits).abs().max() > 1e-3
