"""Tiny Transformers for the chapter's experiments: an encoder block, a GPT, a T5-style encoder-decoder.

All are pre-norm. The GPT follows the LLaMA layout by default (RMSNorm, SwiGLU, no biases),
so its logits can be checked against Hugging Face's Llama with copied weights; `positional`
picks where order enters:

    none        nothing (the causal mask still leaks some position)
    sinusoidal  fixed table added to the token embeddings
    learned     trained table added to the token embeddings (cannot go past max_len)
    t5          one RelativePositionBias per stack, added to the scores of every layer
    rope        q and k rotated in every layer (`rope` options: ROPE_OPTIONS, see GPTConfig.rotary_embedding),
                except the `nope_layers` (hybrid stacks: Llama 4, SmolLM3)
    alibi       fixed linear distance penalty added to the scores

Beside the scheme, as 2024-2026 models ship them: grouped-query attention (`n_kv_heads`),
sliding-window layers (`layer_types`, `sliding_window`) with their own RoPE base (`rope_local_base`,
Gemma 3), partial rotation and p-RoPE (`rope` options partial_rotary_factor, drop_lowest).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from mlbook.transformer.attention import MultiHeadAttention, PositionBias
from mlbook.transformer.cache import KVCache, SinkCache
from mlbook.transformer.positional import (
    LearnedPositionalEmbedding,
    RelativePositionBias,
    RotaryEmbedding,
    alibi_bias,
    sinusoidal_positional_encoding,
)
from mlbook.transformer.rope_scaling import SCALING_PARAMETERS, RopeScaling, scaling_parameters
from mlbook.transformer.validate import (
    check_bool, check_choice, check_int, check_positive_float, check_real, check_token_ids,
)

__all__ = [
    "POSITIONAL_SCHEMES",
    "ROPE_OPTIONS",
    "LAYER_TYPES",
    "RMSNorm",
    "MLP",
    "TransformerEncoderBlock",
    "DecoderBlock",
    "GPTConfig",
    "GPT",
    "T5Config",
    "TinyT5",
    "init_weights",
]

POSITIONAL_SCHEMES: tuple[str, ...] = ("none", "sinusoidal", "learned", "t5", "rope", "alibi")
# GPTConfig.rope keys: RotaryEmbedding's base, pairing, partial rotation and p-RoPE, the scaling's name and
# its parameters (RopeScaling)
ROPE_OPTIONS: tuple[str, ...] = ("base", "pairing", "partial_rotary_factor", "drop_lowest", "scaling",
                                 *SCALING_PARAMETERS)
# GPTConfig.layer_types values, Hugging Face's names (Gemma 2/3, gpt-oss, Qwen3 configs)
LAYER_TYPES: tuple[str, ...] = ("full_attention", "sliding_attention")


class RMSNorm(nn.Module):
    """y = x / sqrt(mean(x^2) + eps) * g, computed in float32 (Zhang & Sennrich, 2019; LLaMA)."""

    def __init__(self, d: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))  # (d,)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)  # (..., d)
        return self.weight * xf.to(x.dtype)


def _norm(kind: str, d: int, eps: float) -> nn.Module:
    return RMSNorm(d, eps) if kind == "rms" else nn.LayerNorm(d, eps=eps)


class MLP(nn.Module):
    """SwiGLU, down(silu(gate x) * up x), or GELU, down(gelu(up x))."""

    def __init__(self, d_model: int, d_ff: int, kind: str = "swiglu", bias: bool = False) -> None:
        super().__init__()
        self.kind = check_choice("mlp", kind, ("swiglu", "gelu"))
        self.up = nn.Linear(d_model, d_ff, bias=bias)
        self.gate = nn.Linear(d_model, d_ff, bias=bias) if kind == "swiglu" else None
        self.down = nn.Linear(d_ff, d_model, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.gate is not None:
            return self.down(F.silu(self.gate(x)) * self.up(x))  # (..., d_model)
        return self.down(F.gelu(self.up(x)))  # (..., d_model)


class TransformerEncoderBlock(nn.Module):
    """Pre-norm bidirectional block: x + attn(norm(x)), then x + mlp(norm(x)). No mask.

    With no positional information this block is exactly permutation-equivariant:
    block(x[:, perm]) == block(x)[:, perm].
    """

    def __init__(
        self, d_model: int, n_heads: int, d_ff: int | None = None, dropout: float = 0.0, *,
        norm: str = "layer", mlp: str = "gelu", bias: bool = True, rotary: RotaryEmbedding | None = None,
        norm_eps: float = 1e-5,
    ) -> None:
        super().__init__()
        d_ff = 4 * d_model if d_ff is None else check_int("d_ff", d_ff, 1)
        check_choice("norm", norm, ("layer", "rms"))
        self.norm1, self.norm2 = _norm(norm, d_model, norm_eps), _norm(norm, d_model, norm_eps)
        self.attn = MultiHeadAttention(d_model, n_heads, causal=False, rotary=rotary, bias=bias)
        self.mlp = MLP(d_model, d_ff, mlp, bias)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, position_bias: PositionBias = None) -> torch.Tensor:
        """x: (B, T, d_model) -> (B, T, d_model)."""
        x = x + self.drop(self.attn(self.norm1(x), position_bias=position_bias))  # (B, T, d_model)
        return x + self.drop(self.mlp(self.norm2(x)))  # (B, T, d_model)


class DecoderBlock(nn.Module):
    """Pre-norm causal block with optional cross-attention (T5 decoder) and a per-layer cache."""

    def __init__(
        self, d_model: int, n_heads: int, d_ff: int, *, norm: str, mlp: str, bias: bool, dropout: float,
        norm_eps: float, rotary: RotaryEmbedding | None = None, cross: bool = False,
        n_kv_heads: int | None = None, window: int | None = None,
    ) -> None:
        super().__init__()
        self.norm1, self.norm2 = _norm(norm, d_model, norm_eps), _norm(norm, d_model, norm_eps)
        self.attn = MultiHeadAttention(d_model, n_heads, causal=True, rotary=rotary, bias=bias, dropout=dropout,
                                       n_kv_heads=n_kv_heads, window=window)
        self.cross = MultiHeadAttention(d_model, n_heads, causal=False, bias=bias) if cross else None
        self.norm_cross = _norm(norm, d_model, norm_eps) if cross else None
        self.mlp = MLP(d_model, d_ff, mlp, bias)
        self.drop = nn.Dropout(dropout)

    def forward(
        self, x: torch.Tensor, *, cache: KVCache | SinkCache | None = None, position_bias: PositionBias = None,
        memory: torch.Tensor | None = None, return_weights: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """x: (B, T, d_model); memory: (B, T_src, d_model) encoder output. Returns (x, weights or None)."""
        out = self.attn(self.norm1(x), cache=cache, position_bias=position_bias, return_weights=return_weights)
        h, w = out if return_weights else (out, None)
        x = x + self.drop(h)  # (B, T, d_model)
        if self.cross is not None:
            x = x + self.drop(self.cross(self.norm_cross(x), context=memory))  # (B, T, d_model)
        return x + self.drop(self.mlp(self.norm2(x))), w  # (B, T, d_model)


@dataclass
class GPTConfig:
    """A tiny decoder-only model. `max_len` is the trained context (T_max for learned positions)."""

    vocab_size: int = 256
    d_model: int = 128
    n_heads: int = 4
    n_layers: int = 2
    max_len: int = 128
    positional: str = "rope"
    d_ff: int | None = None  # default 4 * d_model
    rope: dict[str, Any] = field(default_factory=dict)  # ROPE_OPTIONS: base, pairing, scaling, factor, ...
    t5_num_buckets: int = 32
    t5_max_distance: int = 128
    norm: str = "rms"
    mlp: str = "swiglu"
    bias: bool = False
    tie_embeddings: bool = False
    dropout: float = 0.0
    norm_eps: float = 1e-5
    # Vaswani et al. (2017): token embeddings times sqrt(d_model), initialised N(0, 1/d_model), so that
    # embedding and sinusoidal table have entries of the same size (False: the LLaMA-style default)
    scale_embeddings: bool = False
    n_kv_heads: int | None = None  # grouped-query attention; None = n_heads
    nope_layers: tuple[int, ...] = ()  # positional="rope": layers that do not rotate (NoPE layers of a hybrid)
    layer_types: tuple[str, ...] | None = None  # per layer, LAYER_TYPES; None = every layer full attention
    sliding_window: int | None = None  # a sliding layer's query sees itself and the sliding_window - 1 keys before
    rope_local_base: float | None = None  # RoPE base of the sliding layers (Gemma 3); None = the global base

    def __post_init__(self) -> None:
        for name in ("vocab_size", "d_model", "n_heads", "n_layers", "max_len"):
            check_int(name, getattr(self, name), 1)
        if self.d_model % self.n_heads != 0:
            raise ValueError(f"d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads})")
        check_choice("positional", self.positional, POSITIONAL_SCHEMES)
        check_choice("norm", self.norm, ("rms", "layer"))
        check_choice("mlp", self.mlp, ("swiglu", "gelu"))
        if self.d_ff is not None:
            check_int("d_ff", self.d_ff, 1)
        for name in ("bias", "tie_embeddings", "scale_embeddings"):
            check_bool(name, getattr(self, name))
        check_real("dropout", self.dropout, minimum=0.0, below=1.0)
        check_positive_float("norm_eps", self.norm_eps)
        if self.positional == "t5":  # the bucket checks, with their messages, before any model is built
            RelativePositionBias(self.n_heads, self.t5_num_buckets, self.t5_max_distance, bidirectional=False)
        if not isinstance(self.rope, dict):
            raise TypeError(f"rope must be a dict of RotaryEmbedding options, got {type(self.rope).__name__}")
        if self.rope and self.positional != "rope":
            raise ValueError(f"rope options were given but positional={self.positional!r}; use positional='rope'")
        for key in self.rope:
            check_choice("rope option", key, ROPE_OPTIONS)
        if self.positional == "rope":
            self.rotary_embedding()  # bad RoPE options fail here, not when the model is built
        self._check_layers()

    def _check_layers(self) -> None:
        if self.n_kv_heads is not None:
            check_int("n_kv_heads", self.n_kv_heads, 1)
            if self.n_heads % self.n_kv_heads:
                raise ValueError(f"n_heads ({self.n_heads}) must be a multiple of n_kv_heads ({self.n_kv_heads})")
        if not isinstance(self.nope_layers, (tuple, list)):
            raise TypeError(f"nope_layers must be a tuple of layer indices, got {type(self.nope_layers).__name__}")
        self.nope_layers = tuple(self.nope_layers)
        for i in self.nope_layers:
            check_int("nope_layers entry", i, 0)
            if i >= self.n_layers:
                raise ValueError(f"nope_layers holds {i}, but layers are 0 .. {self.n_layers - 1}")
        if self.nope_layers and self.positional != "rope":
            raise ValueError(f"nope_layers turns rotation off in some layers; it needs positional='rope', "
                             f"got {self.positional!r}")
        if self.layer_types is not None:
            if not isinstance(self.layer_types, (tuple, list)) or len(self.layer_types) != self.n_layers:
                raise ValueError(f"layer_types must list one of {LAYER_TYPES} per layer ({self.n_layers}), "
                                 f"got {self.layer_types!r}")
            self.layer_types = tuple(check_choice("layer_types entry", t, LAYER_TYPES) for t in self.layer_types)
        sliding = self.layer_types is not None and "sliding_attention" in self.layer_types
        if sliding and self.sliding_window is None:
            raise ValueError("layer_types has sliding_attention layers but sliding_window is None; give the window")
        if self.sliding_window is not None:
            check_int("sliding_window", self.sliding_window, 1)
            if not sliding:
                raise ValueError(f"sliding_window={self.sliding_window} is given but no layer is "
                                 f"'sliding_attention' in layer_types; it would be ignored")
        if self.rope_local_base is not None:
            check_positive_float("rope_local_base", self.rope_local_base, above=1.0)
            if not sliding or self.positional != "rope":
                raise ValueError("rope_local_base is the RoPE base of sliding layers: it needs positional='rope' "
                                 "and some 'sliding_attention' layers")

    def rotary_embedding(self, local: bool = False) -> RotaryEmbedding:
        """The RotaryEmbedding the `rope` options describe; a scaling that needs original_max_len gets max_len.

        local=True: the sliding layers' embedding, with rope_local_base and no scaling (Gemma 3 scales only
        its global layers)."""
        options = dict(self.rope)
        base, pairing = options.pop("base", 10000.0), options.pop("pairing", "half")
        partial, drop = options.pop("partial_rotary_factor", 1.0), options.pop("drop_lowest", 0.0)
        name = options.pop("scaling", "none")
        d_head = self.d_model // self.n_heads
        if local:
            return RotaryEmbedding(d_head, self.rope_local_base, None, pairing=pairing,
                                   partial_rotary_factor=partial, drop_lowest=drop)
        if "original_max_len" in scaling_parameters(name):
            options.setdefault("original_max_len", self.max_len)
        return RotaryEmbedding(d_head, base, RopeScaling(name, **options), pairing=pairing,
                               partial_rotary_factor=partial, drop_lowest=drop)

    def layer_plan(self) -> list[tuple[str, bool]]:
        """Per layer: (layer type, whether it rotates q and k)."""
        types = self.layer_types or ("full_attention",) * self.n_layers
        rotates = [self.positional == "rope" and i not in self.nope_layers for i in range(self.n_layers)]
        return list(zip(types, rotates))

    def replace(self, **changes: Any) -> "GPTConfig":
        return dataclasses.replace(self, **changes)


def init_weights(module: nn.Module) -> None:
    """GPT-2's initialisation, as in nanoGPT: Linear and Embedding weights ~ N(0, 0.02^2), Linear
    biases 0; other modules keep PyTorch's defaults. Use it as `model.apply(init_weights)`."""
    if isinstance(module, (nn.Linear, nn.Embedding)):
        nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)


class GPT(nn.Module):
    """Decoder-only language model with a choice of positional scheme and cached generation."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        if not isinstance(config, GPTConfig):
            raise TypeError(f"config must be a GPTConfig, got {type(config).__name__}")
        c = self.config = config
        d_ff = c.d_ff or 4 * c.d_model
        self.tok_emb = nn.Embedding(c.vocab_size, c.d_model)  # (V, d_model)
        self.pos_emb = LearnedPositionalEmbedding(c.max_len, c.d_model) if c.positional == "learned" else None
        self.rotary = c.rotary_embedding() if c.positional == "rope" else None  # shared by every rotating layer
        self.rotary_local = c.rotary_embedding(local=True) if c.rope_local_base is not None else None
        self.rel_bias = (
            RelativePositionBias(c.n_heads, c.t5_num_buckets, c.t5_max_distance, bidirectional=False)
            if c.positional == "t5" else None
        )  # one table for the whole stack, as in T5
        blocks = []
        for kind, rotates in c.layer_plan():
            sliding = kind == "sliding_attention"
            rotary = (self.rotary_local if sliding and self.rotary_local is not None else self.rotary) if rotates else None
            blocks.append(DecoderBlock(c.d_model, c.n_heads, d_ff, norm=c.norm, mlp=c.mlp, bias=c.bias,
                                       dropout=c.dropout, norm_eps=c.norm_eps, rotary=rotary, n_kv_heads=c.n_kv_heads,
                                       window=c.sliding_window if sliding else None))
        self.blocks = nn.ModuleList(blocks)
        self.norm_f = _norm(c.norm, c.d_model, c.norm_eps)
        self.lm_head = nn.Linear(c.d_model, c.vocab_size, bias=False)
        self.apply(init_weights)
        self.emb_scale = 1.0
        if c.scale_embeddings:  # x = sqrt(d) E[token] with E ~ N(0, 1/d): unit-variance entries
            nn.init.normal_(self.tok_emb.weight, mean=0.0, std=c.d_model ** -0.5)
            self.emb_scale = c.d_model ** 0.5
        if c.tie_embeddings:
            self.lm_head.weight = self.tok_emb.weight

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())

    # -- positions ---------------------------------------------------------------------------

    def _score_bias(self, B: int) -> PositionBias:
        if self.rel_bias is not None:
            return lambda T_q, T_k: self.rel_bias(T_q, T_k)  # (1, H, T_q, T_k)
        if self.config.positional == "alibi":
            device = self.tok_emb.weight.device
            return lambda T_q, T_k: alibi_bias(self.config.n_heads, T_q, T_k, device)  # (1, H, T_q, T_k)
        return None

    def absolute_positions(self, T: int, offset: int, device: torch.device) -> torch.Tensor | None:
        """The absolute position rows added to the token embeddings at positions offset .. offset + T - 1:
        (1, T, d_model) from the learned table or the sinusoidal formula, None for the other schemes."""
        if self.pos_emb is not None:
            return self.pos_emb(T, offset)  # (1, T, d_model); raises past max_len
        if self.config.positional == "sinusoidal":
            pe = sinusoidal_positional_encoding(offset + T, self.config.d_model)[offset:]  # (T, d_model)
            return pe.to(device)[None]  # (1, T, d_model)
        return None

    # -- forward and generation -------------------------------------------------------------

    def forward(
        self,
        idx: torch.Tensor,
        caches: list[KVCache | SinkCache] | None = None,
        return_attention: bool = False,
    ) -> torch.Tensor | tuple[torch.Tensor, list[torch.Tensor]]:
        """idx: (B, T) token ids -> logits (B, T, vocab); with return_attention also the
        per-layer weights [(B, H, T, T_k)]. With caches, idx holds the new tokens only."""
        check_token_ids("idx", idx, self.config.vocab_size)
        check_bool("return_attention", return_attention)
        B, T = idx.shape
        if caches is not None:
            if not isinstance(caches, (list, tuple)) or not all(isinstance(c, (KVCache, SinkCache)) for c in caches):
                raise TypeError("caches must be a list of KVCache or SinkCache, one per layer (see GPT.new_caches), "
                                f"got {type(caches).__name__}")
            if len(caches) != len(self.blocks):
                raise ValueError(f"caches must hold one cache per layer ({len(self.blocks)}), got {len(caches)}")
        sink = caches is not None and caches[0].rotates_on_read
        if sink and self.config.positional in ("learned", "sinusoidal"):
            raise ValueError(
                "a SinkCache assigns positions by cache slot, which absolute encodings (learned, sinusoidal) "
                "cannot follow: their positions are baked into the cached values; use rope, alibi, t5 or none"
            )
        offset = caches[0].length if caches is not None else 0
        x = self.tok_emb(idx)  # (B, T, d_model)
        if self.emb_scale != 1.0:
            x = x * self.emb_scale  # (B, T, d_model) sqrt(d_model) E[token], Vaswani et al.
        pos = self.absolute_positions(T, offset, idx.device)
        if pos is not None:
            x = x + pos.to(x.dtype)  # (B, T, d_model)
        bias = self._score_bias(B)
        weights = []
        for i, block in enumerate(self.blocks):
            x, w = block(x, cache=None if caches is None else caches[i], position_bias=bias,
                         return_weights=return_attention)
            weights.append(w)
        logits = self.lm_head(self.norm_f(x))  # (B, T, vocab)
        return (logits, weights) if return_attention else logits

    def new_caches(self, kind: str = "kv", *, capacity: int | None = None, n_sink: int = 4,
                   window: int | None = None) -> list[KVCache | SinkCache]:
        """One cache per layer: kind="kv" (capacity tokens) or "sink" (n_sink + window tokens)."""
        check_choice("kind", kind, ("kv", "sink"))
        if kind == "kv":
            cap = capacity if capacity is not None else self.config.max_len
            return [KVCache(cap) for _ in self.blocks]
        win = window if window is not None else self.config.max_len - n_sink
        return [SinkCache(n_sink, win) for _ in self.blocks]

    @torch.no_grad()
    def generate(
        self,
        idx: torch.Tensor,
        max_new_tokens: int,
        *,
        temperature: float = 1.0,
        top_k: int | None = None,
        cache: str = "kv",
        n_sink: int = 4,
        window: int | None = None,
        generator: torch.Generator | None = None,
    ) -> torch.Tensor:
        """Extend idx (B, T) by max_new_tokens, feeding one token at a time through the cache.

        temperature=0 is greedy; top_k keeps the k most likely tokens (k >= vocab_size keeps them
        all). cache="kv" keeps everything (up to the prompt plus the new tokens); cache="sink"
        streams with n_sink sinks and a sliding window. Bad arguments fail before any token is computed.
        """
        check_token_ids("idx", idx, self.config.vocab_size)
        check_int("max_new_tokens", max_new_tokens, 0)
        check_choice("cache", cache, ("kv", "sink"))
        check_real("temperature", temperature, minimum=0.0)
        if top_k is not None:
            check_int("top_k", top_k, 1)  # top_k >= vocab_size keeps every token, as plain sampling does
        if self.config.positional == "learned" and idx.shape[1] + max_new_tokens > self.config.max_len:
            raise ValueError(f"a learned-position model cannot go past max_len={self.config.max_len}: the prompt "
                             f"({idx.shape[1]} tokens) plus max_new_tokens={max_new_tokens} would reach "
                             f"{idx.shape[1] + max_new_tokens}")
        caches = self.new_caches(cache, capacity=idx.shape[1] + max_new_tokens, n_sink=n_sink, window=window)
        out = idx
        if cache == "sink" and idx.shape[1] > caches[0].capacity:
            logits = None
            for t in range(idx.shape[1]):
                logits = self(idx[:, t : t + 1], caches)
        else:
            logits = self(idx, caches)  # prefill: (B, T, vocab)
        for _ in range(max_new_tokens):
            last = logits[:, -1, :].float()  # (B, vocab)
            if temperature == 0:
                nxt = last.argmax(dim=-1, keepdim=True)  # (B, 1)
            else:
                last = last / temperature
                if top_k is not None:
                    kth = torch.topk(last, min(top_k, last.shape[-1])).values[:, -1:]  # (B, 1)
                    last = last.masked_fill(last < kth, float("-inf"))
                nxt = torch.multinomial(last.softmax(-1), 1, generator=generator)  # (B, 1)
            out = torch.cat([out, nxt], dim=1)  # (B, T + 1)
            logits = self(nxt, caches)  # (B, 1, vocab)
        return out

    # -- interoperability -------------------------------------------------------------------

    @classmethod
    def from_hf_llama(cls, hf_model: nn.Module, pairing: str = "half") -> "GPT":
        """Copy a Hugging Face LlamaForCausalLM's weights into a GPT (positional="rope"): every rope_scaling
        key honoured as transformers does or refused, grouped-query heads kept. See
        `mlbook.transformer.hf.gpt_from_hf_llama`, which this calls."""
        from mlbook.transformer.hf import gpt_from_hf_llama  # hf.py imports this module

        return gpt_from_hf_llama(hf_model, pairing=pairing)


@dataclass
class T5Config:
    """A tiny encoder-decoder. positional="t5" shares one bias per stack; "learned"/"sinusoidal"/"none" for contrast."""

    vocab_size: int = 64
    d_model: int = 64
    n_heads: int = 4
    n_encoder_layers: int = 2
    n_decoder_layers: int = 2
    max_len: int = 64
    positional: str = "t5"
    d_ff: int | None = None
    num_buckets: int = 32
    max_distance: int = 128
    dropout: float = 0.0
    norm_eps: float = 1e-6

    def __post_init__(self) -> None:
        for name in ("vocab_size", "d_model", "n_heads", "n_encoder_layers", "n_decoder_layers", "max_len"):
            check_int(name, getattr(self, name), 1)
        check_choice("positional", self.positional, ("t5", "learned", "sinusoidal", "none"))
        if self.d_model % self.n_heads != 0:
            raise ValueError(f"d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads})")
        if self.d_ff is not None:
            check_int("d_ff", self.d_ff, 1)
        check_real("dropout", self.dropout, minimum=0.0, below=1.0)
        check_positive_float("norm_eps", self.norm_eps)
        if self.positional == "t5":
            RelativePositionBias(self.n_heads, self.num_buckets, self.max_distance, bidirectional=True)


class TinyT5(nn.Module):
    """T5-style encoder-decoder: relative bias shared across the layers of each stack
    (bidirectional in the encoder, causal in the decoder), none in cross-attention."""

    def __init__(self, config: T5Config) -> None:
        super().__init__()
        c = self.config = config
        d_ff = c.d_ff or 4 * c.d_model
        self.emb = nn.Embedding(c.vocab_size, c.d_model)  # shared by encoder, decoder (T5)
        t5 = c.positional == "t5"
        self.enc_bias = RelativePositionBias(c.n_heads, c.num_buckets, c.max_distance, bidirectional=True) if t5 else None
        self.dec_bias = RelativePositionBias(c.n_heads, c.num_buckets, c.max_distance, bidirectional=False) if t5 else None
        self.enc_pos = LearnedPositionalEmbedding(c.max_len, c.d_model) if c.positional == "learned" else None
        self.dec_pos = LearnedPositionalEmbedding(c.max_len, c.d_model) if c.positional == "learned" else None
        self.encoder = nn.ModuleList(
            TransformerEncoderBlock(c.d_model, c.n_heads, d_ff, c.dropout, norm="rms", mlp="gelu", bias=False,
                                    norm_eps=c.norm_eps)
            for _ in range(c.n_encoder_layers)
        )
        self.decoder = nn.ModuleList(
            DecoderBlock(c.d_model, c.n_heads, d_ff, norm="rms", mlp="gelu", bias=False, dropout=c.dropout,
                         norm_eps=c.norm_eps, cross=True)
            for _ in range(c.n_decoder_layers)
        )
        self.enc_norm, self.dec_norm = RMSNorm(c.d_model, c.norm_eps), RMSNorm(c.d_model, c.norm_eps)
        self.lm_head = nn.Linear(c.d_model, c.vocab_size, bias=False)
        self.apply(init_weights)

    def _embed(self, ids: torch.Tensor, table: LearnedPositionalEmbedding | None) -> torch.Tensor:
        x = self.emb(ids)  # (B, T, d_model)
        T = ids.shape[1]
        if table is not None:
            x = x + table(T)  # (B, T, d_model); raises past max_len
        elif self.config.positional == "sinusoidal":
            x = x + sinusoidal_positional_encoding(T, self.config.d_model).to(x.device, x.dtype)[None]
        return x

    def encode(self, src: torch.Tensor) -> torch.Tensor:
        """src: (B, T_src) -> memory (B, T_src, d_model)."""
        x = self._embed(src, self.enc_pos)
        T = src.shape[1]
        bias = self.enc_bias(T, T) if self.enc_bias is not None else None  # (1, H, T, T), computed once
        for block in self.encoder:
            x = block(x, position_bias=bias)
        return self.enc_norm(x)

    def decode(self, tgt: torch.Tensor, memory: torch.Tensor) -> torch.Tensor:
        """tgt: (B, T_tgt) decoder inputs -> logits (B, T_tgt, vocab)."""
        x = self._embed(tgt, self.dec_pos)
        T = tgt.shape[1]
        bias = self.dec_bias(T, T) if self.dec_bias is not None else None  # (1, H, T, T)
        for block in self.decoder:
            x, _ = block(x, position_bias=bias, memory=memory)
        return self.lm_head(self.dec_norm(x))

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        """Teacher-forced logits (B, T_tgt, vocab)."""
        check_token_ids("src", src, self.config.vocab_size)
        check_token_ids("tgt", tgt, self.config.vocab_size)
        if src.shape[0] != tgt.shape[0]:
            raise ValueError(f"src and tgt must have the same batch size, got {src.shape[0]} and {tgt.shape[0]}")
        return self.decode(tgt, self.encode(src))

    @torch.no_grad()
    def generate(self, src: torch.Tensor, max_new_tokens: int, bos_id: int = 0) -> torch.Tensor:
        """Greedy decoding: returns (B, max_new_tokens) ids, the start token excluded."""
        check_token_ids("src", src, self.config.vocab_size)
        check_int("max_new_tokens", max_new_tokens, 0)
        check_int("bos_id", bos_id, 0)
        if bos_id >= self.config.vocab_size:
            raise ValueError(f"bos_id must be a token id in 0 .. {self.config.vocab_size - 1}, got {bos_id}")
        memory = self.encode(src)
        out = torch.full((src.shape[0], 1), bos_id, dtype=torch.long, device=src.device)
        for _ in range(max_new_tokens):
            nxt = self.decode(out, memory)[:, -1].argmax(-1, keepdim=True)  # (B, 1)
            out = torch.cat([out, nxt], dim=1)
        return out[:, 1:]
