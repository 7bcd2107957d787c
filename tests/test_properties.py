"""Property-based tests (hypothesis) for the positional encodings and the encoder block.

RoPE angles are computed in float32 (house convention), so at positions near 1e5 an angle
m * theta_i carries an absolute error up to about m * theta_i * 2^-23 (rounding of theta_i and
of the product). The RoPE tests therefore compare against a float64 closed form with an error
bound derived from that rounding, per pair, instead of a blanket tolerance: small offsets get a
tight bound, large offsets exactly the slack float32 angles need.
"""

from __future__ import annotations

import importlib.util

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from mlbook.transformer.positional import (
    ROPE_PAIRINGS,
    RelativePositionBias,
    RelativePositionBias2D,
    RotaryEmbedding,
    alibi_bias,
)
from mlbook.transformer.rope_scaling import RopeScaling, scaling_parameters

FAST = settings(max_examples=60, deadline=None, derandomize=True)
MAX_POS = 100_000


def theta64(d: int, base: float) -> torch.Tensor:
    return torch.tensor([base ** (-2.0 * i / d) for i in range(d // 2)], dtype=torch.float64)  # (d/2,)


def to_complex(x: torch.Tensor, pairing: str) -> torch.Tensor:
    d = x.shape[-1]
    if pairing == "half":
        return torch.complex(x[..., : d // 2], x[..., d // 2 :])
    return torch.complex(x[..., 0::2], x[..., 1::2])


def rope_score(rope: RotaryEmbedding, q: torch.Tensor, k: torch.Tensor, m: int, n: int) -> float:
    """<R_m q, R_n k> through the library (q, k: (d,) float64; rotation runs in float32)."""
    return (rope.rotate(q[None], offset=m) * rope.rotate(k[None], offset=n)).sum().item()


def float32_bound(q: torch.Tensor, k: torch.Tensor, m: int, n: int, theta: torch.Tensor, pairing: str) -> float:
    """Worst-case |library score - exact score| from float32 angles and float32 products.

    Per pair: |q_i||k_i| * (angle error at m + angle error at n + elementwise rounding), with
    angle error <= p * theta_i * 2^-22 (theta_i and the product each rounded, factor 2 spare)
    and 2^-19 (32 float32 ulps) for rounding q, k and the multiply-adds.
    """
    mag = to_complex(q, pairing).abs() * to_complex(k, pairing).abs()  # (d/2,)
    return (mag * ((m + n) * theta * 2.0**-22 + 2.0**-19)).sum().item()


@FAST
@given(
    half_d=st.integers(1, 32),
    base=st.sampled_from([10000.0, 500000.0]),
    pairing=st.sampled_from(ROPE_PAIRINGS),
    m=st.integers(0, MAX_POS),
    n=st.integers(0, MAX_POS),
    shift=st.integers(-MAX_POS, MAX_POS),
    seed=st.integers(0, 2**31 - 1),
)
def test_rope_relative_property_at_random_offsets(half_d, base, pairing, m, n, shift, seed) -> None:
    """score(m, n) == score(m + s, n + s) == the float64 closed form in m - n, within float32 angle error."""
    d = 2 * half_d
    shift = max(-min(m, n), min(shift, MAX_POS - max(m, n)))  # keep all positions in [0, MAX_POS]
    g = torch.Generator().manual_seed(seed)
    q, k = torch.randn(d, generator=g, dtype=torch.float64), torch.randn(d, generator=g, dtype=torch.float64)
    rope = RotaryEmbedding(d, base, pairing=pairing)
    theta = theta64(d, base)
    # exact: Re sum q_i conj(k_i) e^{i (m - n) theta_i}, a function of m - n alone
    exact = (to_complex(q, pairing) * to_complex(k, pairing).conj() * torch.polar(torch.ones_like(theta), (m - n) * theta)).sum().real.item()
    s1, s2 = rope_score(rope, q, k, m, n), rope_score(rope, q, k, m + shift, n + shift)
    b1 = float32_bound(q, k, m, n, theta, pairing)
    b2 = float32_bound(q, k, m + shift, n + shift, theta, pairing)
    assert abs(s1 - exact) <= b1
    assert abs(s2 - exact) <= b2
    assert abs(s1 - s2) <= b1 + b2


@FAST
@given(
    half_d=st.integers(1, 32),
    pairing=st.sampled_from(ROPE_PAIRINGS),
    scaling=st.sampled_from(["none", "linear", "ntk", "dynamic", "yarn", "llama3"]),
    factor=st.floats(1.0, 32.0),
    offset=st.integers(0, MAX_POS),
    T=st.integers(1, 4),
    seed=st.integers(0, 2**31 - 1),
)
def test_rope_preserves_norm_at_random_offsets(half_d, pairing, scaling, factor, offset, T, seed) -> None:
    """||R_m x|| == attention_factor * ||x|| per row, at any offset (cos^2 + sin^2 = 1 for any float32 angle)."""
    d = 2 * half_d
    given = {"factor": factor, "original_max_len": 4096}  # each scaling takes the ones it uses
    rope_scaling = RopeScaling(scaling, **{k: v for k, v in given.items() if k in scaling_parameters(scaling)})
    rope = RotaryEmbedding(d, rope_scaling=rope_scaling, pairing=pairing)
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(2, T, d, generator=g, dtype=torch.float64)  # (B, T, d)
    y = rope.rotate(x, offset=offset)
    torch.testing.assert_close(y.norm(dim=-1), rope.attention_factor * x.norm(dim=-1), rtol=2e-6, atol=0)
    if offset > 0 and d > 2:  # and it really rotated something
        assert not torch.allclose(y, rope.attention_factor * x, atol=1e-3)


# ---------------------------------------------------------------------------
# Relative biases: translation invariance
# ---------------------------------------------------------------------------


@FAST
@given(data=st.data(), bidirectional=st.booleans(), n_heads=st.integers(1, 4))
def test_t5_bias_translation_invariance(data, bidirectional, n_heads) -> None:
    num_buckets = data.draw(st.integers(4, 64), label="num_buckets")
    exact = (num_buckets // 2 if bidirectional else num_buckets) // 2
    max_distance = data.draw(st.integers(exact + 1, 512), label="max_distance")
    T_q, T_k = data.draw(st.integers(1, 24), label="T_q"), data.draw(st.integers(1, 48), label="T_k")
    q0, s = data.draw(st.integers(0, 3000), label="query_offset"), data.draw(st.integers(1, 3000), label="shift")
    torch.manual_seed(0)
    rpb = RelativePositionBias(n_heads, num_buckets, max_distance, bidirectional)
    with torch.no_grad():  # one distinct value per (bucket, head)
        rpb.table.weight.copy_(torch.randperm(num_buckets * n_heads).float().view(num_buckets, n_heads))
    base = rpb(T_q, T_k, query_offset=q0)  # (1, H, T_q, T_k)
    moved = rpb(T_q, T_k + s, query_offset=q0 + s)  # queries and keys all moved by s
    assert torch.equal(moved[..., s:], base)
    # with default placement the bias is Toeplitz: bias[i, j] == bias[i + t, j + t]
    t = data.draw(st.integers(1, T_k), label="t")
    full = rpb(T_k, T_k)
    assert torch.equal(full[..., t:, t:], full[..., : T_k - t, : T_k - t])


@FAST
@given(data=st.data(), window=st.integers(1, 9), n_heads=st.integers(1, 3))
def test_2d_bias_translation_invariance(data, window, n_heads) -> None:
    torch.manual_seed(0)
    rpb = RelativePositionBias2D(window, n_heads)
    with torch.no_grad():
        rpb.table.copy_(torch.randperm(rpb.table.numel()).float().view_as(rpb.table))
    bias = rpb()  # (H, w*w, w*w)
    coord = st.integers(0, window - 1)
    y1, x1, y2, x2 = (data.draw(coord) for _ in range(4))
    sy = data.draw(st.integers(-min(y1, y2), window - 1 - max(y1, y2)), label="sy")
    sx = data.draw(st.integers(-min(x1, x2), window - 1 - max(x1, x2)), label="sx")

    def idx(y: int, x: int) -> int:
        return y * window + x

    assert torch.equal(bias[:, idx(y1, x1), idx(y2, x2)], bias[:, idx(y1 + sy, x1 + sx), idx(y2 + sy, x2 + sx)])
    if (y1, x1) != (y2, x2):  # a different offset reads a different table entry
        assert not torch.equal(bias[:, idx(y1, x1), idx(y2, x2)], bias[:, idx(y2, x2), idx(y1, x1)])


# ---------------------------------------------------------------------------
# ALiBi: monotone penalty
# ---------------------------------------------------------------------------


@FAST
@given(n_heads=st.integers(1, 64), T_k=st.integers(1, 48), data=st.data())
def test_alibi_penalty_monotone_in_distance(n_heads, T_k, data) -> None:
    """For every head, the bias gets strictly more negative as the key moves further into the past."""
    T_q = data.draw(st.integers(1, T_k), label="T_q")
    bias = alibi_bias(n_heads, T_q, T_k)[0].double()  # (H, T_q, T_k)
    q_pos = torch.arange(T_k - T_q, T_k)[:, None]  # (T_q, 1)
    k_pos = torch.arange(T_k)[None, :]  # (1, T_k)
    dist = q_pos - k_pos  # (T_q, T_k)
    past = dist > 0
    assert (bias[:, past] < 0).all() and (bias[:, ~past] == 0).all()
    # stepping one key further back (j -> j - 1) lowers the bias, for every head and query
    step = bias[..., :-1] - bias[..., 1:]  # (H, T_q, T_k - 1) bias(j) - bias(j + 1)
    assert (step[:, dist[:, :-1] > 0] < 0).all()
    # linear in distance: bias / distance is one slope per head, constant over (i, j)
    if past.any():
        slope = -bias[:, past] / dist[past].double()  # (H, n_past)
        torch.testing.assert_close(slope, slope[:, :1].expand_as(slope), rtol=1e-6, atol=0)
        assert (slope > 0).all()


# ---------------------------------------------------------------------------
# Encoder block: exact permutation equivariance (needs models.py)
# ---------------------------------------------------------------------------


@pytest.mark.skipif(importlib.util.find_spec("mlbook.transformer.models") is None, reason="mlbook.transformer.models not written yet")
@settings(max_examples=20, deadline=None, derandomize=True)
@given(T=st.integers(2, 12), n_heads=st.sampled_from([1, 2, 4]), seed=st.integers(0, 2**31 - 1))
def test_encoder_block_permutation_equivariance(T, n_heads, seed) -> None:
    """With no positional information, block(x[:, perm]) == block(x)[:, perm] (float64)."""
    from mlbook.transformer.models import TransformerEncoderBlock

    torch.manual_seed(seed)
    d_model = 8 * n_heads
    block = TransformerEncoderBlock(d_model, n_heads, 4 * d_model).double().eval()
    x = torch.randn(2, T, d_model, dtype=torch.float64)  # (B, T, d_model)
    perm = torch.randperm(T)
    while T > 1 and torch.equal(perm, torch.arange(T)):
        perm = torch.randperm(T)
    with torch.no_grad():
        y, y_perm = block(x), block(x[:, perm])
    assert (y_perm - y[:, perm]).abs().max().item() <= 1e-10
    assert (y_perm - y).abs().max().item() > 1e-3  # the permutation did move rows
