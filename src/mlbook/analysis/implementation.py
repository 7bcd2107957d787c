"""Checks behind section 3's walkthrough of the library: what the code does, measured.

    cached_keys_check   where attention rotates: a KV cache fed one token at a time holds keys
                        rotated at their absolute positions (after the head split, before the
                        cache update), and cached decoding reproduces the full forward

Nothing here draws; the section prints what these return.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from mlbook.transformer.attention import MultiHeadAttention
from mlbook.transformer.cache import KVCache
from mlbook.transformer.positional import RotaryEmbedding
from mlbook.transformer.validate import check_int

__all__ = ["CachedKeysReport", "cached_keys_check"]


@dataclass(frozen=True)
class CachedKeysReport:
    """Max absolute differences, float64, for one attention layer decoding T tokens one at a time."""

    T: int
    cache_vs_rotated: float  # |cache.k - R_m k_m|: keys stored rotated at their own positions m
    cache_vs_unrotated: float  # |cache.k - k_m|: what an unrotated cache would hold
    cached_vs_full: float  # |one-token-at-a-time output - full forward output|
    tol: float = 1e-12

    def __repr__(self) -> str:
        yes = lambda err: "yes" if err < self.tol else "no"  # noqa: E731
        return "\n".join([
            f"{self.T} tokens, one at a time, RoPE attention with a KVCache (float64):",
            f"  cache holds R_m k_m (rotated at position m):  {yes(self.cache_vs_rotated)}",
            f"  cache holds the unrotated k_m:                {yes(self.cache_vs_unrotated)}",
            f"  cached outputs equal the full forward:        {yes(self.cached_vs_full)}",
        ])


def cached_keys_check(T: int = 6, d_model: int = 32, n_heads: int = 4, seed: int = 0) -> CachedKeysReport:
    """Decode T tokens through `MultiHeadAttention(rotary=RotaryEmbedding(d_head))` with a `KVCache`.

    Compares the cache's keys with the layer's own k projection, split into heads and rotated at
    positions 0 .. T-1 (`RotaryEmbedding.rotate`), and with the same keys unrotated; and the
    step-by-step outputs with one full forward pass. Seeded weights; the caller's RNG is untouched.
    """
    check_int("T", T, 1)
    check_int("d_model", d_model, 1)
    check_int("n_heads", n_heads, 1)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        attn = MultiHeadAttention(d_model, n_heads, rotary=RotaryEmbedding(d_model // n_heads)).double().eval()
    x = torch.randn(1, T, d_model, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)  # (B, T, d)
    cache = KVCache(capacity=T)
    with torch.no_grad():
        full = attn(x)  # (B, T, d_model)
        steps = torch.cat([attn(x[:, t : t + 1], cache=cache) for t in range(T)], dim=1)  # (B, T, d_model)
        k = attn.split_heads(attn.k_proj(x))  # (B, H, T, d_head) after the head split, before any rotation
        k_rot = attn.rotary.rotate(k, offset=0)  # (B, H, T, d_head) row m rotated by m * theta_i
    diff = lambda a, b: (a - b).abs().max().item()  # noqa: E731
    return CachedKeysReport(T, diff(cache.k, k_rot), diff(cache.k, k), diff(steps, full))
