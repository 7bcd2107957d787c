"""Numbers behind section 6's interview answers that no other section computes.

    rope_wavelength_span   shortest and longest RoPE wavelength at a head size, and the
                           d_head -> infinity limit 2 pi * base that is often quoted instead
    format_bytes           a byte count in binary (MiB, GiB) and decimal (GB) units (from
                           `mlbook.analysis.systems`, re-exported)
    KVCacheCase            `kv_cache_bytes` per token and per sequence for one configuration
    decoder_param_count    parameters of a LLaMA-style decoder (SwiGLU MLP, RMSNorm, no biases)
    prefill_flops          matmul FLOPs of a prefill: the weight matmuls against attention's T^2 term
    sequences_that_fit     how many sequences' caches fit in a device's memory beside the weights
    nope_query_scale       Llama 4's temperature on its NoPE layers' queries at a position
    top_weight             softmax weight of the best of n keys ahead by a logit gap, optionally
                           with log-length scaling of the logits
    document_shift         what moving a document to a later position (sequence packing, left
                           padding without position ids) does to RoPE scores and to absolute ones

KV-cache sizes come from `mlbook.analysis.production.kv_cache_bytes` and wavelengths from
`mlbook.analysis.absolute.pair_wavelengths`; angle ranges, NTK bases, YaRN bands, ALiBi penalties,
bias sizes and sink-cache positions are computed by the section modules that develop them
(`analysis.extension`, `analysis.alibi`, `analysis.relative`, `analysis.sinks`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from mlbook.analysis.absolute import pair_wavelengths
from mlbook.analysis.after_rope import llama4_attention_scale
from mlbook.analysis.production import kv_cache_bytes
from mlbook.analysis.rope import rotate_at
from mlbook.analysis.systems import format_bytes
from mlbook.transformer.positional import sinusoidal_positional_encoding
from mlbook.transformer.validate import check_even_d, check_int, check_positive_float

__all__ = [
    "WavelengthSpan",
    "rope_wavelength_span",
    "format_bytes",
    "KVCacheCase",
    "kv_cache_case",
    "decoder_param_count",
    "PrefillFlops",
    "prefill_flops",
    "sequences_that_fit",
    "nope_query_scale",
    "top_weight",
    "DocumentShift",
    "document_shift",
]


# ---------------------------------------------------------------------------
# Wavelengths
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class WavelengthSpan:
    """Shortest and longest wavelength 2 pi / theta_i of a RoPE head, and the limit 2 pi * base."""

    d_head: int
    base: float
    shortest: float  # pair 0: 2 pi / theta_0 = 2 pi
    longest: float  # pair d/2 - 1: 2 pi * base^((d - 2) / d)
    limit: float  # 2 pi * base, approached as d_head grows, never reached

    @property
    def shortfall(self) -> float:
        """How far the longest wavelength falls short of the limit, as a fraction: 1 - base^(-2/d)."""
        return 1.0 - self.longest / self.limit

    def __repr__(self) -> str:
        return (f"d_head = {self.d_head}, base = {self.base:,g}:\n"
                f"  pair 0 turns every {self.shortest:,.3f} tokens, pair {self.d_head // 2 - 1} every "
                f"{float(f'{self.longest:.4g}'):,.0f} tokens\n"
                f"  2 pi * base = {float(f'{self.limit:.4g}'):,.0f} tokens, the d_head -> infinity limit, is "
                f"{self.limit / self.longest - 1:.1%} more\n"
                f"  (the longest wavelength is {self.shortfall:.1%} below it; wavelengths to 4 significant figures, as everywhere "
                f"in the book)")


def rope_wavelength_span(d_head: int = 128, base: float = 10000.0) -> WavelengthSpan:
    """Wavelengths 2 pi / theta_i, theta_i = base^(-2i/d_head), at i = 0 and i = d_head/2 - 1, and 2 pi * base.

    The last pair's wavelength is 2 pi * base^((d-2)/d); "2 pi * base" (62,830 tokens to 4 significant
    figures for base 10000, the "about 63,000" often quoted) is its d -> infinity limit. From `pair_wavelengths` (the library's frequencies).
    """
    check_even_d("d_head", d_head)
    base = check_positive_float("base", base, above=1.0)
    w = pair_wavelengths(d_head, base)  # (d/2,)
    return WavelengthSpan(d_head, base, float(w[0]), float(w[-1]), 2 * math.pi * base)


# ---------------------------------------------------------------------------
# Memory: KV cache and weights
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class KVCacheCase:
    """One model configuration's KV cache: bytes per token and per sequence of `context_len` tokens."""

    n_layers: int
    n_kv_heads: int
    d_head: int
    bytes_per_value: float
    context_len: int
    per_token: int  # bytes
    per_sequence: int  # bytes

    def __repr__(self) -> str:
        return (f"{self.n_layers} layers x {self.n_kv_heads} KV heads x d_head {self.d_head} x "
                f"{self.bytes_per_value:g} bytes x 2 (K and V):\n"
                f"  {format_bytes(self.per_token)} per token, {format_bytes(self.per_sequence)} for "
                f"{self.context_len:,} tokens")


def kv_cache_case(
    n_layers: int = 32, n_kv_heads: int = 32, d_head: int = 128, bytes_per_value: float = 2.0,
    context_len: int = 131072,
) -> KVCacheCase:
    """2 * n_layers * n_kv_heads * d_head * bytes_per_value bytes per token (`kv_cache_bytes`), times context_len.

    Defaults: a 7B-class model (LLaMA-7B: 32 layers, 32 heads of 128, fp16) at 128k = 131,072 tokens.
    """
    per_token = kv_cache_bytes(n_layers, n_kv_heads, d_head, bytes_per_value)
    per_sequence = kv_cache_bytes(n_layers, n_kv_heads, d_head, bytes_per_value, context_len=context_len)
    return KVCacheCase(n_layers, n_kv_heads, d_head, float(bytes_per_value), context_len, per_token, per_sequence)


def decoder_param_count(
    d_model: int = 4096, n_layers: int = 32, d_ff: int = 11008, vocab_size: int = 32000, n_heads: int = 32,
    n_kv_heads: int | None = None, tied_embeddings: bool = False,
) -> int:
    """Parameters of a LLaMA-style decoder: per layer W_q, W_o (d^2 each), W_k, W_v (d * n_kv_heads * d_head
    each), a SwiGLU MLP (3 d d_ff) and two RMSNorm gains (2 d); plus the token embedding (V d), a final
    norm (d) and, unless tied, the output projection (V d). No biases.

    The defaults are LLaMA-7B's configuration: 6,738,415,616 parameters.
    """
    for name, value in (("d_model", d_model), ("n_layers", n_layers), ("d_ff", d_ff), ("vocab_size", vocab_size),
                        ("n_heads", n_heads)):
        check_int(name, value, 1)
    n_kv_heads = n_heads if n_kv_heads is None else check_int("n_kv_heads", n_kv_heads, 1)
    if d_model % n_heads or n_heads % n_kv_heads:
        raise ValueError(f"d_model ({d_model}) must be divisible by n_heads ({n_heads}), and n_heads by "
                         f"n_kv_heads ({n_kv_heads})")
    d_kv = n_kv_heads * (d_model // n_heads)
    per_layer = 2 * d_model * d_model + 2 * d_model * d_kv + 3 * d_model * d_ff + 2 * d_model
    embeddings = vocab_size * d_model * (1 if tied_embeddings else 2)
    return n_layers * per_layer + embeddings + d_model


# ---------------------------------------------------------------------------
# Compute: a prefill's FLOPs
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class PrefillFlops:
    """FLOPs of one prefill of T tokens: weight matmuls (linear in T) and attention scores (quadratic)."""

    T: int
    weights: float  # 2 * T * (matmul parameters), output projection included
    attention: float  # q k^T and A v over the causal triangle

    @property
    def attention_share(self) -> float:
        return self.attention / (self.weights + self.attention)

    @property
    def ratio(self) -> float:
        """attention / weights."""
        return self.attention / self.weights

    def __repr__(self) -> str:
        return (f"T = {self.T:,}: weight matmuls {self.weights:.3g} FLOPs, attention {self.attention:.3g}\n"
                f"  attention / weights = {self.ratio:.2f}, {self.attention_share:.0%} of the total")


def prefill_flops(
    T: int, d_model: int = 4096, n_layers: int = 32, d_ff: int = 11008, vocab_size: int = 32000, n_heads: int = 32,
    n_kv_heads: int | None = None, causal: bool = True,
) -> PrefillFlops:
    """Matmul FLOPs of a prefill of T tokens through a LLaMA-style decoder (2 FLOPs per multiply-add).

    weights   = 2 T (n_layers (2 d^2 + 2 d d_kv + 3 d d_ff) + V d): every token through every weight
                matrix and the output projection (embedding lookups and norms cost no matmul).
    attention = n_layers * 2 * 2 d * P, P the number of query-key pairs scored: T (T + 1) / 2 with a
                causal mask (a kernel that skips the masked half), T^2 without. q k^T and A v each cost
                2 d per pair. Defaults: LLaMA-7B.
    """
    check_int("T", T, 1)
    params = decoder_param_count(d_model, n_layers, d_ff, vocab_size, n_heads, n_kv_heads, tied_embeddings=False)
    matmul_params = params - vocab_size * d_model - (2 * n_layers + 1) * d_model  # drop embedding lookup and norms
    pairs = T * (T + 1) / 2 if causal else float(T) * T
    return PrefillFlops(T, 2.0 * T * matmul_params, n_layers * 2 * 2 * d_model * pairs)


def sequences_that_fit(memory_bytes: float, weights_bytes: float, per_sequence_bytes: float) -> int:
    """How many sequences' KV caches fit beside the weights: floor((memory - weights) / per_sequence).

    Activations and allocator overhead also need room, so this is an upper bound. 0 when even
    one sequence does not fit.
    """
    for name, value in (("memory_bytes", memory_bytes), ("weights_bytes", weights_bytes),
                        ("per_sequence_bytes", per_sequence_bytes)):
        check_positive_float(name, value)
    return max(0, int((memory_bytes - weights_bytes) // per_sequence_bytes))


# ---------------------------------------------------------------------------
# 2026 questions: NoPE temperature, log-length scaling, positions under packing
# ---------------------------------------------------------------------------


def nope_query_scale(position: int, floor_scale: float = 8192.0, attn_scale: float = 0.1) -> float:
    """Llama 4's factor on the queries of its NoPE layers at 0-based `position`:

        1 + attn_scale * ln(1 + floor((position + 1) / floor_scale)),

    as transformers' Llama4TextAttention computes it (models/llama4/modeling_llama4.py, applied when
    `attn_temperature_tuning` is set and the layer does not rotate). It is 1 for the first
    floor_scale - 1 positions and then grows with the log of the position in steps of floor_scale
    tokens: logits sharpen as the number of keys a global layer spreads its weight over grows.
    Defaults: Llama-4-Scout's config (floor_scale 8192, attn_scale 0.1). One position of
    `mlbook.analysis.after_rope.llama4_attention_scale`, which holds the formula.
    """
    check_int("position", position, 0)
    floor_scale = check_positive_float("floor_scale", floor_scale)
    attn_scale = check_positive_float("attn_scale", attn_scale)
    return float(llama4_attention_scale([position], floor_scale, attn_scale).item())


def top_weight(gap: float, n: int, *, log_scale_from: int | None = None) -> float:
    """Softmax weight of one key whose logit is `gap` above each of n - 1 equal others:
    e^g / (e^g + n - 1).

    With log_scale_from = n0, the logits are first multiplied by log(n) / log(n0) (n >= n0), the
    log-length scaling of Chiang and Cholak (2022), Qwen's LogN attention and Scalable-Softmax
    (Nakanishi 2025): the weight at n0 is unchanged, and as n grows it falls like n^(g / ln n0 - 1)
    instead of like 1 / n (unscaled, e^g / n for large n), staying bounded away from 0 once the gap
    is at least ln n0 nats.
    """
    check_int("n", n, 1)
    if isinstance(gap, bool) or not isinstance(gap, (int, float)) or not math.isfinite(gap) or gap < 0:
        raise ValueError(f"gap must be a finite number of nats >= 0, got {gap!r}")
    g = float(gap)
    if log_scale_from is not None:
        check_int("log_scale_from", log_scale_from, 2)
        if n < log_scale_from:
            raise ValueError(f"n ({n}) must be >= log_scale_from ({log_scale_from}): the scaling starts there")
        g *= math.log(n) / math.log(log_scale_from)
    # e^g / (e^g + n - 1), written to stay finite for large g
    return 1.0 / (1.0 + (n - 1) * math.exp(-g))


@dataclass(frozen=True)
class DocumentShift:
    """Scores of one document's tokens at positions 0.. and at shift.., under RoPE and under added sinusoids."""

    shift: int
    rope: float  # max |score difference| with RoPE: rounding of the float32 angles, not a change of scores
    absolute: float  # max |score difference| with sinusoidal positions added to the same vectors
    score_scale: float  # max |score| at positions 0.., for scale

    def __repr__(self) -> str:
        return (f"the same document at positions 0.. and at {self.shift:,}..: largest change of a score "
                f"(scores up to {self.score_scale:.3f})\n"
                f"  RoPE: {self.rope:.1e} (float32 angles rounded)   added sinusoids: {self.absolute:.3f}")


def document_shift(shift: int = 3000, T: int = 6, d_head: int = 64, *, seed: int = 0) -> DocumentShift:
    """Move a T-token document from positions 0..T-1 to shift..shift+T-1 and compare its causal
    scores q_i . k_j (j <= i), q and k in float64: with RoPE (`rotate_at`, angles in float32 as
    everywhere in the library) they depend on i - j only, so they change only by the rounding of
    the larger angles; with a sinusoidal table added to the vectors (an absolute scheme) they
    change outright. This is why, under RoPE, sequence packing and left padding are about the
    attention mask (and about staying inside the trained range), not about the offsets inside a
    document.
    """
    check_int("shift", shift, 1)
    check_int("T", T, 2)
    check_even_d("d_head", d_head)
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(T, d_head, generator=g, dtype=torch.float64) / d_head**0.25  # (T, d_head)
    k = torch.randn(T, d_head, generator=g, dtype=torch.float64) / d_head**0.25  # (T, d_head)
    causal = torch.tril(torch.ones(T, T, dtype=torch.bool))  # (T, T)

    def rope_scores(start: int) -> torch.Tensor:
        qr = torch.stack([rotate_at(q[i], start + i) for i in range(T)])  # (T, d_head)
        kr = torch.stack([rotate_at(k[j], start + j) for j in range(T)])  # (T, d_head)
        return (qr @ kr.T)[causal]  # (T (T + 1) / 2,)

    pe = sinusoidal_positional_encoding(shift + T, d_head).double()  # (shift + T, d_head)

    def absolute_scores(start: int) -> torch.Tensor:
        qa, ka = q + pe[start:start + T], k + pe[start:start + T]  # (T, d_head)
        return (qa @ ka.T)[causal]

    at_zero = rope_scores(0)
    return DocumentShift(shift, float((rope_scores(shift) - at_zero).abs().max()),
                         float((absolute_scores(shift) - absolute_scores(0)).abs().max()),
                         float(at_zero.abs().max()))
