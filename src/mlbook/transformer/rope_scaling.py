"""Context-extension scaling for RoPE: one registry from scaling name to the function computing its frequencies.

A RoPE model trained at length L meets angles m * theta_i it never saw once m >= L. Each scaling
changes the frequency ladder theta_i = base^(-2i/d) (`positional.frequency_ladder`) so that a
longer context L' = s L needs fewer new angles; s is the `factor`:

    none     theta_i
    linear   theta_i / s                       position interpolation (Chen et al., 2023)
    ntk      (base * s^(d/(d-2)))^(-2i/d)      NTK-aware: a larger base (bloc97, 2023)
    dynamic  theta_i up to L; past it, NTK with s replaced by s n / L - (s - 1) for n tokens
    yarn     theta_i blended towards theta_i / s over pair index, and an attention factor
             0.1 ln s + 1 on cos and sin (Peng et al., 2023); DeepSeek's mscale / mscale_all_dim
             and an explicit attention_factor replace that factor, truncate=False keeps the
             ramp's ends fractional (gpt-oss)
    llama3   theta_i / s for long wavelengths, theta_i for short ones, a blend between (Llama 3.1)
    longrope theta_i / lambda_i with searched per-pair factors lambda_i: short_factor up to L,
             long_factor past it, and an attention factor sqrt(1 + ln s / ln L) (Ding et al.,
             2024; Phi-3)
    proportional  the first floor(p d / 2) pairs turn at theta_i / s, the rest at frequency 0: p-RoPE
             (Barbero et al., 2025), as transformers 5 ships it for Gemma 4's global layers

How the pieces fit, in the manner of Hugging Face's `modeling_rope_utils`, with a frozen config
object in place of keyword arguments and errors where it only warns:

    RopeScaling("yarn", factor=4.0, original_max_len=2048)      the frozen, validated config
        .frequencies(d_head, base, seq_len)                      -> (inv_freq, attention_factor)
    ROPE_SCALING_REGISTRY["yarn"]                               what that call looks up: the
        = ScalingScheme(yarn_frequencies, parameters, ...)       function and its parameters

To add a scaling, write its frequency function and append a pair to ROPE_SCALING_REGISTRY:
ROPE_SCALINGS, RopeScaling's validation and `RotaryEmbedding` pick it up from there.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Callable, Mapping, NamedTuple

import torch

from mlbook.transformer.positional import frequency_ladder
from mlbook.transformer.validate import check_bool, check_choice, check_even_d, check_int, check_positive_float

__all__ = [
    "RopeScaling",
    "ScalingScheme",
    "ROPE_SCALING_REGISTRY",
    "ROPE_SCALINGS",
    "SCALING_PARAMETERS",
    "FACTOR_DEFAULTS_TO_ONE",
    "scaling_parameters",
    "unscaled_frequencies",
    "linear_frequencies",
    "ntk_base",
    "ntk_frequencies",
    "dynamic_ntk_frequencies",
    "yarn_ramp",
    "YARN_BAND_NAMES",
    "YarnBands",
    "yarn_bands",
    "yarn_attention_factor",
    "proportional_frequencies",
    "yarn_mscale",
    "yarn_scaling_attention_factor",
    "yarn_frequencies",
    "llama3_frequencies",
    "longrope_attention_factor",
    "longrope_frequencies",
]

# ---------------------------------------------------------------------------
# One function per scaling: (d_head, base, scaling, seq_len) -> (inv_freq (d_head/2,) float32, attention_factor)
# ---------------------------------------------------------------------------


def unscaled_frequencies(
    d_head: int, base: float, scaling: RopeScaling, seq_len: int | None
) -> tuple[torch.Tensor, float]:
    """theta_i = base^(-2i/d_head): RoPE as trained (Su et al., 2021)."""
    return frequency_ladder(d_head, base), 1.0


def linear_frequencies(
    d_head: int, base: float, scaling: RopeScaling, seq_len: int | None
) -> tuple[torch.Tensor, float]:
    """Position interpolation (Chen et al., 2023): theta_i / s, so position m turns like m / s did in training."""
    # m * (theta_i / s) == (m / s) * theta_i: dividing the frequencies divides the positions
    return frequency_ladder(d_head, base) / scaling.factor, 1.0


def ntk_base(d_head: int, base: float, factor: float) -> float:
    """NTK-aware base (bloc97, 2023): base * s^(d/(d-2)).

    With this base theta_0 = 1 is unchanged and the last pair's frequency is divided by exactly s;
    the pairs between are slowed by s^(2i/(d-2)). A head with one pair (d_head = 2) keeps its base.
    """
    if d_head == 2:  # one pair: theta_0 = 1 is the only frequency, nothing to stretch
        return base
    return base * factor ** (d_head / (d_head - 2))


def ntk_frequencies(d_head: int, base: float, scaling: RopeScaling, seq_len: int | None) -> tuple[torch.Tensor, float]:
    """NTK-aware scaling: the ladder of the larger base `ntk_base(d_head, base, s)`."""
    return frequency_ladder(d_head, ntk_base(d_head, base, scaling.factor)), 1.0


def dynamic_ntk_frequencies(
    d_head: int, base: float, scaling: RopeScaling, seq_len: int | None
) -> tuple[torch.Tensor, float]:
    """Dynamic NTK (emozilla, 2023; Hugging Face's "dynamic"): NTK scaling that grows with the sequence.

    For a sequence of n = seq_len tokens past L = original_max_len the base is
    ntk_base with s replaced by s n / L - (s - 1), i.e. base * (s n / L - (s - 1))^(d/(d-2));
    up to L (or with no seq_len) the frequencies are the trained ones.
    """
    L = scaling.original_max_len
    if seq_len is None or seq_len <= L:
        return frequency_ladder(d_head, base), 1.0
    growth = scaling.factor * seq_len / L - (scaling.factor - 1)
    return frequency_ladder(d_head, ntk_base(d_head, base, growth)), 1.0


def yarn_ramp(
    d_head: int, base: float = 10000.0, *, original_max_len: int, beta_fast: float = 32.0, beta_slow: float = 1.0,
    truncate: bool = True,
) -> torch.Tensor:
    """YaRN's per-pair blend weight w_i in [0, 1]: theta_i' = (1 - w_i) theta_i + w_i theta_i / s.

    With L = original_max_len, pair i turns L / lambda_i = L theta_i / (2 pi) times within L. The
    ramp is 0 (keep theta_i: extrapolate) for pairs at or below floor(i_fast) and 1 (interpolate:
    theta_i / s) from ceil(i_slow) on, linear in i between, where i_beta is the (fractional) pair
    that turns beta times in L: i_beta = d_head ln(L / (2 pi beta)) / (2 ln base). Defaults are
    the paper's beta_fast = 32, beta_slow = 1 (Peng et al., 2023). truncate=False keeps i_fast and
    i_slow fractional instead of rounding them outwards (Hugging Face's `truncate` key, which
    gpt-oss sets to false); either way they are clamped to [0, d_head - 1]. Returns (d_head/2,) float32.
    """
    check_even_d("d_head", d_head)
    base = check_positive_float("base", base, above=1.0)
    L = check_int("original_max_len", original_max_len, 1)
    beta_fast = check_positive_float("beta_fast", beta_fast)
    beta_slow = check_positive_float("beta_slow", beta_slow)
    if beta_fast < beta_slow:  # equal betas are a one-pair ramp: Kimi K2 ships beta_fast = beta_slow = 1
        raise ValueError(f"beta_fast ({beta_fast}) must be at least beta_slow ({beta_slow})")
    check_bool("truncate", truncate)

    def pair_turning(turns: float) -> float:  # the fractional pair index whose wavelength fits `turns` turns in L
        return d_head * math.log(L / (turns * 2 * math.pi)) / (2 * math.log(base))

    low, high = pair_turning(beta_fast), pair_turning(beta_slow)
    if truncate:  # round the ramp's ends outwards to whole pairs (the paper's and DeepSeek's code)
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, d_head - 1)
    if high == low:
        high += 0.001  # avoid a zero-width ramp
    i = torch.arange(d_head // 2, dtype=torch.float32)  # (d/2,)
    return ((i - low) / (high - low)).clamp(0.0, 1.0)  # (d/2,) 0: keep, 1: interpolate


YARN_BAND_NAMES = ("keep", "blend", "interpolate")  # w_i = 0, 0 < w_i < 1, w_i = 1


@dataclass(frozen=True)
class YarnBands:
    """YaRN's per-pair ramp weight w_i (`yarn_ramp`) and the three bands it defines.

    keep (w_i = 0): theta_i unchanged, the pair extrapolates; interpolate (w_i = 1): theta_i / s;
    blend: between. turns_i = L theta_i / (2 pi) is how many full turns pair i makes within the
    trained length L (Peng et al., 2023, section 3.2).
    """

    d_head: int
    base: float
    original_max_len: int
    beta_fast: float
    beta_slow: float
    ramp: tuple[float, ...]  # (d/2,) w_i, float32 values
    turns: tuple[float, ...]  # (d/2,) L theta_i / (2 pi), float64

    @property
    def keep(self) -> tuple[int, ...]:
        return tuple(i for i, r in enumerate(self.ramp) if r <= 0.0)

    @property
    def blend(self) -> tuple[int, ...]:
        return tuple(i for i, r in enumerate(self.ramp) if 0.0 < r < 1.0)

    @property
    def interpolate(self) -> tuple[int, ...]:
        return tuple(i for i, r in enumerate(self.ramp) if r >= 1.0)

    def band_of(self, i: int) -> str:
        """'keep', 'blend' or 'interpolate' for pair i."""
        if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < self.d_head // 2:
            raise ValueError(f"pair {i!r} is out of range: d_head={self.d_head} has pairs 0..{self.d_head // 2 - 1}")
        r = self.ramp[i]
        return "keep" if r <= 0.0 else ("interpolate" if r >= 1.0 else "blend")

    def as_record(self) -> dict[str, object]:
        """The bands as an experiment record stores them: ramp to 4 decimals, turns to 3, pair lists."""
        return {
            "beta_fast": self.beta_fast, "beta_slow": self.beta_slow,
            "ramp": [round(r, 4) for r in self.ramp], "turns": [round(t, 3) for t in self.turns],
            "keep": list(self.keep), "blend": list(self.blend), "interpolate": list(self.interpolate),
        }


def yarn_bands(
    d_head: int = 128, base: float = 10000.0, original_max_len: int = 8192, beta_fast: float = 32.0,
    beta_slow: float = 1.0, *, truncate: bool = True,
) -> YarnBands:
    """Which RoPE pairs YaRN keeps, blends and interpolates: the ramp of `yarn_ramp` and each pair's
    turns within L, turns_i = L theta_i / (2 pi). Defaults: the paper's beta_fast = 32, beta_slow = 1
    for d_head = 128, base 10,000, L = 8192 (Peng et al., 2023); truncate as in `yarn_ramp`."""
    ramp = yarn_ramp(d_head, base, original_max_len=original_max_len, beta_fast=beta_fast, beta_slow=beta_slow,
                     truncate=truncate)
    theta = frequency_ladder(d_head, base).double()  # (d/2,) unscaled theta_i
    turns = original_max_len * theta / (2 * math.pi)  # (d/2,) L theta_i / 2 pi
    return YarnBands(d_head, float(base), original_max_len, beta_fast, beta_slow,
                     tuple(ramp.tolist()), tuple(turns.tolist()))


def yarn_attention_factor(factor: float) -> float:
    """YaRN's attention factor sqrt(1/t) = 0.1 ln s + 1 for s > 1, else 1 (Peng et al., 2023, eq. 22).

    RotaryEmbedding multiplies cos and sin by it, so q . k carries its square, the logit scale 1/t.
    """
    factor = check_positive_float("factor", factor)
    return 0.1 * math.log(factor) + 1.0 if factor > 1 else 1.0


def yarn_mscale(factor: float, mscale: float = 1.0) -> float:
    """DeepSeek's get_mscale: 0.1 mscale ln s + 1 for s > 1, else 1 (DeepSeek-V2 code; Hugging Face's yarn).

    yarn_mscale(s) is `yarn_attention_factor(s)`; mscale scales the logarithm's weight.
    """
    factor = check_positive_float("factor", factor)
    return 0.1 * mscale * math.log(factor) + 1.0 if factor > 1 else 1.0


def yarn_scaling_attention_factor(scaling: RopeScaling) -> float:
    """The factor YaRN puts on cos and sin, chosen as Hugging Face's `_compute_yarn_parameters` does:

        attention_factor given                     -> that value
        mscale and mscale_all_dim both given, != 0 -> yarn_mscale(s, mscale) / yarn_mscale(s, mscale_all_dim)
        otherwise                                  -> yarn_mscale(s) = 0.1 ln s + 1

    DeepSeek-V2/V3 ship mscale = mscale_all_dim, so the factor on cos and sin is 1; their attention
    module multiplies the softmax scale by yarn_mscale(s, mscale_all_dim)^2 instead.
    """
    if scaling.attention_factor is not None:
        return scaling.attention_factor
    if scaling.mscale and scaling.mscale_all_dim:
        return yarn_mscale(scaling.factor, scaling.mscale) / yarn_mscale(scaling.factor, scaling.mscale_all_dim)
    return yarn_mscale(scaling.factor)


def yarn_frequencies(d_head: int, base: float, scaling: RopeScaling, seq_len: int | None) -> tuple[torch.Tensor, float]:
    """YaRN (Peng et al., 2023): keep the fast pairs, interpolate the slow ones, blend between (`yarn_ramp`).

    The attention factor is `yarn_scaling_attention_factor` (0.1 ln s + 1 unless the config says otherwise).
    """
    theta = frequency_ladder(d_head, base)  # (d/2,) extrapolation: the trained frequencies
    ramp = yarn_ramp(d_head, base, original_max_len=scaling.original_max_len, beta_fast=scaling.beta_fast,
                     beta_slow=scaling.beta_slow, truncate=scaling.truncate)  # (d/2,) 0: keep theta_i, 1: theta_i / s
    inv_freq = theta * (1 - ramp) + (theta / scaling.factor) * ramp  # (d/2,)
    return inv_freq, yarn_scaling_attention_factor(scaling)


def llama3_frequencies(
    d_head: int, base: float, scaling: RopeScaling, seq_len: int | None
) -> tuple[torch.Tensor, float]:
    """Llama 3.1's scaling (Meta's reference code; Hugging Face "llama3"), by wavelength lambda_i = 2 pi / theta_i:

    lambda_i > L / low_freq_factor: theta_i / s;  lambda_i < L / high_freq_factor: theta_i;  between,
    (1 - a) theta_i / s + a theta_i with a = (L / lambda_i - low_freq_factor) / (high_freq_factor - low_freq_factor).
    """
    theta = frequency_ladder(d_head, base)  # (d/2,)
    s, L = scaling.factor, scaling.original_max_len
    low, high = scaling.low_freq_factor, scaling.high_freq_factor
    wavelength = 2 * math.pi / theta  # (d/2,)
    low_freq_wavelength = L / low  # longer than this: divide by factor
    high_freq_wavelength = L / high  # shorter than this: unchanged
    # low == high (a sharp switch) leaves no pair strictly inside the band; avoid dividing by zero there
    smooth = (L / wavelength - low) / (high - low) if high > low else torch.ones_like(theta)  # (d/2,)
    blended = (1 - smooth) * theta / s + smooth * theta  # (d/2,)
    inv_freq = torch.where(wavelength > low_freq_wavelength, theta / s, theta)  # (d/2,)
    medium = (wavelength >= high_freq_wavelength) & (wavelength <= low_freq_wavelength)  # (d/2,)
    return torch.where(medium, blended, inv_freq), 1.0


def longrope_attention_factor(factor: float, original_max_len: int) -> float:
    """LongRoPE's attention factor sqrt(1 + ln s / ln L) for s > 1, else 1 (Microsoft's LongRoPE and Phi-3 code;
    Hugging Face's longrope default). L is the trained context, s the extension ratio."""
    factor = check_positive_float("factor", factor)
    L = check_int("original_max_len", original_max_len, 2)
    return math.sqrt(1 + math.log(factor) / math.log(L)) if factor > 1 else 1.0


def longrope_frequencies(
    d_head: int, base: float, scaling: RopeScaling, seq_len: int | None
) -> tuple[torch.Tensor, float]:
    """LongRoPE (Ding et al., 2024), as Phi-3 ships it: theta_i / lambda_i with one searched factor per pair.

    lambda = short_factor for a sequence of at most L = original_max_len tokens (or no seq_len),
    long_factor past L; each has d_head/2 entries. The attention factor on cos and sin is
    attention_factor if given, else `longrope_attention_factor(factor, L)`; it does not depend on
    the sequence length (Hugging Face computes it once, at initialisation).
    """
    lam = scaling.long_factor if seq_len is not None and seq_len > scaling.original_max_len else scaling.short_factor
    if len(lam) != d_head // 2:
        which = "long_factor" if lam is scaling.long_factor else "short_factor"
        raise ValueError(f"{which} has {len(lam)} entries, but d_head={d_head} has {d_head // 2} pairs: "
                         f"longrope needs one factor per pair")
    theta = frequency_ladder(d_head, base)  # (d/2,)
    inv_freq = theta / torch.tensor(lam, dtype=torch.float32)  # (d/2,) theta_i / lambda_i
    attention = (scaling.attention_factor if scaling.attention_factor is not None
                 else longrope_attention_factor(scaling.factor, scaling.original_max_len))
    return inv_freq, attention


def proportional_frequencies(
    d_head: int, base: float, scaling: RopeScaling, seq_len: int | None
) -> tuple[torch.Tensor, float]:
    """p-RoPE (Barbero et al., 2025, "Round and round we go"), as transformers 5 computes its "proportional"
    type (Gemma 4's global layers: p = 0.25 of a 512-wide head at base 10^6).

    The ladder is the whole head's, theta_i = base^(-2i/d_head); the first floor(p d_head / 2) pairs keep it
    (divided by factor), the others get frequency 0 and never turn, so they carry content with no position.
    p is `rotated_fraction` (transformers' partial_rotary_factor, which here does not shorten the head).
    """
    theta = frequency_ladder(d_head, base)  # (d/2,)
    turning = int(scaling.rotated_fraction * d_head // 2)  # transformers: int(p * head_dim // 2)
    keep = torch.arange(d_head // 2) < turning  # (d/2,)
    return theta * keep / scaling.factor, 1.0  # (d/2,) zero past the first `turning` pairs
# ---------------------------------------------------------------------------

FrequencyFunction = Callable[[int, float, "RopeScaling", "int | None"], "tuple[torch.Tensor, float]"]


def _check_yarn(scaling: RopeScaling) -> None:
    if scaling.beta_fast < scaling.beta_slow:
        raise ValueError(f"beta_fast ({scaling.beta_fast}) must be at least beta_slow ({scaling.beta_slow})")


def _check_proportional(scaling: RopeScaling) -> None:
    if scaling.rotated_fraction > 1.0:
        raise ValueError(f"rotated_fraction must be in (0, 1] (the share of the head's pairs that turn), "
                         f"got {scaling.rotated_fraction:g}")


def _check_llama3(scaling: RopeScaling) -> None:
    # equal factors are a sharp switch with no blend band: Llama 4 Scout ships low = high = 1 (Meta's llama4 code)
    if scaling.high_freq_factor < scaling.low_freq_factor:
        raise ValueError(f"high_freq_factor ({scaling.high_freq_factor}) must be at least "
                         f"low_freq_factor ({scaling.low_freq_factor})")


class ScalingScheme(NamedTuple):
    """One registry entry: the frequency function, the parameters it takes and how they must relate."""

    frequencies: FrequencyFunction
    parameters: Mapping[str, object]  # name -> default; None: the caller must give it (unless in `optional`)
    check: Callable[[RopeScaling], None] | None = None  # relations between parameters, after each is valid
    uses_seq_len: bool = False  # True: the frequencies depend on the sequence length (recomputed per call)
    optional: tuple[str, ...] = ()  # parameters with no default that may stay None (the scheme then derives them)


ROPE_SCALING_REGISTRY: dict[str, ScalingScheme] = {
    "none": ScalingScheme(unscaled_frequencies, {}),
    "linear": ScalingScheme(linear_frequencies, {"factor": 1.0}),
    "ntk": ScalingScheme(ntk_frequencies, {"factor": 1.0}),
    "dynamic": ScalingScheme(dynamic_ntk_frequencies, {"factor": 1.0, "original_max_len": None}, uses_seq_len=True),
    "yarn": ScalingScheme(
        yarn_frequencies,
        {"factor": 1.0, "original_max_len": None, "beta_fast": 32.0, "beta_slow": 1.0, "attention_factor": None,
         "mscale": None, "mscale_all_dim": None, "truncate": True},
        _check_yarn, optional=("attention_factor", "mscale", "mscale_all_dim"),
    ),
    "llama3": ScalingScheme(
        llama3_frequencies,
        {"factor": 1.0, "original_max_len": None, "low_freq_factor": 1.0, "high_freq_factor": 4.0},
        _check_llama3,
    ),
    "longrope": ScalingScheme(
        longrope_frequencies,
        {"factor": 1.0, "original_max_len": None, "short_factor": None, "long_factor": None, "attention_factor": None},
        uses_seq_len=True, optional=("attention_factor",),
    ),
    "proportional": ScalingScheme(
        proportional_frequencies, {"factor": 1.0, "rotated_fraction": None}, _check_proportional,
    ),
}
# ("none", "linear", "ntk", "dynamic", "yarn", "llama3", "longrope", "proportional")
ROPE_SCALINGS: tuple[str, ...] = tuple(ROPE_SCALING_REGISTRY)


def scaling_parameters(name: str) -> tuple[str, ...]:
    """The parameters scaling `name` takes, e.g. ("factor", "original_max_len", "beta_fast", "beta_slow") for yarn."""
    return tuple(ROPE_SCALING_REGISTRY[check_choice("scaling", name, ROPE_SCALINGS)].parameters)


# ---------------------------------------------------------------------------
# The config object
# ---------------------------------------------------------------------------

# The scalings whose factor may be left out and is then 1: "none" scales nothing, and transformers 5.15's
# "proportional" reads factor with a default of 1. Every other scaling needs it stated.
FACTOR_DEFAULTS_TO_ONE: tuple[str, ...] = ("none", "proportional")


@dataclass(frozen=True)
class RopeScaling:
    """A RoPE context-extension scaling: its name and parameters, validated when made, then frozen.

        name               one of ROPE_SCALINGS ("none", "linear", "ntk", "dynamic", "yarn", "llama3", "longrope",
                           "proportional")
        factor             s = L' / L, the extension ratio, >= 1 (for dynamic, the s in s n / L - (s - 1))
        original_max_len   L, the context length the model was trained at (dynamic, yarn, llama3: required)
        beta_fast, beta_slow
                           yarn: pairs turning more than beta_fast times in L keep theta_i, fewer than
                           beta_slow times get theta_i / s (default 32, 1)
        low_freq_factor, high_freq_factor
                           llama3: wavelengths above L / low_freq_factor get theta_i / s, below
                           L / high_freq_factor keep theta_i (default 1, 4)
        attention_factor   yarn, longrope: the factor on cos and sin, overriding the scheme's own
        mscale, mscale_all_dim
                           yarn: DeepSeek's pair; with both set the factor is
                           yarn_mscale(s, mscale) / yarn_mscale(s, mscale_all_dim). mscale alone is
                           refused (transformers ignores it); mscale_all_dim alone leaves the factor
                           at 0.1 ln s + 1, as in transformers (DeepSeek's attention reads it)
        truncate           yarn: round the ramp's ends to whole pairs (default True; gpt-oss: False)
        short_factor, long_factor
                           longrope: d_head/2 per-pair divisors, for up to L tokens and past L (a list
                           or tuple; `frequencies` refuses either of a length other than d_head/2)
        rotated_fraction   proportional: the share p of the head's pairs that turn, in (0, 1]
                           (transformers' partial_rotary_factor for rope_type "proportional")

    A scaling takes only its own parameters (`scaling_parameters(name)`): giving any other, or a
    factor other than 1 with name="none", is an error, and so is leaving out a required one (factor
    included, except for FACTOR_DEFAULTS_TO_ONE: RopeScaling("linear") is refused, not plain RoPE). The
    optional ones left unset take the scheme's defaults (or stay None where the scheme derives
    them: YaRN's and LongRoPE's attention factor); the ones it does not take stay None.

    `frequencies(d_head, base, seq_len)` returns (inv_freq (d_head/2,) float32, attention_factor), from
    the function ROPE_SCALING_REGISTRY holds for `name`; `RotaryEmbedding(d_head, base, rope_scaling)` calls it.
    """

    name: str = "none"
    factor: float | None = None  # required by every scaling but those in FACTOR_DEFAULTS_TO_ONE
    original_max_len: int | None = None
    beta_fast: float | None = None
    beta_slow: float | None = None
    low_freq_factor: float | None = None
    high_freq_factor: float | None = None
    attention_factor: float | None = None
    mscale: float | None = None
    mscale_all_dim: float | None = None
    truncate: bool | None = None
    short_factor: tuple[float, ...] | None = None
    long_factor: tuple[float, ...] | None = None
    rotated_fraction: float | None = None

    def __post_init__(self) -> None:
        scheme = ROPE_SCALING_REGISTRY[check_choice("scaling", self.name, ROPE_SCALINGS)]
        if self.factor is None:  # a scaling left at factor 1 would silently be plain RoPE
            if self.name not in FACTOR_DEFAULTS_TO_ONE:
                raise ValueError(
                    f"scaling={self.name!r} needs factor, the context-extension ratio s = L'/L >= 1, and got none: "
                    f"left at 1 it would be plain RoPE; give it explicitly (factor=1.0 to scale nothing)"
                )
            object.__setattr__(self, "factor", 1.0)
        factor = check_positive_float("factor", self.factor)
        if self.name == "none" and factor != 1.0:
            raise ValueError(
                f"factor={factor:g} was given with scaling='none', which scales nothing; pick a scaling "
                f"({', '.join(repr(n) for n in ROPE_SCALINGS[1:])}) or leave factor at 1"
            )
        if self.name != "none" and factor < 1.0:
            raise ValueError(
                f"factor must be >= 1 with scaling={self.name!r} (it is the context-extension ratio L'/L), got {factor}"
            )
        object.__setattr__(self, "factor", factor)
        for param in SCALING_PARAMETERS:
            if param == "factor":  # checked above: every scaling takes it
                continue
            value = getattr(self, param)
            if param not in scheme.parameters:
                if value is not None:
                    takes = ", ".join(scheme.parameters) or "no parameters"
                    raise ValueError(
                        f"{param}={value!r} was given, but scaling={self.name!r} does not use it (it takes {takes})"
                    )
                continue
            if value is None:
                if param in scheme.optional:
                    continue
                if scheme.parameters[param] is None:
                    raise ValueError(
                        f"scaling={self.name!r} needs {param}"
                        + (", the context length the model was trained at" if param == "original_max_len" else "")
                        + (", one factor per frequency pair" if param in ("short_factor", "long_factor") else "")
                    )
                value = scheme.parameters[param]
            if param == "original_max_len":
                value = check_int(param, value, 1)
            elif param == "truncate":
                value = check_bool(param, value)
            elif param in ("short_factor", "long_factor"):
                value = _check_factor_list(param, value)
            else:
                value = check_positive_float(param, value)
            object.__setattr__(self, param, value)
        if self.mscale is not None and self.mscale_all_dim is None:
            raise ValueError(
                f"mscale={self.mscale:g} was given without mscale_all_dim: transformers (4.57 and 5.15) reads mscale "
                f"only in the pair yarn_mscale(s, mscale) / yarn_mscale(s, mscale_all_dim) and ignores it alone, "
                f"leaving the factor on cos and sin at 0.1 ln s + 1; give mscale_all_dim too (DeepSeek ships "
                f"mscale = mscale_all_dim), or leave mscale out"
            )
        if scheme.check is not None:
            scheme.check(self)

    @property
    def uses_seq_len(self) -> bool:
        """True if the frequencies depend on the sequence length (dynamic): pass seq_len to `frequencies`."""
        return ROPE_SCALING_REGISTRY[self.name].uses_seq_len

    def frequencies(self, d_head: int, base: float = 10000.0, seq_len: int | None = None) -> tuple[torch.Tensor, float]:
        """(inv_freq (d_head/2,) float32, attention_factor) for a head of d_head channels.

        seq_len is the total sequence length (cache included); only a scaling with `uses_seq_len`
        (dynamic) reads it, and without it that one returns the trained frequencies.
        """
        check_even_d("d_head", d_head)
        base = check_positive_float("base", base, above=1.0)
        if seq_len is not None:
            check_int("seq_len", seq_len, 0)
        for param in ("short_factor", "long_factor"):  # both, whichever this seq_len would use
            lam = getattr(self, param)
            if lam is not None and len(lam) != d_head // 2:
                raise ValueError(f"{param} has {len(lam)} entries, but d_head={d_head} has {d_head // 2} pairs: "
                                 f"{self.name} needs one factor per pair")
        return ROPE_SCALING_REGISTRY[self.name].frequencies(d_head, base, self, seq_len)


def _check_factor_list(name: str, value: object) -> tuple[float, ...]:
    """A non-empty sequence of positive finite numbers, as a tuple of floats (LongRoPE's per-pair factors)."""
    if not isinstance(value, (list, tuple)):  # a dict would give its keys, a string its characters
        raise TypeError(f"{name} must be a list of positive numbers, one per frequency pair, got "
                        f"{type(value).__name__} ({value!r:.60})")
    items = list(value)
    if not items:
        raise ValueError(f"{name} must hold one positive number per frequency pair, got an empty list")
    return tuple(check_positive_float(f"{name}[{i}]", v) for i, v in enumerate(items))


SCALING_PARAMETERS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(RopeScaling) if f.name != "name")
