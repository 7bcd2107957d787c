"""Section 4's failure modes as checks a reader can run in seconds.

Each function plants the cause in a tiny model (or reads it off the library) and returns the
number the check looks at, with the correct setting beside it:

    decode_reset_check     cached generation degrades: positions reset to 0 at decode
                           (uses mlbook.analysis.learned.decode_logit_drift)
    extrapolation_check    perplexity explodes past the training length: missing learned rows,
                           RoPE pairs driven to angles they never saw
    ported_q_check         a ported checkpoint produces garbage: the RoPE pairing differs; compare
                           one layer's rotated q with the reference's
    shuffle_check          a model ignores position: the encoding never reaches the scores (added
                           after the attention's projections, or removed by LayerNorm); shuffle
                           the tokens and see whether the attention pattern changes beyond the shuffle
    cache_rescaling_check  a scaling that follows the sequence length (dynamic NTK, LongRoPE)
                           changes the frequencies mid-generation, so keys cached earlier were
                           rotated with other ones; compare cached decoding with a full forward

Retrieval failing while perplexity looks fine, and a sliding window collapsing, take a trained
model, and the literature and this book's tiny models do not agree on them, so section 4 gives
both, labelled: StreamingLLM (Xiao et al., ICLR 2024) reports the window collapse in pretrained
LLMs, and Al-Khateeb et al. (2023, arXiv 2310.13017) report ALiBi models retrieving better past
their training length once positions are interpolated; the book's own runs are Experiment 5
(attention sinks, notebooks/24_exp_attention_sinks) and Experiment 6 (passkey retrieval,
notebooks/25_exp_passkey).
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass

import torch
from torch import nn

from mlbook.analysis.extension import angle_coverage
from mlbook.analysis.learned import DECODE_BUG_SCHEMES, decode_logit_drift
from mlbook.analysis.rope import load_port, pairing_permutation, porting_layers
from mlbook.transformer.attention import MultiHeadAttention
from mlbook.transformer.cache import KVCache
from mlbook.transformer.models import GPT, GPTConfig
from mlbook.transformer.positional import (
    LearnedPositionalEmbedding,
    RotaryEmbedding,
    convert_rotary_weights,
    sinusoidal_positional_encoding,
)
from mlbook.transformer.rope_scaling import RopeScaling
from mlbook.transformer.validate import check_choice, check_int, check_positive_float

__all__ = [
    "DecodeResetReport",
    "decode_reset_check",
    "ExtrapolationRow",
    "ExtrapolationReport",
    "extrapolation_check",
    "PortedQReport",
    "ported_q_check",
    "SHUFFLE_PLACEMENTS",
    "ShuffleReport",
    "shuffle_check",
    "CACHE_SCALINGS",
    "CacheScalingReport",
    "cache_rescaling_check",
]


# ---------------------------------------------------------------------------
# Cached generation degrades after a few tokens
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class DecodeResetReport:
    """Max |cached logits - full-forward logits| per decoding step, correct and with positions reset."""

    scheme: str
    correct: torch.Tensor  # (S,) float64
    reset: torch.Tensor  # (S,) float64

    @property
    def first_bad_step(self) -> int | None:
        """First step where the reset run differs from the full forward by more than 1e-4."""
        bad = (self.reset > 1e-4).nonzero()
        return int(bad[0]) if bad.numel() else None

    def __repr__(self) -> str:
        return (f"{self.scheme}: max |cached - full-forward logits| over {self.correct.numel()} steps\n"
                f"    correct {float(self.correct.max()):.1e}; positions reset {float(self.reset.max()):.1e}, "
                f"first off by more than 1e-4 at step {self.first_bad_step}")


def decode_reset_check(scheme: str = "learned", T: int = 24, seed: int = 0) -> DecodeResetReport:
    """Teacher-forced cached decoding of a random tiny GPT, correct and with positions reset to 0.

    The check asserts cached logits equal full-forward logits at every step (`decode_logit_drift`);
    a correct cache gives float rounding, the planted bug a difference from the second step on.
    """
    check_choice("scheme", scheme, DECODE_BUG_SCHEMES)
    check_int("T", T, 3)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = GPT(GPTConfig(vocab_size=64, d_model=32, n_heads=2, n_layers=2, max_len=T, positional=scheme))
        tokens = torch.randint(0, 64, (2, T))  # (2, T)
    model.eval()
    with torch.no_grad():
        correct = decode_logit_drift(model, tokens, reset_positions=False)
        reset = decode_logit_drift(model, tokens, reset_positions=True)
    return DecodeResetReport(scheme, correct.double(), reset.double())


# ---------------------------------------------------------------------------
# Perplexity explodes past the training length
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ExtrapolationRow:
    """At T = factor * L: learned rows that do not exist, and RoPE pairs at never-seen angles."""

    factor: float
    T: int
    learned_missing_rows: int
    learned_error: str | None  # the library's refusal, if any
    rope_new_angle_pairs: int  # pairs whose angles at T go past everything seen in training
    rope_pairs: int
    largest_angle_ratio: float  # (T - 1) / L for every pair


@dataclass(frozen=True)
class ExtrapolationReport:
    trained_len: int
    d_head: int
    base: float
    rows: tuple[ExtrapolationRow, ...]

    def __repr__(self) -> str:
        head = (f"trained length L = {self.trained_len:,}; RoPE d_head = {self.d_head}, base = {self.base:,g}\n"
                f"{'T / L':>6}  {'T':>7}  {'learned rows':>12}  {'RoPE pairs at':>13}  {'largest angle':>13}\n"
                f"{'':>6}  {'':>7}  {'missing':>12}  {'new angles':>13}  {'/ trained':>13}")
        lines = [f"{r.factor:>6g}  {r.T:>7,}  {r.learned_missing_rows:>12,}  "
                 f"{f'{r.rope_new_angle_pairs} of {r.rope_pairs}':>13}  {r.largest_angle_ratio:>13.3f}" for r in self.rows]
        refused = next((r.learned_error for r in self.rows if r.learned_error), None)
        tail = textwrap.wrap(f"the learned table refuses: {refused}", 88, subsequent_indent="    ") if refused else []
        return "\n".join([head] + lines + tail)


def extrapolation_check(
    trained_len: int = 2048, factors: tuple[float, ...] = (1.0, 1.5, 2.0), d_head: int = 128, base: float = 10000.0
) -> ExtrapolationReport:
    """At each factor: ask a learned table of trained_len rows for T positions, and count the RoPE
    pairs that never completed a turn within trained_len (they see new angles at T > trained_len).

    Past 1x the learned table has T - L rows missing (the library refuses); RoPE has rows for any
    T but its slow pairs leave the trained arc. The perplexity itself needs a trained model:
    Experiment 2 (notebooks/21_exp_extrapolation) evaluates each scheme at 1x, 1.5x, 2x and 4x
    its training length.
    """
    check_int("trained_len", trained_len, 1)
    rows = []
    for f in factors:
        f = check_positive_float("factor", f)
        T = int(round(f * trained_len))
        table = LearnedPositionalEmbedding(trained_len, 2)
        error = None
        try:
            table(T)
        except ValueError as err:
            error = str(err).split(";")[0]
        cov = angle_coverage(d_head, base, trained_len, target_len=T)
        new = len(cov.unwrapped) if T > trained_len else 0
        rows.append(ExtrapolationRow(f, T, max(T - trained_len, 0), error, new, d_head // 2, cov.ratio))
    return ExtrapolationReport(trained_len, d_head, float(base), tuple(rows))


# ---------------------------------------------------------------------------
# A ported checkpoint produces garbage
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class PortedQReport:
    """Max |rotated q - reference rotated q| (float64) for weights ported from the interleaved layout."""

    before_rotation: float  # raw port, q before rotation: the weights themselves load fine
    raw: float  # raw port, after rotation: the pairing mismatch
    converted: float  # after convert_rotary_weights, compared channel for channel
    scale: float  # max |reference rotated q|, for scale

    def __repr__(self) -> str:
        return "\n".join([
            f"max |q - q_ref| over one layer (max |q_ref| = {self.scale:.2f})",
            f"    before rotation, weights copied as they are  {self.before_rotation:.1e}",
            f"    after rotation, weights copied as they are   {self.raw:.2f}",
            f"    after rotation, convert_rotary_weights       {self.converted:.1e}",
        ])


def _rotated_q(layer: MultiHeadAttention, x: torch.Tensor, rotate: bool = True) -> torch.Tensor:
    q = layer.split_heads(layer.q_proj(x))  # (B, H, T, d_head)
    return layer.rotary.rotate(q) if rotate and layer.rotary is not None else q  # (B, H, T, d_head)


def ported_q_check(d_model: int = 64, n_heads: int = 2, T: int = 16, base: float = 10000.0, *,
                   seed: int = 0) -> PortedQReport:
    """Reference: an attention layer with interleaved-pair RoPE (RoFormer, Meta's original LLaMA
    code). Port: a half-pair layer (GPT-NeoX, Hugging Face LLaMA) given the same q weights, as they
    are and after `convert_rotary_weights(..., to="half")`: the set-up of `analysis.rope.porting_bug`
    (`porting_layers`, `load_port`), read at q instead of at the scores. The converted port's
    channels are a permutation of the reference's; the comparison maps them back before subtracting.
    """
    check_int("T", T, 2)
    ref, port, x = porting_layers(d_model, n_heads, base, seed=seed, T=T)  # x: (1, T, d_model)
    perm = pairing_permutation(ref.d_head).argsort()  # new channel r of a converted head holds old channel perm[r]
    with torch.no_grad():
        q_ref = _rotated_q(ref, x)  # (1, H, T, d_head)
        load_port(ref, port, convert=False)
        before = (_rotated_q(port, x, rotate=False) - _rotated_q(ref, x, rotate=False)).abs().max().item()
        raw = (_rotated_q(port, x) - q_ref).abs().max().item()
        load_port(ref, port, convert=True)
        converted = (_rotated_q(port, x) - q_ref[..., perm]).abs().max().item()
    return PortedQReport(before, raw, converted, q_ref.abs().max().item())


# ---------------------------------------------------------------------------
# A model ignores position
# ---------------------------------------------------------------------------

SHUFFLE_PLACEMENTS: tuple[str, ...] = ("input", "rope", "after_projection", "norm_zeroed", "none")


@dataclass(frozen=True)
class ShuffleReport:
    """max |A(P x) - P A(x) P^T| of one attention layer's weights, per placement of the encoding."""

    sensitivity: dict[str, float]
    tolerance: float

    def uses_position(self, placement: str) -> bool:
        return self.sensitivity[placement] > self.tolerance

    def __repr__(self) -> str:
        width = max(len(p) for p in self.sensitivity)
        return "\n".join(
            f"{p:<{width}}  {s:9.2e}  {'uses position' if s > self.tolerance else 'IGNORES position'}"
            for p, s in self.sensitivity.items()
        )


class _ShuffleProbe(nn.Module):
    """LayerNorm then one bidirectional attention layer, with the encoding placed as asked."""

    def __init__(self, placement: str, d_model: int, n_heads: int, T: int) -> None:
        super().__init__()
        self.placement = placement
        rotary = RotaryEmbedding(d_model // n_heads) if placement == "rope" else None
        self.norm = nn.LayerNorm(d_model)
        self.attn = MultiHeadAttention(d_model, n_heads, causal=False, rotary=rotary)
        pe = sinusoidal_positional_encoding(T, d_model).double()  # (T, d_model)
        scalar = (torch.arange(T, dtype=torch.float64) / T)[:, None].expand(T, d_model)  # (T, d_model) p_t * 1
        self.register_buffer("pe", pe, persistent=False)
        self.register_buffer("scalar_pe", scalar, persistent=False)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.placement == "input":
            x = x + self.pe  # (B, T, d_model) the usual place: before the norm and the projections
        elif self.placement == "norm_zeroed":
            x = x + self.scalar_pe  # (B, T, d_model) the same number in every feature: LayerNorm centres it away
        out, weights = self.attn(self.norm(x), return_weights=True)  # (B, T, d_model), (B, H, T, T)
        if self.placement == "after_projection":
            out = out + self.pe  # after the output projection: no score ever saw it
        return out, weights


def shuffle_check(
    T: int = 12, d_model: int = 32, n_heads: int = 4, *, seed: int = 0, tolerance: float = 1e-6
) -> ShuffleReport:
    """Shuffle the tokens with a permutation P; for each placement of the encoding compare the
    attention weights A(P x) with the shuffled weights P A(x) P^T (the layer returns its weights
    from float32 scores, so rounding is about 1e-8; tolerance 1e-6).

    Zero (up to rounding) means the scores never saw position: the layer is permutation-equivariant.
    input     sinusoidal table added to the embeddings          -> changes
    rope      q and k rotated                                   -> changes
    after_projection  table added after the output projection   -> zero: the scores never see it
    norm_zeroed  a per-position scalar added to every feature   -> zero: LayerNorm subtracts the mean
    none      no encoding                                       -> zero
    """
    check_int("T", T, 2)
    check_int("d_model", d_model, 2)
    check_int("n_heads", n_heads, 1)
    tolerance = check_positive_float("tolerance", tolerance)
    if d_model % n_heads or (d_model // n_heads) % 2:
        raise ValueError(f"d_model ({d_model}) must be n_heads ({n_heads}) times an even d_head")
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(1, T, d_model, generator=gen, dtype=torch.float64)  # (1, T, d_model)
    perm = torch.randperm(T, generator=gen)  # (T,)
    while torch.equal(perm, torch.arange(T)):
        perm = torch.randperm(T, generator=gen)
    sensitivity = {}
    for placement in SHUFFLE_PLACEMENTS:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            probe = _ShuffleProbe(placement, d_model, n_heads, T).double().eval()
        with torch.no_grad():
            _, w = probe(x)  # (1, H, T, T)
            _, w_shuffled = probe(x[:, perm])  # (1, H, T, T)
        expected = w[:, :, perm][:, :, :, perm]  # (1, H, T, T) P A(x) P^T
        sensitivity[placement] = (w_shuffled - expected).abs().max().item()
    return ShuffleReport(sensitivity, tolerance)


# ---------------------------------------------------------------------------
# A scaling that follows the length invalidates the cache
# ---------------------------------------------------------------------------

CACHE_SCALINGS: tuple[str, ...] = ("none", "ntk", "yarn", "dynamic", "longrope")


@dataclass(frozen=True)
class CacheScalingReport:
    """Per scaling: max |cached step output - full forward over the same prefix|, before and past L."""

    trained_len: int
    T: int
    factor: float
    within: dict[str, float]  # steps whose sequence fits the trained length L
    beyond: dict[str, float]  # steps past L
    tol: float = 1e-9

    def stale(self, name: str) -> bool:
        """True if cached decoding leaves the full forward once the sequence passes L."""
        return self.beyond[name] > self.tol

    def __repr__(self) -> str:
        lines = [f"one RoPE attention layer (float64), L = {self.trained_len}, {self.T} tokens decoded one at a time, "
                 f"factor {self.factor:g}:",
                 f"{'scaling':10s}{'steps < L':>12s}{'steps >= L':>12s}  cached keys"]
        shown = lambda err: f"{err:.1e}" if err > self.tol else f"< {self.tol:.0e}"  # noqa: E731 rounding: no digits
        for name in self.within:
            verdict = "STALE past L: rotated with other frequencies" if self.stale(name) else "valid"
            lines.append(f"{name:10s}{shown(self.within[name]):>12s}{shown(self.beyond[name]):>12s}  {verdict}")
        return "\n".join(lines)


def _scaling(name: str, factor: float, trained_len: int, d_head: int) -> RopeScaling | None:
    if name == "none":
        return None
    if name == "ntk":
        return RopeScaling("ntk", factor=factor)
    if name == "longrope":  # one factor per pair: 1 for short inputs, a ramp up to the factor for long ones
        pairs = d_head // 2
        long = tuple(1.0 + (factor - 1.0) * i / (pairs - 1) for i in range(pairs))
        return RopeScaling("longrope", factor=factor, original_max_len=trained_len,
                           short_factor=(1.0,) * pairs, long_factor=long)
    return RopeScaling(name, factor=factor, original_max_len=trained_len)


def cache_rescaling_check(
    trained_len: int = 16, T: int = 40, factor: float = 4.0, *, d_model: int = 32, n_heads: int = 2, seed: int = 0,
) -> CacheScalingReport:
    """Decode T tokens one at a time through one RoPE attention layer with a `KVCache`, per scaling.

    Step t's output is compared with a full forward pass over tokens 0..t, which is what the same
    layer computes without a cache. Static scalings (none, ntk, yarn) agree at every step: each key
    was rotated once with the frequencies every later query uses. Dynamic NTK and LongRoPE choose
    their frequencies from the current length (Hugging Face's `dynamic_rope_update`: dynamic grows
    the base as the sequence grows past L; LongRoPE switches short_factor to long_factor past L),
    so past L a query meets keys rotated under other frequencies, and cached decoding drifts.
    """
    check_int("trained_len", trained_len, 2)
    check_int("T", T, trained_len + 1)
    factor = check_positive_float("factor", factor, above=1.0)
    check_int("d_model", d_model, 2)
    check_int("n_heads", n_heads, 1)
    if d_model % n_heads or (d_model // n_heads) % 4:
        raise ValueError(f"d_model ({d_model}) must be n_heads ({n_heads}) times a d_head divisible by 4")
    d_head = d_model // n_heads
    x = torch.randn(1, T, d_model, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)  # (1, T, d)
    within, beyond = {}, {}
    for name in CACHE_SCALINGS:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            rotary = RotaryEmbedding(d_head, rope_scaling=_scaling(name, factor, trained_len, d_head))
            attn = MultiHeadAttention(d_model, n_heads, rotary=rotary).double().eval()
        cache = KVCache(capacity=T)
        with torch.no_grad():
            diffs = torch.stack([
                (attn(x[:, t : t + 1], cache=cache)[:, 0] - attn(x[:, : t + 1])[:, t]).abs().max()
                for t in range(T)
            ])  # (T,) step t: t + 1 tokens in all
        within[name] = diffs[:trained_len].max().item()
        beyond[name] = diffs[trained_len:].max().item()
    return CacheScalingReport(trained_len, T, factor, within, beyond)
