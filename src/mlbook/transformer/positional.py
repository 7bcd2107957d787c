"""Positional encodings: sinusoidal, learned, T5 relative bias (1-D and Swin 2-D), RoPE, ALiBi.

Self-attention is permutation-equivariant, so order has to be injected somewhere:

    add to the input      sinusoidal (fixed) or learned absolute tables
    add to the scores     T5 bucketed bias b[h, bucket(j - i)], ALiBi -m_h (i - j)
    rotate q and k        RoPE: <R_m q, R_n k> depends on n - m only

This file is the chapter's implementation, in the order section 3 reads it: the frequency ladder,
sinusoidal and learned tables, T5 buckets and bias with the 2-D Swin form, RoPE, ALiBi. The
machinery around it lives beside it: context-extension scaling in `rope_scaling.py`, the compiled
RoPE kernel in `fused.py`, the argument checks in `validate.py`.

Conventions used throughout: positions are integers starting at 0, `T_q` queries are the
*last* `T_q` of `T_k` key positions unless a query offset is given, angles are computed in
float32 whatever the model's dtype, and every public entry point validates its arguments.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch
from torch import nn

from mlbook.transformer.validate import (
    check_bucket_config, check_choice, check_drop_lowest, check_even_d, check_head_rows, check_int,
    check_positive_float, check_rope_scaling, check_rotary_dim, check_rotary_inputs, check_tensor,
)

if TYPE_CHECKING:  # for the type hint only: rope_scaling.py imports this file
    from mlbook.transformer.rope_scaling import RopeScaling

__all__ = [
    "frequency_ladder", "sinusoidal_positional_encoding", "LearnedPositionalEmbedding", "relative_position_bucket",
    "RelativePositionBias", "RelativePositionBias2D", "ROPE_PAIRINGS", "rotate_half", "rotate_interleaved",
    "apply_rotary", "RotaryEmbedding", "convert_rotary_weights", "alibi_slopes", "alibi_bias",
]


# ---------------------------------------------------------------------------
# The frequency ladder: sinusoidal encodings and RoPE turn pair i at rate w_i
# ---------------------------------------------------------------------------


def frequency_ladder(d: int, base: float = 10000.0) -> torch.Tensor:
    """The frequencies w_i = base^(-2i/d), i = 0 .. d/2 - 1, of sinusoidal encodings and RoPE.

    Pair i turns by w_i radians per position, so it repeats every 2 pi / w_i positions: 2 pi for
    i = 0, growing geometrically to nearly 2 pi * base for the last pair (Vaswani et al., 2017,
    section 3.5; Su et al., 2021). Computed in float64, returned as float32 (d/2,).
    """
    check_even_d("d", d)
    base = check_positive_float("base", base, above=1.0)
    two_i = torch.arange(0, d, 2, dtype=torch.float64)  # (d/2,) 2i
    return (1.0 / base ** (two_i / d)).float()  # (d/2,) w_i


# ---------------------------------------------------------------------------
# Absolute: sinusoidal and learned
# ---------------------------------------------------------------------------


def sinusoidal_positional_encoding(T: int, d_model: int, base: float = 10000.0) -> torch.Tensor:
    """Fixed sinusoidal table of Vaswani et al. (2017), section 3.5.

    PE[t, 2i] = sin(t * w_i),  PE[t, 2i+1] = cos(t * w_i),  w_i = base^(-2i / d_model).

    Returns a float32 tensor of shape (T, d_model); row t encodes position t. Because each
    (sin, cos) pair turns by the angle k * w_i when t moves to t + k, PE[t + k] is a fixed
    linear map (a rotation per pair) of PE[t].
    """
    check_int("T", T, 0)
    check_even_d("d_model", d_model)
    check_positive_float("base", base, above=1.0)
    omega = frequency_ladder(d_model, base)  # (d_model/2,) w_i
    t = torch.arange(T, dtype=torch.float32)  # (T,)
    angle = torch.outer(t, omega)  # (T, d_model/2) t * w_i
    pe = torch.stack([angle.sin(), angle.cos()], dim=-1)  # (T, d_model/2, 2) (sin, cos) per pair
    return pe.reshape(T, d_model)  # (T, d_model) sin at even columns, cos at odd


class LearnedPositionalEmbedding(nn.Module):
    """A trained (T_max, d_model) table indexed by absolute position (GPT-2, BERT).

    out[0, t] = P[offset + t]. There is no row for a position >= T_max, so the table cannot
    extrapolate; `offset` is the absolute position of the first token (the cache length
    during cached decoding).
    """

    def __init__(self, T_max: int, d_model: int) -> None:
        super().__init__()
        self.T_max = check_int("T_max", T_max, 1)
        self.d_model = check_int("d_model", d_model, 1)
        self.table = nn.Embedding(T_max, d_model)  # (T_max, d_model)

    def forward(self, T: int, offset: int = 0) -> torch.Tensor:
        """Returns (1, T, d_model): the rows for positions offset .. offset + T - 1."""
        check_int("T", T, 0)
        check_int("offset", offset, 0)
        if offset + T > self.T_max:
            raise ValueError(
                f"learned positions cannot extrapolate: positions {offset}..{offset + T - 1} were asked for, "
                f"but the table only has rows 0..{self.T_max - 1} (T_max = {self.T_max}); "
                f"keep offset + T <= T_max or use a relative scheme (rope, alibi, t5)"
            )
        pos = torch.arange(offset, offset + T, device=self.table.weight.device)  # (T,)
        return self.table(pos)[None]  # (1, T, d_model)


# ---------------------------------------------------------------------------
# Relative: T5 bucketed bias and its 2-D (Swin) form
# ---------------------------------------------------------------------------


def relative_position_bucket(
    relative_position: torch.Tensor, bidirectional: bool = True, num_buckets: int = 32, max_distance: int = 128
) -> torch.Tensor:
    """Map key_pos - query_pos to a T5 bucket id (Raffel et al., 2020).

    With n = query_pos - key_pos (positive for past keys) and, if bidirectional, the buckets
    split in half by the sign of n (future keys take the upper half), let B be the buckets
    per direction and e = B // 2. Then

        bucket(n) = |n|                                             if |n| < e (exact)
                  = min(B - 1, e + floor(log(|n| / e) / log(max_distance / e) * (B - e)))  otherwise

    so small offsets are exact and larger ones share log-spaced buckets; every offset at or
    past max_distance lands in the last bucket. In the causal case future keys map to 0.

    relative_position: integer tensor of any shape. Returns int64 bucket ids of that shape.
    """
    check_tensor("relative_position", relative_position, integer=True)
    per_direction, exact = check_bucket_config(num_buckets, max_distance, bidirectional)  # B and e
    n = -relative_position.long()  # (...) query - key, > 0 for past keys
    offset = torch.zeros_like(n)  # (...)
    if bidirectional:
        offset = (n < 0).long() * per_direction  # (...) future keys use the upper half
        n = n.abs()  # (...) |n|
    else:
        n = n.clamp(min=0)  # (...) future keys (masked anyway) share bucket 0
    # log-spaced buckets for |n| >= exact; the float32 rounding matches the reference implementations
    ratio = n.float() / exact  # (...)
    log_bucket = exact + (torch.log(ratio) / math.log(max_distance / exact) * (per_direction - exact)).long()  # (...)
    log_bucket = log_bucket.clamp(max=per_direction - 1)  # (...) everything far shares the last bucket
    return offset + torch.where(n < exact, n, log_bucket)  # (...)


class RelativePositionBias(nn.Module):
    """T5 relative bias: a learned scalar per (bucket, head) added to the attention scores.

    S[h, i, j] += b[bucket(j - i), h]. One instance is shared by all layers of a stack.
    """

    def __init__(self, n_heads: int, num_buckets: int = 32, max_distance: int = 128, bidirectional: bool = True) -> None:
        super().__init__()
        self.n_heads = check_int("n_heads", n_heads, 1)
        check_bucket_config(num_buckets, max_distance, bidirectional)
        self.num_buckets, self.max_distance, self.bidirectional = num_buckets, max_distance, bidirectional
        self.table = nn.Embedding(num_buckets, n_heads)  # (num_buckets, H)

    def forward(self, T_q: int, T_k: int, query_offset: int | None = None) -> torch.Tensor:
        """Returns the bias (1, H, T_q, T_k) for queries at query_offset + i and keys at j.

        By default the queries are the last T_q of the T_k positions (query_offset = T_k - T_q),
        which is what cached decoding needs; with T_q == T_k that is position i for row i.
        """
        check_int("T_q", T_q, 0)
        check_int("T_k", T_k, 0)
        if query_offset is None:
            if T_q > T_k:
                raise ValueError(f"T_q ({T_q}) > T_k ({T_k}): pass query_offset to say where the queries sit")
            query_offset = T_k - T_q
        check_int("query_offset", query_offset, 0)
        device = self.table.weight.device
        q_pos = torch.arange(query_offset, query_offset + T_q, device=device)[:, None]  # (T_q, 1)
        k_pos = torch.arange(T_k, device=device)[None, :]  # (1, T_k)
        relative = k_pos - q_pos  # (T_q, T_k) key position - query position
        buckets = relative_position_bucket(relative, self.bidirectional, self.num_buckets, self.max_distance)  # (T_q, T_k)
        bias = self.table(buckets)  # (T_q, T_k, H)
        return bias.permute(2, 0, 1)[None]  # (1, H, T_q, T_k)


class RelativePositionBias2D(nn.Module):
    """Swin-style 2-D relative bias inside a w x w window (Liu et al., 2021).

    A learned table of shape ((2w-1)^2, H) indexed by the offset (dy, dx) in [-(w-1), w-1]^2:
    index = (dy + w - 1) * (2w - 1) + (dx + w - 1). Gathered for every pair of the w*w window
    positions (row-major) it gives the bias (H, w*w, w*w), which depends only on the offset.
    """

    def __init__(self, window: int, n_heads: int) -> None:
        super().__init__()
        self.window = check_int("window", window, 1)
        self.n_heads = check_int("n_heads", n_heads, 1)
        span = 2 * window - 1
        self.table = nn.Parameter(torch.zeros(span * span, n_heads))  # ((2w-1)^2, H)
        nn.init.trunc_normal_(self.table, std=0.02)
        ys, xs = torch.meshgrid(torch.arange(window), torch.arange(window), indexing="ij")  # (w, w) each
        coords = torch.stack([ys.flatten(), xs.flatten()])  # (2, w*w) row-major window positions
        delta = coords[:, :, None] - coords[:, None, :]  # (2, w*w, w*w) (dy, dx) of query minus key
        index = (delta[0] + window - 1) * span + (delta[1] + window - 1)  # (w*w, w*w) in [0, span^2)
        self.register_buffer("index", index, persistent=False)  # (w*w, w*w)

    def forward(self) -> torch.Tensor:
        """Returns the bias (H, w*w, w*w)."""
        w2 = self.window * self.window
        bias = self.table[self.index.reshape(-1)]  # (w*w * w*w, H)
        return bias.reshape(w2, w2, self.n_heads).permute(2, 0, 1).contiguous()  # (H, w*w, w*w)


# ---------------------------------------------------------------------------
# RoPE: rotate each pair of q and k by an angle proportional to its position
# ---------------------------------------------------------------------------

ROPE_PAIRINGS: tuple[str, ...] = ("half", "interleaved")


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """Half layout (GPT-NeoX, Hugging Face's Llama port): [x1, x2] -> [-x2, x1], x1 and x2 the two halves of the last dim."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]  # (..., d/2) each
    return torch.cat([-x2, x1], dim=-1)  # (..., d)


def rotate_interleaved(x: torch.Tensor) -> torch.Tensor:
    """Interleaved layout (RoFormer, GPT-J): (x0, x1, x2, x3, ...) -> (-x1, x0, -x3, x2, ...)."""
    even, odd = x[..., 0::2], x[..., 1::2]  # (..., d/2) each
    return torch.stack([-odd, even], dim=-1).flatten(-2)  # (..., d)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, pairing: str = "half") -> torch.Tensor:
    """Rotate x by per-position angles: x * cos + rot(x) * sin, rot = rotate_half or rotate_interleaved.

    For a pair (a, b) at angle t this is (a cos t - b sin t, b cos t + a sin t), the rotation R(t)
    of `RotaryEmbedding`, i.e. the complex product (a + ib) e^{it}. x: (..., T, d_head); cos, sin:
    (T, d_head) in the layout of `pairing`, as RotaryEmbedding returns them. Computed in float32
    (float64 for float64 x), returned in x.dtype. The same arithmetic compiled into one kernel is
    `fused.apply_rotary_fused`.
    """
    check_choice("pairing", pairing, ROPE_PAIRINGS)
    check_rotary_inputs(x, cos, sin)
    rot = rotate_half if pairing == "half" else rotate_interleaved
    xf = x if x.dtype == torch.float64 else x.float()  # (..., T, d_head) at least float32
    # rot(x) holds (-b, a) where x holds (a, b), so each pair becomes (a cos t - b sin t, b cos t + a sin t)
    return (xf * cos.to(xf.dtype) + rot(xf) * sin.to(xf.dtype)).to(x.dtype)  # (..., T, d_head)


class RotaryEmbedding(nn.Module):
    """Rotary position embedding, RoPE (Su et al., 2021): turn each query and key by its position.

    The pairs. A head's d_head channels form d_head/2 pairs, each a point in the plane. With
    pairing="half" (GPT-NeoX, Hugging Face's Llama) pair i is channels i and i + d_head/2: the first
    half holds every pair's first coordinate, the second half every second one. With "interleaved"
    (RoFormer, GPT-J, Meta's original LLaMA code) pair i is channels 2i and 2i + 1, side by side.
    `convert_rotary_weights` moves a model's q and k projections from one layout to the other.

    The rotation. At position m pair i is turned by the angle m theta_i, with theta_i =
    base^(-2i/d_head) from `frequency_ladder`:

        R(a) = [[cos a, -sin a],         (x_a, x_b) -> (x_a cos a - x_b sin a,
                [sin a,  cos a]]                        x_b cos a + x_a sin a)

    Why a score depends on n - m only. Take one pair of a query q at position m and of a key k at
    position n, and write t for its theta_i:

        # the rotated query and key
        q' = R(m t) q,   k' = R(n t) k
        # their dot product, using (A q)^T = q^T A^T
        q' . k' = q^T R(m t)^T R(n t) k
        # the transpose of a rotation turns back, R(a)^T = R(-a), and turns about one centre add up
        R(m t)^T R(n t) = R(-m t) R(n t) = R((n - m) t)
        # so the positions enter only through n - m
        q' . k' = q^T R((n - m) t) k

    The score is the sum of these over the pairs, a function of q, k and n - m: moving both tokens
    by the same distance leaves it unchanged. (In complex form pair (x_a, x_b) is x_a + i x_b, R(a)
    is multiplication by e^{ia}, and q' . k' = Re[conj(q e^{imt}) k e^{int}] = Re[conj(q) k e^{i(n-m)t}].)

    Rotating fewer pairs. partial_rotary_factor f < 1 turns only the first r = int(f d_head)
    channels, with the ladder base^(-2i/r) re-spaced over them (GPT-NeoX's rotary_pct, Hugging Face's
    partial_rotary_factor). drop_lowest p > 0 keeps the full ladder but sets its lowest round(p d_head/2)
    frequencies to 0, so those pairs never turn (p-RoPE, Barbero et al., 2025: "p-RoPE 0.75" is p = 0.25).

    Frequencies and scaling. `inv_freq` (r/2,) stays float32 when the module is cast. A `RopeScaling`
    (mlbook.transformer.rope_scaling) supplies scaled frequencies, which follow the sequence length
    under dynamic scaling, and an `attention_factor` on cos and sin (YaRN's 0.1 ln s + 1). `forward(T,
    offset)` returns the float32 tables cos and sin (T, r) for positions offset .. offset + T - 1.
    """

    inv_freq: torch.Tensor

    def __init__(
        self, d_head: int, base: float = 10000.0, rope_scaling: RopeScaling | None = None, *, pairing: str = "half",
        partial_rotary_factor: float = 1.0, drop_lowest: float = 0.0,
    ) -> None:
        super().__init__()
        self.d_head = check_even_d("d_head", d_head)
        self.base = check_positive_float("base", base, above=1.0)
        self.pairing = check_choice("pairing", pairing, ROPE_PAIRINGS)
        self.rotary_dim = check_rotary_dim(d_head, partial_rotary_factor)  # r = int(f d_head): the channels that turn
        self.partial_rotary_factor = float(partial_rotary_factor)
        self.drop_lowest = check_drop_lowest(drop_lowest, self.rotary_dim // 2)  # p: drops round(p r/2) pairs
        self.rope_scaling = check_rope_scaling(rope_scaling)
        if rope_scaling is None:
            inv_freq, self.attention_factor = frequency_ladder(self.rotary_dim, self.base), 1.0  # (r/2,) theta_i
        else:
            inv_freq, self.attention_factor = rope_scaling.frequencies(self.rotary_dim, self.base)  # (r/2,) scaled
        # the scaling's name and factor, for reading and repr: "none" and 1.0 without one
        self.scaling, self.factor = ("none", 1.0) if rope_scaling is None else (rope_scaling.name, rope_scaling.factor)
        self.register_buffer("inv_freq", self.without_lowest(inv_freq), persistent=False)  # (r/2,) float32

    def without_lowest(self, inv_freq: torch.Tensor) -> torch.Tensor:
        """inv_freq with its lowest round(drop_lowest * r/2) frequencies (the last pairs) set to 0 (p-RoPE)."""
        n_drop = round(self.drop_lowest * inv_freq.shape[0])
        if n_drop == 0:
            return inv_freq  # (r/2,)
        keep = torch.arange(inv_freq.shape[0], device=inv_freq.device) < inv_freq.shape[0] - n_drop  # (r/2,)
        return inv_freq * keep  # (r/2,) a zero frequency: the pair never turns

    def _apply(self, fn, recurse=True):  # type: ignore[no-untyped-def]
        # .to(bfloat16) would quantise the frequencies; keep them float32, follow the device only
        freq = self.inv_freq  # (d_head/2,) float32
        super()._apply(fn, recurse)
        self.inv_freq = freq.to(device=self.inv_freq.device, dtype=torch.float32)  # (d_head/2,) on the new device
        return self

    def extra_repr(self) -> str:
        extra = (f", rotary_dim={self.rotary_dim}" if self.rotary_dim < self.d_head else "") + (
            f", drop_lowest={self.drop_lowest:g}" if self.drop_lowest else "")
        return (f"d_head={self.d_head}, base={self.base:g}, scaling={self.scaling!r}, factor={self.factor:g}, "
                f"pairing={self.pairing!r}{extra}")

    def inv_freq_at(self, seq_len: int) -> torch.Tensor:
        """The frequencies for a sequence of seq_len tokens in all: inv_freq, unless the scaling follows the length."""
        if self.rope_scaling is None or not self.rope_scaling.uses_seq_len:
            return self.inv_freq  # (d_head/2,)
        inv_freq, _ = self.rope_scaling.frequencies(self.rotary_dim, self.base, seq_len)  # (r/2,) dynamic NTK
        return self.without_lowest(inv_freq.to(self.inv_freq.device))  # (r/2,)

    def angles(self, positions: torch.Tensor, seq_len: int | None = None) -> torch.Tensor:
        """m * theta_i for the given (T,) positions: (T, r/2) float32."""
        if seq_len is None:
            seq_len = int(positions.max().item()) + 1 if positions.numel() else 0
        inv_freq = self.inv_freq_at(seq_len)  # (r/2,) theta_i
        # angle[m, i] = m theta_i: position m turns pair i by m times its frequency
        return torch.outer(positions.to(device=inv_freq.device, dtype=torch.float32), inv_freq)  # (T, r/2)

    def forward(self, T: int, offset: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
        """cos and sin for positions offset .. offset + T - 1, each (T, r) float32 (r = rotary_dim)."""
        check_int("T", T, 0)
        check_int("offset", offset, 0)
        positions = torch.arange(offset, offset + T, device=self.inv_freq.device)  # (T,)
        angle = self.angles(positions, seq_len=offset + T)  # (T, r/2)
        # both channels of a pair turn by the pair's angle: write it at each of the two columns
        if self.pairing == "half":
            angle = torch.cat([angle, angle], dim=-1)  # (T, r) pair i at columns i and i + r/2
        else:
            angle = angle.repeat_interleave(2, dim=-1)  # (T, r) pair i at columns 2i and 2i + 1
        # R(m theta_i) is read off cos and sin of that angle; YaRN also scales them (attention_factor)
        return angle.cos() * self.attention_factor, angle.sin() * self.attention_factor  # (T, r) each

    def apply_tables(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, rotate=apply_rotary) -> torch.Tensor:  # type: ignore[no-untyped-def]
        """Rotate the first r channels of x (..., T, d_head) with the tables from `forward`, pass the rest.
        `rotate` is apply_rotary or a kernel with its signature (fused.apply_rotary_fused)."""
        r = cos.shape[-1]
        if r == x.shape[-1]:
            return rotate(x, cos, sin, self.pairing)  # (..., T, d_head)
        turned = rotate(x[..., :r], cos, sin, self.pairing)  # (..., T, r)
        return torch.cat([turned, x[..., r:]], dim=-1)  # (..., T, d_head) channels r.. unrotated

    def rotate(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        """Rotate x (..., T, d_head) as if its T rows sit at positions offset .. offset + T - 1."""
        if check_tensor("x", x).dim() < 2 or x.shape[-1] != self.d_head:
            raise ValueError(f"x must have shape (..., T, d_head={self.d_head}), got {tuple(x.shape)}")
        cos, sin = self(x.shape[-2], offset)  # (T, r) each
        return self.apply_tables(x, cos, sin)  # (..., T, d_head)


def convert_rotary_weights(weight: torch.Tensor, n_heads: int, to: str) -> torch.Tensor:
    """Permute the output rows of a q or k projection between the two RoPE pairings.

    A weight of shape (n_heads * d_head, d_in) trained with pairing "half" (pairs (i, i + d/2))
    becomes one for pairing "interleaved" (pairs (2i, 2i + 1)) with to="interleaved", and back
    with to="half". Rotated scores q . k are unchanged, because both q and k channels move by
    the same permutation and each pair keeps its frequency. A bias (n_heads * d_head,) works too.
    """
    check_choice("to", to, ROPE_PAIRINGS)
    d_head = check_head_rows("weight", weight, n_heads)
    half = torch.arange(d_head // 2)  # (d/2,)
    to_interleaved = torch.stack([half, half + d_head // 2], dim=-1).flatten()  # (d,) new row r <- old row
    perm = to_interleaved if to == "interleaved" else torch.argsort(to_interleaved)  # (d,)
    w = weight.reshape(n_heads, d_head, *weight.shape[1:])  # (H, d_head, ...)
    return w[:, perm].reshape(weight.shape)  # (H * d_head, ...)


# ---------------------------------------------------------------------------
# ALiBi
# ---------------------------------------------------------------------------


def alibi_slopes(n_heads: int) -> torch.Tensor:
    """Per-head ALiBi slopes (Press et al., 2022).

    For H a power of two: m_h = 2^(-8h/H), h = 1..H (H = 8 gives 1/2, 1/4, ..., 1/256). Otherwise,
    with n the largest power of two below H, the paper takes the n slopes for n heads and adds
    every other slope of the 2n-head sequence until there are H. Returns (H,) float32.
    """
    check_int("n_heads", n_heads, 1)

    def power_of_two_slopes(n: int) -> list[float]:  # the geometric sequence for n heads, n a power of two
        start = 2.0 ** (-8.0 / n)  # 2^(-8/n)
        return [start ** (h + 1) for h in range(n)]

    n = 2 ** math.floor(math.log2(n_heads))  # the largest power of two <= H
    slopes = power_of_two_slopes(n)  # n slopes, 2^(-8/n) down to 2^(-8)
    if n < n_heads:
        slopes += power_of_two_slopes(2 * n)[0::2][: n_heads - n]  # every other slope of the 2n-head sequence
    return torch.tensor(slopes, dtype=torch.float32)  # (H,)


def alibi_bias(n_heads: int, T_q: int, T_k: int, device: torch.device | str | None = None) -> torch.Tensor:
    """Causal ALiBi bias: S[h, i, j] += -m_h * (i - j) for keys j <= i, 0 for future keys.

    The T_q queries are the last T_q of the T_k positions (query i sits at T_k - T_q + i), as in
    cached decoding. Future keys get 0 rather than a bonus; the causal mask removes them.
    Returns (1, H, T_q, T_k) float32 on `device` (default: CPU).
    """
    check_int("n_heads", n_heads, 1)
    check_int("T_q", T_q, 0)
    check_int("T_k", T_k, 0)
    if T_q > T_k:
        raise ValueError(f"T_q ({T_q}) must be <= T_k ({T_k}): the queries are the last T_q of the T_k key positions")
    q_pos = torch.arange(T_k - T_q, T_k, device=device)[:, None]  # (T_q, 1)
    k_pos = torch.arange(T_k, device=device)[None, :]  # (1, T_k)
    distance = (q_pos - k_pos).clamp(min=0).float()  # (T_q, T_k) i - j, 0 for future keys
    slopes = alibi_slopes(n_heads).to(distance.device)  # (H,)
    return -slopes[None, :, None, None] * distance[None, None]  # (1, H, T_q, T_k)

