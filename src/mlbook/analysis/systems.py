"""Systems arithmetic for the systems view (notebooks/11_systems): what each positional scheme
costs against attention, what a materialised bias holds and moves, and the context-extension
decision procedure. KV-cache sizes and device budgets (sections 07, 08, 12, 15) are in
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
LONG_DOCS_FACTOR = 8.0  # past about this factor, fine-tuning needs long documents, not only more steps


def extension_plan(
    trained_len: int, target_len: int, *, can_finetune: bool, local_resolution_matters: bool = True
) -> ExtensionPlan:
    """Section 2.6's procedure for a RoPE model trained at L = trained_len, needed at L' = target_len.

    s = L' / L. s <= 1: nothing to do. No fine-tuning budget: NTK-aware scaling for s <= 2, and
    beyond that only zero-shot stopgaps. With a budget and s <= 8: position interpolation and a few
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
    s = target_len / trained_len
    probe = (f"retrieval probes (passkey, needle-in-a-haystack) at {target_len:,} tokens, not perplexity: "
             "perplexity is dominated by local context and stays flat while long-range use collapses; "
             "and the short-context benchmarks again, to catch regressions")
    if s <= 1:
        return ExtensionPlan(trained_len, target_len, s, "no change",
                             ("the target fits in the trained context",), probe)
    reasons: list[str] = []
    if not can_finetune:
        if s <= MODEST_FACTOR:
            method = "NTK-aware scaling (base * s^(d/(d-2))), or its dynamic form, without fine-tuning"
            reasons.append(f"a modest factor (s <= {MODEST_FACTOR:g}) with no fine-tuning budget: raising the base "
                           "stretches the slow pairs and leaves the fast pairs that order neighbours untouched")
        else:
            method = "no reliable zero-shot option: NTK-aware or YaRN scaling as a stopgap, then fine-tune"
            reasons.append(f"s = {s:g} is beyond what scaling alone usually survives (about {MODEST_FACTOR:g}x); "
                           "expect long-range quality to drop until the model is fine-tuned")
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
    if can_finetune and s <= LONG_DOCS_FACTOR:
        reasons.append("raising the base for the fine-tune (ABF) is the other documented route")
    if can_finetune and s > LONG_DOCS_FACTOR:
        reasons.append(f"s = {s:g} > {LONG_DOCS_FACTOR:g}: fine-tune on documents close to {target_len:,} tokens, not "
                       "only for more steps; the model has to learn to use the new distances, not only tolerate them")
    return ExtensionPlan(trained_len, target_len, s, method, tuple(reasons), probe)
