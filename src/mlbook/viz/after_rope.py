"""Figures for section 2.8, what came after RoPE.

One private build function per figure (one set of knob values, one figure) behind two public forms,
as in the other section modules:

    fig_x(value, ..., grid=X_GRID)   a plotly slider over a short precomputed grid (static site);
                                     grid=None gives the single figure at `value`
    live_x(...)                      ipywidgets sliders over the same build (`core.live_figure`); show
                                     it with `show_live`

Every number comes from `mlbook.analysis.after_rope`
(which calls `mlbook.transformer`); this module only arranges and draws. Colours: Okabe-Ito lines
(`LINE_COLORS`), Viridis and a zero-centred diverging map for heatmaps.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import plotly.graph_objects as go

from mlbook.analysis.after_rope import (
    LOCAL_GLOBAL_MODELS,
    SHIPPED_SCALINGS,
    llama4_attention_scale,
    local_global,
    model_kv_bytes,
    mrope_score_map,
    nope_position_signal,
    pair_frequencies,
    scaled_frequency_ratio,
    shipped_scaling,
)
from mlbook.transformer.latent import absorption_error
from mlbook.viz.core import (
    LINE_COLORS,
    choice_knob,
    diverging,
    float_knob,
    int_knob,
    knob_figure,
    light_figure,
    live_figure,
    log_knob,
    round_array,
    toggle_knob,
)

__all__ = [
    "NOPE_GRID",
    "fig_nope_signal",
    "live_nope_signal",
    "TEMPERATURE_GRID",
    "fig_attention_temperature",
    "live_attention_temperature",
    "KV_MODELS",
    "fig_windowed_kv",
    "live_windowed_kv",
    "STILL_GRID",
    "fig_rotated_pairs",
    "live_rotated_pairs",
    "fig_absorption",
    "live_absorption",
    "MROPE_SPLITS",
    "fig_mrope_scores",
    "live_mrope_scores",
    "SCALING_MODELS",
    "fig_shipped_scaling",
    "live_shipped_scaling",
]


def _title(text: str) -> dict[str, Any]:
    return {"text": text, "x": 0.0, "xanchor": "left", "font": {"size": 14}}


# ---------------------------------------------------------------------------
# NoPE: a causal layer outputs 1 / (i + 1)
# ---------------------------------------------------------------------------

NOPE_GRID: tuple[int, ...] = (8, 16, 32, 64)


def _nope(T: int, x_max: int | None = None) -> go.Figure:
    sig = nope_position_signal(T)
    x = list(range(T))
    x_max = max(T, x_max or T)
    return light_figure(
        [
            dict(type="scatter", x=x, y=round_array(sig.causal, 4), mode="lines+markers", name="causal: 1 / (i + 1)",
                 line=dict(color=LINE_COLORS[0], width=3), hovertemplate="position %{x}: %{y}<extra>causal</extra>"),
            dict(type="scatter", x=x, y=round_array(sig.bidirectional, 4), mode="lines+markers",
                 name="bidirectional: 1 / T", line=dict(color=LINE_COLORS[1], width=3, dash="dash"),
                 hovertemplate="position %{x}: %{y}<extra>bidirectional</extra>"),
        ],
        title=_title(f"T = {T}: the causal output names the position, the bidirectional one is flat"),
        height=420, margin=dict(t=70, b=60, l=70, r=20),
        xaxis=dict(title="query position i", range=[-0.5, x_max - 0.5]),
        yaxis=dict(title="attention output (value 1 at token 0)", range=[0, 1.05]),
        legend=dict(orientation="h", x=1, xanchor="right", y=1.0, yanchor="bottom"),
    )


def fig_nope_signal(T: int = 16, *, grid: tuple[int, ...] | None = NOPE_GRID) -> go.Figure:
    """One attention layer, no positional encoding, equal scores, value 1 on the first token only:
    its output at each position under a causal mask (1 / (i + 1)) and without one (1 / T). Slider over T."""
    x_max = max(grid) if grid else T
    return knob_figure(_nope, "T", T, grid, "T (tokens)", {"x_max": x_max})


@live_figure(int_knob("T", 16, 2, 128, 1, "T (tokens)"),
             caption="Output of a NoPE attention layer with and without the causal mask.",
             alt="Line plot of attention output against position: one over i plus one, and a flat line.")
def live_nope_signal(T: int) -> go.Figure:
    """Live form of `fig_nope_signal`: the sequence length."""
    return _nope(T)


# ---------------------------------------------------------------------------
# Llama 4's temperature on the NoPE layers
# ---------------------------------------------------------------------------

TEMPERATURE_GRID: tuple[float, ...] = (0.05, 0.1, 0.2, 0.4)
_LAST = 9_999_999  # the last position drawn


def _temperature(attn_scale: float, floor_scale: float, y_max: float | None = None) -> go.Figure:
    p = np.unique(np.round(np.logspace(0, math.log10(_LAST + 1), 400)).astype(np.int64)) - 1  # 0 .. 10M - 1
    now = llama4_attention_scale(p, floor_scale, attn_scale).numpy()
    ref = llama4_attention_scale(p, 8192.0, 0.1).numpy()
    top = max(float(now[-1]), float(ref[-1]), y_max or 0.0) + 0.1
    return light_figure(
        [
            dict(type="scatter", x=p + 1, y=np.round(ref, 4), mode="lines", name="released: 0.1, 8,192",
                 line=dict(color="#888888", width=2, dash="dot"), hoverinfo="skip"),
            dict(type="scatter", x=p + 1, y=np.round(now, 4), mode="lines", name="this setting",
                 line=dict(color=LINE_COLORS[0], width=3, shape="hv"),
                 hovertemplate="position %{x:,}: query × %{y}<extra></extra>"),
        ],
        title=_title(f"attn_scale {attn_scale:g}, floor_scale {floor_scale:,.0f}: the NoPE layers' queries "
                     f"are scaled by {float(now[-1]):.2f} at 10M"),
        height=420, margin=dict(t=70, b=60, l=70, r=20),
        xaxis=dict(title="position p + 1 (tokens, log scale)", type="log"),
        yaxis=dict(title="query scale (temperature⁻¹)", range=[0.95, top]),
        legend=dict(orientation="h", x=0, xanchor="left", y=1.0, yanchor="bottom"),
    )


def fig_attention_temperature(attn_scale: float = 0.1, floor_scale: float = 8192.0, *,
                              grid: tuple[float, ...] | None = TEMPERATURE_GRID) -> go.Figure:
    """Llama 4's query scale 1 + attn_scale ln(1 + floor((p + 1) / floor_scale)) against the position p,
    with the released setting (0.1, 8192) dotted. Slider over attn_scale."""
    top = float(llama4_attention_scale([_LAST], floor_scale, max(grid or (attn_scale,))).item())
    return knob_figure(_temperature, "attn_scale", attn_scale, grid, "attn_scale",
                       {"floor_scale": floor_scale, "y_max": top})


@live_figure(float_knob("attn_scale", 0.1, 0.0, 0.5, 0.01, "attn_scale"),
             log_knob("floor_scale", 8192.0, 2.0, 6.0, "floor_scale"),
             caption="Llama 4's query scale on its NoPE layers against the position.",
             alt="Step curve of query scale against position on a log axis.")
def live_attention_temperature(attn_scale: float, floor_scale: float) -> go.Figure:
    """Live form of `fig_attention_temperature`: the slope and the step length."""
    return _temperature(attn_scale, floor_scale)


# ---------------------------------------------------------------------------
# What local layers do to the KV cache
# ---------------------------------------------------------------------------

KV_MODELS: tuple[str, ...] = tuple(m.name for m in LOCAL_GLOBAL_MODELS)


def _windowed_kv(model: str) -> go.Figure:
    m = local_global(model)
    ctx = np.unique(np.round(np.logspace(10, 20, 81, base=2)).astype(np.int64))  # 1,024 .. 1,048,576
    mixed = np.array([model_kv_bytes(m, int(c)) for c in ctx]) / 2**30
    full = np.array([model_kv_bytes(m, int(c), all_global=True) for c in ctx]) / 2**30
    ratio = full[-1] / mixed[-1]
    local = "chunk" if m.kind == "chunked" else "window"
    return light_figure(
        [
            dict(type="scatter", x=ctx, y=np.round(full, 3), mode="lines", name="every layer global",
                 line=dict(color=LINE_COLORS[1], width=3, dash="dash"),
                 hovertemplate="%{x:,} tokens: %{y} GiB<extra>all global</extra>"),
            dict(type="scatter", x=ctx, y=np.round(mixed, 3), mode="lines", name="as released",
                 line=dict(color=LINE_COLORS[0], width=3),
                 hovertemplate="%{x:,} tokens: %{y} GiB<extra>as released</extra>"),
        ],
        title=_title(f"{m.name} ({m.checkpoint}): {m.local_per_global} local ({local} {m.window:,}) per global"
                     f"<br><sup>at 1M tokens the cache is {ratio:.1f}× smaller</sup>"),
        height=460, margin=dict(t=90, b=60, l=70, r=20),
        xaxis=dict(title="context length (tokens, log scale)", type="log"),
        yaxis=dict(title="KV cache per request (GiB, bf16)", type="log", range=[-2, 3]),
        legend=dict(orientation="h", x=0, xanchor="left", y=1.0, yanchor="bottom"),
    )


def fig_windowed_kv(model: str = "Gemma 3", *, grid: tuple[str, ...] | None = KV_MODELS) -> go.Figure:
    """KV cache of one request (GiB, bf16) against the context length for a released local/global stack,
    and for the same stack with every layer global. Slider over the models of LOCAL_GLOBAL_MODELS."""
    if model not in KV_MODELS:
        raise ValueError(f"model must be one of {list(KV_MODELS)}, got {model!r}")
    values = list(grid) if grid is not None else None
    return knob_figure(_windowed_kv, "model", model, values, "model", {})


@live_figure(choice_knob("model", "Gemma 3", KV_MODELS, "model"),
             caption="KV cache against context length, as released and with every layer global.",
             alt="Log-log plot of KV cache against context length, two lines.")
def live_windowed_kv(model: str) -> go.Figure:
    """Live form of `fig_windowed_kv`: the model."""
    return _windowed_kv(model)


# ---------------------------------------------------------------------------
# Partial rotary against p-RoPE
# ---------------------------------------------------------------------------

STILL_GRID: tuple[float, ...] = (0.25, 0.5, 0.75)
_FLOOR = 1e-8  # where a pair that never turns is drawn on the log axis


def _rotated_pairs(still: float, base: float, d_head: int = 64) -> go.Figure:
    pairs = list(range(d_head // 2))
    data = []
    settings = (("RoPE", {}, "#777777", "solid"),
                (f"partial rotary, factor {1 - still:g}", {"partial_rotary_factor": 1 - still}, LINE_COLORS[0], "solid"),
                (f"p-RoPE, lowest {still:.0%} dropped", {"drop_lowest": still}, LINE_COLORS[5], "dash"))
    for name, kw, color, dash in settings:
        f = pair_frequencies(d_head, base, **kw).numpy()
        y = np.where(f > 0, f, _FLOOR)
        data.append(dict(type="scatter", x=pairs, y=[float(f"{v:.4g}") for v in y], mode="lines+markers", name=name,
                         line=dict(color=color, width=2, dash=dash), marker=dict(size=6, color=color),
                         customdata=[f"{2 * math.pi / v:,.0f} tokens per turn" if v > 0 else "never turns" for v in f],
                         hovertemplate="pair %{x}: %{customdata}<extra>" + name + "</extra>"))
    return light_figure(
        data,
        title=_title(f"{still:.0%} of the pairs still (base {base:,.0f})"
                     "<br><sup>partial rotary squeezes the ladder, p-RoPE cuts its slow end</sup>"),
        height=500, margin=dict(t=110, b=60, l=80, r=20),
        xaxis=dict(title="pair i (channel i and i + r/2 of the rotated part)"),
        yaxis=dict(title="frequency θ_i (radians per token, log scale)", type="log", range=[-8.3, 0.4],
                   tickvals=[_FLOOR, 1e-6, 1e-4, 1e-2, 1], ticktext=["never turns", "1e-6", "1e-4", "0.01", "1"]),
        legend=dict(orientation="h", x=0, xanchor="left", y=1.0, yanchor="bottom"),
    )


def fig_rotated_pairs(still: float = 0.25, base: float = 10000.0, *,
                      grid: tuple[float, ...] | None = STILL_GRID) -> go.Figure:
    """Radians per token of each pair of a 64-wide head: full RoPE, partial rotary over 1 - still of the
    channels (the ladder recomputed over fewer dims), and p-RoPE with the lowest `still` of the rungs set to 0.
    Pairs that never turn sit on the bottom line. Slider over the share of still pairs."""
    return knob_figure(_rotated_pairs, "still", still, grid, "share of pairs that do not turn", {"base": base})


@live_figure(float_knob("still", 0.25, 0.0, 0.9375, 0.03125, "share still"),
             log_knob("base", 10000.0, 2.0, 7.0, "base"),
             caption="Frequencies of RoPE, partial rotary and p-RoPE, pair by pair.",
             alt="Log-scale line plot of frequency against pair index for three settings.")
def live_rotated_pairs(still: float, base: float) -> go.Figure:
    """Live form of `fig_rotated_pairs`: the share of pairs that do not turn (steps of one pair) and the base."""
    return _rotated_pairs(still, base)


# ---------------------------------------------------------------------------
# MLA: absorbing W_UK works without RoPE, fails with it
# ---------------------------------------------------------------------------


def _absorption(rope: str, T: int = 16) -> go.Figure:
    if rope not in ("on", "off"):
        raise ValueError(f"rope must be 'on' or 'off', got {rope!r}")
    rep = absorption_error(rope == "on", T=T)
    scale = float(rep.materialised.abs().max())
    z = np.round(((rep.materialised - rep.absorbed) / scale).numpy(), 3)
    return light_figure(
        [dict(type="heatmap", z=z, x=list(range(T)), y=list(range(T)), **diverging(np.array([[-1.0, 1.0]])),
              colorbar=dict(title=dict(text="error / max |score|", side="right")),
              hovertemplate="query m = %{y}, key n = %{x}: error %{z}<extra></extra>")],
        title=_title(f"RoPE {rope}: largest error {rep.max_error:.2g} of the largest score"
                     + (" (zero only where n = m)" if rope == "on" else " (rounding only)")),
        height=460, margin=dict(t=70, b=60, l=70, r=20),
        xaxis=dict(title="key position n", constrain="domain"),
        yaxis=dict(title="query position m", autorange="reversed", scaleanchor="x"),
    )


def fig_absorption(rope: str = "on", T: int = 16, *, grid: tuple[str, ...] | None = ("on", "off")) -> go.Figure:
    """Heatmap of the score error (true minus absorbed) for every query m and key n of one head, relative to
    the largest score, with the key up-projection folded into the query; RoPE on the whole key or not."""
    if rope not in ("on", "off"):
        raise ValueError(f"rope must be 'on' or 'off', got {rope!r}")
    return knob_figure(_absorption, "rope", rope, list(grid) if grid else None, "RoPE on the key", {"T": T})


@live_figure(toggle_knob("rope", "on", (("RoPE on", "on"), ("RoPE off", "off")), "RoPE"),
             int_knob("T", 16, 2, 32, 1, "T (tokens)"),
             caption="Score error of absorbing the key up-projection, with and without RoPE.",
             alt="Heatmap of score errors over query and key positions.")
def live_absorption(rope: str, T: int) -> go.Figure:
    """Live form of `fig_absorption`: RoPE on or off, and the number of positions."""
    return _absorption(rope, T)


# ---------------------------------------------------------------------------
# M-RoPE / 2-D RoPE: a patch against every patch
# ---------------------------------------------------------------------------

MROPE_SPLITS: dict[str, tuple[int, int, int]] = {
    "16 rows / 16 columns": (0, 16, 16),
    "8 rows / 24 columns": (0, 8, 24),
    "24 rows / 8 columns": (0, 24, 8),
    "32 rows / 0 columns": (0, 32, 0),
}


def _mrope(split: str, base: float, size: int = 11) -> go.Figure:
    if split not in MROPE_SPLITS:
        raise ValueError(f"split must be one of {list(MROPE_SPLITS)}, got {split!r}")
    c = size // 2
    z = mrope_score_map(size, size, row=c, col=c, d_head=64, section=MROPE_SPLITS[split], base=base).numpy()
    return light_figure(
        [dict(type="heatmap", z=np.round(z, 3), x=list(range(-c, size - c)), y=list(range(-c, size - c)),
              **diverging(np.array([[-1.0, 1.0]])),
              colorbar=dict(title=dict(text="score / score at itself", side="right")),
              hovertemplate="dh = %{y}, dw = %{x}: %{z}<extra></extra>")],
        title=_title(f"{split} (section {list(MROPE_SPLITS[split])}), base {base:,g}"
                     "<br><sup>the score depends on (dh, dw) only</sup>"),
        height=490, margin=dict(t=80, b=60, l=70, r=20),
        xaxis=dict(title="column offset dw (patches)", constrain="domain"),
        yaxis=dict(title="row offset dh (patches)", autorange="reversed", scaleanchor="x"),
    )


def fig_mrope_scores(split: str = "16 rows / 16 columns", base: float = 100.0, *,
                     grid: tuple[str, ...] | None = tuple(MROPE_SPLITS)) -> go.Figure:
    """Score of the centre patch of an 11 x 11 image against every patch under M-RoPE with the given split
    of a 64-wide head's 32 pairs between rows and columns (time unused: one frame). Slider over the split."""
    if split not in MROPE_SPLITS:
        raise ValueError(f"split must be one of {list(MROPE_SPLITS)}, got {split!r}")
    return knob_figure(_mrope, "split", split, list(grid) if grid else None, "pairs", {"base": base})


@live_figure(choice_knob("split", "16 rows / 16 columns", tuple(MROPE_SPLITS), "pairs"),
             log_knob("base", 100.0, 0.5, 5.0, "base", fmt=",.1f"),
             caption="Score of the centre patch against every patch under M-RoPE.",
             alt="Heatmap of scores over row and column offsets.")
def live_mrope_scores(split: str, base: float) -> go.Figure:
    """Live form of `fig_mrope_scores`: the split of pairs and the base."""
    return _mrope(split, base)


# ---------------------------------------------------------------------------
# Context extension as shipped: what each config does to each pair
# ---------------------------------------------------------------------------

SCALING_MODELS: tuple[str, ...] = tuple(r.name.split(" (")[0] for r in SHIPPED_SCALINGS)


def _shipped_scaling(model: str) -> go.Figure:
    row = shipped_scaling(model)
    wl, ratio = scaled_frequency_ratio(row)
    s = row.factor
    kept = int((ratio > 0.999).sum())
    interp = int((ratio < 1.001 / s).sum())
    return light_figure(
        [
            dict(type="scatter", x=[float(f"{v:.4g}") for v in wl], y=np.round(ratio.numpy(), 4), mode="lines+markers",
                 name=row.scaling, line=dict(color=LINE_COLORS[0], width=2), marker=dict(size=6),
                 hovertemplate="wavelength %{x:,} tokens: × %{y}<extra></extra>"),
            dict(type="scatter", x=[row.original_len, row.original_len], y=[0, 1.05], mode="lines",
                 name="original context", line=dict(color="#888888", dash="dot"), hoverinfo="skip"),
        ],
        title=_title(f"{row.name}: {row.scaling}, factor {s:g} on {row.original_len:,}, context {row.max_len:,}"
                     f"<br><sup>{kept} pairs kept, {interp} divided by {s:g}, {len(ratio) - kept - interp} blended</sup>"),
        height=460, margin=dict(t=90, b=60, l=70, r=20),
        xaxis=dict(title="trained wavelength 2π/θ_i (tokens, log scale)", type="log", range=[0.5, 7.2]),
        yaxis=dict(title="scaled θ_i / trained θ_i", range=[0, 1.05]),
        legend=dict(orientation="h", x=0, xanchor="left", y=1.0, yanchor="bottom"),
    )


def fig_shipped_scaling(model: str = "Llama 3.1", *, grid: tuple[str, ...] | None = SCALING_MODELS) -> go.Figure:
    """Scaled / trained frequency of every pair against its trained wavelength, for a released model's
    rope_scaling; the dotted line marks the original context length. Slider over SHIPPED_SCALINGS."""
    return knob_figure(_shipped_scaling, "model", model, list(grid) if grid else None, "model", {})


@live_figure(choice_knob("model", "Llama 3.1", SCALING_MODELS, "model"),
             caption="What a released model's rope_scaling does to each pair.",
             alt="Frequency ratio against wavelength for one model's scaling.")
def live_shipped_scaling(model: str) -> go.Figure:
    """Live form of `fig_shipped_scaling`: the model."""
    return _shipped_scaling(model)
