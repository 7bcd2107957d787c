"""Systems arithmetic for the systems view (notebooks/11_systems): what each positional scheme
costs against attention, what a materialised bias holds and moves, the context-extension
decision procedure, and what RoPE moves in a serving engine (its cos/sin table, its in-place pass
against the KV-cache read). KV-cache sizes and device budgets (sections 07, 08, 12, 15) are in
`mlbook.analysis.production`.

FLOPs count one multiply or one add as one FLOP (a multiply-add is 2), as in the usual
"2 * parameters FLOPs per token" rule. Bytes are bytes.
"""

from __future__ import annotations

import math
import textwrap
from dataclasses import dataclass

from mlbook.analysis.relative import bias_bytes
from mlbook.transformer.validate import check_choice, check_int, check_positive_float

__all__ = [
    "format_bytes",
    "COST_SCHEMES",
    "AttentionFlops",
    "attention_flops",
    "PositionCost",
    "position_cost",
    "BiasMemory",
    "bias_memory",
    "ExtensionPlan",
    "extension_plan",
    "H200_HBM_BYTES_PER_S",
    "cos_sin_cache_bytes",
    "RopeServingCost",
    "rope_serving_cost",
]


def format_bytes(n: float) -> str:
    """n bytes in the largest binary unit that keeps it >= 1 (KiB = 2^10 ... TiB = 2^40), with the decimal GB.

    format_bytes(2**36) == "64 GiB (68.72 GB)". Binary units are what memory is sold and reported
    in by allocators; decimal GB is what marketing pages and some papers use.
    """
    if isinstance(n, bool) or not isinstance(n, (int, float)) or not math.isfinite(n) or n < 0:
        raise ValueError(f"n must be a finite number of bytes >= 0, got {n!r}")
    units = ("B", "KiB", "MiB", "GiB", "TiB")
    k = 0
    while k < len(units) - 1 and n >= 1024 ** (k + 1):
        k += 1
    value = n / 1024**k
    text = f"{value:,.0f}" if value == int(value) else f"{value:,.2f}"
    return f"{text} {units[k]} ({n / 1e9:,.2f} GB)" if k >= 3 else f"{text} {units[k]}"



# ---------------------------------------------------------------------------
# Cost of each scheme against attention's
# ---------------------------------------------------------------------------

COST_SCHEMES: tuple[str, ...] = ("sinusoidal", "learned", "rope", "t5", "alibi", "alibi_fused")


def _check_heads(d_model: int, n_heads: int, n_kv_heads: int | None) -> int:
    check_int("d_model", d_model, 1)
    check_int("n_heads", n_heads, 1)
    if d_model % n_heads:
        raise ValueError(f"d_model ({d_model}) must be divisible by n_heads ({n_heads})")
    n_kv = n_heads if n_kv_heads is None else check_int("n_kv_heads", n_kv_heads, 1)
    if n_heads % n_kv:
        raise ValueError(f"n_heads ({n_heads}) must be divisible by n_kv_heads ({n_kv})")
    return n_kv


@dataclass(frozen=True)
class AttentionFlops:
    """FLOPs of one attention layer over B sequences of T tokens (see `attention_flops`)."""

    B: int
    T: int
    d_model: int
    projections: float  # W_q, W_k, W_v, W_o: 8 B T d^2 without GQA
    scores: float  # q k^T: 2 B T^2 d (half with a causal kernel)
    mix: float  # A v: 2 B T^2 d (half with a causal kernel)

    @property
    def total(self) -> float:
        return self.projections + self.scores + self.mix


def attention_flops(
    B: int, T: int, d_model: int, n_heads: int = 1, n_kv_heads: int | None = None, *, causal: bool = False
) -> AttentionFlops:
    """FLOPs of one attention layer, 2 per multiply-add.

    projections = 2 B T (2 d^2 + 2 d d_kv): W_q and W_o are d x d, W_k and W_v are d x d_kv with
                  d_kv = n_kv_heads * d_head; without GQA (d_kv = d) that is 8 B T d^2.
    scores      = 2 B P d, mix = 2 B P d: P = T^2 query-key pairs, or T (T + 1) / 2 when a causal
                  kernel skips the masked half.
    """
    check_int("B", B, 1)
    check_int("T", T, 1)
    n_kv = _check_heads(d_model, n_heads, n_kv_heads)
    d_kv = n_kv * (d_model // n_heads)
    pairs = T * (T + 1) / 2 if causal else float(T) * T
    projections = 2.0 * B * T * (2 * d_model * d_model + 2 * d_model * d_kv)
    return AttentionFlops(B, T, d_model, projections, 2.0 * B * pairs * d_model, 2.0 * B * pairs * d_model)


@dataclass(frozen=True)
class PositionCost:
    """What one positional scheme adds: FLOPs, where they are spent, and bytes it materialises."""

    scheme: str
    flops: float
    per: str  # "model" (once, at the input) or "layer"
    materialised_bytes: int  # a tensor the scheme builds per forward pass (0: nothing beyond q, k)
    traffic_bytes: int  # bytes read per layer beyond q, k, v (0 when computed inside the kernel)
    formula: str


def position_cost(
    scheme: str, B: int, T: int, d_model: int, n_heads: int, n_kv_heads: int | None = None,
    bytes_per_value: float = 4.0,
) -> PositionCost:
    """FLOPs and bytes a positional scheme adds to a forward pass over B sequences of T tokens.

    sinusoidal, learned  B T d adds, once per model (the encoding is added to the embeddings);
    rope                 3 FLOPs (2 multiplies, 1 add) per element of q and k, every layer:
                         3 B T (d + d_kv) = 6 B T d without GQA; cos/sin tables (T, d_head) are
                         built once and shared by every layer;
    t5, alibi            one add per score, B H T^2 per layer, from a bias (H, T, T) that is built
                         (materialised_bytes = H T^2 bytes_per_value) and read once per sequence
                         and head (traffic_bytes = B H T^2 bytes_per_value);
    alibi_fused          ALiBi computed inside the kernel from the indices: m_h (i - j) and the
                         add, 3 FLOPs per score, no tensor and no extra traffic.
    Future keys are counted as well (no causal halving), as in the B H T^2 of the text.
    """
    check_choice("scheme", scheme, COST_SCHEMES)
    check_int("B", B, 1)
    check_int("T", T, 1)
    n_kv = _check_heads(d_model, n_heads, n_kv_heads)
    bytes_per_value = check_positive_float("bytes_per_value", bytes_per_value)
    d_kv = n_kv * (d_model // n_heads)
    scores = B * n_heads * T * T
    if scheme in ("sinusoidal", "learned"):
        return PositionCost(scheme, float(B * T * d_model), "model", 0, 0, "B T d")
    if scheme == "rope":
        form = "6 B T d" if d_kv == d_model else "3 B T (d + d_kv)"
        return PositionCost(scheme, 3.0 * B * T * (d_model + d_kv), "layer", 0, 0, form)
    if scheme == "alibi_fused":
        return PositionCost(scheme, 3.0 * scores, "layer", 0, 0, "3 B H T^2 (in the kernel)")
    built = bias_bytes(n_heads, T, T, bytes_per_value)
    return PositionCost(scheme, float(scores), "layer", built, int(round(scores * bytes_per_value)), "B H T^2")


@dataclass(frozen=True)
class BiasMemory:
    """A materialised (H, T, T) score bias over a whole forward pass: what it holds and what it moves."""

    n_heads: int
    T: int
    n_layers: int
    B: int
    bytes_per_value: float
    held: int  # one (H, T, T) tensor, built once per forward pass and kept until the last layer
    traffic: int  # read once per sequence by every layer: n_layers * B * H * T^2 * bytes_per_value

    def __repr__(self) -> str:
        bits = f"{8 * self.bytes_per_value:g}-bit"
        batch = f" for {self.B} sequences" if self.B > 1 else ""
        return (f"bias (H, T, T) = ({self.n_heads}, {self.T:,}, {self.T:,}), {bits}: "
                f"{format_bytes(self.held)} held once per forward pass,\n"
                f"    read by each of {self.n_layers} layers{batch}: {format_bytes(self.traffic)} of reads")


def bias_memory(n_heads: int, T: int, n_layers: int, *, B: int = 1, bytes_per_value: float = 2.0) -> BiasMemory:
    """Memory and traffic of a T5 or ALiBi bias materialised as an (H, T, T) tensor.

    held    = H T^2 bytes_per_value: the bias is built once per forward pass and shared by every
              layer (Hugging Face's T5 computes it in the first block of each stack and passes it
              on; BLOOM builds its ALiBi tensor once in the model's forward) and broadcast over the
              batch;
    traffic = n_layers B H T^2 bytes_per_value: every layer reads it once per sequence, the
              per-layer `traffic_bytes` of `position_cost` times n_layers.
    A fused kernel that computes the bias from the indices (ALiBi in FlashAttention's
    `alibi_slopes`, a FlexAttention `score_mod`) holds and reads none of it.
    """
    check_int("n_heads", n_heads, 1)
    check_int("T", T, 1)
    check_int("n_layers", n_layers, 1)
    check_int("B", B, 1)
    bytes_per_value = check_positive_float("bytes_per_value", bytes_per_value)
    held = bias_bytes(n_heads, T, T, bytes_per_value)
    traffic = int(round(n_layers * B * n_heads * T * T * bytes_per_value))
    return BiasMemory(n_heads, T, n_layers, B, bytes_per_value, held, traffic)


# ---------------------------------------------------------------------------
# Extending a RoPE model's context: the decision procedure
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ExtensionPlan:
    """The recommendation for one situation: method, data, and how to evaluate it."""

    trained_len: int
    target_len: int
    factor: float
    method: str
    reasons: tuple[str, ...]
    evaluate: str

    def __repr__(self) -> str:
        lines = textwrap.wrap(f"{self.trained_len:,} -> {self.target_len:,} tokens (s = {self.factor:g}): {self.method}",
                              88, subsequent_indent="    ")
        for r in self.reasons:
            lines += textwrap.wrap(r, 88, initial_indent="  - ", subsequent_indent="    ")
        lines += textwrap.wrap(f"evaluate: {self.evaluate}", 88, initial_indent="  ", subsequent_indent="    ")
        return "\n".join(lines)


MODEST_FACTOR = 2.0  # without fine-tuning, NTK-aware scaling is usually usable up to about this factor
ZERO_SHOT_YARN_FACTOR = 4.0  # static YaRN without fine-tuning, on a model pretrained long with a raised base
LONG_DOCS_FACTOR = 8.0  # past about this factor, fine-tuning needs long documents, not only more steps


def extension_plan(
    trained_len: int, target_len: int, *, can_finetune: bool, local_resolution_matters: bool = True,
    base_raised_in_pretraining: bool = False,
) -> ExtensionPlan:
    """Section 2.6's procedure for a RoPE model trained at L = trained_len, needed at L' = target_len.

    s = L' / L. s <= 1: nothing to do. A model whose pretraining already reached L with a raised
    base (`base_raised_in_pretraining`, ABF) takes static YaRN up to s = 4 without fine-tuning, the
    recipe Qwen2.5 and Qwen3 ship (32,768 -> 131,072 at inference; Qwen2.5 report, arXiv
    2412.15115; Qwen3 report, arXiv 2505.09388), whatever the budget: a fine-tune is optional there.
    Otherwise, no fine-tuning budget: static NTK-aware scaling for s <= 2 (not the dynamic form,
    whose base changes mid-generation and leaves cached keys stale), and beyond that only zero-shot
    stopgaps. With a budget and s <= 8: position interpolation and a few
    hundred steps on long documents, or YaRN when local resolution matters; raising the base for
    the fine-tune (ABF, Xiong et al. 2023, arXiv 2309.16039) is the other documented route. With a
    budget and s > 8: the production recipe, a raised base (or frequency-band scaling) with
    continued pretraining on long documents, lengthened in stages (Llama 3.1, arXiv 2407.21783;
    Qwen2, arXiv 2407.10671). Always evaluate with retrieval probes, not perplexity, and re-run the
    short-context benchmarks to catch regressions.
    """
    check_int("trained_len", trained_len, 1)
    check_int("target_len", target_len, 1)
    if not isinstance(can_finetune, bool) or not isinstance(local_resolution_matters, bool):
        raise TypeError("can_finetune and local_resolution_matters must be True or False")
    if not isinstance(base_raised_in_pretraining, bool):
        raise TypeError(f"base_raised_in_pretraining must be True or False, got {base_raised_in_pretraining!r}")
    s = target_len / trained_len
    probe = (f"retrieval probes (passkey, needle-in-a-haystack) at {target_len:,} tokens, not perplexity: "
             "perplexity is dominated by local context and stays flat while long-range use collapses; "
             "and the short-context benchmarks again, to catch regressions")
    if s <= 1:
        return ExtensionPlan(trained_len, target_len, s, "no change",
                             ("the target fits in the trained context",), probe)
    reasons: list[str] = []
    if base_raised_in_pretraining and s <= ZERO_SHOT_YARN_FACTOR:
        method = "static YaRN (factor s) without fine-tuning, set only when long inputs are expected"
        reasons.append(f"pretraining already reached {trained_len:,} tokens with a raised base (ABF), so up to "
                       f"s = {ZERO_SHOT_YARN_FACTOR:g} YaRN is used zero-shot: Qwen2.5 and Qwen3 ship this "
                       "recipe, 32,768 -> 131,072 tokens at inference; a static scaling also changes short "
                       "inputs, so Qwen's guides add it only when long inputs are expected")
        if can_finetune:
            reasons.append("a fine-tune is optional for this model class: Qwen2.5 and Qwen3 ship the scaling "
                           "without one")
    elif not can_finetune:
        if s <= MODEST_FACTOR:
            method = "static NTK-aware scaling (base * s^(d/(d-2))) without fine-tuning"
            reasons.append(f"a modest factor (s <= {MODEST_FACTOR:g}) with no fine-tuning budget: raising the base "
                           "stretches the slow pairs and leaves the fast pairs that order neighbours untouched")
            reasons.append("not the dynamic form with a KV cache: its base changes as the sequence grows, so keys "
                           "cached under the old base go stale; one static base for the longest "
                           "length served avoids that")
        else:
            method = "no reliable zero-shot option: NTK-aware or YaRN scaling as a stopgap, then fine-tune"
            if base_raised_in_pretraining:
                reasons.append(f"s = {s:g} is past the about {ZERO_SHOT_YARN_FACTOR:g}x that zero-shot YaRN is "
                               "shipped for, even after long pretraining with a raised base (Qwen2.5, Qwen3)")
            else:
                reasons.append(f"s = {s:g} is beyond what scaling alone usually survives (about {MODEST_FACTOR:g}x) "
                               "on a model trained at one length with its original base; a model pretrained long "
                               f"with a raised base (ABF) takes about {ZERO_SHOT_YARN_FACTOR:g}x zero-shot "
                               "(Qwen2.5 and Qwen3 ship static YaRN x4); expect long-range quality to drop until "
                               "the model is fine-tuned")
    elif s > LONG_DOCS_FACTOR:
        method = ("raise the RoPE base (ABF) or scale the slow frequencies (YaRN, 'llama3'), and continue "
                  "pretraining on long documents, lengthening the context in stages")
        reasons.append("the production recipe for large factors: Xiong et al. raise the base and continue "
                       "pretraining (ABF); Llama 3.1 reached 128k by continued pretraining in stages, each stage "
                       "checked for short-context recovery and needle retrieval; Qwen2 raised the base to 1,000,000 "
                       "while going from 4,096 to 32,768 tokens late in pretraining")
    elif local_resolution_matters:
        method = "YaRN plus fine-tuning"
        reasons.append("YaRN interpolates only the pairs whose wavelength exceeds the trained context, keeps the fast "
                       "pairs (local order) as trained, and corrects the softmax temperature")
    else:
        method = "position interpolation (positions / s) plus a few hundred fine-tuning steps"
        reasons.append("every angle stays inside the trained range; the well-documented path (LLaMA to 32k within "
                       "1000 steps)")
    if can_finetune and s <= LONG_DOCS_FACTOR and not (base_raised_in_pretraining and s <= ZERO_SHOT_YARN_FACTOR):
        reasons.append("raising the base for the fine-tune (ABF) is the other documented route")
    if can_finetune and s > LONG_DOCS_FACTOR:
        reasons.append(f"s = {s:g} > {LONG_DOCS_FACTOR:g}: fine-tune on documents close to {target_len:,} tokens, not "
                       "only for more steps; the model has to learn to use the new distances, not only tolerate them")
    return ExtensionPlan(trained_len, target_len, s, method, tuple(reasons), probe)


# ---------------------------------------------------------------------------
# RoPE in a serving engine: bytes, not FLOPs
# ---------------------------------------------------------------------------

H200_HBM_BYTES_PER_S = 4.8e12  # NVIDIA H200 datasheet: 4.8 TB/s of HBM3e bandwidth
# Below this, a kernel's bytes take less time than launching it: an eager launch costs a few
# microseconds and even a CUDA-graph replay costs each kernel node on the order of one (an order
# of magnitude, not a measurement), so the roofline time is only a lower bound.
LAUNCH_SECONDS = 2e-6


def cos_sin_cache_bytes(max_positions: int, rotary_dim: int, bytes_per_value: float = 2.0) -> int:
    """Bytes of a precomputed RoPE table covering positions 0 .. max_positions - 1.

    The layout of vLLM's `RotaryEmbedding.cos_sin_cache`: one row per position, rotary_dim / 2
    cosines then rotary_dim / 2 sines, so max_positions * rotary_dim values, in the model's dtype
    (bytes_per_value 2) in vLLM and in float32 (4) in SGLang's and FlashInfer's kernels.
    """
    check_int("max_positions", max_positions, 1)
    check_int("rotary_dim", rotary_dim, 2)
    if rotary_dim % 2:
        raise ValueError(f"rotary_dim must be even (channels rotate in pairs), got {rotary_dim}")
    bytes_per_value = check_positive_float("bytes_per_value", bytes_per_value)
    return int(round(max_positions * rotary_dim * bytes_per_value))


@dataclass(frozen=True)
class RopeServingCost:
    """Bytes one layer moves for RoPE and for reading the KV cache, for `tokens` decoded at `context`."""

    tokens: int
    context: int
    rope_bytes: int  # q and k rotated in place (read and written) plus one cos/sin row per token
    kv_read_bytes: int  # attention reading every cached key and value once per new token
    bandwidth: float  # bytes per second

    @property
    def rope_seconds(self) -> float:
        return self.rope_bytes / self.bandwidth

    @property
    def kv_read_seconds(self) -> float:
        return self.kv_read_bytes / self.bandwidth

    def __repr__(self) -> str:
        return (f"{self.tokens:,} new tokens at context {self.context:,}, one layer, at "
                f"{self.bandwidth / 1e12:g} TB/s:\n"
                f"    RoPE in place   {format_bytes(self.rope_bytes):>22}  {self.rope_seconds * 1e6:10.3f} us\n"
                f"    KV-cache read   {format_bytes(self.kv_read_bytes):>22}  {self.kv_read_seconds * 1e6:10.3f} us\n"
                f"    RoPE / KV read  {self.rope_bytes / self.kv_read_bytes:.2e}"
                + (f"\n    RoPE's time is a lower bound: under one kernel launch (~{LAUNCH_SECONDS * 1e6:g} us), "
                   "so unfused it is launch-bound"
                   if self.rope_seconds < LAUNCH_SECONDS else ""))


def rope_serving_cost(
    tokens: int, context: int, n_heads: int, n_kv_heads: int, head_dim: int, *, rotary_dim: int | None = None,
    bytes_per_value: float = 2.0, table_bytes_per_value: float = 2.0, bandwidth: float = H200_HBM_BYTES_PER_S,
) -> RopeServingCost:
    """A roofline estimate of RoPE against attention's cache read, per layer: arithmetic, not a measurement.

    RoPE, as serving engines apply it (in place on the new tokens' q and k before the KV write):
        rope_bytes    = tokens * (2 (H + H_kv) r bytes_per_value + r table_bytes_per_value),
    each rotated channel read and written once, r = rotary_dim (head_dim unless partial), one
    cos/sin row per token. Decode attention reads every cached key and value for each new token:
        kv_read_bytes = tokens * context * 2 H_kv head_dim bytes_per_value.
    Both are memory-bound on a GPU, so time = bytes / bandwidth (default: an H200's 4.8 TB/s), a
    roofline lower bound. At decode sizes RoPE's bytes take less time than a kernel launch
    (LAUNCH_SECONDS), so an unfused RoPE kernel is launch-bound, and the repr says so.
    """
    check_int("tokens", tokens, 1)
    check_int("context", context, 1)
    check_int("n_heads", n_heads, 1)
    check_int("n_kv_heads", n_kv_heads, 1)
    check_int("head_dim", head_dim, 2)
    if n_heads % n_kv_heads:
        raise ValueError(f"n_heads ({n_heads}) must be divisible by n_kv_heads ({n_kv_heads})")
    r = head_dim if rotary_dim is None else check_int("rotary_dim", rotary_dim, 2)
    if r > head_dim or r % 2:
        raise ValueError(f"rotary_dim must be even and at most head_dim ({head_dim}), got {r}")
    bytes_per_value = check_positive_float("bytes_per_value", bytes_per_value)
    table_bytes_per_value = check_positive_float("table_bytes_per_value", table_bytes_per_value)
    bandwidth = check_positive_float("bandwidth", bandwidth)
    rope = tokens * (2 * (n_heads + n_kv_heads) * r * bytes_per_value + r * table_bytes_per_value)
    kv = tokens * context * 2 * n_kv_heads * head_dim * bytes_per_value
    return RopeServingCost(tokens, context, int(round(rope)), int(round(kv)), bandwidth)
