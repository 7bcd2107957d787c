"""Figures and tables for section 1 (why position) and section 2.1 (sinusoidal encoding).

One function per figure. A figure with a knob has one private build function (one value,
one figure) behind two public forms:

    fig_x(..., value, grid=...)   a plotly slider over a precomputed grid (`grid_slider`, static
                                  site); grid=None gives the single figure at `value`
    live_x(...)                   ipywidgets sliders over the same build function, declared with
                                  `live_figure` (each knob's name, default, range, step and label);
                                  show it with `show_live`

Every number comes from `mlbook.transformer` and `mlbook.analysis.absolute` (frequencies,
wavelengths, the offset matrix, the equivariance report); this module only rounds and draws it.
Static data is rounded (`round_array`) and slider grids are short, so a page stays small.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np
import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots

from mlbook.analysis.absolute import (
    EquivarianceReport,
    equivariance_report,
    first_pair_exceeding,
    offset_matrix,
    pair_frequencies,
    pair_wavelengths,
)
from mlbook.transformer.positional import sinusoidal_positional_encoding
from mlbook.viz.core import (
    DIVERGING,
    LINE_COLORS,
    SEQUENTIAL,
    format_base,
    int_knob,
    knob_figure,
    label_on_log_axis,
    live_figure,
    log_knob,
    round_array,
)

__all__ = [
    "BASES",
    "HEATMAP_BASES",
    "D_MODELS",
    "D_HEADS",
    "fig_sinusoidal_heatmap",
    "live_sinusoidal_heatmap",
    "fig_pe_similarity",
    "live_pe_similarity",
    "fig_binary_vs_sinusoid",
    "fig_offset_rotation",
    "live_offset_rotation",
    "fig_wavelengths",
    "live_wavelengths",
    "fig_permutation_equivariance",
]

# Slider grids: short (6-8 steps) so the static page stays light.
BASES: tuple[float, ...] = (10.0, 100.0, 1_000.0, 10_000.0, 100_000.0, 500_000.0, 1_000_000.0)  # 500k: Llama 3
HEATMAP_BASES: tuple[float, ...] = (10.0, 100.0, 1_000.0, 10_000.0, 100_000.0, 1_000_000.0)  # heavier figures
D_MODELS: tuple[int, ...] = (8, 16, 32, 64, 128)
D_HEADS: tuple[int, ...] = (32, 64, 128, 256)


# ---------------------------------------------------------------------------
# Permutation equivariance (section 1): the report comes from mlbook.analysis.absolute
# ---------------------------------------------------------------------------


def fig_permutation_equivariance(report: EquivarianceReport | None = None, *, floor: float = 1e-18) -> go.Figure:
    """Grouped bars: per output position, max |f(Px) - P f(x)| on a log axis, one colour per case.

    Exact zeros are drawn at `floor` so they stay visible on the log axis.
    """
    report = report or equivariance_report()
    fig = go.Figure()
    for n, c in enumerate(report.cases):
        err = np.maximum(np.asarray(c.errors), floor)
        fig.add_bar(
            x=list(range(len(err))), y=[float(f"{e:.2e}") for e in err], name=f"{c.name} ({c.permutation})",
            marker_color=LINE_COLORS[n % len(LINE_COLORS)],
            hovertemplate="position %{x}<br>max error %{y:.1e}<extra>%{fullData.name}</extra>",
        )
    fig.add_hline(y=report.tol, line_dash="dot", line_color="grey", annotation_text=f"tolerance {report.tol:.0e}",
                  annotation_position="top right")
    label_on_log_axis(fig, "y")
    fig.update_layout(
        title=f"Permute the input, permute the output?<br><sup>error per output position; exact zeros drawn at {floor:.0e}</sup>",
        barmode="group", yaxis_type="log", yaxis_range=[math.log10(floor) - 0.5, 1],
        height=480, title_font_size=14,
        xaxis_title="output position j (token index)", yaxis_title="max |f(Px) − P f(x)| at position j",
        legend=dict(orientation="h", yanchor="top", y=-0.22, x=0),
        margin=dict(b=130),
    )
    fig.update_yaxes(exponentformat="power")
    return fig


# ---------------------------------------------------------------------------
# Section 2.1 figures
# ---------------------------------------------------------------------------


def _heatmap(T: int, d: int, base: float, fraction: bool = False) -> go.Figure:
    pe = sinusoidal_positional_encoding(T, d, base)  # (T, d)
    x = [(j + 0.5) / d for j in range(d)] if fraction else list(range(d))
    fig = go.Figure(go.Heatmap(
        z=round_array(pe, 2), x=x, y=list(range(T)), zmin=-1, zmax=1, colorscale=DIVERGING, zmid=0,
        colorbar=dict(title="PE value"),
        hovertemplate="position t=%{y}<br>column %{x}<br>PE=%{z}<extra></extra>",
    ))
    fig.update_layout(
        title=f"Sinusoidal PE, T={T}, d={d}, base={format_base(base)}<br><sup>column 2i = sin(ω_i t), 2i+1 = cos(ω_i t)</sup>",
        height=520, title_font_size=14,
        xaxis_title=("column j / d (fraction of the width)" if fraction else "embedding dimension j (2i = sin, 2i+1 = cos)"),
        yaxis_title="position t (tokens)",
    )
    fig.update_xaxes(range=[0, 1] if fraction else [-0.5, d - 0.5])
    fig.update_yaxes(autorange="reversed")
    return fig


def fig_sinusoidal_heatmap(
    T: int = 100, d: int = 64, base: float = 10000.0, *, vary: str = "base",
    bases: Sequence[float] | None = HEATMAP_BASES, ds: Sequence[int] | None = D_MODELS,
) -> go.Figure:
    """Heatmap of PE (T, d): rows are positions, columns dimensions (sin at 2i, cos at 2i+1).

    vary="base": slider over `bases` at fixed d. vary="d": slider over `ds` at fixed base, with
    the columns drawn as a fraction j/d of the width so every d fills the same axis.
    Pass bases=None (or ds=None) for one heatmap at exactly (T, d, base).
    """
    if vary == "base":
        return knob_figure(_heatmap, "base", float(base), bases, "base", {"T": T, "d": d})
    if vary == "d":
        return knob_figure(_heatmap, "d", d, ds, "d", {"T": T, "base": base, "fraction": ds is not None})
    raise ValueError(f"vary must be 'base' or 'd', got {vary!r}")


@live_figure(
    int_knob("T", 100, 10, 400, 10, "T (positions)"), int_knob("d", 64, 2, 256, 2, "d (width)"),
    log_knob("base", 10000.0, label="base"),
    caption="Sinusoidal PE for the chosen T, d and base.",
    alt="Heatmap of the sinusoidal positional encoding, positions down, dimensions across.",
)
def live_sinusoidal_heatmap(T: int, d: int, base: float) -> go.Figure:
    """Live form of `fig_sinusoidal_heatmap`: any T, even d and base. Wrap in `show_live`."""
    return _heatmap(T, d, base)


def _similarity(T: int, d: int, base: float, positions: Sequence[int]) -> go.Figure:
    bad = [t for t in positions if not 0 <= t < T]
    if bad:
        raise ValueError(f"positions {bad} are outside 0..{T - 1} (T={T})")
    pe = sinusoidal_positional_encoding(T, d, base)  # (T, d)
    fig = go.Figure()
    for n, t in enumerate(positions):
        sim = pe @ pe[t]  # (T,) PE_s . PE_t for every s
        fig.add_scatter(
            x=list(range(T)), y=round_array(sim, 2), mode="lines", name=f"t = {t}",
            line=dict(color=LINE_COLORS[n % len(LINE_COLORS)], width=2),
            hovertemplate=f"t={t}, s=%{{x}}<br>PE_t·PE_s=%{{y}}<extra></extra>",
        )
        fig.add_vline(x=t, line_dash="dot", line_color="grey", opacity=0.5)
    fig.update_layout(
        title=f"PE_t · PE_s against s (d={d}, base={format_base(base)}); maximum d/2 = {d // 2} at s = t",
        height=440, title_font_size=14,
        xaxis_title="position s (tokens)", yaxis_title="PE_t · PE_s (dimensionless)",
        yaxis_range=[-d / 4 - 1, d / 2 + 2],
        legend=dict(orientation="h", y=1.0, yanchor="bottom", x=1, xanchor="right"),
    )
    return fig


def fig_pe_similarity(
    T: int = 100, d: int = 64, positions: Sequence[int] = (10, 50, 90), base: float = 10000.0,
    *, bases: Sequence[float] | None = HEATMAP_BASES,
) -> go.Figure:
    """Dot product PE_t . PE_s as a function of s, one curve per t in `positions`; slider over base."""
    return knob_figure(_similarity, "base", float(base), bases, "base", {"T": T, "d": d, "positions": tuple(positions)})


@live_figure(
    int_knob("T", 100, 20, 1000, 10, "T (positions)"), int_knob("d", 64, 2, 256, 2, "d (width)"),
    log_knob("base", 10000.0, label="base"),
    caption="PE_t · PE_s for three positions spread over T.",
    alt="Line plot of the dot product between sinusoidal encodings against position, one line per reference position.",
)
def live_pe_similarity(T: int, d: int, base: float) -> go.Figure:
    """Live form of `fig_pe_similarity`, with positions T/10, T/2 and T - T/10."""
    return _similarity(T, d, base, (T // 10, T // 2, T - 1 - T // 10))


def _wavelengths(d_head: int, base: float, length: int, fraction: bool = False) -> go.Figure:
    lam = pair_wavelengths(d_head, base)  # (d/2,)
    i = np.arange(lam.size)
    x = 2 * i / d_head if fraction else i
    first = first_pair_exceeding(d_head, base, length)
    fig = go.Figure()
    for mask, name, color, symbol in (
        (lam <= length, f"completes a turn within {length:,} tokens", LINE_COLORS[0], "circle"),
        (lam > length, f"never completes a turn in {length:,} tokens", LINE_COLORS[1], "diamond"),
    ):
        fig.add_scatter(
            x=x[mask].tolist(), y=round_array(lam[mask], 1), customdata=i[mask].tolist(), mode="markers", name=name,
            marker=dict(color=color, size=6, symbol=symbol),
            hovertemplate="pair %{customdata}<br>wavelength %{y:,.1f} tokens<extra></extra>",
        )
    fig.add_hline(y=length, line_dash="dash", line_color="grey",
                  annotation_text=f"context length {length:,}", annotation_position="top left")
    label_on_log_axis(fig, "y")
    where = "no pair exceeds it" if first is None else f"first pair past it: i = {first} of {d_head // 2}"
    fig.update_layout(
        title=f"Wavelength 2π/θ_i per pair, d_head={d_head}, base={format_base(base)}<br><sup>{where}</sup>",
        height=480, title_font_size=14, margin=dict(t=120),
        xaxis_title="pair position 2i / d_head" if fraction else "pair index i",
        yaxis_title="wavelength 2π/θ_i (tokens, log scale)", yaxis_type="log",
        yaxis_range=[0.5, 7.5], xaxis_range=[-0.02, 1.0] if fraction else [-1, d_head // 2],
        legend=dict(orientation="h", y=1.0, yanchor="bottom", x=1, xanchor="right"),
    )
    return fig


def fig_wavelengths(
    d_head: int = 128, base: float = 10000.0, length: int = 8192, *, vary: str = "base",
    bases: Sequence[float] | None = BASES, d_heads: Sequence[int] | None = D_HEADS,
) -> go.Figure:
    """Wavelength (log axis) of every pair, with a horizontal line at a context `length`.

    vary="base": slider over `bases`; vary="d_head": slider over `d_heads`, pairs placed at
    2i/d_head so every width fills the same axis. None for one figure at exactly these values.
    """
    if vary == "base":
        return knob_figure(_wavelengths, "base", float(base), bases, "base", {"d_head": d_head, "length": length})
    if vary == "d_head":
        fixed = {"base": base, "length": length, "fraction": d_heads is not None}
        return knob_figure(_wavelengths, "d_head", d_head, d_heads, "d_head", fixed)
    raise ValueError(f"vary must be 'base' or 'd_head', got {vary!r}")


@live_figure(
    int_knob("d_head", 128, 2, 512, 2, "d_head"), log_knob("base", 10000.0, 1.0, 8.0, "base"),
    int_knob("length", 8192, 256, 131072, 256, "context length"),
    caption="Wavelength of every pair for the chosen d_head, base and context length.",
    alt="Scatter plot of wavelength in tokens against pair index on a log axis, with a horizontal line at the context length.",
)
def live_wavelengths(d_head: int, base: float, length: int) -> go.Figure:
    """Live form of `fig_wavelengths`: any even d_head, base and context length."""
    return _wavelengths(d_head, base, length)


# ---------------------------------------------------------------------------
# Section 1 figures: binary counter, offset as rotation
# ---------------------------------------------------------------------------


def fig_binary_vs_sinusoid(n_bits: int = 4, oversample: int = 3) -> go.Figure:
    """Bit b of a binary counter (a square wave of period 2^(b+1)) beside the sinusoid pair of equal period.

    The sinusoids come from `sinusoidal_positional_encoding` with frequencies halving per pair
    (d = 2 (n_bits + oversample), base = 2^(d/2), so omega_i = 2^-i), read at positions
    u = 2^oversample * pi * x: pair b + oversample then has period 2^(b+1) in x. The
    oversampling only makes the curves smooth; the waves are the library's.
    """
    if not 1 <= n_bits <= 6:
        raise ValueError(f"n_bits must be between 1 and 6, got {n_bits}")
    d = 2 * (n_bits + oversample)
    base = 2.0 ** (d // 2)
    x_max = 2**n_bits
    scale = 2**oversample * math.pi  # library positions u per token of x
    U = int(math.ceil(x_max * scale)) + 1
    pe = sinusoidal_positional_encoding(U, d, base)  # (U, d)
    x = round_array(np.arange(U) / scale, 3)
    t = np.arange(x_max + 1)
    fig = make_subplots(rows=n_bits, cols=1, shared_xaxes=True, vertical_spacing=0.05,
                        subplot_titles=[f"bit {b}: period {2 ** (b + 1)} tokens" for b in range(n_bits)])
    for b in range(n_bits):
        col = 2 * (b + oversample)  # the pair whose period is 2^(b+1) tokens
        first = b == 0
        fig.add_scatter(x=t.tolist(), y=((t >> b) & 1).tolist(), mode="lines+markers", line_shape="hv",
                        name="bit b of t (0 or 1)", line=dict(color="black", width=2), marker=dict(size=5),
                        legendgroup="bit", showlegend=first, row=b + 1, col=1)
        fig.add_scatter(x=x, y=round_array(pe[:, col]), mode="lines", name="sin, same period",
                        line=dict(color=LINE_COLORS[0], width=2), legendgroup="sin", showlegend=first, row=b + 1, col=1)
        fig.add_scatter(x=x, y=round_array(pe[:, col + 1]), mode="lines", name="cos, same period",
                        line=dict(color=LINE_COLORS[1], width=2, dash="dash"), legendgroup="cos", showlegend=first,
                        row=b + 1, col=1)
        fig.update_yaxes(range=[-1.15, 1.15], tickvals=[-1, 0, 1], row=b + 1, col=1)
    fig.update_xaxes(title_text="position t (tokens)", dtick=1, row=n_bits, col=1)
    fig.update_layout(
        height=140 * n_bits + 140, title_font_size=14,
        title="Bits of a binary counter are square waves<br><sup>the sinusoidal encoding uses smooth waves of the same periods</sup>",
        legend=dict(orientation="h", y=-0.12, x=0),
    )
    return fig


def _rotation(d: int, pair: int, k: int, T: int, base: float, starts: Sequence[int]) -> go.Figure:
    if not 0 <= pair < d // 2:
        raise ValueError(f"pair must be in 0..{d // 2 - 1} for d={d}, got {pair}")
    bad = [s for s in starts if not 0 <= s < T]
    if bad:
        raise ValueError(f"starts {bad} are outside 0..{T - 1} (T={T})")
    pe = sinusoidal_positional_encoding(T + k, d, base).double()  # (T + k, d)
    u = pe[:, 2 * pair : 2 * pair + 2]  # (T + k, 2) (sin, cos) of pair i
    M = offset_matrix(k, d, base)[2 * pair : 2 * pair + 2, 2 * pair : 2 * pair + 2]  # (2, 2) R(omega_i k)
    moved = u[:T] @ M.T  # (T, 2) R u(t) for every t
    ring = max(T - k, 0)  # rings only where t + k < T, so each lands on a labelled dot
    omega = float(pair_frequencies(d, base)[pair])
    fig = go.Figure()
    fig.add_scatter(
        x=round_array(u[:T, 0]), y=round_array(u[:T, 1]), mode="markers+text", text=[str(t) for t in range(T)],
        textposition="top center", textfont=dict(size=9), name="u_i(t) for t = 0..T-1 (label: t)",
        marker=dict(size=9, color=list(range(T)), colorscale=SEQUENTIAL, showscale=False),
        hovertemplate="t=%{text}<br>(sin, cos)=(%{x}, %{y})<extra></extra>",
    )
    fig.add_scatter(
        x=round_array(moved[:ring, 0]), y=round_array(moved[:ring, 1]), mode="markers", name="R(ω_i k) u_i(t)",
        marker=dict(size=15, color="rgba(0,0,0,0)", line=dict(color=LINE_COLORS[5], width=2)),
        hovertemplate="R(ω_i k) u_i(t) lands on u_i(t+k)<extra></extra>",
    )
    for n, s in enumerate(starts):
        fig.add_scatter(
            x=round_array(torch.stack([u[s, 0], moved[s, 0]])), y=round_array(torch.stack([u[s, 1], moved[s, 1]])),
            mode="lines+markers", marker=dict(symbol="arrow", angleref="previous", size=[0, 12]),
            line=dict(color=LINE_COLORS[(n + 2) % len(LINE_COLORS)], width=2),
            name=f"t = {s} → {s + k}", hoverinfo="skip",
        )
    fig.update_layout(
        title=f"Pair i={pair} of d={d} (ω_i={omega:.3g}): shifting by k={k} turns every point by ω_i k = {omega * k:.3f} rad",
        height=620, title_font_size=13,
        xaxis=dict(title="PE[t, 2i] = sin(ω_i t)", range=[-1.3, 1.3], zeroline=True),
        yaxis=dict(title="PE[t, 2i+1] = cos(ω_i t)", range=[-1.3, 1.3], scaleanchor="x", scaleratio=1, zeroline=True),
        legend=dict(x=0.0, y=1.0, xanchor="left", yanchor="top", bgcolor="rgba(255,255,255,0.8)", font_size=11),
    )
    return fig


def fig_offset_rotation(
    d: int = 16, pair: int = 1, k: int = 3, T: int = 20, base: float = 10000.0, *,
    ks: Sequence[int] | None = (1, 2, 3, 4, 6, 8, 12), starts: Sequence[int] = (0, 3, 7),
) -> go.Figure:
    """One (sin, cos) pair of PE on its unit circle: R(omega_i k) u(t) lands on u(t + k) for every t.

    Axes are the pair's two columns (x = sin, y = cos), so increasing t moves clockwise, matching
    R(phi) = [[cos, sin], [-sin, cos]] acting on (sin, cos). Slider over the offset k.
    """
    fixed = {"d": d, "pair": pair, "T": T, "base": base, "starts": tuple(starts)}
    return knob_figure(_rotation, "k", k, ks, "offset k", fixed)


@live_figure(
    int_knob("pair", 1, 0, lambda d: d // 2 - 1, label=lambda d: f"pair i (d={d})"),
    int_knob("k", 3, 0, 40, label="offset k (tokens)"), log_knob("base", 10000.0, label="base"),
    caption="One (sin, cos) pair on its circle: the rotated points land on the shifted ones.",
    alt="Points on a unit circle labelled by position, with rings marking each point rotated by a fixed angle.",
)
def live_offset_rotation(pair: int, k: int, base: float, *, d: int = 16, T: int = 20) -> go.Figure:
    """Live form of `fig_offset_rotation`: any pair, offset and base (d and T fixed per call)."""
    return _rotation(d, pair, k, T, base, (0, 3, 7))
