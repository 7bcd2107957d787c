"""Multi-head attention that takes any positional scheme: rotate q and k, or add a score bias.

    S = q k^T / sqrt(d_head) + bias        bias: T5 relative bias or ALiBi, (1 or B, H, T_q, T_k)
    A = softmax(S masked causally)         queries are the last T_q of the T_k keys
    out = A v

RoPE is applied after splitting heads and before the cache update, so a plain KV cache holds
keys already rotated at their absolute positions. A sink cache holds unrotated keys, which are
rotated by slot when read. Without `return_weights` the fused
`torch.nn.functional.scaled_dot_product_attention` does the work; with it, the readable path
below computes the same thing and also returns the weights for plots. RoPE itself has the same two
paths (`rotate`): the readable `apply_rotary`, or its compiled kernel where that pays (`fused`).
"""

from __future__ import annotations

import math
from typing import Callable, Union

import torch
import torch.nn.functional as F
from torch import nn

from mlbook.transformer.cache import KVCache, SinkCache
from mlbook.transformer.fused import apply_rotary_fused, wants_fused
from mlbook.transformer.positional import RotaryEmbedding, apply_rotary
from mlbook.transformer.validate import check_bool, check_int, check_real

__all__ = ["MultiHeadAttention", "causal_mask", "PositionBias"]

# A score bias given directly, or a function (T_q, T_k) -> (1 or B, H, T_q, T_k) called once T_k is known.
PositionBias = Union[torch.Tensor, Callable[[int, int], torch.Tensor], None]


def causal_mask(T_q: int, T_k: int, device: torch.device | None = None, window: int | None = None) -> torch.Tensor:
    """Boolean (T_q, T_k) mask, True where query i (at position T_k - T_q + i) may see key j <= it.

    With a window W (sliding-window attention, Mistral, Gemma 2's local layers) the query at position
    p sees only p - W < j <= p: itself and the W - 1 keys before it, Hugging Face's convention.
    """
    q_pos = torch.arange(T_k - T_q, T_k, device=device)[:, None]  # (T_q, 1)
    k_pos = torch.arange(T_k, device=device)[None, :]  # (1, T_k)
    if window is None:
        return k_pos <= q_pos  # (T_q, T_k)
    return (k_pos <= q_pos) & (k_pos > q_pos - window)  # (T_q, T_k) the last W positions


def _autocast_on(device_type: str) -> bool:
    """Whether torch.autocast is active for device_type (where inputs and weights may differ in dtype)."""
    try:
        return bool(torch.is_autocast_enabled(device_type))
    except TypeError:  # torch < 2.4: no device argument
        return bool(torch.is_autocast_enabled())


class MultiHeadAttention(nn.Module):
    """Multi-head attention with optional RoPE, additive position bias and a KV or sink cache.

    Args:
        d_model: model width; split into n_heads heads of d_head = d_model / n_heads.
        n_heads: number of query heads.
        causal: mask future keys (decoder) or not (encoder, cross-attention).
        rotary: a RotaryEmbedding to rotate q and k with (None: no rotation, a NoPE layer).
        bias: whether the four projections carry a bias.
        dropout: attention-weight dropout while training.
        n_kv_heads: key/value heads (grouped-query attention, Ainslie et al., 2023): query head h reads
            key/value head h // (n_heads / n_kv_heads), as Hugging Face's repeat_kv; the cache holds
            n_kv_heads heads. None: n_heads (multi-head); 1: multi-query.
        window: sliding-window attention (causal only): a query sees itself and the window - 1 keys before it.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        *,
        causal: bool = True,
        rotary: RotaryEmbedding | None = None,
        bias: bool = False,
        dropout: float = 0.0,
        n_kv_heads: int | None = None,
        window: int | None = None,
    ) -> None:
        super().__init__()
        check_int("d_model", d_model, 1)
        check_int("n_heads", n_heads, 1)
        if d_model % n_heads != 0:
            raise ValueError(f"d_model ({d_model}) must be divisible by n_heads ({n_heads})")
        n_kv_heads = n_heads if n_kv_heads is None else check_int("n_kv_heads", n_kv_heads, 1)
        if n_heads % n_kv_heads != 0:
            raise ValueError(f"n_heads ({n_heads}) must be a multiple of n_kv_heads ({n_kv_heads})")
        check_bool("causal", causal)
        check_bool("bias", bias)
        check_real("dropout", dropout, minimum=0.0, below=1.0)
        if window is not None:
            check_int("window", window, 1)
            if not causal:
                raise ValueError("window (sliding-window attention) needs causal=True")
        if rotary is not None and not isinstance(rotary, RotaryEmbedding):
            raise TypeError(f"rotary must be a RotaryEmbedding or None, got {type(rotary).__name__}")
        self.d_model, self.n_heads, self.d_head = d_model, n_heads, d_model // n_heads
        self.n_kv_heads, self.window = n_kv_heads, window
        if rotary is not None and rotary.d_head != self.d_head:
            raise ValueError(f"rotary.d_head ({rotary.d_head}) must equal d_model / n_heads ({self.d_head})")
        self.causal, self.rotary, self.dropout = causal, rotary, dropout
        d_kv = n_kv_heads * self.d_head
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_kv, bias=bias)
        self.v_proj = nn.Linear(d_model, d_kv, bias=bias)
        self.o_proj = nn.Linear(d_model, d_model, bias=bias)

    def split_heads(self, x: torch.Tensor) -> torch.Tensor:
        """(B, T, n * d_head) -> (B, n, T, d_head): head h takes features h d_head .. (h + 1) d_head - 1."""
        B, T, width = x.shape
        return x.view(B, T, width // self.d_head, self.d_head).transpose(1, 2)  # (B, n, T, d_head)

    def share_kv(self, x: torch.Tensor) -> torch.Tensor:
        """(B, n_kv_heads, T, d_head) -> (B, n_heads, T, d_head): each key/value head serves n_heads / n_kv_heads queries."""
        group = self.n_heads // self.n_kv_heads
        return x if group == 1 else x.repeat_interleave(group, dim=1)  # (B, H, T, d_head)

    def _check_input(self, name: str, x: object, batch: int | None) -> None:
        """x or context: a (B, T, d_model) tensor in the projections' dtype and on their device."""
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor of shape (B, T, d_model={self.d_model}), "
                            f"got {type(x).__name__}")
        if x.dim() != 3 or x.shape[-1] != self.d_model:
            raise ValueError(f"{name} must be (B, T, d_model={self.d_model}), got {tuple(x.shape)}")
        w = self.q_proj.weight
        if not x.is_floating_point():
            raise TypeError(f"{name} must be a floating-point tensor (embeddings, not token ids), got dtype {x.dtype}")
        if x.dtype != w.dtype and not _autocast_on(x.device.type):
            raise TypeError(f"{name} has dtype {x.dtype} but the attention weights are {w.dtype}; convert one to the "
                            f"other (e.g. {name}.to({w.dtype}) or module.to({x.dtype}))")
        if x.device != w.device:
            raise ValueError(f"{name} is on {x.device} but the attention weights are on {w.device}; move one of them")
        if batch is not None and x.shape[0] != batch:
            raise ValueError(f"{name} has batch size {x.shape[0]}, x has {batch}; they must match")

    def _check_bias(self, bias: object, B: int, T_q: int, T_k: int) -> None:
        """position_bias (or what its function returned): floating point, (1 or B, 1 or H, T_q, T_k)."""
        want = f"(1 or B={B}, 1 or H={self.n_heads}, T_q={T_q}, T_k={T_k})"
        if not isinstance(bias, torch.Tensor):
            raise TypeError(f"position_bias must be a tensor {want}, a function (T_q, T_k) -> such a tensor, "
                            f"or None; got {type(bias).__name__}")
        if not bias.is_floating_point():
            raise TypeError(f"position_bias must be a floating-point tensor added to the scores, got dtype "
                            f"{bias.dtype} (for a mask, use causal=True)")
        ok = (bias.dim() == 4 and bias.shape[0] in (1, B) and bias.shape[1] in (1, self.n_heads)
              and tuple(bias.shape[2:]) == (T_q, T_k))
        if not ok:
            raise ValueError(f"position_bias must have shape {want}, got {tuple(bias.shape)}")

    def rotate(self, x: torch.Tensor, offset: int) -> torch.Tensor:
        """RoPE on x (B, H, T, d_head) at positions offset .. offset + T - 1.

        The compiled kernel where `fused.wants_fused(x)` says it pays (large inputs outside autograd,
        or MLBOOK_ROPE_KERNEL=fused), else the readable `apply_rotary`: the same numbers either way.
        """
        cos, sin = self.rotary(x.shape[2], offset)  # (T, r) each, float32; r = d_head unless partial
        kernel = apply_rotary_fused if wants_fused(x) else apply_rotary  # one compiled pass, or the readable one
        return self.rotary.apply_tables(x, cos, sin, kernel)  # (B, H, T, d_head)

    def forward(
        self,
        x: torch.Tensor,
        *,
        context: torch.Tensor | None = None,
        cache: KVCache | SinkCache | None = None,
        position_bias: PositionBias = None,
        return_weights: bool = False,
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """x: (B, T_q, d_model). context: (B, T_k, d_model) for cross-attention (keys from it).

        Returns (B, T_q, d_model), and the weights (B, H, T_q, T_k) if return_weights.
        """
        self._check_input("x", x, None)
        if context is not None:
            self._check_input("context", context, x.shape[0])
        if cache is not None and not isinstance(cache, (KVCache, SinkCache)):
            raise TypeError(f"cache must be a KVCache, a SinkCache or None, got {type(cache).__name__}")
        check_bool("return_weights", return_weights)
        if context is not None and cache is not None:
            raise ValueError("cross-attention (context=...) does not use a cache here; pass cache=None")
        B, T_q, _ = x.shape
        src = x if context is None else context
        q = self.split_heads(self.q_proj(x))  # (B, H, T_q, d_head)
        k = self.split_heads(self.k_proj(src))  # (B, H_kv, T_src, d_head)
        v = self.split_heads(self.v_proj(src))  # (B, H_kv, T_src, d_head)

        if cache is not None and cache.rotates_on_read:
            k, v = cache.update(k, v)  # (B, H_kv, T_k, d_head) unrotated, in slot order
            if self.rotary is not None:
                T_k = k.shape[2]
                k = self.rotate(k, offset=0)  # (B, H_kv, T_k, d_head) slot s at position s
                q = self.rotate(q, offset=T_k - T_q)  # (B, H, T_q, d_head) the last slots
        else:
            offset = cache.length if cache is not None else 0  # absolute position of the first query
            if self.rotary is not None and context is None:
                q = self.rotate(q, offset)  # (B, H, T_q, d_head)
                k = self.rotate(k, offset)  # (B, H_kv, T_q, d_head) rotated once, at write time
            if cache is not None:
                k, v = cache.update(k, v)  # (B, H_kv, T_k, d_head)
        k, v = self.share_kv(k), self.share_kv(v)  # (B, H, T_k, d_head) each
        T_k = k.shape[2]

        bias = position_bias(T_q, T_k) if callable(position_bias) else position_bias
        if bias is not None:
            self._check_bias(bias, B, T_q, T_k)
        mask = causal_mask(T_q, T_k, x.device, self.window) if self.causal else None  # (T_q, T_k) bool
        dropout_p = self.dropout if self.training else 0.0

        if return_weights:
            scores = (q.float() @ k.float().transpose(-2, -1)) / math.sqrt(self.d_head)  # (B, H, T_q, T_k)
            if bias is not None:
                scores = scores + bias.float()
            if mask is not None:
                scores = scores.masked_fill(~mask, float("-inf"))
            weights = scores.softmax(dim=-1)  # (B, H, T_q, T_k) rows sum to 1
            out = F.dropout(weights, dropout_p, self.training).to(v.dtype) @ v  # (B, H, T_q, d_head)
        else:
            if bias is None:
                plain = mask is not None and T_q == T_k and self.window is None
                attn_mask, is_causal = (None, True) if plain else (mask, False)
            else:
                attn_mask = bias.to(q.dtype)  # (1 or B, H, T_q, T_k)
                if mask is not None:
                    attn_mask = attn_mask.masked_fill(~mask, float("-inf"))
                is_causal = False
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal)

        out = self.o_proj(out.transpose(1, 2).reshape(B, T_q, self.d_model))  # (B, T_q, d_model)
        return (out, weights) if return_weights else out
