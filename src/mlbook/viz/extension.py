"""Figures for section 2.6, extending a RoPE model's context (PI, NTK-aware, dynamic NTK, YaRN, Llama 3).

One function per figure, each with a static form (a plotly slider over a short precomputed grid,
`grid_slider`, which works with no kernel on the static site) and a live form (ipywidgets sliders
declared with `live_figure`, shown with `show_live`):

    fig_angle_coverage / live_angle_coverage   per pair, the largest angle seen in training
                                               against the largest needed at s L; slider over s
    fig_context_scaling / live_context_scaling theta_i' / theta_i and the wavelength per pair for
                                               every method, YaRN's bands shaded; slider over s
                                               and a method picker (plotly updatemenus)
    fig_score_fit / live_score_fit             Chen et al.'s argument: a score fitted on [0, L)
                                               extrapolated and interpolated; slider over the ridge

Every number comes from `mlbook.analysis.extension` (and through it from
`mlbook.transformer.positional`); this module arranges, rounds and draws.
"""

from __future__ import annotations

import functools
import math
from typing import Any, Sequence

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
from plotly.subplots import make_subplots

from mlbook.analysis.absolute import pair_frequencies, pair_wavelengths
from mlbook.analysis.extension import (
    METHOD_LABELS,
    METHODS,
    ScoreFit,
    angle_coverage,
    fit_attention_score,
    frequency_ratios,
    yarn_bands,
)
from mlbook.viz.core import (
    LINE_COLORS, float_knob, grid_slider, int_knob, knob_values, light_figure, live_figure, log_knob,
    note_adjustment,
)

__all__ = [
    "SCALE_FACTORS",
    "METHOD_STYLE",
    "METHOD_PICKS",
    "fig_angle_coverage",
    "live_angle_coverage",
    "fig_context_scaling",
    "live_context_scaling",
    "fig_score_fit",
    "live_score_fit",
]

SCALE_FACTORS: tuple[float, ...] = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0)
RIDGES: tuple[float, ...] = (1e-10, 1e-8, 1e-5, 1e-2)

# colour, dash, marker per method: Okabe-Ito colours, and dash/marker so no line relies on colour alone
METHOD_STYLE: dict[str, tuple[str, str, str]] = {
    "none": (LINE_COLORS[7], "solid", "circle"),
    "linear": (LINE_COLORS[0], "solid", "square"),
    "ntk": (LINE_COLORS[1], "solid", "diamond"),
    "dynamic": (LINE_COLORS[3], "dot", "x"),
    "yarn": (LINE_COLORS[2], "solid", "triangle-up"),
    "llama3": (LINE_COLORS[5], "dash", "star"),
}
# The method picker's choices: (button label, methods shown). "none" stays as the reference line.
METHOD_PICKS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("all methods", METHODS),
    ("PI vs NTK", ("none", "linear", "ntk")),
    ("NTK vs dynamic", ("none", "ntk", "dynamic")),
    ("YaRN vs Llama 3", ("none", "yarn", "llama3")),
    ("PI vs YaRN", ("none", "linear", "yarn")),
)
_BAND_FILL = {"keep": "rgba(86,180,233,0.13)", "blend": "rgba(240,228,66,0.20)", "interpolate": "rgba(204,121,167,0.13)"}
_BAND_TEXT = {"keep": "YaRN keeps θ_i", "blend": "YaRN blends", "interpolate": "YaRN: θ_i / s"}


def _fmt_len(n: float) -> str:
    return f"{n:,.0f}"


def _check_factor(factor: float) -> float:
    if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not math.isfinite(factor) or factor < 1:
        raise ValueError(f"factor (the scale s = L'/L) must be a number >= 1, got {factor!r}")
    return float(factor)


def _band_spans(d_head: int, base: float, L: int, beta_fast: float, beta_slow: float) -> list[tuple[str, float, float]]:
    bands = yarn_bands(d_head, base, L, beta_fast, beta_slow)
    spans = []
    for name, ix in (("keep", bands.keep), ("blend", bands.blend), ("interpolate", bands.interpolate)):
        if ix:
            spans.append((name, ix[0] - 0.5, ix[-1] + 0.5))
    return spans


# ---------------------------------------------------------------------------
# Figure 1: why a RoPE model fails past L
# ---------------------------------------------------------------------------


def _angle_coverage(d_head: int, base: float, original_max_len: int, factor: float, y_max: float) -> go.Figure:
    factor = _check_factor(factor)
    cov = angle_coverage(d_head, base, original_max_len, factor=factor)
    i = np.arange(d_head // 2)
    fig = go.Figure()
    first = cov.first_unwrapped
    if first is not None:
        fig.add_vrect(x0=first - 0.5, x1=d_head // 2 - 0.5, fillcolor="rgba(213,94,0,0.10)", line_width=0,
                      annotation_text="never a full turn in training", annotation_position="top left",
                      annotation_font_size=11)
    fig.add_scatter(
        x=i, y=cov.seen, mode="lines+markers", name=f"trained range: L θ_i (L = {_fmt_len(original_max_len)})",
        line=dict(color=LINE_COLORS[0], width=2), marker=dict(size=5, symbol="circle"),
        hovertemplate="pair %{x}<br>largest trained angle %{y:,.3g} rad<extra></extra>",
    )
    fig.add_scatter(
        x=i, y=cov.needed, mode="lines+markers",
        name=f"needed at L' = sL: (L' - 1) θ_i", line=dict(color=LINE_COLORS[5], width=2, dash="dash"),
        marker=dict(size=5, symbol="diamond"),
        hovertemplate="pair %{x}<br>largest angle needed %{y:,.3g} rad<extra></extra>",
    )
    fig.add_hline(y=2 * math.pi, line_dash="dot", line_color="grey")
    fig.add_annotation(x=0, xref="x", y=math.log10(2 * math.pi), yref="y", text="2π: one full turn",  # log axis: log10
                       showarrow=False, xanchor="left", yanchor="top", font=dict(size=11, color="#555"))
    n_new = len(cov.unwrapped)
    fig.update_layout(
        title=(f"s = {factor:g}: L' = {_fmt_len(cov.target_len)}, every angle x{cov.ratio:.3g}<br><sup>"
               + (f"pairs {first}..{d_head // 2 - 1} ({n_new} of {d_head // 2}) reach angles never seen"
                  if first is not None else "every pair wrapped in training") + "</sup>"),
        height=460, title_font_size=14,
        xaxis_title=f"pair index i (d_head = {d_head}, base = {base:,g})",
        yaxis_title="largest query-key angle (radians, log scale)", yaxis_type="log",
        yaxis_range=[math.log10(max(cov.seen.min() / 2, 1e-6)), math.log10(y_max)], yaxis_dtick=1,
        yaxis_exponentformat="power",
        xaxis_range=[-1, d_head // 2],
        legend=dict(orientation="h", y=1.0, yanchor="bottom", x=1, xanchor="right"),
    )
    return fig


def fig_angle_coverage(
    d_head: int = 128, base: float = 10000.0, original_max_len: int = 8192, factor: float = 4.0, *,
    factors: Sequence[float] | None = (1.5, 2.0, 4.0, 8.0, 16.0, 32.0),
) -> go.Figure:
    """Per pair i: the trained range L theta_i against (sL - 1) theta_i, log axis; slider over s.

    The pairs that never complete a turn in L (wavelength > L) are shaded: past L they meet
    angles the model has never seen. factors=None gives the single figure at `factor`.
    """
    values = knob_values(float(factor), factors)
    top = max(values or [factor])
    y_max = 3 * top * original_max_len
    fixed = dict(d_head=d_head, base=base, original_max_len=original_max_len, y_max=y_max)
    if values is None:
        return _angle_coverage(factor=factor, **fixed)
    return grid_slider(_angle_coverage, "factor", values, active=values.index(float(factor)), label="s = L'/L", fixed=fixed)


@live_figure(
    int_knob("d_head", 128, 8, 256, 8, "d_head"), log_knob("base", 10000.0, 2.0, 7.0, "base"),
    int_knob("original_max_len", 8192, 256, 32768, 256, "L (trained)"), float_knob("factor", 4.0, 1.0, 32.0, 0.5, "s = L'/L"),
    caption="Largest angle per pair: trained range against the extended context.",
    alt="Two curves over pair index on a log axis: the largest trained angle and the largest needed angle.",
)
def live_angle_coverage(d_head: int, base: float, original_max_len: int, factor: float) -> go.Figure:
    """Live form of `fig_angle_coverage`: d_head, base, L and s."""
    return _angle_coverage(d_head, base, original_max_len, factor, 3 * factor * original_max_len)


# ---------------------------------------------------------------------------
# Figure 2: the scaling figure (every method, every pair)
# ---------------------------------------------------------------------------


_RATIO_TICKS = (1 / 32, 1 / 16, 1 / 8, 1 / 4, 1 / 2, 1.0)
_TOKEN_TICKS = (10.0, 100.0, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8)


def _token_label(v: float) -> str:
    return {1e3: "1k", 1e4: "10k", 1e5: "100k", 1e6: "1M", 1e7: "10M", 1e8: "100M"}.get(v, f"{v:g}")


def _scaling(
    d_head: int, base: float, original_max_len: int, factor: float, seq_len: int | None, beta_fast: float,
    beta_slow: float, methods: tuple[str, ...], wave_max: float,
) -> go.Figure:
    factor = _check_factor(factor)
    L = original_max_len
    at_sL = seq_len is None
    if at_sL:  # dynamic NTK at the same effective factor as the others: n = s L
        seq_len = int(round(factor * L))
    ratios = frequency_ratios(d_head, base, factor, original_max_len=L, methods=methods, seq_len=seq_len,
                              beta_fast=beta_fast, beta_slow=beta_slow)
    lam = pair_wavelengths(d_head, base)
    i = np.arange(d_head // 2)
    # two panels sharing the pair axis (make_subplots(rows=2, shared_xaxes=True, vertical_spacing=0.05)
    # written out), built as plain dicts: plotly's validation was most of a live redraw
    # markers on every 4th pair or so (plotly's maxdisplayed; the lines join every pair): enough to tell
    # the methods apart, and a quarter of the points to redraw at each slider step
    shown = max(8, d_head // 8)
    traces = []
    for m in methods:
        color, dash, symbol = METHOD_STYLE[m]
        # at n = sL the legend says so and the title gives n: a legend that changed size at each
        # slider step would have plotly lay out the whole figure again
        label = (METHOD_LABELS[m] if m != "dynamic" else "dynamic NTK at n = sL" if at_sL
                 else f"dynamic NTK at n = {_fmt_len(seq_len)}")
        r = ratios[m]
        traces.append(dict(
            type="scatter", x=i, y=r, mode="lines+markers", name=label, legendgroup=m,
            line=dict(color=color, width=2, dash=dash), marker=dict(size=5, symbol=symbol, color=color, maxdisplayed=shown),
            hovertemplate=f"{label}<br>pair %{{x}}<br>θ'/θ = %{{y:.4f}}<extra></extra>", xaxis="x", yaxis="y",
        ))
        traces.append(dict(
            type="scatter", x=i, y=lam / r, mode="lines+markers", name=label, legendgroup=m, showlegend=False,
            line=dict(color=color, width=2, dash=dash), marker=dict(size=4, symbol=symbol, color=color, maxdisplayed=shown),
            hovertemplate=f"{label}<br>pair %{{x}}<br>wavelength %{{y:,.4g}} tokens<extra></extra>", xaxis="x2", yaxis="y2",
        ))
    target = int(round(factor * L))
    for y, name, dash in ((L, f"L = {_fmt_len(L)} (trained)", "dash"), (target, f"L' = sL = {_fmt_len(target)}", "dot")):
        traces.append(dict(
            type="scatter", x=np.array([-0.5, d_head // 2 - 0.5]), y=np.array([y, y], dtype=float), mode="lines+text",
            text=[name, ""], textposition="top right", textfont=dict(size=11, color="#555"),
            line=dict(color="grey", width=1.5, dash=dash), showlegend=False, hoverinfo="skip", xaxis="x2", yaxis="y2",
        ))
    # YaRN's bands, shaded in both panels
    shapes, notes = [], []
    for name, x0, x1 in _band_spans(d_head, base, L, beta_fast, beta_slow):
        shapes += [dict(type="rect", x0=x0, x1=x1, xref=xref, y0=0, y1=1, yref=f"{yref} domain",
                        fillcolor=_BAND_FILL[name], line=dict(width=0), layer="below")
                   for xref, yref in (("x", "y"), ("x2", "y2"))]
        notes.append(dict(x=(x0 + x1) / 2, y=0.02, xref="x", yref="y domain", yanchor="bottom", showarrow=False,
                          text=_BAND_TEXT[name], font=dict(size=11, color="#333")))
    ticks = [v for v in _TOKEN_TICKS if v <= wave_max]
    return light_figure(
        traces, shapes=shapes, annotations=notes,
        xaxis=dict(anchor="y", domain=[0.0, 1.0], matches="x2", showticklabels=False, range=[-1, d_head // 2]),
        yaxis=dict(anchor="x", domain=[0.525, 1.0], type="log", title=dict(text="θ_i' / θ_i"),
                   range=[math.log10(1 / 45), math.log10(1.4)], tickvals=list(_RATIO_TICKS),
                   ticktext=["1/32", "1/16", "1/8", "1/4", "1/2", "1"]),
        xaxis2=dict(anchor="y2", domain=[0.0, 1.0],
                    title=dict(text=f"pair index i (d_head = {d_head}, base = {base:,g}, L = {_fmt_len(L)})")),
        yaxis2=dict(anchor="x2", domain=[0.0, 0.475], type="log", title=dict(text="wavelength 2π/θ_i' (tokens)"),
                    range=[math.log10(2), math.log10(wave_max)], tickvals=ticks, ticktext=[_token_label(v) for v in ticks]),
        title=dict(text=f"s = {factor:g}: frequency ratio (top) and wavelength (bottom) per pair"
                        + (f"<br><sup>dynamic NTK at n = sL = {_fmt_len(seq_len)}</sup>" if at_sL and "dynamic" in methods else ""),
                   y=0.985, yanchor="top", font=dict(size=14), pad=dict(t=16 if at_sL and "dynamic" in methods else 0)),
        height=780, hovermode="closest",
        legend=dict(orientation="h", y=1.01, yanchor="bottom", x=0, xanchor="left", font=dict(size=11)),
        margin=dict(t=150, b=90, l=70, r=20),
    )


def _method_picker(fig: go.Figure, methods: tuple[str, ...]) -> go.Figure:
    """Add plotly updatemenus buttons that show only the chosen methods (reference lines stay)."""
    n_ref = len(fig.data) - 2 * len(methods)
    buttons = []
    for label, chosen in METHOD_PICKS:
        shown = [m for m in chosen if m in methods]
        if not shown:
            continue
        visible = [m in shown for m in methods for _ in (0, 1)] + [True] * n_ref
        buttons.append(dict(label=label, method="restyle", args=[{"visible": visible}]))
    fig.update_layout(updatemenus=[dict(
        type="buttons", direction="right", buttons=buttons, active=0, showactive=True,
        x=0.0, xanchor="left", y=1.12, yanchor="bottom", pad=dict(r=4, t=0), font=dict(size=11),
    )])
    return fig


def fig_context_scaling(
    d_head: int = 128, base: float = 10000.0, original_max_len: int = 8192, factor: float = 4.0, *,
    factors: Sequence[float] | None = SCALE_FACTORS, seq_len: int | None = None, beta_fast: float = 32.0,
    beta_slow: float = 1.0, methods: Sequence[str] = METHODS, picker: bool = True,
) -> go.Figure:
    """theta_i'/theta_i (top) and wavelength 2 pi/theta_i' (bottom) per pair for each method.

    Slider over the scale s in `factors` (None: one figure at `factor`), YaRN's three bands shaded,
    and with picker=True a row of buttons choosing which methods are drawn. Dynamic NTK is drawn
    with the library's dynamic_factor 1 at n = s L by default, the same effective factor as the
    other methods (where it equals static NTK), or at a fixed sequence length n = seq_len.
    """
    methods = tuple(methods)
    for m in methods:
        if m not in METHODS:
            raise ValueError(f"unknown method {m!r}; valid values are {', '.join(repr(x) for x in METHODS)}")
    if not methods:
        raise ValueError("methods is empty; give at least one of " + ", ".join(METHODS))
    values = knob_values(float(factor), factors)
    top = max(values or [factor])
    wave_max = 3 * top * max(float(pair_wavelengths(d_head, base)[-1]), top * original_max_len)
    fixed = dict(d_head=d_head, base=base, original_max_len=original_max_len, seq_len=seq_len, beta_fast=beta_fast,
                 beta_slow=beta_slow, methods=methods, wave_max=wave_max)
    if values is None:
        fig = _scaling(factor=factor, **fixed)
    else:
        fig = grid_slider(_scaling, "factor", values, active=values.index(float(factor)), label="s = L'/L", fixed=fixed)
        fig.layout.sliders[0].update(pad=dict(t=50))
    return _method_picker(fig, methods) if picker else fig


@live_figure(
    float_knob("factor", 4.0, 1.0, 32.0, 0.5, "s = L'/L"), log_knob("base", 10000.0, 3.0, 7.0, "base"),
    int_knob("d_head", 128, 16, 256, 16, "d_head"), int_knob("original_max_len", 8192, 512, 32768, 512, "L (trained)"),
    float_knob("beta_fast", 32.0, 2.0, 128.0, 1.0, "beta_fast"), float_knob("beta_slow", 1.0, 0.25, 8.0, 0.25, "beta_slow"),
    float_knob("n_over_L", lambda factor: factor, 1.0, 32.0, 0.5, "dynamic: n / L"),
    caption="theta_i'/theta_i and wavelength per pair for every method, at the chosen settings.",
    alt="Two panels over pair index: frequency ratio and wavelength after scaling, one line per method.",
)
def live_context_scaling(factor: float, base: float, d_head: int, original_max_len: int, beta_fast: float,
                         beta_slow: float, n_over_L: float) -> go.Figure:
    """Live form of `fig_context_scaling`: s, base, d_head, L, beta_fast, beta_slow and dynamic's n / L
    (which starts at s). With beta_fast < beta_slow YaRN's ramp runs backwards: the figure draws
    beta_fast = beta_slow + 1 and says so (equal betas are a one-pair ramp, as Kimi K2 ships)."""
    note = None
    if beta_fast < beta_slow:
        note = (f"beta_fast ({beta_fast:g}) must be at least beta_slow ({beta_slow:g}): YaRN is drawn with "
                f"beta_fast = {beta_slow + 1.0:g}")
        beta_fast = beta_slow + 1.0
    seq_len = max(1, int(round(n_over_L * original_max_len)))
    wave_max = 3 * factor * max(float(pair_wavelengths(d_head, base)[-1]), factor * original_max_len)
    fig = _scaling(d_head, base, original_max_len, factor, seq_len, beta_fast, beta_slow, METHODS, wave_max)
    return note_adjustment(fig, note) if note else fig


# ---------------------------------------------------------------------------
# Figure 3: interpolation versus extrapolation (Chen et al.)
# ---------------------------------------------------------------------------


def _envelope(y: np.ndarray, k: int) -> np.ndarray:
    """Max of |y| over consecutive blocks of k: a downsampled curve that keeps every peak."""
    n = len(y) // k * k
    return np.abs(y[:n]).reshape(-1, k).max(axis=1)


def _score_on_grid(fit: ScoreFit, n: int, step: float) -> np.ndarray:
    """fit.score(k * step) for k = 0 .. n-1, as one complex matrix product instead of n * d/2 complex exps.

    With k = B q + r: a(k step) = Re sum_j [h_j e^{i B q step theta_j}] e^{i r step theta_j}, a (Q, d/2) @ (d/2, B)
    product (B about sqrt(n)); the same float64 sum as `attention_score` up to rounding (~1e-13 here), about
    twenty times faster at n = 65,536, which keeps the live figure's redraw at L = 4096, s = 16 interactive.
    """
    theta = pair_frequencies(fit.d_head, fit.base) * step  # (d/2,) phase per grid step
    B = max(1, math.isqrt(max(n - 1, 0)) + 1)
    Q = -(-n // B)
    coarse = fit.h.astype(np.complex128) * np.exp(1j * (B * np.arange(Q, dtype=np.float64))[:, None] * theta)  # (Q, d/2)
    fine = np.exp(1j * np.arange(B, dtype=np.float64)[:, None] * theta)  # (B, d/2)
    return (coarse @ fine.T).real.reshape(-1)[:n]  # (n,)


@functools.lru_cache(maxsize=1)
def _score_fit_skeleton() -> dict[str, Any]:
    """The three-row layout's axes (domains, anchors) and subplot-title annotations, from make_subplots once."""
    lay = make_subplots(rows=3, cols=1, vertical_spacing=0.09, row_heights=[0.38, 0.36, 0.26],
                        subplot_titles=("a", "b", "c")).to_plotly_json()["layout"]
    return {k: lay[k] for k in ("xaxis", "yaxis", "xaxis2", "yaxis2", "xaxis3", "yaxis3", "annotations")}


@functools.lru_cache(maxsize=1)
def _template_json() -> dict[str, Any]:
    return pio.templates["plotly_white"].to_plotly_json()


@functools.lru_cache(maxsize=32)
def _cached_fit(d_head: int, base: float, original_max_len: int, n_points: int, ridge: float, seed: int) -> ScoreFit:
    """The fit for one setting of the fit's knobs, kept so that moving s (or back) does not refit."""
    return fit_attention_score(d_head, base, original_max_len, n_points, ridge, seed)


def _score_fit(d_head: int, base: float, original_max_len: int, n_points: int, factor: float, ridge: float,
               seed: int, zoom: int = 48) -> go.Figure:
    factor = _check_factor(factor)
    L = original_max_len
    fit = _cached_fit(d_head, float(base), L, n_points, float(ridge), seed)
    hi = int(round(factor * L))
    block = max(1, hi // 1024)
    ext = _score_on_grid(fit, hi, 1.0)  # (sL,) extrapolation: a at integer distances
    env = _envelope(ext, block)
    x_env = (np.arange(len(env)) * block + block / 2).round(1)
    interp_all = _score_on_grid(fit, hi, 1.0 / factor)  # (sL,) a(m / s): what PI feeds the model
    interp = interp_all[::block]
    sk = _score_fit_skeleton()  # axis domains and subplot-title positions, laid out once
    titles = (
        f"extrapolated: |a(m)| for distances m in [0, {factor:g}L), log axis",
        f"interpolated (PI): a(m / {factor:g}) for m in [0, {factor:g}L)<br>grey: the targets, placed at m = {factor:g}Δ_k",
        f"zoom: a(m / {factor:g}) between integer distances<br>against straight lines between them",
    )
    z0 = (L // 2) * int(round(factor))  # a window in the middle of the extended context
    m = np.arange(z0, z0 + zoom + 1, dtype=np.float64)
    fine = fit.score(m / factor)
    integers = np.arange(math.ceil(z0 / factor), math.floor((z0 + zoom) / factor) + 1, dtype=np.float64)
    data = [
        dict(type="scatter", x=x_env, y=np.maximum(env, 1e-4), mode="lines", name="|a(m)| extrapolated (peak per bin)",
             line=dict(color=LINE_COLORS[5], width=1.5), xaxis="x", yaxis="y",
             hovertemplate="m ≈ %{x:,.0f}<br>|a| = %{y:.3g}<extra></extra>"),
        dict(type="scatter", x=(fit.positions * factor), y=fit.targets, mode="markers", name=f"targets (n = {n_points})",
             marker=dict(size=3, color="rgba(120,120,120,0.45)"), hoverinfo="skip", xaxis="x2", yaxis="y2"),
        dict(type="scatter", x=np.arange(0, hi, block), y=interp, mode="lines", name="a(m / s) interpolated",
             line=dict(color=LINE_COLORS[0], width=1.5), xaxis="x2", yaxis="y2",
             hovertemplate="m = %{x:,}<br>a(m/s) = %{y:.3f}<extra></extra>"),
        dict(type="scatter", x=(integers * factor), y=fit.score(integers), mode="lines+markers",
             name="a at integers, joined by lines", line=dict(color="grey", width=1, dash="dot"),
             marker=dict(size=7, color="grey"), xaxis="x3", yaxis="y3",
             hovertemplate="m = %{x}<br>a = %{y:.3f}<extra></extra>"),
        dict(type="scatter", x=m, y=fine, mode="markers", name="a(m / s) at fractional distances",
             marker=dict(size=5, color=LINE_COLORS[0], symbol="diamond"), xaxis="x3", yaxis="y3",
             hovertemplate="m = %{x}<br>a(m/s) = %{y:.3f}<extra></extra>"),
    ]
    far = float(np.abs(ext[L:]).max())
    layout = dict(
        template=_template_json(),
        xaxis={**sk["xaxis"], "range": [0, hi]},
        yaxis={**sk["yaxis"], "title": {"text": "|a(m)| (log)"}, "type": "log", "range": [-2.5, 5.5]},
        xaxis2={**sk["xaxis2"], "range": [0, hi]},
        yaxis2={**sk["yaxis2"], "title": {"text": "a(m / s)"}, "range": [-1.6, 1.6]},
        xaxis3={**sk["xaxis3"], "title": {"text": "position m in the extended context (tokens)"},
                "range": [z0 - 0.5, z0 + zoom + 0.5]},
        yaxis3={**sk["yaxis3"], "title": {"text": "a"}},
        annotations=[*({**a, "text": t} for a, t in zip(sk["annotations"], titles)),
                     dict(font=dict(size=11), showarrow=False, text=f"L = {_fmt_len(L)}", x=L, xanchor="left",
                          xref="x", y=1.0, yanchor="top", yref="y domain")],
        shapes=[dict(type="line", x0=L, x1=L, xref=xref, y0=0, y1=1, yref=f"{yref} domain",
                     line=dict(color="grey", dash="dash")) for xref, yref in (("x", "y"), ("x2", "y2"))],
        title=dict(font=dict(size=14), y=0.985, yanchor="top",
                   text=f"ridge {ridge:.0e}: max |a| {float(np.abs(ext[:L]).max()):.2g} on [0, L), "
                        f"{far:.3g} extrapolated, {float(np.abs(interp_all).max()):.2g} interpolated"),
        legend=dict(font=dict(size=11), orientation="h", y=1.055, yanchor="bottom", x=0, xanchor="left"),
        margin=dict(t=160, b=80), height=900,
    )
    # plain dicts on a layout computed once: make_subplots and the per-row updates were ~70 ms of a live redraw
    fig = go.Figure(data=data, layout=layout, _validate=False)
    return fig


def fig_score_fit(
    d_head: int = 128, base: float = 10000.0, original_max_len: int = 2048, n_points: int = 1024,
    factor: float = 4.0, ridge: float = 1e-8, seed: int = 0, *, ridges: Sequence[float] | None = RIDGES,
) -> go.Figure:
    """A score a(s) = Re sum_j h_j e^{i s theta_j} fitted to random targets on [0, L), read past L
    (extrapolation, top, |a| on a log axis) and at m/s (interpolation, middle; zoom at the bottom).

    Slider over the ridge term of the fit (None: one figure at `ridge`): the fit on [0, L) hardly
    changes while the extrapolated curve follows whatever the data left unconstrained.
    """
    values = knob_values(float(ridge), ridges)
    fixed = dict(d_head=d_head, base=base, original_max_len=original_max_len, n_points=n_points, factor=factor, seed=seed)
    if values is None:
        return _score_fit(ridge=ridge, **fixed)
    return grid_slider(_score_fit, "ridge", values, active=values.index(float(ridge)), label="ridge", fixed=fixed)


@live_figure(
    log_knob("ridge", 1e-8, -12.0, 0.0, "ridge", fmt=".0e"), int_knob("seed", 0, 0, 20, label="seed"),
    int_knob("n_points", 1024, 64, 2048, 64, "targets n"), float_knob("factor", 4.0, 1.5, 16.0, 0.5, "s"),
    int_knob("d_head", 128, 16, 256, 16, "d_head"), log_knob("base", 10000.0, 3.0, 6.0, "base"),
    int_knob("original_max_len", 2048, 512, 4096, 256, "L (trained)"),
    caption="A score function fitted on [0, L), extrapolated and interpolated.",
    alt="Three panels: extrapolated score magnitude on a log axis, interpolated score, and a zoom.",
)
def live_score_fit(ridge: float, seed: int, n_points: int, factor: float, d_head: int, base: float,
                   original_max_len: int) -> go.Figure:
    """Live form of `fig_score_fit`: ridge, seed, number of targets, s, d_head, base, L (more targets
    than the L positions they are drawn from are cut to L, and the figure says so)."""
    fig = _score_fit(d_head, base, original_max_len, min(n_points, original_max_len), factor, ridge, seed)
    return fig if n_points <= original_max_len else note_adjustment(
        fig, f"targets n={n_points} exceed L={original_max_len} positions: fitted on n={original_max_len}")
