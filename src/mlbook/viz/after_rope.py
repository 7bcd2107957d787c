"""Figures for section 2.7, what came after RoPE.

One build function per figure, `fig_x(**knobs) -> Figure`, and beside it `X_KNOBS`, the values of
each knob; the page shows both forms with `show_knob(fig_x, X_KNOBS, ...)` (a static slider over
the first knob, live sliders over all of them). Every number comes from `mlbook.analysis.after_rope`
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
from mlbook.viz.core import LINE_COLORS, SEQUENTIAL, diverging, light_figure, round_array

__all__ = [
    "NOPE_KNOBS",
    "fig_nope_signal",
    "TEMPERATURE_KNOBS",
    "fig_attention_temperature",
    "KV_KNOBS",
    "fig_windowed_kv",
    "ROTATION_KNOBS",
    "fig_rotated_pairs",
    "ABSORPTION_KNOBS",
    "fig_absorption",
    "MROPE_KNOBS",
    "MROPE_SPLITS",
    "fig_mrope_scores",
    "SCALING_KNOBS",
    "fig_shipped_scaling",
]


def _title(text: str) -> dict[str, Any]:
    return {"text": text, "x": 0.0, "xanchor": "left", "font": {"size": 14}}


# ---------------------------------------------------------------------------
# NoPE: a causal layer outputs 1 / (i + 1)
# ---------------------------------------------------------------------------

NOPE_KNOBS: dict[str, list[int]] = {"T": [16, 8, 32, 64]}


def fig_nope_signal(T: int = 16) -> go.Figure:
    """One attention layer, no positional encoding, equal scores, value 1 on the first token only:
    its output at each position under a causal mask (1 / (i + 1)) and without one (1 / T)."""
    sig = nope_position_signal(T)
    x = list(range(T))
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
        xaxis=dict(title="query position i", range=[-0.5, 63.5] if T > 32 else [-0.5, T - 0.5]),
        yaxis=dict(title="attention output (value 1 at token 0)", range=[0, 1.05]),
        legend=dict(orientation="h", x=1, xanchor="right", y=1.0, yanchor="bottom"),
    )


# ---------------------------------------------------------------------------
# Llama 4's temperature on the NoPE layers
# ---------------------------------------------------------------------------

TEMPERATURE_KNOBS: dict[str, list[float]] = {"attn_scale": [0.1, 0.05, 0.2, 0.4], "floor_scale": [8192.0, 1024.0, 65536.0]}


def fig_attention_temperature(attn_scale: float = 0.1, floor_scale: float = 8192.0) -> go.Figure:
    """Llama 4's query scale 1 + attn_scale ln(1 + floor((p + 1) / floor_scale)) against the position p,
    with the released setting (0.1, 8192) drawn dotted for reference."""
    p = np.unique(np.round(np.logspace(0, math.log10(10_000_000), 400)).astype(np.int64)) - 1  # 0 .. 10M - 1
    now = llama4_attention_scale(p, floor_scale, attn_scale).numpy()
    ref = llama4_attention_scale(p, 8192.0, 0.1).numpy()
    return light_figure(
        [
            dict(type="scatter", x=p + 1, y=np.round(ref, 4), mode="lines", name="released: 0.1, 8,192",
                 line=dict(color="#888888", width=2, dash="dot"), hoverinfo="skip"),
            dict(type="scatter", x=p + 1, y=np.round(now, 4), mode="lines", name="this setting",
                 line=dict(color=LINE_COLORS[0], width=3, shape="hv"),
                 hovertemplate="position %{x:,}: query × %{y}<extra></extra>"),
        ],
        title=_title(f"attn_scale {attn_scale:g}, floor_scale {floor_scale:,.0f}: the NoPE layers' queries "
                     f"are scaled by {llama4_attention_scale([9_999_999], floor_scale, attn_scale).item():.2f} at 10M"),
        height=420, margin=dict(t=70, b=60, l=70, r=20),
        xaxis=dict(title="position p + 1 (tokens, log scale)", type="log"),
        yaxis=dict(title="query scale (temperature⁻¹)", range=[0.95, 2.6]),
        legend=dict(orientation="h", x=0, xanchor="left", y=1.0, yanchor="bottom"),
    )


# ---------------------------------------------------------------------------
# What local layers do to the KV cache
# ---------------------------------------------------------------------------

KV_KNOBS: dict[str, list[str]] = {"model": [m.name for m in LOCAL_GLOBAL_MODELS]}


def fig_windowed_kv(model: str = "Gemma 3 12B") -> go.Figure:
    """KV cache of one request (GiB, bf16) against the context length for a released local/global stack,
    and for the same stack with every layer global."""
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
        title=_title(f"{m.name}: {m.local_per_global} local ({local} {m.window:,}) per global layer; "
                     f"at 1M tokens the cache is {ratio:.1f}× smaller"),
        height=440, margin=dict(t=70, b=60, l=70, r=20),
        xaxis=dict(title="context length (tokens, log scale)", type="log"),
        yaxis=dict(title="KV cache per request (GiB, bf16)", type="log", range=[-2, 3]),
        legend=dict(orientation="h", x=0, xanchor="left", y=1.0, yanchor="bottom"),
    )


# ---------------------------------------------------------------------------
# Partial rotary against p-RoPE
# ---------------------------------------------------------------------------

ROTATION_KNOBS: dict[str, list[float]] = {"still": [0.25, 0.5, 0.75], "base": [10000.0, 500000.0]}
_FLOOR = 1e-7  # where a pair that never turns is drawn on the log axis


def fig_rotated_pairs(still: float = 0.25, base: float = 10000.0, d_head: int = 64) -> go.Figure:
    """Radians per token of each pair of a 64-wide head: full RoPE, partial rotary over 1 - still of the
    channels (the ladder recomputed over fewer dims), and p-RoPE with the lowest `still` of the rungs set to 0.
    Pairs that never turn sit on the bottom line."""
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
        title=_title(f"{still:.0%} of the pairs still: partial rotary squeezes the ladder, p-RoPE cuts its slow end "
                     f"(base {base:,.0f})"),
        height=460, margin=dict(t=70, b=60, l=80, r=20),
        xaxis=dict(title="pair i (channel i and i + r/2 of the rotated part)"),
        yaxis=dict(title="frequency θ_i (radians per token, log scale)", type="log", range=[-7.3, 0.4],
                   tickvals=[_FLOOR, 1e-5, 1e-3, 1e-1, 1], ticktext=["never turns", "1e-5", "0.001", "0.1", "1"]),
        legend=dict(orientation="h", x=0, xanchor="left", y=1.0, yanchor="bottom"),
    )


# ---------------------------------------------------------------------------
# MLA: absorbing W_UK works without RoPE, fails with it
# ---------------------------------------------------------------------------

ABSORPTION_KNOBS: dict[str, list[str]] = {"rope": ["on", "off"]}


def fig_absorption(rope: str = "on", T: int = 16) -> go.Figure:
    """Heatmap of the score error (true minus absorbed) for every query m and key n of one head, relative to
    the largest score, with the key up-projection folded into the query; RoPE on the whole key or not."""
    if rope not in ("on", "off"):
        raise ValueError(f"rope must be 'on' or 'off', got {rope!r}")
    rep = absorption_error(rope == "on", T=T)
    scale = float(rep.materialised.abs().max())
    err = ((rep.materialised - rep.absorbed) / scale).numpy()
    z = np.round(err, 3)
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


# ---------------------------------------------------------------------------
# M-RoPE / 2-D RoPE: a patch against every patch
# ---------------------------------------------------------------------------

MROPE_SPLITS: dict[str, tuple[int, int, int]] = {
    "16 rows / 16 columns": (0, 16, 16),
    "8 rows / 24 columns": (0, 8, 24),
    "24 rows / 8 columns": (0, 24, 8),
    "32 rows / 0 columns": (0, 32, 0),
}
MROPE_KNOBS: dict[str, list[Any]] = {"split": list(MROPE_SPLITS), "base": [100.0, 10.0, 10000.0]}


def fig_mrope_scores(split: str = "16 rows / 16 columns", base: float = 100.0, size: int = 11) -> go.Figure:
    """Score of the centre patch of a size x size image against every patch under M-RoPE with the given
    section of a 64-wide head's 32 pairs between rows and columns (time unused: one frame)."""
    if split not in MROPE_SPLITS:
        raise ValueError(f"split must be one of {list(MROPE_SPLITS)}, got {split!r}")
    c = size // 2
    z = mrope_score_map(size, size, row=c, col=c, d_head=64, section=MROPE_SPLITS[split], base=base).numpy()
    return light_figure(
        [dict(type="heatmap", z=np.round(z, 3), x=list(range(-c, size - c)), y=list(range(-c, size - c)),
              colorscale=SEQUENTIAL, zmin=-0.2, zmax=1.0,
              colorbar=dict(title=dict(text="score / score at itself", side="right")),
              hovertemplate="dh = %{y}, dw = %{x}: %{z}<extra></extra>")],
        title=_title(f"{split} (section {list(MROPE_SPLITS[split])}), base {base:,g}: "
                     "the score depends on (dh, dw) only"),
        height=480, margin=dict(t=70, b=60, l=70, r=20),
        xaxis=dict(title="column offset dw (patches)", constrain="domain"),
        yaxis=dict(title="row offset dh (patches)", autorange="reversed", scaleanchor="x"),
    )


# ---------------------------------------------------------------------------
# Context extension as shipped: what each config does to each pair
# ---------------------------------------------------------------------------

SCALING_KNOBS: dict[str, list[str]] = {"model": [r.name.split(" (")[0] for r in SHIPPED_SCALINGS]}


def fig_shipped_scaling(model: str = "Llama 3.1 8B") -> go.Figure:
    """Scaled / trained frequency of every pair against its trained wavelength, for a released model's
    rope_scaling; the dotted line marks the original context length."""
    row = shipped_scaling(model)
    wl, ratio = scaled_frequency_ratio(row)
    s = row.rope_scaling().factor
    kept = int((ratio > 0.999).sum())
    interp = int((ratio < 1.001 / s).sum())
    return light_figure(
        [
            dict(type="scatter", x=[float(f"{v:.4g}") for v in wl], y=np.round(ratio.numpy(), 4), mode="lines+markers",
                 name=row.scaling, line=dict(color=LINE_COLORS[0], width=2), marker=dict(size=6),
                 hovertemplate="wavelength %{x:,} tokens: × %{y}<extra></extra>"),
            dict(type="scatter", x=[row.original_len, row.original_len], y=[0, 1.05], mode="lines",
                 name=f"original context {row.original_len:,}", line=dict(color="#888888", dash="dot"),
                 hoverinfo="skip"),
        ],
        title=_title(f"{row.name}: {row.scaling}, factor {s:g} on {row.original_len:,}, context {row.max_len:,}; "
                     f"{kept} pairs kept, {interp} divided by {s:g}, {len(ratio) - kept - interp} blended"),
        height=440, margin=dict(t=70, b=60, l=70, r=20),
        xaxis=dict(title="trained wavelength 2π/θ_i (tokens, log scale)", type="log"),
        yaxis=dict(title="scaled θ_i / trained θ_i", range=[0, 1.05]),
        legend=dict(orientation="h", x=0, xanchor="left", y=1.0, yanchor="bottom"),
    )
