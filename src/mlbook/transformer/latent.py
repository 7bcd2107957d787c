"""Multi-head latent attention (MLA) with decoupled RoPE, as in DeepSeek-V2 and DeepSeek-V3.

The idea (DeepSeek-AI, 2024, "DeepSeek-V2", section 2.1). Instead of caching every head's key and
value, a token is compressed once into a small latent vector c_kv (kv_lora_rank wide, 512 in
DeepSeek-V2/V3) and the heads' keys and values are read back out of it by up-projections:

    c_kv   = norm(W_DKV x)                      (r,)         the part that is cached
    k_h    = W_UK_h c_kv,  v_h = W_UV_h c_kv     (d_nope,)     per head, recomputed or absorbed

Absorption. A query meets a key as q_h . k_h = q_h . (W_UK_h c_kv) = (W_UK_h^T q_h) . c_kv, so the
key up-projection can be folded into the query once, and attention runs against the cached latents
directly; the value up-projection folds into the output projection the same way. Nothing per head
is ever materialised for the cached tokens.

Why RoPE breaks it. Rotate the key by its position n and the query by m: the score becomes
q_h . R_m^T R_n W_UK_h c_kv = q_h . R_(n-m) W_UK_h c_kv. The matrix between q_h and c_kv now
depends on the offset n - m, so no single matrix can be folded into the query: every cached key
would have to be rebuilt and rotated for every new query (`absorption_error` measures this).

The fix: decoupled RoPE. Keep the latent part position-free and add a small separate part that
carries the rotation: each head gets d_rope more query dims (64 in DeepSeek-V2/V3), and every token
gets ONE rotary key k_rope (d_rope,) shared by all heads, computed from x and rotated once, like a
multi-query key. The score is the sum of the two parts,

    score_h(m, n) = q_nope_h(m) . k_nope_h(n) + q_rope_h(m) . k_rope(n),   scaled by 1/sqrt(d_nope + d_rope)

and a token's cache entry is c_kv and the rotated k_rope: kv_lora_rank + qk_rope_head_dim values per
layer (512 + 64 = 576 in DeepSeek-V3), against 2 * n_heads * d_head for multi-head attention.

Names and layout follow Hugging Face's `DeepseekV3Attention` (transformers 4.57,
models/deepseek_v3/modeling_deepseek_v3.py), so its weights load with `load_state_dict`: `q_proj`
(or `q_a_proj`, `q_a_layernorm`, `q_b_proj` with a query rank), `kv_a_proj_with_mqa` (d_model ->
kv_lora_rank + d_rope), `kv_a_layernorm`, `kv_b_proj` (kv_lora_rank -> n_heads (d_nope + d_v)) and
`o_proj`. Hugging Face's `rope_interleave=True` (the default) is this module's
`pairing="interleaved"`; `rope_interleave=False` is `pairing="half"`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

import torch
from torch import nn

from mlbook.transformer.attention import causal_mask
from mlbook.transformer.models import RMSNorm
from mlbook.transformer.positional import ROPE_PAIRINGS, RotaryEmbedding
from mlbook.transformer.validate import check_choice, check_even_d, check_int, check_positive_float

__all__ = [
    "MLAConfig",
    "LatentCache",
    "MultiHeadLatentAttention",
    "mla_cache_values",
    "mha_cache_values",
    "AbsorptionReport",
    "absorption_error",
]


@dataclass(frozen=True)
class MLAConfig:
    """The shape of one MLA layer; the defaults are a tiny model, `deepseek_v3()` the released one.

    DeepSeek-V3 (config.json of deepseek-ai/DeepSeek-V3, and transformers' DeepseekV3Config defaults):
    d_model 7168, 128 heads, q_lora_rank 1536, kv_lora_rank 512, qk_nope_head_dim 128,
    qk_rope_head_dim 64, v_head_dim 128, rope base 10000, 61 layers.
    """

    d_model: int = 64
    n_heads: int = 4
    kv_lora_rank: int = 16  # width of the cached latent c_kv
    q_lora_rank: int | None = None  # None: one query projection; an int: down, norm, up as DeepSeek-V3
    qk_nope_head_dim: int = 16  # per-head query/key dims read from the latent (no rotation)
    qk_rope_head_dim: int = 8  # per-head query dims and the one shared key that carry RoPE
    v_head_dim: int = 16
    rope_base: float = 10000.0
    pairing: str = "half"  # "interleaved" = Hugging Face's rope_interleave=True
    norm_eps: float = 1e-6

    def __post_init__(self) -> None:
        for name in ("d_model", "n_heads", "kv_lora_rank", "qk_nope_head_dim", "v_head_dim"):
            check_int(name, getattr(self, name), 1)
        if self.q_lora_rank is not None:
            check_int("q_lora_rank", self.q_lora_rank, 1)
        check_even_d("qk_rope_head_dim", self.qk_rope_head_dim)
        check_positive_float("rope_base", self.rope_base, above=1.0)
        check_choice("pairing", self.pairing, ROPE_PAIRINGS)
        check_positive_float("norm_eps", self.norm_eps)

    @property
    def qk_head_dim(self) -> int:
        """A query's (and a key's) full width per head: the latent part plus the rotary part."""
        return self.qk_nope_head_dim + self.qk_rope_head_dim

    @property
    def cache_values_per_token(self) -> int:
        """Values one token leaves in this layer's cache: the latent c_kv and the shared rotary key."""
        return self.kv_lora_rank + self.qk_rope_head_dim

    def replace(self, **changes: Any) -> MLAConfig:
        return replace(self, **changes)

    @classmethod
    def deepseek_v3(cls) -> MLAConfig:
        """DeepSeek-V3's attention shape (one layer of 61)."""
        return cls(d_model=7168, n_heads=128, kv_lora_rank=512, q_lora_rank=1536, qk_nope_head_dim=128,
                   qk_rope_head_dim=64, v_head_dim=128, rope_base=10000.0, pairing="interleaved")


class LatentCache(NamedTuple):
    """What MLA keeps per token: the latent (B, T, kv_lora_rank) and the rotated shared key (B, T, d_rope)."""

    c_kv: torch.Tensor
    k_rope: torch.Tensor


class MultiHeadLatentAttention(nn.Module):
    """Causal MLA with decoupled RoPE; `forward` expands keys and values, `forward_absorbed` never does.

    Both give the same output (to rounding): `forward` is the readable form (rebuild every head's key
    and value from the latent, attend as usual), `forward_absorbed` the inference form (fold the key
    up-projection into the query and the value up-projection into the output, attend over the cache).
    """

    def __init__(self, config: MLAConfig) -> None:
        super().__init__()
        if not isinstance(config, MLAConfig):
            raise TypeError(f"config must be an MLAConfig, got {type(config).__name__}")
        self.config = c = config
        H = c.n_heads
        if c.q_lora_rank is None:
            self.q_proj = nn.Linear(c.d_model, H * c.qk_head_dim, bias=False)
        else:  # DeepSeek-V2/V3 also compress the query (saves activations in training, not cache)
            self.q_a_proj = nn.Linear(c.d_model, c.q_lora_rank, bias=False)
            self.q_a_layernorm = RMSNorm(c.q_lora_rank, c.norm_eps)
            self.q_b_proj = nn.Linear(c.q_lora_rank, H * c.qk_head_dim, bias=False)
        # one projection gives the latent and the shared rotary key side by side
        self.kv_a_proj_with_mqa = nn.Linear(c.d_model, c.kv_lora_rank + c.qk_rope_head_dim, bias=False)
        self.kv_a_layernorm = RMSNorm(c.kv_lora_rank, c.norm_eps)
        # W_UK and W_UV stacked: per head d_nope rows of key, then d_v rows of value
        self.kv_b_proj = nn.Linear(c.kv_lora_rank, H * (c.qk_nope_head_dim + c.v_head_dim), bias=False)
        self.o_proj = nn.Linear(H * c.v_head_dim, c.d_model, bias=False)
        self.rotary = RotaryEmbedding(c.qk_rope_head_dim, c.rope_base, pairing=c.pairing)
        self.scale = 1.0 / math.sqrt(c.qk_head_dim)

    def _check(self, x: object) -> torch.Tensor:
        if not isinstance(x, torch.Tensor) or x.dim() != 3 or x.shape[-1] != self.config.d_model:
            shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
            raise ValueError(f"x must be a tensor of shape (B, T, d_model={self.config.d_model}), got {shape}")
        return x

    def queries(self, x: torch.Tensor, offset: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
        """q_nope (B, H, T, d_nope) and q_rope (B, H, T, d_rope), the latter rotated to positions offset.."""
        c, (B, T, _) = self.config, self._check(x).shape
        if c.q_lora_rank is None:
            q = self.q_proj(x)  # (B, T, H * d_qk)
        else:
            q = self.q_b_proj(self.q_a_layernorm(self.q_a_proj(x)))  # (B, T, H * d_qk)
        q = q.view(B, T, c.n_heads, c.qk_head_dim).transpose(1, 2)  # (B, H, T, d_qk)
        q_nope, q_rope = q.split([c.qk_nope_head_dim, c.qk_rope_head_dim], dim=-1)  # (B, H, T, d_nope), (.., d_rope)
        return q_nope, self.rotary.rotate(q_rope, offset)  # q_rope turned by its position

    def latent(self, x: torch.Tensor, offset: int = 0) -> LatentCache:
        """The cache entries of x's tokens: c_kv (B, T, r) and the rotated shared key k_rope (B, T, d_rope)."""
        c = self.config
        ckv, k_rope = self.kv_a_proj_with_mqa(self._check(x)).split([c.kv_lora_rank, c.qk_rope_head_dim], dim=-1)
        # the latent is normalised before the up-projection; k_rope is rotated once, when it is written
        return LatentCache(self.kv_a_layernorm(ckv), self.rotary.rotate(k_rope, offset))  # (B, T, r), (B, T, d_rope)

    def up_projections(self) -> tuple[torch.Tensor, torch.Tensor]:
        """W_UK (H, d_nope, r) and W_UV (H, d_v, r): kv_b_proj's weight split per head."""
        c = self.config
        w = self.kv_b_proj.weight.view(c.n_heads, c.qk_nope_head_dim + c.v_head_dim, c.kv_lora_rank)  # (H, dn+dv, r)
        w_uk, w_uv = w.split([c.qk_nope_head_dim, c.v_head_dim], dim=1)  # (H, d_nope, r), (H, d_v, r)
        return w_uk, w_uv

    def _attend(self, scores: torch.Tensor, T_k: int) -> torch.Tensor:
        T_q = scores.shape[-2]
        scores = scores.masked_fill(~causal_mask(T_q, T_k, scores.device), float("-inf"))  # (B, H, T_q, T_k)
        return torch.softmax(scores.float(), dim=-1).to(scores.dtype)  # (B, H, T_q, T_k)

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        """Readable form: rebuild each head's key and value from the latent, then causal attention. (B, T, d_model)."""
        c, (B, T, _) = self.config, self._check(x).shape
        q_nope, q_rope = self.queries(x, offset)  # (B, H, T, d_nope), (B, H, T, d_rope)
        cache = self.latent(x, offset)  # c_kv (B, T, r), k_rope (B, T, d_rope)
        kv = self.kv_b_proj(cache.c_kv).view(B, T, c.n_heads, -1).transpose(1, 2)  # (B, H, T, d_nope + d_v)
        k_nope, v = kv.split([c.qk_nope_head_dim, c.v_head_dim], dim=-1)  # (B, H, T, d_nope), (B, H, T, d_v)
        k_rope = cache.k_rope.unsqueeze(1).expand(B, c.n_heads, T, c.qk_rope_head_dim)  # (B, H, T, d_rope) shared
        q = torch.cat([q_nope, q_rope], dim=-1)  # (B, H, T, d_qk)
        k = torch.cat([k_nope, k_rope], dim=-1)  # (B, H, T, d_qk)
        w = self._attend(q @ k.transpose(-2, -1) * self.scale, T)  # (B, H, T, T)
        out = (w @ v).transpose(1, 2).reshape(B, T, c.n_heads * c.v_head_dim)  # (B, T, H * d_v)
        return self.o_proj(out)  # (B, T, d_model)

    def forward_absorbed(self, x: torch.Tensor, cache: LatentCache | None = None, offset: int = 0) -> torch.Tensor:
        """Inference form: attend over the latent cache with W_UK folded into the query and W_UV into the output.

        `cache` holds the earlier tokens' entries (positions 0 .. offset - 1), or None; x's tokens sit
        at positions offset .. offset + T - 1. Returns (B, T, d_model), equal to `forward` on the whole text.
        """
        c, (B, T, _) = self.config, self._check(x).shape
        new = self.latent(x, offset)  # (B, T, r), (B, T, d_rope)
        if cache is not None:
            new = LatentCache(torch.cat([cache.c_kv, new.c_kv], dim=1), torch.cat([cache.k_rope, new.k_rope], dim=1))
        T_k = new.c_kv.shape[1]
        q_nope, q_rope = self.queries(x, offset)  # (B, H, T, d_nope), (B, H, T, d_rope)
        w_uk, w_uv = self.up_projections()  # (H, d_nope, r), (H, d_v, r)
        # q_nope . (W_UK c) = (W_UK^T q_nope) . c: the key up-projection moves onto the query
        q_latent = torch.einsum("bhtd,hdr->bhtr", q_nope, w_uk)  # (B, H, T, r)
        scores = q_latent @ new.c_kv.unsqueeze(1).transpose(-2, -1)  # (B, H, T, T_k) against the latents
        scores = scores + q_rope @ new.k_rope.unsqueeze(1).transpose(-2, -1)  # (B, H, T, T_k) the rotary part
        w = self._attend(scores * self.scale, T_k)  # (B, H, T, T_k)
        ctx = w @ new.c_kv.unsqueeze(1)  # (B, H, T, r) a mix of latents
        out = torch.einsum("bhtr,hdr->bthd", ctx, w_uv).reshape(B, T, -1)  # (B, T, H * d_v) W_UV applied once
        return self.o_proj(out)  # (B, T, d_model)


def mla_cache_values(n_layers: int, kv_lora_rank: int, qk_rope_head_dim: int) -> int:
    """Values MLA caches per token: n_layers * (kv_lora_rank + qk_rope_head_dim) (DeepSeek-V2, eq. 14-19).

    DeepSeek-V3: 61 * (512 + 64) = 35,136 values, 70,272 bytes in bf16. DeepSeek-V2 writes this as
    (d_c + d_h^R) l = (4 d_h + d_h / 2) l with d_h = 128, about what grouped-query attention with 2.25
    groups would cache.
    """
    check_int("n_layers", n_layers, 1)
    check_int("kv_lora_rank", kv_lora_rank, 1)
    check_int("qk_rope_head_dim", qk_rope_head_dim, 0)
    return n_layers * (kv_lora_rank + qk_rope_head_dim)


def mha_cache_values(n_layers: int, n_kv_heads: int, k_head_dim: int, v_head_dim: int | None = None) -> int:
    """Values a multi-head (or grouped-query) attention cache holds per token: n_layers * n_kv_heads * (d_k + d_v)."""
    check_int("n_layers", n_layers, 1)
    check_int("n_kv_heads", n_kv_heads, 1)
    check_int("k_head_dim", k_head_dim, 1)
    v_head_dim = k_head_dim if v_head_dim is None else check_int("v_head_dim", v_head_dim, 1)
    return n_layers * n_kv_heads * (k_head_dim + v_head_dim)


class AbsorptionReport(NamedTuple):
    """Scores with materialised keys against scores with W_UK folded into the query, and their gap."""

    rotate: bool
    materialised: torch.Tensor  # (T, T) q_m . k_n with k_n = W_UK c_n (rotated by n if rotate)
    absorbed: torch.Tensor  # (T, T) (W_UK^T q_m) . c_n, one fixed matrix per head (what absorption computes)
    max_error: float  # largest |difference| relative to the largest |score|


def absorption_error(rotate: bool, *, T: int = 16, d_head: int = 32, rank: int = 24, base: float = 10000.0,
                     seed: int = 0) -> AbsorptionReport:
    """Does folding W_UK into the query reproduce the scores? Yes without RoPE, no with it.

    One head, float64: latents c_n (rank,), a key up-projection W_UK (d_head, rank), queries q_m.
    Materialised: k_n = W_UK c_n, rotated by R_n when `rotate`, queries rotated by R_m. Absorbed: the
    query is mapped once to W_UK^T q_m and dotted with c_n, a fixed map that cannot know m or n.
    Without rotation the two agree to rounding (q . W_UK c = W_UK^T q . c); with it, the true score is
    q_m^T R_(n-m) W_UK c_n, whose matrix changes with n - m, and the absorbed scores are wrong except
    on the diagonal n = m, where R_0 = I.
    """
    check_int("T", T, 1)
    gen = torch.Generator().manual_seed(seed)
    c = torch.randn(T, rank, generator=gen, dtype=torch.float64)  # (T, r) cached latents
    w_uk = torch.randn(d_head, rank, generator=gen, dtype=torch.float64) / math.sqrt(rank)  # (d_head, r)
    q = torch.randn(T, d_head, generator=gen, dtype=torch.float64)  # (T, d_head) one query per position
    k = c @ w_uk.T  # (T, d_head) keys rebuilt from the latents
    absorbed = (q @ w_uk) @ c.T  # (T, T) (W_UK^T q_m) . c_n: one fixed map per head, blind to positions
    if rotate:
        rope = RotaryEmbedding(d_head, base)
        q, k = rope.rotate(q), rope.rotate(k)  # (T, d_head) each at its own position
    materialised = q @ k.T  # (T, T) q_m . k_n = q_m^T R_(n-m) W_UK c_n when rotated
    scale = float(materialised.abs().max())
    return AbsorptionReport(rotate, materialised, absorbed, float((materialised - absorbed).abs().max()) / scale)
