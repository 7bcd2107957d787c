"""Figures for section 2.5: ALiBi's slopes, its penalty per head, and its bias maps.

Same pattern as `mlbook.viz.absolute`: a private build function per figure behind a static
form `fig_x(..., grid)` (plotly slider over a precomputed grid) and a live form `live_x(...)`.
Slopes come from `alibi_slopes`, biases from `alibi_bias`, windows from `mlbook.analysis.alibi`.
"""

from __future__ import annotations

import functools
import math
from typing import Any, Sequence

import numpy as np
import plotly.graph_objects as go

from mlbook.analysis.alibi import alibi_penalty, effective_window, naive_slopes, slope_provenance
from mlbook.transformer.positional import alibi_bias, alibi_slopes
from mlbook.viz.core import (
    LINE_COLORS,
    SEQUENTIAL,
    float_knob,
    int_knob,
    knob_figure,
    legend_below,
    live_figure,
    note_adjustment,
)

__all__ = [
    "HEAD_COUNTS",
    "NATS",
    "fig_alibi_slopes",
    "live_alibi_slopes",
    "fig_alibi_penalty",
    "live_alibi_penalty",
    "fig_alibi_bias_map",
    "live_alibi_bias_map",
]

HEAD_COUNTS: tuple[int, ...] = (4, 6, 8, 12, 16, 20, 32)  # powers of two and not
NATS: tuple[float, ...] = (1.0, 2.0, 3.0, 5.0, 8.0)


def _log2_ticks(lo: int, hi: int) -> dict[str, Any]:
    vals = [2.0 ** -k for k in range(lo, hi + 1)]
    return dict(tickvals=vals, ticktext=["1" if k == 0 else f"1/{2 ** k}" for k in range(lo, hi + 1)])


# ---------------------------------------------------------------------------
# Slopes against head index
# ---------------------------------------------------------------------------


def _slopes(n_heads: int) -> go.Figure:
    m = alibi_slopes(n_heads).double().numpy()  # (H,)
    origin = np.array(slope_provenance(n_heads))
    heads = np.arange(n_heads)
    fig = go.Figure()
    n_pow = int(np.sum(origin == "power of two"))
    for n, (kind, label) in enumerate((("power of two", f"the {n_pow} slopes 2^(−8k/{n_pow}), k = 1..{n_pow}"),
                                       ("interleaved", f"extra heads: every other slope of the {2 * n_pow}-head sequence"))):
        mask = origin == kind
        fig.add_scatter(
            x=heads[mask], y=m[mask], mode="markers", name=label,
            marker=dict(size=10, color=LINE_COLORS[n], symbol="circle" if n == 0 else "diamond"),
            hovertemplate="head %{x}<br>slope %{y:.4g}<extra></extra>",
        )
    fig.add_scatter(
        x=heads, y=naive_slopes(n_heads).numpy(), mode="markers", name="2^(−8(h+1)/H) applied to this H (not the recipe)",
        marker=dict(size=14, color="rgba(0,0,0,0)", line=dict(color=LINE_COLORS[5], width=1.5)),
        hovertemplate="head %{x}<br>naive 2^(−8(h+1)/H) = %{y:.4g}<extra></extra>",
    )
    power = n_heads & (n_heads - 1) == 0
    kind = "(a power of two: ratio 2^(−8/H) between heads)" if power else "(not a power of two: the paper's recipe)"
    fig.update_layout(
        title=f"ALiBi slopes for H = {n_heads} heads {kind}",
        title_font_size=14,
        xaxis=dict(title="head index h (0-based)", range=[-0.7, max(HEAD_COUNTS) - 0.3]),
        yaxis=dict(title="slope m_h (log scale)", type="log", range=[math.log10(2.0 ** -8.6), math.log10(1.1)],
                   **_log2_ticks(0, 8)),
    )
    return legend_below(fig, height=580, rows=3)


def fig_alibi_slopes(n_heads: int = 8, *, head_counts: Sequence[int] | None = HEAD_COUNTS) -> go.Figure:
    """Slope of every head (log axis) with the naive formula for comparison; slider over H."""
    return knob_figure(_slopes, "n_heads", n_heads, head_counts, "heads H", {})


@live_figure(
    int_knob("n_heads", 8, 1, 32, label="heads H"),
    caption="ALiBi slopes for the chosen number of heads.",
    alt="Scatter plot of slope on a log axis against head index, with hollow markers for the naive formula.",
)
def live_alibi_slopes(n_heads: int) -> go.Figure:
    """Live form of `fig_alibi_slopes`: any H from 1 to 32."""
    return _slopes(n_heads)


# ---------------------------------------------------------------------------
# Penalty in nats against distance, with each head's effective window
# ---------------------------------------------------------------------------

_DISTANCES = np.unique(np.round(np.logspace(0, math.log10(4096), 60)).astype(int))  # 1 .. 4096, log-spaced


def _penalty(n_heads: int, nats: float, max_heads: int) -> go.Figure:
    if n_heads > max_heads:
        raise ValueError(f"n_heads ({n_heads}) must be <= max_heads ({max_heads})")
    m, pen = _slopes_and_penalties(n_heads)  # (H,), (H, K) m_h k
    window = effective_window(n_heads, nats).numpy()  # (H,)
    data = [
        dict(  # a fixed number of traces, empty past n_heads, so any H fits one slider
            type="scatter", x=_DISTANCES if h < n_heads else [], y=np.round(pen[h], 4) if h < n_heads else [],
            mode="lines", name=f"head {h}: m = {_slope_label(m[h])}" if h < n_heads else f"head {h}",
            showlegend=h < n_heads, line=dict(color=_head_colour(h, n_heads) if h < n_heads else "grey", width=2),
            hovertemplate=f"head {h}" + "<br>distance %{x}<br>penalty %{y:.3g} nats<extra></extra>",
        )
        for h in range(max_heads)
    ]
    data.append(dict(
        type="scatter", x=window, y=np.full(n_heads, nats), mode="markers", name="effective window",
        marker=dict(size=9, color="black", symbol="x"), hovertemplate="window %{x} tokens<extra></extra>",
    ))
    data.append(dict(type="scatter", x=[1, 4096], y=[nats, nats], mode="lines", name=f"threshold: {nats:g} nats",
                     line=dict(color="grey", dash="dash", width=1), hoverinfo="skip"))
    fig = go.Figure(data=data)  # one call: adding 34 traces one by one was most of a live redraw
    fig.update_layout(
        title=f"ALiBi penalty m_h·(i − j) per head, H = {n_heads}; × marks where it reaches {nats:g} nats",
        title_font_size=14,
        xaxis=dict(title="distance i − j (tokens, log scale)", type="log", range=[0, math.log10(4096)]),
        yaxis=dict(title="penalty (nats, log scale)", type="log", range=[-2.5, 2.2]),
    )
    fig.update_layout(legend_entrywidth=0.5, legend_entrywidthmode="fraction")  # two columns
    return legend_below(fig, height=640 + 22 * math.ceil((n_heads + 2) / 2), rows=math.ceil((n_heads + 2) / 2))


def _slope_label(m: float) -> str:
    """1/2^k for an exact power of two, else 4 significant digits."""
    k = -math.log2(m)
    return f"1/{2 ** round(k)}" if abs(k - round(k)) < 1e-9 else f"{m:.4g}"


@functools.lru_cache(maxsize=64)
def _slopes_and_penalties(n_heads: int) -> tuple[np.ndarray, np.ndarray]:
    """Each head's slope (H,) and its penalty m_h k at the plotted distances (H, K), kept per H."""
    m = alibi_slopes(n_heads).double().numpy()  # (H,)
    pen = np.stack([alibi_penalty(n_heads, int(k)).numpy() for k in _DISTANCES], axis=1)  # (H, K)
    return m, pen


@functools.lru_cache(maxsize=2048)
def _head_colour(h: int, n_heads: int) -> str:
    """Viridis-like ramp from the steepest head (dark) to the gentlest (light), via plotly's sampler."""
    from plotly.colors import sample_colorscale

    return sample_colorscale(SEQUENTIAL, [0.9 * h / max(n_heads - 1, 1)])[0]


def fig_alibi_penalty(
    n_heads: int = 8, nats: float = 3.0, *, nats_grid: Sequence[float] | None = NATS,
) -> go.Figure:
    """m_h * distance for every head on log-log axes (parallel lines) and each head's effective
    window at `nats`; slider over the threshold."""
    return knob_figure(_penalty, "nats", float(nats), nats_grid, "threshold (nats)",
                        {"n_heads": n_heads, "max_heads": n_heads})


@live_figure(
    int_knob("n_heads", 8, 1, 32, label="heads H"), float_knob("nats", 3.0, 0.5, 10.0, 0.5, "threshold (nats)"),
    caption="Each head's penalty against distance, and where it reaches the chosen threshold.",
    alt="Parallel straight lines on log-log axes, one per head, crossing a horizontal threshold line at crosses.",
)
def live_alibi_penalty(n_heads: int, nats: float) -> go.Figure:
    """Live form of `fig_alibi_penalty`: H and the threshold in nats."""
    return _penalty(n_heads, nats, 32)


# ---------------------------------------------------------------------------
# The (T_q, T_k) bias map of one head
# ---------------------------------------------------------------------------


def _bias_map(head: int, n_heads: int, T: int, floor: float) -> go.Figure:
    if not 0 <= head < n_heads:
        raise ValueError(f"head must be in 0..{n_heads - 1}, got {head}")
    bias = alibi_bias(n_heads, T, T)[0, head].double().numpy()  # (T, T), 0 for future keys
    future = np.triu(np.ones((T, T), dtype=bool), k=1)
    z = np.where(future, np.nan, np.round(bias, 3))  # masked keys drawn blank (NaN is written as null)
    m = float(alibi_slopes(n_heads)[head])
    window = int(effective_window(n_heads, -floor)[head]) if floor < 0 else None
    fig = go.Figure(go.Heatmap(
        z=z, x=np.arange(T), y=np.arange(T), colorscale=SEQUENTIAL, zmin=floor, zmax=0.0,
        colorbar=dict(title="bias (nats)"),
        hovertemplate="query i=%{y}, key j=%{x}<br>bias %{z:.3g} nats<extra></extra>",
    ))
    fig.update_layout(
        title=(f"ALiBi bias −m·(i − j), head {head} of {n_heads}, m = {_slope_label(m)}"
               + (f"<br><sup>down to the {floor:g} nat colour floor at distance {window}</sup>" if window is not None else "")),
        height=560, title_font_size=13,
        xaxis=dict(title="key position j (tokens)", constrain="domain"),
        yaxis=dict(title="query position i (tokens)", autorange="reversed", scaleanchor="x"),
    )
    return fig


def fig_alibi_bias_map(
    head: int = 0, n_heads: int = 8, T: int = 64, floor: float = -8.0, *, heads: Sequence[int] | None = (),
) -> go.Figure:
    """Heatmap of one head's causal bias (future keys blank), colours clipped at `floor` nats so
    every head shares one scale; slider over `heads` (default: all)."""
    grid = list(range(n_heads)) if heads == () else heads
    return knob_figure(_bias_map, "head", head, grid, "head", {"n_heads": n_heads, "T": T, "floor": floor})


@live_figure(
    int_knob("head", 0, 0, 31, label="head"), int_knob("n_heads", 8, 1, 32, label="heads H"),
    int_knob("T", 64, 8, 256, 8, "T (tokens)"), float_knob("floor", -8.0, -30.0, -0.5, 0.5, "colour floor (nats)"),
    caption="One head's ALiBi bias for the chosen number of heads and length.",
    alt="Lower-triangular heatmap, zero on the diagonal, growing more negative away from it at a head-dependent rate.",
)
def live_alibi_bias_map(head: int, n_heads: int, T: int, floor: float) -> go.Figure:
    """Live form of `fig_alibi_bias_map`: head, H, length, colour floor (a head past the last is drawn
    as the last head, and the figure says so)."""
    fig = _bias_map(min(head, n_heads - 1), n_heads, T, floor)
    return fig if head < n_heads else note_adjustment(
        fig, f"head {head} is past the last of H = {n_heads} heads: drawn for head {n_heads - 1}")
