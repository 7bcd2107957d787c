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
    sink_correction_error  transformers' flex-attention sink factor sigma(lse - s), formed in bf16
    context_parallel_check scores of a sequence sharded over ranks, rotated with global or local
                           positions; causal pairs per rank (`context_parallel_positions`)
    stale_rotation_error   keys cached before dynamic NTK rescaled the frequencies, read after
    fp8_key_error          rounding of RoPE keys stored in FP8, once and after a re-rotation; optionally
                           with the query rounded to FP8 too, as vLLM does on backends that take one
    tiny_causal_lm         a tiny random Llama or hybrid Qwen3-Next (`transformers`), for the rollback check
    draft_rollback_check   a rejected speculative draft rolled back with `crop`, against a full forward
    CheckReport, check_report  a check cell's printed lines, shown as a collapsed HTML <details> (its plain
                           text unchanged, for nbval)
    rope_tables            float64 cos and sin at any positions, in the library's half layout
    interleaved_axes       which M-RoPE axis (time, height, width) turns each pair in Qwen3-VL's
                           interleaved order
    passkey_reading        one method's passkey retrieval at the longest length of Experiment 6's record,
                           per seed, zero-shot and after the fine-tune, on average and for the farthest key
    rotation_precision     RoPE keys rotated with a bf16 cos/sin table (float32 angles), and with bf16 angles

KV-cache sizes come from `mlbook.analysis.production.kv_cache_bytes` and wavelengths from
`mlbook.analysis.absolute.pair_wavelengths`; angle ranges, NTK bases, YaRN bands, ALiBi penalties,
bias sizes and sink-cache positions are computed by the section modules that develop them
(`analysis.extension`, `analysis.alibi`, `analysis.relative`, `analysis.sinks`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from mlbook.analysis.absolute import pair_wavelengths
from mlbook.analysis.after_rope import llama4_attention_scale
from mlbook.analysis.production import kv_cache_bytes
from mlbook.analysis.rope import rotate_at
from mlbook.analysis.systems import format_bytes
from mlbook.analysis.report import CheckReport, check_report  # re-exported: page 6's check cells use them
from mlbook.experiments.exp_passkey import RETRIEVES, accuracy_per_seed, length_change
from mlbook.transformer.positional import frequency_ladder, rotate_half, sinusoidal_positional_encoding
from mlbook.transformer.rope_scaling import RopeScaling, ntk_base
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
    "SinkCorrection",
    "sink_correction_error",
    "context_parallel_positions",
    "ContextParallelCheck",
    "context_parallel_check",
    "StaleRotation",
    "stale_rotation_error",
    "Fp8Keys",
    "fp8_key_error",
    "rope_tables",
    "interleaved_axes",
    "tiny_causal_lm",
    "DraftRollback",
    "draft_rollback_check",
    "CheckReport",
    "check_report",
    "PasskeyReading",
    "passkey_reading",
    "RotationPrecision",
    "rotation_precision",
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


# ---------------------------------------------------------------------------
# Serving questions: the sink correction's precision, context parallelism,
# a cache rotated before a dynamic rescale, FP8 keys
# ---------------------------------------------------------------------------


def _tables64(positions: torch.Tensor, inv_freq: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """float64 cos and sin (T, d) for `positions` (T,) and the frequencies inv_freq (d/2,), half layout."""
    angle = positions.double()[:, None] * inv_freq.double()  # (T, d/2): position times theta_i
    angle = torch.cat([angle, angle], dim=-1)  # (T, d): pair i at columns i and i + d/2
    return angle.cos(), angle.sin()


def _rotate64(x: torch.Tensor, positions: torch.Tensor, inv_freq: torch.Tensor) -> torch.Tensor:
    """x (T, d) rotated at `positions` (T,) with the frequencies inv_freq (d/2,), half layout, in float64."""
    cos, sin = _tables64(positions, inv_freq)  # (T, d) each
    return x * cos + rotate_half(x) * sin  # (T, d)


def rope_tables(positions: torch.Tensor, d_head: int = 64, base: float = 10000.0
                ) -> tuple[torch.Tensor, torch.Tensor]:
    """float64 cos and sin, each (T, d_head), of RoPE at integer `positions` (T,): the angle of pair i at
    position n is n * theta_i, theta_i = base^(-2i/d_head) (`frequency_ladder`), laid out as the library's
    `RotaryEmbedding` lays it (half: pair i at columns i and i + d_head/2).

    Unlike `RotaryEmbedding`, whose tables start at 0 and are float32, these are computed in float64 at any
    positions, e.g. one row at a shift Delta, the bare rotation R_Delta that moves a cached key from n to
    n + Delta (`P.apply_rotary(key, *rope_tables(torch.full((T,), delta)))`).
    """
    if not isinstance(positions, torch.Tensor) or positions.dim() != 1 or positions.is_floating_point() \
            or positions.is_complex() or positions.dtype == torch.bool:
        raise TypeError(f"positions must be a 1-D integer tensor, got {positions!r}")
    check_even_d("d_head", d_head)
    base = check_positive_float("base", base, above=1.0)
    return _tables64(positions, frequency_ladder(d_head, base))


def interleaved_axes(section: tuple[int, int, int] | list[int], pairs: int) -> torch.Tensor:
    """(pairs,) the M-RoPE axis that turns each frequency pair, 0 time, 1 height, 2 width, in Qwen3-VL's
    interleaved order T H W T H W ...: pair i takes height when i % 3 == 1 and i < 3 * section[1], width
    when i % 3 == 2 and i < 3 * section[2], and time otherwise (so the pairs past the interleaved block
    are time's). This is `apply_interleaved_mrope` of transformers' `Qwen3VLTextRotaryEmbedding`
    (and Qwen3.5's), which starts from the time axis's angles and overwrites those slots.

    Qwen3-VL's default section [24, 20, 20] over 64 pairs gives width pairs 2, 5, ..., 59, so every axis
    spans the ladder from its fast end to its slow one, unlike Qwen2-VL's blocks (`section_axes`).
    """
    if (not isinstance(section, (tuple, list)) or len(section) != 3
            or any(isinstance(s, bool) or not isinstance(s, int) or s < 0 for s in section)):
        raise ValueError(f"section must be three pair counts >= 0 (time, height, width), got {section!r}")
    check_int("pairs", pairs, 1)
    if sum(section) != pairs:
        raise ValueError(f"section {list(section)} must add up to pairs ({pairs}): each pair turns with one axis")
    i = torch.arange(pairs)
    axes = torch.zeros(pairs, dtype=torch.long)
    axes[(i % 3 == 1) & (i < 3 * section[1])] = 1
    axes[(i % 3 == 2) & (i < 3 * section[2])] = 2
    return axes


@dataclass(frozen=True)
class SinkCorrection:
    """The flex path's sink factor sigma(lse - s) formed in a low precision, against float64."""

    sink: float
    dtype: torch.dtype
    worst_lse: float  # the row's log-sum-exp at which the relative error is largest
    worst_relative: float  # max |factor / exact - 1| over the grid of lse values
    float32_relative: float  # the same, with the factor formed in float32

    def __repr__(self) -> str:
        name = str(self.dtype).removeprefix("torch.")
        return (f"sink logit {self.sink:g}, factor exp(lse - logsumexp(lse, sink)) formed in {name}: off by up to "
                f"{self.worst_relative:.2%} (at lse = {self.worst_lse:.2f}); formed in float32: "
                f"{self.float32_relative:.1e}")


def sink_correction_error(sink: float = 3.0, dtype: torch.dtype = torch.bfloat16, lse_max: float = 20.0
                          ) -> SinkCorrection:
    """How far transformers' flex-attention sink factor is from sigma(lse - s) when formed in `dtype`.

    `integrations/flex_attention.py` (transformers 5.15) takes the kernel's float32 log-sum-exp of
    the real keys, casts it to the value dtype (`lse.to(value.dtype)`), then computes
    combined = logsumexp([lse, s]) and factor = exp(lse - combined) in that dtype, s the head's sink
    logit (a parameter in the model's dtype). The exact factor is e^lse / (e^lse + e^s) =
    sigma(lse - s). This replays that arithmetic for lse on a grid 0 .. lse_max (step 0.01) and
    reports the largest relative error, and the same in float32 for comparison.
    """
    if isinstance(sink, bool) or not isinstance(sink, (int, float)) or not math.isfinite(sink):
        raise ValueError(f"sink must be a finite logit, got {sink!r}")
    sink = float(sink)
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating torch.dtype, got {dtype!r}")
    lse_max = check_positive_float("lse_max", lse_max)
    lse32 = torch.arange(0.0, lse_max, 0.01, dtype=torch.float32)  # (N,) what the kernel returns

    def factor_in(dt: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        s = torch.tensor([sink], dtype=dt)  # the stored sink logit
        lse = lse32.to(dt)[:, None]  # (N, 1) lse.to(value.dtype)
        combined = torch.logsumexp(torch.cat([lse, s.expand_as(lse)], dim=-1), dim=-1, keepdim=True)  # (N, 1)
        exact = torch.sigmoid(lse32.double() - s.double())  # (N,) from the float32 lse and the stored sink
        return torch.exp(lse - combined)[:, 0].double(), exact

    low, exact = factor_in(dtype)
    rel = (low / exact - 1).abs()  # (N,)
    f32, exact32 = factor_in(torch.float32)
    worst = int(rel.argmax())
    return SinkCorrection(sink, dtype, float(lse32[worst]), float(rel[worst]), float((f32 / exact32 - 1).abs().max()))


def context_parallel_positions(T: int, n_ranks: int, balanced: bool = True) -> tuple[torch.Tensor, ...]:
    """The global positions each of n_ranks ranks holds when a sequence of T tokens is sharded.

    balanced=False: P contiguous chunks, rank r the r-th. balanced=True: the load-balanced layout
    Llama 3 describes for context parallelism (2P chunks, rank r the r-th and the (2P - 1 - r)-th),
    which gives every rank the same number of causal query-key pairs.
    """
    check_int("n_ranks", n_ranks, 1)
    check_int("T", T, 2 * n_ranks if balanced else n_ranks)
    chunks = 2 * n_ranks if balanced else n_ranks
    if T % chunks:
        raise ValueError(f"T ({T}) must be divisible by {chunks} (the number of chunks for {n_ranks} ranks, "
                         f"balanced={balanced})")
    c = T // chunks
    pos = torch.arange(T)
    if not balanced:
        return tuple(pos[r * c:(r + 1) * c] for r in range(n_ranks))
    return tuple(torch.cat([pos[r * c:(r + 1) * c], pos[(chunks - 1 - r) * c:(chunks - r) * c]])
                 for r in range(n_ranks))


@dataclass(frozen=True)
class ContextParallelCheck:
    """Ring-style attention over sharded positions: the scores with global and with local positions."""

    T: int
    n_ranks: int
    global_error: float  # max |score - unsharded score| when every rank rotates with global positions
    local_error: float  # the same when each rank numbers its own tokens from 0
    score_scale: float  # max |unsharded score|
    pairs_contiguous: tuple[int, ...]  # causal query-key pairs each rank scores, contiguous chunks
    pairs_balanced: tuple[int, ...]  # the same, load-balanced chunks

    def __repr__(self) -> str:
        return (f"{self.T} tokens over {self.n_ranks} ranks (float64, scores up to {self.score_scale:.2f}):\n"
                f"  rotated with global positions: max |score difference| {self.global_error:.1e}\n"
                f"  rotated with each rank's local positions: {self.local_error:.2f}\n"
                f"  causal pairs per rank, contiguous chunks: {list(self.pairs_contiguous)}; "
                f"load-balanced: {list(self.pairs_balanced)}")


def context_parallel_check(T: int = 64, n_ranks: int = 4, d_head: int = 64, *, seed: int = 0) -> ContextParallelCheck:
    """Shard a sequence over ranks (load-balanced chunks), let every rank score its queries against
    every rank's keys (what ring attention passes around), and compare each causal score with the
    unsharded sequence's: with global positions they agree to rounding, with local ones they do not,
    since a score depends on the offset of the two global positions. Also counts the causal pairs
    each rank scores under contiguous and load-balanced sharding. q, k in float64.
    """
    check_even_d("d_head", d_head)
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(T, d_head, generator=g, dtype=torch.float64) / d_head**0.25  # (T, d)
    k = torch.randn(T, d_head, generator=g, dtype=torch.float64) / d_head**0.25  # (T, d)
    inv_freq = frequency_ladder(d_head)  # (d/2,)
    pos = torch.arange(T)
    reference = _rotate64(q, pos, inv_freq) @ _rotate64(k, pos, inv_freq).T  # (T, T)
    shards = context_parallel_positions(T, n_ranks, balanced=True)
    errors = {"global": 0.0, "local": 0.0}
    for p_r in shards:
        for p_s in shards:
            causal = p_s[None, :] <= p_r[:, None]  # (|p_r|, |p_s|)
            want = reference[p_r][:, p_s]
            for kind in errors:
                pq = p_r if kind == "global" else torch.arange(len(p_r))
                pk = p_s if kind == "global" else torch.arange(len(p_s))
                got = _rotate64(q[p_r], pq, inv_freq) @ _rotate64(k[p_s], pk, inv_freq).T
                errors[kind] = max(errors[kind], float((got - want)[causal].abs().max()))

    def pairs(balanced: bool) -> tuple[int, ...]:
        return tuple(int((p + 1).sum()) for p in context_parallel_positions(T, n_ranks, balanced))

    return ContextParallelCheck(T, n_ranks, errors["global"], errors["local"],
                                float(reference.tril().abs().max()), pairs(False), pairs(True))


@dataclass(frozen=True)
class StaleRotation:
    """Keys rotated with the trained frequencies, read by a query rotated after dynamic NTK rescaled them."""

    original_max_len: int
    seq_len: int
    new_base: float
    pairs_off: int  # pairs whose angle for the key at original_max_len - 1 is off by more than 0.1 rad
    n_pairs: int
    score_error: float  # max |score(stale keys) - score(keys rotated afresh)|, relative to the largest score

    def __repr__(self) -> str:
        return (f"length {self.seq_len:,} (past {self.original_max_len:,}): base {self.new_base:,.0f}; keys cached "
                f"at the old base: {self.pairs_off} of {self.n_pairs} pairs more than 0.1 rad off at position "
                f"{self.original_max_len - 1:,}, scores off by up to {self.score_error:.1%} of the largest")


def stale_rotation_error(seq_len: int, d_head: int = 128, base: float = 10000.0, factor: float = 4.0,
                         original_max_len: int = 4096, *, seed: int = 0) -> StaleRotation:
    """Dynamic NTK (`RopeScaling("dynamic")`, Hugging Face's `dynamic_rope_update`) recomputes the
    frequencies once the sequence grows past original_max_len; keys already in the cache keep the
    rotation they were written with. Keys cached at positions 0 .. L - 1 with the trained
    frequencies are scored by a query at position seq_len - 1 rotated with the rescaled ones, and
    compared with the same keys rotated afresh with the rescaled frequencies (what a prefill of the
    whole sequence computes). q, k random, in float64.
    """
    L = check_int("original_max_len", original_max_len, 2)
    check_int("seq_len", seq_len, L + 1)
    check_even_d("d_head", d_head)
    scaling = RopeScaling("dynamic", factor=factor, original_max_len=L)
    old, _ = scaling.frequencies(d_head, base, seq_len=L)  # (d/2,) what the keys were rotated with
    new, _ = scaling.frequencies(d_head, base, seq_len=seq_len)  # (d/2,) what the query is rotated with
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(1, d_head, generator=g, dtype=torch.float64) / d_head**0.25  # (1, d)
    k = torch.randn(L, d_head, generator=g, dtype=torch.float64) / d_head**0.25  # (L, d)
    keys = torch.arange(L)
    query = _rotate64(q, torch.tensor([seq_len - 1]), new)  # (1, d)
    stale = (query @ _rotate64(k, keys, old).T)[0]  # (L,)
    fresh = (query @ _rotate64(k, keys, new).T)[0]  # (L,)
    diff = (L - 1) * (new.double() - old.double())  # (d/2,) each pair's angle difference at key L - 1
    wrapped = torch.remainder(diff + math.pi, 2 * math.pi) - math.pi  # (d/2,) in [-pi, pi)
    growth = factor * seq_len / L - (factor - 1)
    return StaleRotation(L, seq_len, ntk_base(d_head, base, growth), int((wrapped.abs() > 0.1).sum()), d_head // 2,
                         float((stale - fresh).abs().max() / fresh.abs().max()))


@dataclass(frozen=True)
class Fp8Keys:
    """Rounding of RoPE keys stored in FP8, written once and re-rotated after storage."""

    fresh: float  # rms relative error of a key quantised once after its rotation
    moved: float  # the same for a key dequantised, re-rotated by shift and quantised again
    score_fresh: float  # rms error of q . k relative to the rms score, key quantised once
    score_moved: float  # the same, re-rotated key
    scale: float | None = None  # None: amax / 448 per stored tensor; else the fixed scale used
    query: bool = False  # True: the queries are rounded to e4m3 too (with the same kind of scale)

    def __repr__(self) -> str:
        how = "per-tensor scale amax / 448" if self.scale is None else f"fixed scale {self.scale:g}"
        what = "query and keys" if self.query else "keys only"
        return (f"FP8 e4m3, {what} ({how}): rms error {self.fresh:.2%} of a key, scores {self.score_fresh:.2%}; "
                f"re-rotated after storage and stored again: {self.moved:.2%}, scores {self.score_moved:.2%}")


def fp8_key_error(n_keys: int = 4096, d_head: int = 128, shift: int = 2900, *, scale: float | None = None,
                  quantise_query: bool = False, seed: int = 0) -> Fp8Keys:
    """Keys rotated at positions 0 .. n_keys - 1 in float64, then stored as float8_e4m3fn with one
    per-tensor scale and read back: the rounding every FP8 cache adds once, after RoPE. Re-positioning
    such a cache means dequantising, rotating by `shift` and quantising again: two roundings. Errors
    against the exact keys at positions + shift, and of the scores q . k with random queries.

    scale=None takes amax / 448 (e4m3's largest value) of each stored tensor; a number fixes it, e.g.
    1.0, vLLM's default when a checkpoint supplies no scale. FP8 is a floating-point format, so any
    scale that keeps the keys inside its normal range rounds them by the same relative step; a fixed
    scale too small for the largest key is the failure, since no e4m3 value exceeds 448 (the keys
    here are unit-variance, so a scale of 1.0 keeps them in range).

    quantise_query=True rounds the queries to e4m3 as well (same kind of scale), as vLLM's `Attention`
    layer does for an fp8 or nvfp4 cache on a backend that takes an FP8 query (`query_quant`, a static
    per-tensor scale, 1.0 without one from the checkpoint): the scores are then q8 . k8 against the
    exact q . k. The key errors do not change; the score errors grow.
    """
    check_int("n_keys", n_keys, 2)
    check_even_d("d_head", d_head)
    check_int("shift", shift, 1)
    fixed = None if scale is None else check_positive_float("scale", scale)
    if not isinstance(quantise_query, bool):
        raise TypeError(f"quantise_query must be True or False, got {quantise_query!r}")
    g = torch.Generator().manual_seed(seed)
    k = torch.randn(n_keys, d_head, generator=g, dtype=torch.float64)  # (N, d)
    q = torch.randn(64, d_head, generator=g, dtype=torch.float64)  # (64, d)
    inv_freq = frequency_ladder(d_head)
    pos = torch.arange(n_keys)

    def store(x: torch.Tensor, what: str = "keys") -> torch.Tensor:  # quantise to e4m3 with one scale, read back
        s = x.abs().max() / 448.0 if fixed is None else torch.tensor(fixed, dtype=torch.float64)
        if fixed is not None and (x / s).abs().max() > 448.0:
            raise ValueError(f"scale={fixed} puts {what} up to {float((x / s).abs().max()):.1f} past e4m3's largest "
                             "value, 448: they would saturate; pass a larger scale or None (amax / 448)")
        return (x / s).to(torch.float8_e4m3fn).double() * s

    exact = _rotate64(k, pos + shift, inv_freq)  # (N, d) R_{n + shift} k
    fresh = store(exact)
    moved = store(_rotate64(store(_rotate64(k, pos, inv_freq)), torch.full((n_keys,), shift), inv_freq))
    q_read = store(q, "queries") if quantise_query else q  # (64, d) what the kernel multiplies
    want = q @ exact.T  # (64, N) exact scores

    def rms_rel(x: torch.Tensor) -> float:
        return float((x - exact).norm() / exact.norm())

    def score_rel(x: torch.Tensor) -> float:
        return float((q_read @ x.T - want).pow(2).mean().sqrt() / want.pow(2).mean().sqrt())

    return Fp8Keys(rms_rel(fresh), rms_rel(moved), score_rel(fresh), score_rel(moved), fixed, quantise_query)


# ---------------------------------------------------------------------------
# Speculative decoding: rolling a rejected draft back out of a transformers cache
# ---------------------------------------------------------------------------


def tiny_causal_lm(kind: str = "llama", *, seed: int = 0) -> Any:
    """A tiny random `transformers` causal LM, in eval mode: kind "llama", a 2-layer Llama (4 heads of 16,
    2 KV heads), or "qwen3_next", a 4-layer Qwen3-Next: 3 Gated DeltaNet layers (linear attention with a
    recurrent state and a short convolution) and 1 attention layer, a small mixture of experts. The
    weights come from `torch.manual_seed(seed)`; vocabulary 97.
    """
    kinds = ("llama", "qwen3_next")
    if kind not in kinds:
        raise ValueError(f"kind must be one of {list(kinds)}, got {kind!r}")
    import transformers

    shape = dict(vocab_size=97, hidden_size=64, intermediate_size=96, num_attention_heads=4, num_key_value_heads=2)
    if kind == "llama":
        config = transformers.LlamaConfig(**shape, num_hidden_layers=2)
        cls = transformers.LlamaForCausalLM
    else:
        if not hasattr(transformers, "Qwen3NextConfig"):
            raise ValueError(f"kind 'qwen3_next' needs a transformers with Qwen3-Next, got {transformers.__version__}")
        config = transformers.Qwen3NextConfig(
            **shape, head_dim=16, num_hidden_layers=4, linear_num_key_heads=2, linear_num_value_heads=4,
            linear_key_head_dim=16, linear_value_head_dim=16, num_experts=4, num_experts_per_tok=2,
            moe_intermediate_size=32, shared_expert_intermediate_size=32,
            layer_types=["linear_attention"] * 3 + ["full_attention"])
        cls = transformers.Qwen3NextForCausalLM
    torch.manual_seed(check_int("seed", seed, 0))
    return cls(config).eval()


@dataclass(frozen=True)
class DraftRollback:
    """The next token's logits after a speculative step, against a full forward of the accepted text."""

    model_type: str
    cache_layers: tuple[str, ...]  # the cache's layer classes, one per decoder layer
    n_prompt: int
    n_draft: int
    accepted: int
    cropped: float  # max |logits - full forward|, cache cropped by the rejected drafts
    not_cropped: float  # the same, the rejected drafts left in the cache
    never_fed: float  # the same, a cache that only ever saw the accepted drafts
    crop_refused: str | None  # the error crop raised without past recording, if it did

    def __repr__(self) -> str:
        def verdict(gap: float) -> str:
            return "match the full forward (< 1e-5)" if gap < 1e-5 else f"off by {gap:.2g}"

        kinds = ", ".join(f"{n} {name}" for name, n in
                          ((c, self.cache_layers.count(c)) for c in dict.fromkeys(self.cache_layers)))
        rejected = self.n_draft - self.accepted
        refused = (f"\n  crop without past recording: refused ({self.crop_refused})" if self.crop_refused else "")
        return (f"{self.model_type}, cache layers {kinds}:\n"
                f"  {self.n_prompt} prompt tokens, {self.n_draft} drafts, {self.accepted} accepted; the next token's "
                f"logits against a full forward\n"
                f"  cache cropped by the {rejected} rejected (crop(-{rejected}), past recording on): "
                f"{verdict(self.cropped)}\n"
                f"  cache not rolled back: {verdict(self.not_cropped)}\n"
                f"  a cache that only ever saw the accepted drafts: {verdict(self.never_fed)}{refused}")


def draft_rollback_check(model: Any, *, n_prompt: int = 6, n_draft: int = 4, accepted: int = 2,
                         seed: int = 1) -> DraftRollback:
    """One speculative step on a `transformers` causal LM: a prompt of n_prompt random tokens, n_draft
    drafts verified in one forward, `accepted` of them kept and the target's own token after them.
    The cache is then rolled back as 5.15's assisted generation does (`_assisted_decoding` calls
    `cache.activate_past_recording()` before the drafts and `crop(-rejected)` after), or left alone,
    and the own token's logits are compared with a forward of the accepted text without a cache, and
    with a cache that only ever saw the accepted drafts.

    For attention layers `crop` drops the rejected keys and values. For linear-attention layers
    (`LinearAttentionCacheLayerMixin.crop` in `cache_utils.py`) it trims only the convolution window:
    the recurrent state has already folded the rejected drafts in, so a hybrid's logits are off.
    Without past recording such a layer refuses the crop (`crop_refused`). `generate` itself refuses assisted
    decoding for such a target (`_is_stateful`, "assisted generation is not supported with stateful models"):
    what this measures for a hybrid is a hand-written loop that calls `crop`.
    """
    import transformers

    for name, value in (("n_prompt", n_prompt), ("n_draft", n_draft)):
        check_int(name, value, 1)
    check_int("accepted", accepted, 0)
    if accepted >= n_draft:
        raise ValueError(f"accepted ({accepted}) must be below n_draft ({n_draft}): at least one draft is rejected")
    if not hasattr(model, "config") or not hasattr(model, "forward"):
        raise TypeError(f"model must be a transformers causal LM, got {type(model).__name__}")
    vocab = model.config.get_text_config().vocab_size
    g = torch.Generator().manual_seed(check_int("seed", seed, 0))
    prompt = torch.randint(0, vocab, (1, n_prompt), generator=g)  # (1, n) positions 0 .. n - 1
    draft = torch.randint(0, vocab, (1, n_draft), generator=g)  # (1, k) proposed for n .. n + k - 1
    own = torch.randint(0, vocab, (1, 1), generator=g)  # (1, 1) the target's token at n + accepted
    rejected = n_draft - accepted

    def next_logits(*, crop: bool, record: bool = True, feed_all: bool = True) -> tuple[torch.Tensor, Any]:
        cache = transformers.DynamicCache(config=model.config)
        if record and hasattr(cache, "activate_past_recording"):
            cache.activate_past_recording()
        model(prompt, past_key_values=cache)
        model(draft if feed_all else draft[:, :accepted], past_key_values=cache)  # verify in one forward
        if crop:
            cache.crop(-rejected)
        return model(own, past_key_values=cache).logits[0, -1], cache  # (V,) placed at the cache's length

    with torch.no_grad():
        truth = model(torch.cat([prompt, draft[:, :accepted], own], dim=1), use_cache=False).logits[0, -1]  # (V,)
        cropped, cache = next_logits(crop=True)
        not_cropped, _ = next_logits(crop=False)
        never_fed, _ = next_logits(crop=False, feed_all=False)
        try:
            next_logits(crop=True, record=False)
            refused = None
        except RuntimeError as err:
            refused = str(err).split(". ")[0].replace("`", "")
    layers = tuple(type(layer).__name__ for layer in getattr(cache, "layers", ()))
    return DraftRollback(model.config.model_type, layers, n_prompt, n_draft, accepted,
                         float((cropped - truth).abs().max()), float((not_cropped - truth).abs().max()),
                         float((never_fed - truth).abs().max()), refused)


# ---------------------------------------------------------------------------
# Passkey retrieval past the trained length, read from Experiment 6's record
# ---------------------------------------------------------------------------

_PHASE_NAMES = {"zero_shot": "zero-shot", "finetuned": "after the fine-tune"}


def _two(x: float, sign: bool = False) -> str:
    """x to 2 decimals, never '-0.00' (nor '+0.00' with sign)."""
    text = f"{x:+.2f}" if sign else f"{x:.2f}"
    return text[1:] if text[0] in "+-" and float(text) == 0.0 else text


def _seed_list(seeds: list[int]) -> str:
    """'seed 2', 'seeds 2 and 3', 'seeds 0, 1 and 4'."""
    if len(seeds) == 1:
        return f"seed {seeds[0]}"
    return "seeds " + ", ".join(str(s) for s in seeds[:-1]) + f" and {seeds[-1]}"


@dataclass(frozen=True)
class PasskeyReading:
    """One method's passkey retrieval at the record's longest length, per phase (zero-shot, after the fine-tune):
    the all-digits accuracy averaged over key depths, per seed; its paired change from the trained length
    (`exp_passkey.length_change`: mean, 95% interval, verdict); and the accuracy of a key at the first depth
    (depth 0, the farthest from the question), per seed. A seed "retrieves" at accuracy >= RETRIEVES."""

    method: str
    train_len: int
    length: int
    seeds: tuple[int, ...]
    per_seed: dict[str, list[float]]  # phase -> (S,) depth-averaged accuracy at `length`
    change: dict[str, dict[str, Any]]  # phase -> common.paired dict, at `length` minus at `train_len`
    far: dict[str, list[float]]  # phase -> (S,) accuracy of a key at depth 0 at `length`

    def far_lost(self, phase: str) -> list[int]:
        """The seeds on which the farthest key is not retrieved at `length` in `phase`."""
        return [s for s, a in zip(self.seeds, self.far[phase]) if a < RETRIEVES]

    def lines(self) -> list[str]:
        out = []
        for phase, acc in self.per_seed.items():
            d = self.change[phase]
            lost = self.far_lost(phase)
            far = (f"not retrieved on {_seed_list(lost)} of {len(self.seeds)}" if lost
                   else f"retrieved on every seed of {len(self.seeds)}")
            out.append(f"{self.method} at {self.length}, {_PHASE_NAMES.get(phase, phase)}: depth-averaged accuracy "
                       f"per seed {', '.join(f'{a:.2f}' for a in acc)} (mean {sum(acc) / len(acc):.2f}); "
                       f"{self.length} - {self.train_len}: {_two(d['mean'], True)} "
                       f"[{_two(d['ci95'][0])}, {_two(d['ci95'][1])}] "
                       f"({d['verdict']}); a key at depth 0, the farthest from the question, {far}")
        return out

    def verdict(self) -> str:
        """Per phase: the average's change from the trained length in the verdict rule's words (lower, higher, or
        cannot tell at this number of seeds, with its interval; "the same on every seed" when no seed changes),
        and where the farthest key is lost."""
        parts = []
        for phase in self.per_seed:
            d = self.change[phase]
            ci = f"({_two(d['mean'], True)} [{_two(d['ci95'][0])}, {_two(d['ci95'][1])}])"
            if all(x == 0.0 for x in d["per_seed"]):
                avg = "the average the same on every seed"
            elif d["verdict"] in ("lower", "higher"):
                avg = f"{d['verdict']} on average {ci}"
            else:
                avg = f"cannot tell the average's change from zero at {len(self.seeds)} seeds {ci}"
            lost = self.far_lost(phase)
            far = f"the farthest key lost on {_seed_list(lost)}" if lost else "the farthest key kept on every seed"
            parts.append(f"{_PHASE_NAMES.get(phase, phase)}: {avg}, {far}")
        return f"{self.method} at {self.length // self.train_len}x its training length: " + "; ".join(parts)

    def __repr__(self) -> str:
        return "\n".join(self.lines() + [self.verdict()])


def passkey_reading(record: dict[str, Any], method: str = "alibi", label: str | None = None) -> PasskeyReading:
    """`method`'s retrieval at the longest length of a passkey record (`load_result("passkey", ...)`),
    zero-shot and after the record's fine-tune, from its own numbers: nothing typed by hand."""
    if not isinstance(record, dict) or "results" not in record or "results" not in record["results"]:
        raise ValueError("record must be a passkey record, as load_result('passkey', 'full') returns")
    r = record["results"]
    if method not in r["methods"]:
        raise ValueError(f"method must be one of {list(r['methods'])}, got {method!r}")
    phases = [p for p in r["phases"] if method in r["results"][p]]
    if float(r["depths"][0]) != 0.0:
        raise ValueError("the record's first key depth must be 0 (the farthest from the question), "
                         f"got {r['depths'][0]}")
    seeds = tuple(s["seed"] for s in r["results"][phases[0]][method])
    return PasskeyReading(
        method=label or r.get("labels", {}).get(method, method), train_len=int(r["lengths"][0]),
        length=int(r["lengths"][-1]), seeds=seeds,
        per_seed={p: accuracy_per_seed(record, p, method, -1) for p in phases},
        change={p: length_change(record, p, method)["accuracy"] for p in phases},
        far={p: [float(s["accuracy"][-1][0]) for s in r["results"][p][method]] for p in phases})


# ---------------------------------------------------------------------------
# Rotation precision: what must be float32 before a cache is quantised
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class RotationPrecision:
    """rms error, relative to the exact keys, of keys rotated at positions 0 .. n - 1 (float64 reference)."""

    n_keys: int
    d_head: int
    table_bf16: float  # angles in float32, cos and sin rounded to bfloat16 (Hugging Face, vLLM in a bf16 model)
    output_bf16: float  # the same, and the rotated key rounded to bfloat16, as a bf16 model stores it
    angles_bf16: float  # positions, inv_freq and their product in bfloat16: the angle itself rounded

    def __repr__(self) -> str:
        return (f"RoPE keys at positions 0 to {self.n_keys - 1:,}, d_head {self.d_head}: rms error "
                f"{self.table_bf16:.2%} with a bf16 cos/sin table (float32 angles), {self.output_bf16:.2%} with the "
                f"rotated key stored in bf16 too; angles computed in bf16: {self.angles_bf16:.0%}")


def rotation_precision(n_keys: int = 4096, d_head: int = 128, base: float = 10000.0, *, seed: int = 0
                       ) -> RotationPrecision:
    """Keys rotated three ways against the float64 rotation: float32 angles with cos and sin rounded to
    bfloat16 (what `transformers`' rotary module returns to a bf16 model, `cos.to(x.dtype)`, and vLLM's
    `cos_sin_cache.to(dtype)`); the same with the result rounded to bfloat16; and angles formed in bfloat16,
    whose spacing at position m is m * 2^-8 radians or more, the error that grows with the position."""
    check_int("n_keys", n_keys, 2)
    check_even_d("d_head", d_head)
    check_positive_float("base", base)
    g = torch.Generator().manual_seed(seed)
    k = torch.randn(n_keys, d_head, generator=g, dtype=torch.float64)  # (N, d)
    inv32 = frequency_ladder(d_head, base).float()  # (d/2,) float32, as models keep it
    pos = torch.arange(n_keys)
    exact_angles = torch.outer(pos.double(), inv32.double())  # (N, d/2)

    def rotate(angles: torch.Tensor, table_dtype: torch.dtype) -> torch.Tensor:  # half layout, float64 products
        emb = torch.cat([angles, angles], dim=-1)  # (N, d)
        cos, sin = emb.cos().to(table_dtype).double(), emb.sin().to(table_dtype).double()
        return k * cos + rotate_half(k) * sin  # (N, d)

    exact = rotate(exact_angles, torch.float64)
    f32 = torch.outer(pos.float(), inv32).double()  # (N, d/2) float32 angles
    table = rotate(f32, torch.bfloat16)
    bf16 = torch.outer(pos.bfloat16(), inv32.bfloat16()).double()  # (N, d/2) bf16 angles

    def rms_rel(x: torch.Tensor) -> float:
        return float((x - exact).norm() / exact.norm())

    return RotationPrecision(n_keys, d_head, rms_rel(table), rms_rel(table.bfloat16().double()),
                             rms_rel(rotate(bf16, torch.bfloat16)))
