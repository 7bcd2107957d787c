"""Numbers for section 2.8, what came after RoPE: NoPE, hybrid and local/global stacks, partial rotary
and p-RoPE, latent attention's cache, M-RoPE, and context extension as shipped.

Each function computes what the page prints or draws, from the library (`mlbook.transformer`) and from
the released models' settings in `mlbook.data.model_families` (each row names its config.json and
paper). Plain maths, no plotting.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple, Sequence

import torch

from mlbook.analysis.production import kv_cache_plan
from mlbook.data.model_families import ModelFamily, family
from mlbook.transformer.attention import causal_mask
from mlbook.transformer.hf import every_nth
from mlbook.transformer.latent import mha_cache_values, mla_cache_values
from mlbook.transformer.multimodal import apply_mrope, mrope_position_ids
from mlbook.transformer.positional import RotaryEmbedding, frequency_ladder
from mlbook.transformer.rope_scaling import RopeScaling, yarn_mscale, yarn_scaling_attention_factor
from mlbook.transformer.validate import check_int, check_positive_float, check_real

__all__ = [
    "PositionSignal",
    "nope_position_signal",
    "nope_layers_every",
    "llama4_attention_scale",
    "LocalGlobal",
    "LOCAL_GLOBAL_FAMILIES",
    "LOCAL_GLOBAL_MODELS",
    "local_global",
    "layer_types",
    "pairs_slower_than",
    "window_fitted_base",
    "WindowFit",
    "LOCAL_BASE_FAMILIES",
    "local_window_fit",
    "windowed_kv_bytes",
    "model_kv_bytes",
    "pair_frequencies",
    "RotationSummary",
    "rotation_summary",
    "MLACacheRow",
    "mla_cache_rows",
    "MLASoftmaxScale",
    "MLA_FAMILIES",
    "mla_softmax_scale",
    "mrope_score_map",
    "QWEN3_VL_SECTION",
    "interleaved_section_axes",
    "ShippedScaling",
    "SHIPPED_FAMILIES",
    "SHIPPED_SCALINGS",
    "shipped_scaling",
    "scaled_frequency_ratio",
    "xpos_zeta",
    "xpos_largest_scale",
    "xpos_overflow_length",
]


# ---------------------------------------------------------------------------
# NoPE: a causal decoder can count
# ---------------------------------------------------------------------------


class PositionSignal(NamedTuple):
    """The output at each position of one attention layer with no positional encoding and equal scores."""

    causal: torch.Tensor  # (T,) 1 / (i + 1): a different number at every position
    bidirectional: torch.Tensor  # (T,) 1 / T everywhere: no position information at all


def nope_position_signal(T: int) -> PositionSignal:
    """Why a causal decoder without positional encoding still knows where it is (Haviv et al., 2022).

    Give every token the same query and key (so every score is equal) and let only the first token carry
    a value of 1 (a beginning-of-text marker), the others 0. Under the causal mask query i averages the
    values of keys 0..i, so it outputs 1 / (i + 1): a function of its position, which later layers can
    read. Without the mask every query averages all T keys and outputs 1 / T: nothing to read. The masks
    are the library's `causal_mask`.
    """
    check_int("T", T, 1)
    scores = torch.zeros(T, T, dtype=torch.float64)  # (T, T) every query scores every key alike
    values = torch.zeros(T, dtype=torch.float64)  # (T,)
    values[0] = 1.0  # only the first token carries a 1
    causal = torch.softmax(scores.masked_fill(~causal_mask(T, T), float("-inf")), dim=-1) @ values  # (T,)
    bidirectional = torch.softmax(scores, dim=-1) @ values  # (T,)
    return PositionSignal(causal, bidirectional)


# ---------------------------------------------------------------------------
# Hybrid stacks: which layers rotate, and Llama 4's temperature on the NoPE layers
# ---------------------------------------------------------------------------


def nope_layers_every(n_layers: int, interval: int) -> tuple[int, ...]:
    """The NoPE layers of a stack with one in every `interval` layers unrotated, the last of each group.

    Llama 4 and SmolLM3 write this as `no_rope_layers` flags, 1 = rotate, built in transformers as
    int((i + 1) % no_rope_layer_interval != 0) (Llama4TextConfig, SmolLM3Config; interval 4 in both):
    layers 3, 7, 11, ... are NoPE. The result is `GPTConfig.nope_layers`.
    """
    check_int("interval", interval, 1)
    return tuple(i for i, rotates in enumerate(every_nth(n_layers, interval, False, True)) if not rotates)


def llama4_attention_scale(positions: torch.Tensor | Sequence[int], floor_scale: float = 8192.0,
                           attn_scale: float = 0.1) -> torch.Tensor:
    """Llama 4's query scale on its NoPE layers: 1 + attn_scale * ln(1 + floor((p + 1) / floor_scale)).

    From transformers 4.57, models/llama4/modeling_llama4.py, `Llama4TextAttention.forward`, applied
    when `attn_temperature_tuning` is on and the layer does not rotate; the defaults are the released
    configs' (`floor_scale` 8192, `attn_scale` 0.1). The scale is 1 for the first 8191 positions and then
    grows with the logarithm of the position, step by step: it sharpens the softmax of a query that
    sees ever more keys, so that the weights do not flatten as the context grows (the code cites
    Nakanishi, 2025, scalable softmax). A position that is negative, NaN or not whole is a ValueError.
    """
    floor_scale = check_positive_float("floor_scale", floor_scale)
    check_real("attn_scale", attn_scale)
    p = torch.as_tensor(positions, dtype=torch.float64)  # (T,) cache positions 0, 1, ...
    bad = (~torch.isfinite(p) | (p < 0) | (p != p.floor())).flatten()  # a position -8193 gives -inf, NaN gives NaN
    if bad.any():
        i = int(bad.nonzero()[0, 0])
        raise ValueError(f"positions must be whole numbers >= 0 (cache positions 0, 1, ...), got "
                         f"{p.flatten()[i].item():g} at index {i} (flattened)")
    return torch.log1p(torch.floor((p + 1.0) / floor_scale)) * attn_scale + 1.0  # (T,)


# ---------------------------------------------------------------------------
# Local and global layers: what each model ships and what its KV cache holds
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class LocalGlobal:
    """A stack of local (sliding-window or chunked) and global layers, as one released model ships it."""

    name: str  # the family, as `data.model_families` names it
    checkpoint: str
    types: tuple[str, ...]  # per layer, Hugging Face's names ("chunked_attention" for Llama 4's local layers)
    window: int  # tokens a local layer sees (its window, or its chunk for chunked attention)
    n_kv_heads: int
    d_head: int
    local_base: float  # RoPE base of the local layers
    global_base: float | None  # RoPE base of the global layers; None: the global layers do not rotate (NoPE)
    kind: str  # "sliding" or "chunked"
    source: str  # the released config the row was read from

    @property
    def n_layers(self) -> int:
        return len(self.types)

    @property
    def local_per_global(self) -> int:
        """Local layers per global one (Gemma 2: 1, Gemma 3: 5, Llama 4: 3)."""
        n_global = sum(t == "full_attention" for t in self.types)
        return (self.n_layers - n_global) // max(n_global, 1)


# the local/global stacks the page compares, read from `data.model_families` (the production table's rows)
LOCAL_GLOBAL_FAMILIES: tuple[str, ...] = ("Gemma 2", "Gemma 3", "gpt-oss", "Llama 4")


def _local_global(row: ModelFamily) -> LocalGlobal:
    types = row.layer_kinds
    window = row.chunk if row.chunk is not None else row.window
    if window is None or "full_attention" not in types or all(t == "full_attention" for t in types):
        raise ValueError(f"{row.name} is not a stack of local and global layers")
    global_layers = [i for i, t in enumerate(types) if t == "full_attention"]
    global_rotates = any(i in row.rotary_layers for i in global_layers)
    return LocalGlobal(row.name, row.checkpoint, types, window, row.n_kv_heads, row.d_head,
                       row.rope_local_base or row.rope_base, row.rope_base if global_rotates else None,
                       "chunked" if row.chunk is not None else "sliding", row.urls[-1] if row.urls else row.checkpoint)


LOCAL_GLOBAL_MODELS: tuple[LocalGlobal, ...] = tuple(_local_global(family(n)) for n in LOCAL_GLOBAL_FAMILIES)


def local_global(name: str) -> LocalGlobal:
    """The row of LOCAL_GLOBAL_MODELS for family `name` ("Gemma 3", ...)."""
    for row in LOCAL_GLOBAL_MODELS:
        if row.name == name:
            return row
    raise ValueError(f"no model {name!r}; choose one of {[r.name for r in LOCAL_GLOBAL_MODELS]}")


def layer_types(n_layers: int, local_per_global: int) -> tuple[str, ...]:
    """Hugging Face's per-layer names: `local_per_global` "sliding_attention" layers, then one "full_attention".

    Gemma 2 and gpt-oss (1), Gemma 3 (5, its sliding_window_pattern 6), Cohere's Command R7B (3): layer i is
    global when (i + 1) % (local_per_global + 1) == 0. Pass the result to `GPTConfig.layer_types`.
    """
    check_int("local_per_global", local_per_global, 0)
    return every_nth(n_layers, local_per_global + 1, "full_attention", "sliding_attention")


def pairs_slower_than(d_head: int, base: float, length: float) -> int:
    """How many pairs of the ladder theta_i = base^(-2i/d_head) have a wavelength 2 pi / theta_i longer than
    `length` tokens: pairs that turn less than one full turn over offsets up to `length`.

    Pair i is slower exactly when 2i/d_head > ln(length / 2 pi) / ln(base). From the library's
    `frequency_ladder`, so the count is the ladder's, not a formula typed twice.
    """
    check_int("d_head", d_head, 2)
    base = check_positive_float("base", base)
    length = check_positive_float("length", length)
    wavelengths = 2 * math.pi / frequency_ladder(d_head, base).double()  # (d_head/2,)
    return int((wavelengths > length).sum())


def window_fitted_base(window: float, d_head: int) -> float:
    """The base whose slowest pair turns exactly once over `window` tokens: 2 pi base^((d-2)/d) = W, so
    base = (W / 2 pi)^(d / (d - 2)). A base that spent the whole head on wavelengths within the window."""
    window = check_positive_float("window", window)
    d = check_int("d_head", d_head, 4)
    return (window / (2 * math.pi)) ** (d / (d - 2))


class WindowFit(NamedTuple):
    """How a released model's local-layer base sits against the offsets its local layers see."""

    name: str
    d_head: int
    local_base: float
    window: int  # the config's window (ModernBERT: local_attention, 64 tokens each side)
    longest_offset: int  # the largest |i - j| a local layer sees: W - 1 causal, W // 2 for a bidirectional window
    pairs: int  # d_head / 2
    slower_than_window: int  # pairs whose wavelength exceeds the window
    slower_than_offset: int  # pairs that do not complete one turn over the offsets the layer sees
    fitted_base: float  # window_fitted_base(longest_offset, d_head): slowest pair one turn over the offsets seen
    checkpoint: str = ""  # the released checkpoint the row describes (Gemma 3: its 12B geometry, d_head 256)


LOCAL_BASE_FAMILIES: tuple[str, ...] = ("Gemma 3", "ModernBERT")  # stacks whose local layers have a base of their own


def local_window_fit(name: str) -> WindowFit:
    """`WindowFit` of a `data.model_families` row with a sliding window and a local base (Gemma 3, ModernBERT).

    A causal sliding layer (Hugging Face: key j visible when i - W < j <= i) sees offsets 0..W-1; ModernBERT's
    bidirectional local layers see W // 2 tokens on each side (`local_attention // 2`). The fitted base is fitted
    to that longest offset, the distance the layer can actually compare (Gemma 3: 1,023; ModernBERT: 64).
    """
    row = family(name)
    if row.window is None or row.rope_local_base is None:
        raise ValueError(f"{row.name} has no sliding window with a base of its own; choose one of "
                         f"{list(LOCAL_BASE_FAMILIES)}")
    longest = row.window // 2 if row.encoder else row.window - 1
    base = float(row.rope_local_base)
    return WindowFit(row.name, row.d_head, base, row.window, longest, row.d_head // 2,
                     pairs_slower_than(row.d_head, base, row.window), pairs_slower_than(row.d_head, base, longest),
                     window_fitted_base(longest, row.d_head), row.checkpoint)


def windowed_kv_bytes(types: Sequence[str], window: int | None, context_len: int, n_kv_heads: int, d_head: int,
                      bytes_per_value: float = 2.0) -> int:
    """KV-cache bytes of a stack after `context_len` tokens: a global layer keeps every token, a local one
    at most `window` (a sliding layer never looks further back; a chunked layer never past its chunk).

    Per layer and token a cache holds n_kv_heads * 2 d_head values (`transformer.latent.mha_cache_values`),
    so the total is (n_global * C + n_local * min(C, W)) * 2 * n_kv_heads * d_head * bytes_per_value:
    the KV calculator's `analysis.production.kv_cache_plan` with one window W for both local kinds.
    """
    types = tuple(types)
    if window is None and any(t != "full_attention" for t in types):
        raise ValueError("the stack has local layers, so it needs a window (tokens each local layer keeps)")
    plan = kv_cache_plan(len(types), n_kv_heads, d_head, layer_types=types,
                         sliding_window=window if "sliding_attention" in types else None,
                         chunk_size=window if "chunked_attention" in types else None, bytes_per_value=bytes_per_value)
    return plan.bytes(context_len)


def model_kv_bytes(model: LocalGlobal | str, context_len: int, *, all_global: bool = False,
                   bytes_per_value: float = 2.0) -> int:
    """One request's KV cache for a LOCAL_GLOBAL_MODELS row (bf16), or for the same stack with every layer global."""
    m = local_global(model) if isinstance(model, str) else model
    types = ("full_attention",) * m.n_layers if all_global else m.types
    return windowed_kv_bytes(types, m.window, context_len, m.n_kv_heads, m.d_head, bytes_per_value)


# ---------------------------------------------------------------------------
# Partial rotary and p-RoPE: which pairs turn, how fast
# ---------------------------------------------------------------------------


def pair_frequencies(d_head: int = 64, base: float = 10000.0, *, partial_rotary_factor: float = 1.0,
                     drop_lowest: float = 0.0) -> torch.Tensor:
    """(d_head/2,) radians per token of every pair of a head, 0 for a pair that does not turn.

    Read off the library's `RotaryEmbedding(d_head, base, partial_rotary_factor=..., drop_lowest=...)`:
    partial rotation turns the first r = int(f d_head) channels with the ladder base^(-2i/r) over them
    and leaves the other pairs still (listed last, at 0); p-RoPE keeps the full ladder base^(-2i/d_head)
    and zeroes its lowest round(p d_head / 2) rungs.
    """
    rope = RotaryEmbedding(d_head, base, partial_rotary_factor=partial_rotary_factor, drop_lowest=drop_lowest)
    freq = torch.zeros(d_head // 2, dtype=torch.float64)  # (d_head/2,)
    freq[: rope.inv_freq.shape[0]] = rope.inv_freq.double()  # (r/2,) the rotating channels' pairs
    return freq


class RotationSummary(NamedTuple):
    """What a rotation setting leaves of a head's ladder."""

    turning: int  # pairs with a non-zero frequency
    still: int  # pairs that never turn: position-free channels
    fastest_wavelength: float  # tokens per turn of the fastest pair (2 pi / theta_max)
    slowest_wavelength: float  # tokens per turn of the slowest pair that still turns


def rotation_summary(d_head: int = 64, base: float = 10000.0, *, partial_rotary_factor: float = 1.0,
                     drop_lowest: float = 0.0) -> RotationSummary:
    """Counts and extreme wavelengths (2 pi / theta) of `pair_frequencies` for one setting."""
    f = pair_frequencies(d_head, base, partial_rotary_factor=partial_rotary_factor, drop_lowest=drop_lowest)
    on = f[f > 0]
    return RotationSummary(int(on.numel()), int((f == 0).sum()), float(2 * math.pi / on.max()),
                           float(2 * math.pi / on.min()))


# ---------------------------------------------------------------------------
# Latent attention: what is cached per token
# ---------------------------------------------------------------------------


class MLACacheRow(NamedTuple):
    """Values and bf16 bytes one token leaves in the whole cache under one attention design."""

    design: str
    values: int
    bytes_bf16: int


def mla_cache_rows(model: str = "DeepSeek-V3", v_head_dim: int = 128, gqa_groups: int = 8) -> tuple[MLACacheRow, ...]:
    """Per-token cache of an MLA model's shape (layers, heads, kv_lora_rank, qk_rope_head_dim, qk_nope_head_dim
    from its `data.model_families` row; v_head_dim 128 from DeepSeek-V3's config.json) under MLA, under
    multi-head attention with the same heads (key d_nope + d_rope, value d_v), and under grouped-query
    attention with `gqa_groups` KV heads of that shape. From `transformer.latent.mla_cache_values` and
    `mha_cache_values`.
    """
    row = family(model)
    if row.kv_lora_rank is None or row.qk_rope_head_dim is None or row.qk_nope_head_dim is None:
        raise ValueError(f"{row.name} does not use multi-head latent attention (no kv_lora_rank in its row)")
    d_k = row.qk_nope_head_dim + row.qk_rope_head_dim
    rows = [
        ("MLA: latent + shared rotary key", mla_cache_values(row.n_layers, row.kv_lora_rank, row.qk_rope_head_dim)),
        (f"multi-head, {row.n_heads} KV heads", mha_cache_values(row.n_layers, row.n_heads, d_k, v_head_dim)),
        (f"grouped-query, {gqa_groups} KV heads", mha_cache_values(row.n_layers, gqa_groups, d_k, v_head_dim)),
    ]
    return tuple(MLACacheRow(name, v, 2 * v) for name, v in rows)


class MLASoftmaxScale(NamedTuple):
    """The softmax scale of an MLA model's score, before and after its shipped YaRN."""

    d_qk: int  # qk_nope_head_dim + qk_rope_head_dim: the width of the whole score
    plain: float  # 1 / sqrt(d_qk), the scale without context extension
    temperature: float  # yarn_mscale(s, mscale_all_dim)^2, the factor on the softmax scale of the whole score
    released: float  # plain * temperature, what the released model uses
    cos_sin_factor: float  # YaRN's factor on cos and sin of the rotary part: mscale / mscale_all_dim terms
    name: str = ""  # the family, as `data.model_families` names it
    factor: float = 1.0  # the shipped YaRN factor s (1: no context-extension scaling)


# released models with multi-head latent attention, in `data.model_families`
MLA_FAMILIES: tuple[str, ...] = ("DeepSeek-V3", "Kimi K2", "GLM-5")


def mla_softmax_scale(model: str = "DeepSeek-V3") -> MLASoftmaxScale:
    """Softmax scale of an MLA model under its shipped YaRN, as Hugging Face's `DeepseekV3Attention` sets it.

    transformers 5, models/deepseek_v3/modeling_deepseek_v3.py: `self.scaling = yarn_apply_mscale(
    config.rope_parameters, qk_head_dim ** -0.5)`, which multiplies 1/sqrt(d_qk) by
    yarn_get_mscale(factor, mscale_all_dim)^2 = (0.1 mscale_all_dim ln s + 1)^2; DeepSeek's own inference
    code does the same. The factor on cos and sin is `yarn_scaling_attention_factor`, 1 when mscale =
    mscale_all_dim, as DeepSeek-V3's config ships them (and Kimi K2's, factor 32). So the frequencies change only
    on the rotary part, while the temperature multiplies the score of all d_qk dimensions. A model that ships no
    scaling (GLM-5, whose `GlmMoeDsaAttention` calls the same `yarn_apply_mscale`) keeps 1/sqrt(d_qk).
    """
    row = family(model)
    if row.qk_rope_head_dim is None or row.qk_nope_head_dim is None:
        raise ValueError(f"{row.name} does not use multi-head latent attention (no qk_rope_head_dim in its row)")
    d_qk = row.qk_nope_head_dim + row.qk_rope_head_dim
    plain = 1.0 / math.sqrt(d_qk)
    if row.scaling in (None, "none"):
        return MLASoftmaxScale(d_qk, plain, 1.0, plain, 1.0, row.name, 1.0)
    if row.scaling != "yarn":
        raise ValueError(f"{row.name} ships {row.scaling!r} scaling; the MLA softmax scale is defined for YaRN or none")
    mscale_all_dim = float(row.scaling_params.get("mscale_all_dim") or 0.0)
    temperature = yarn_mscale(float(row.scaling_factor), mscale_all_dim) ** 2 if mscale_all_dim else 1.0
    return MLASoftmaxScale(d_qk, plain, temperature, plain * temperature,
                           yarn_scaling_attention_factor(_shipped(row).rope_scaling()), row.name,
                           float(row.scaling_factor))


# ---------------------------------------------------------------------------
# M-RoPE and 2-D RoPE: a patch's score against every other patch
# ---------------------------------------------------------------------------


def mrope_score_map(h: int = 9, w: int = 9, *, row: int = 4, col: int = 4, d_head: int = 64,
                    section: Sequence[int] = (0, 16, 16), base: float = 100.0) -> torch.Tensor:
    """(h, w) score of the patch at (row, col) against every patch of one h x w image, normalised to 1 at itself.

    The query and the key carry the same content, (1, 0) in every pair, so the score is the mean over
    pairs of cos(offset along the pair's axis * theta_i): it depends only on (dh, dw), the rotary
    counterpart of Swin's (2h - 1)(2w - 1) bias table. Computed by the library's `apply_mrope` on
    `mrope_position_ids([(1, h, w)])`. The default section (0, 16, 16) gives half the pairs to rows and
    half to columns, axial 2-D RoPE; a small base makes the pattern visible within a few patches.
    """
    check_int("h", h, 1)
    check_int("w", w, 1)
    if not (0 <= row < h and 0 <= col < w):
        raise ValueError(f"(row, col)=({row}, {col}) is outside the {h} x {w} grid")
    ids = mrope_position_ids([(1, h, w)])  # (3, h*w)
    x = torch.zeros(h * w, d_head, dtype=torch.float64)  # (h*w, d_head)
    x[:, : d_head // 2] = 1.0  # pair i = (1, 0): first coordinates 1, second 0 (half layout)
    rotated = apply_mrope(x, ids, section, base)  # (h*w, d_head)
    q = rotated[row * w + col]  # (d_head,)
    return (rotated @ q / (d_head // 2)).reshape(h, w)  # (h, w)


QWEN3_VL_SECTION: tuple[int, int, int] = (24, 20, 20)  # Qwen3-VL's mrope_section, with mrope_interleaved true


def interleaved_section_axes(section: Sequence[int], d_head: int) -> torch.Tensor:
    """(d_head/2,) the axis (0 time, 1 height, 2 width) each pair turns with under interleaved M-RoPE (Qwen3-VL).

    As transformers' `Qwen3VLTextRotaryEmbedding.apply_interleaved_mrope` lays it out: start from time on
    every pair, then give height the pairs 1, 4, ..., 3 section[1] - 2 and width the pairs 2, 5, ...,
    3 section[2] - 1; the pairs past those (the slowest) stay with time. Against Qwen2-VL's contiguous
    blocks (`transformer.multimodal.section_axes`) every axis gets fast and slow pairs.
    """
    t, h, w = (check_int("section entry", int(n), 0) for n in section)
    d = check_int("d_head", d_head, 2)
    if t + h + w != d // 2:
        raise ValueError(f"section {tuple(section)} must sum to d_head / 2 = {d // 2} pairs, not {t + h + w}")
    if h > t or w > t:
        raise ValueError(f"interleaving needs section[0] >= section[1], section[2]; got {tuple(section)}")
    axes = torch.zeros(d // 2, dtype=torch.long)  # (d/2,) time everywhere
    axes[1: 3 * h: 3] = 1  # height
    axes[2: 3 * w: 3] = 2  # width
    return axes


# ---------------------------------------------------------------------------
# Context extension as shipped
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ShippedScaling:
    """A released model's RoPE settings for its long context (its config.json's rope_theta, rope_scaling and
    max_position_embeddings). Llama 3.1's factor 8 on 8,192 is not its 131,072 context: the long context came
    from continued pretraining, the scaling sets the frequencies it was trained with."""

    name: str
    d_head: int  # the rotated width (DeepSeek-V3: its 64-dim rotary part)
    base: float
    scaling: str  # the library's name: "llama3" or "yarn"
    params: tuple[tuple[str, object], ...]  # RopeScaling keyword arguments
    max_len: int  # the context the release supports: config max_position_embeddings, or the model card's
    # when the scaling is added by hand (Qwen2.5: config 32,768, card 131,072 with YaRN)
    source: str
    original: int = 0  # the pretraining length the factor stretches; 0: the params' original_max_len

    def rope_scaling(self) -> RopeScaling:
        return RopeScaling(self.scaling, **dict(self.params))

    @property
    def original_len(self) -> int:
        """The length the factor stretches: the config's original_max_position_embeddings, or, for linear
        scaling, which has no such key (Gemma 3), the pretraining length of the model's row."""
        return self.original or int(dict(self.params)["original_max_len"])

    @property
    def factor(self) -> float:
        return float(dict(self.params)["factor"])


SHIPPED_FAMILIES: tuple[str, ...] = ("Llama 3.1", "Qwen2.5", "DeepSeek-V3", "gpt-oss", "Gemma 3")
_PARAM_NAMES = {"original_max_position_embeddings": "original_max_len"}  # config key -> RopeScaling argument


def _shipped(row: ModelFamily) -> ShippedScaling:
    params = {"factor": float(row.scaling_factor)}
    params.update({_PARAM_NAMES.get(k, k): v for k, v in row.scaling_params.items()})
    name = row.name if row.scaling_in_config else f"{row.name} (YaRN as its card says to add)"
    d_rot = row.qk_rope_head_dim or row.d_head  # MLA scales only its rotary part
    original = 0 if "original_max_len" in params else int(row.original_len)  # linear (Gemma 3): no such key
    return ShippedScaling(name, d_rot, float(row.rope_base), row.scaling, tuple(params.items()), int(row.max_len),
                          row.urls[-1] if row.urls else row.checkpoint, original)


SHIPPED_SCALINGS: tuple[ShippedScaling, ...] = tuple(_shipped(family(n)) for n in SHIPPED_FAMILIES)


def shipped_scaling(name: str) -> ShippedScaling:
    """The row of SHIPPED_SCALINGS whose name starts with `name`."""
    for row in SHIPPED_SCALINGS:
        if row.name.startswith(name):
            return row
    raise ValueError(f"no shipped scaling {name!r}; choose one of {[r.name for r in SHIPPED_SCALINGS]}")


def scaled_frequency_ratio(row: ShippedScaling | str) -> tuple[torch.Tensor, torch.Tensor]:
    """(wavelengths, ratio): each pair's trained wavelength 2 pi / theta_i in tokens, and scaled / trained
    frequency under the model's shipped scaling (1: kept, 1 / factor: fully interpolated), from the
    library's `RopeScaling.frequencies` at the model's base and rotated width."""
    r = shipped_scaling(row) if isinstance(row, str) else row
    theta = frequency_ladder(r.d_head, r.base).double()  # (d/2,)
    scaled, _ = r.rope_scaling().frequencies(r.d_head, r.base)  # (d/2,)
    return 2 * math.pi / theta, scaled.double() / theta


# ---------------------------------------------------------------------------
# Other proposals: xPos
# ---------------------------------------------------------------------------


def xpos_zeta(d_head: int = 64) -> torch.Tensor:
    """(d_head/2,) xPos's per-pair decay base zeta_i = (2i/d + 0.4) / 1.4 (Sun et al., 2023).

    As the reference implementation (torchscale's `XPOS`) builds it: `scale = (arange(0, d, 2) + 0.4 d) /
    (1.4 d)`. The query at m is scaled by zeta^(m/gamma) and the key at n by zeta^(-n/gamma) (gamma = 512),
    so the score of pair i is multiplied by zeta_i^((m - n)/gamma): 0.4/1.4 = 0.29 per gamma tokens for the
    fastest pair (i = 0), close to 1 for the slowest. The decay damps the fast, oscillating pairs.
    """
    d = check_int("d_head", d_head, 2)
    if d % 2:
        raise ValueError(f"d_head must be even (pairs of channels), got {d}")
    return (torch.arange(0, d, 2, dtype=torch.float64) / d + 0.4) / 1.4  # (d/2,)


def xpos_largest_scale(length: int, d_head: int = 64, scale_base: float = 512.0, *, centred: bool = False) -> float:
    """The largest factor xPos puts on any query or key of a `length`-token sequence: zeta_0^(-e / gamma).

    The key at position n is multiplied by zeta_i^(-n/gamma) and the query at m by zeta_i^(m/gamma); with
    zeta_0 = 0.4/1.4 < 1 the fastest pair's factor grows as 3.5^(n/gamma). Numbered 0..L-1 the largest exponent
    is e = L - 1 (the last key). torchscale's `XPOS.forward` centres the positions instead, `min_pos =
    -(length + offset) // 2`, so they run from -ceil(L/2) to floor(L/2) - 1 and e = ceil(L/2) (the first
    query): half the exponent. Computed in float64 from `xpos_zeta`.
    """
    L = check_int("length", length, 1)
    gamma = check_positive_float("scale_base", scale_base)
    zeta0 = float(xpos_zeta(d_head)[0])
    e = -(-L // 2) if centred else L - 1
    return zeta0 ** (-e / gamma)


def xpos_overflow_length(dtype: torch.dtype, d_head: int = 64, scale_base: float = 512.0, *,
                         centred: bool = False) -> int:
    """The shortest sequence whose largest xPos factor (`xpos_largest_scale`) exceeds `dtype`'s largest finite
    value: past it the fastest pair's key (or, centred, query) scale is inf in that dtype.

    With x = gamma ln(max) / -ln(zeta_0), the exponent must exceed x: L - 1 > x from position 0, ceil(L/2) > x
    when centred. fp16 (max 65,504) overflows from about 4,500 tokens at gamma = 512, fp32 and bf16 (about
    3.4e38) from about 36,000; centring doubles both.
    """
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating torch.dtype (torch.float16, ...), got {dtype!r}")
    gamma = check_positive_float("scale_base", scale_base)
    zeta0 = float(xpos_zeta(d_head)[0])
    x = gamma * math.log(torch.finfo(dtype).max) / -math.log(zeta0)
    e = math.floor(x) + 1  # the smallest whole exponent above x
    return 2 * e - 1 if centred else e + 1
