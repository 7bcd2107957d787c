"""Figures for section 2.3: T5's buckets, a T5 bias map, and Swin's 2-D bias.

Same pattern as `mlbook.viz.absolute`: one private build function per figure (one knob value,
one figure) behind a static form `fig_x(..., grid=...)` (a plotly slider over a precomputed
grid) and a live form `live_x(...)` (ipywidgets sliders calling the same build function).

Bucket ids come from `relative_position_bucket`, bias maps from `RelativePositionBias` and
`RelativePositionBias2D`, with their own initialisation under a fixed seed.
"""

from __future__ import annotations

import functools
from typing import Any, Sequence

import numpy as np
import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots

from mlbook.analysis.relative import bucket_layout
from mlbook.transformer.positional import RelativePositionBias, RelativePositionBias2D, relative_position_bucket
from mlbook.viz.core import (
    DIVERGING, LINE_COLORS, int_knob, knob_figure, legend_below, live_figure, note_adjustment, toggle_knob,
)

__all__ = [
    "NUM_BUCKETS",
    "MAX_DISTANCES",
    "WINDOWS",
    "t5_bias",
    "swin_bias",
    "fig_buckets",
    "live_buckets",
    "fig_t5_bias_map",
    "live_t5_bias_map",
    "fig_swin_bias",
    "live_swin_bias",
]

NUM_BUCKETS: tuple[int, ...] = (8, 16, 32, 64, 128)
MAX_DISTANCES: tuple[int, ...] = (20, 32, 64, 128, 256)
WINDOWS: tuple[int, ...] = (2, 3, 4, 5, 6, 7, 8)


_DIRECTIONS: tuple[tuple[str, bool], ...] = (("bidirectional", True), ("causal", False))  # the toggle's options


# ---------------------------------------------------------------------------
# Data
# ---------------------------------------------------------------------------


def t5_bias(
    T: int = 64, n_heads: int = 8, num_buckets: int = 32, max_distance: int = 128, bidirectional: bool = True,
    seed: int = 0,
) -> torch.Tensor:
    """The (H, T, T) bias of a freshly initialised `RelativePositionBias` (table ~ N(0, 1)), seeded."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        module = RelativePositionBias(n_heads, num_buckets, max_distance, bidirectional)
    with torch.no_grad():
        return module(T, T)[0]  # (H, T, T)


def swin_bias(window: int = 7, n_heads: int = 4, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """A seeded `RelativePositionBias2D`: its table ((2w-1)^2, H) and the gathered bias (H, w^2, w^2).

    The table is initialised as in Swin, truncated normal with std 0.02.
    """
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        module = RelativePositionBias2D(window, n_heads)
    with torch.no_grad():
        return module.table.detach().clone(), module()  # ((2w-1)^2, H), (H, w^2, w^2)


# ---------------------------------------------------------------------------
# Bucket id against relative position
# ---------------------------------------------------------------------------

_BUCKET_MODES = ("bidirectional", "causal")


def _buckets(num_buckets: int, max_distance: int, span: int, show: str = "bidirectional") -> go.Figure:
    rel = torch.arange(-span, span + 1)  # (2 span + 1,) j - i
    fig = go.Figure()
    y_top = num_buckets + 1
    for n, (mode, bidirectional) in enumerate((("bidirectional", True), ("causal", False))):
        layout = bucket_layout(num_buckets, max_distance, bidirectional)
        b = relative_position_bucket(rel, bidirectional, num_buckets, max_distance)  # (2 span + 1,)
        exact = max(layout.exact_past) + 1
        name = (f"{mode}: exact |j-i| < {exact}, last bucket from {layout.last_bucket_from}"
                + (f", bucket {layout.unused_buckets[0]} unused" if layout.unused_buckets else ""))
        fig.add_scatter(
            x=rel.numpy(), y=b.numpy(), mode="lines", line_shape="hv", name=name,
            line=dict(color=LINE_COLORS[n], width=2), marker=dict(size=3),
            visible=True if mode == show or show == "both" else False,
            hovertemplate=f"{mode}<br>j − i = %{{x}}<br>bucket %{{y}}<extra></extra>",
        )
    for sign in (-1, 1):  # max_distance markers as traces, so the slider moves them
        fig.add_scatter(
            x=[sign * max_distance] * 2, y=[-1, y_top], mode="lines", name="± max_distance",
            line=dict(color="grey", dash="dot", width=1), showlegend=sign == 1, hoverinfo="skip",
        )
    fig.update_layout(
        title=f"T5 bucket of each relative position, num_buckets={num_buckets}, max_distance={max_distance}",
        title_font_size=14,
        xaxis=dict(title="relative position j − i (tokens; negative: key before the query)", range=[-span, span]),
        yaxis=dict(title="bucket id", range=[-1, num_buckets]),
        updatemenus=[dict(
            type="buttons", direction="right", x=0.0, xanchor="left", y=1.0, yanchor="bottom", pad=dict(b=4),
            buttons=[
                dict(label="bidirectional (encoder)", method="restyle", args=[{"visible": [True, False, True, True]}]),
                dict(label="causal (decoder)", method="restyle", args=[{"visible": [False, True, True, True]}]),
                dict(label="both", method="restyle", args=[{"visible": [True, True, True, True]}]),
            ],
            active=["bidirectional", "causal", "both"].index(show),
        )],
    )
    return legend_below(fig, height=600, rows=3)


def _exact(num_buckets: int, bidirectional: bool) -> int:
    """Distances with their own bucket per direction: (num_buckets // 2 if bidirectional) // 2."""
    return (num_buckets // 2 if bidirectional else num_buckets) // 2


def _per_frame_y_range(fig: go.Figure, top: Any) -> go.Figure:
    """Give each slider frame its own y range [-1, top(frame name)] and strip trace visibility from
    the frames, so that the direction buttons' choice survives a move of the slider."""
    for frame in fig.frames:
        frame.layout = {**(frame.layout.to_plotly_json() if frame.layout else {}),
                        "yaxis": {"range": [-1, top(frame.name)]}}
        for trace in frame.data:
            trace.visible = None
    return fig


def fig_buckets(
    num_buckets: int = 32, max_distance: int = 128, *, vary: str = "num_buckets", span: int | None = None,
    grid: Sequence[int] | None = (), show: str = "bidirectional",
) -> go.Figure:
    """Bucket id against j - i, bidirectional and causal (buttons switch between them).

    vary="num_buckets": slider over `grid` (default NUM_BUCKETS) at fixed max_distance;
    vary="max_distance": slider over `grid` (default MAX_DISTANCES) at fixed num_buckets.
    grid=None: one figure at exactly these values. `span` is the half-width of the x axis
    (default: 1.25 times the largest max_distance shown).
    """
    if show not in (*_BUCKET_MODES, "both"):
        raise ValueError(f"show must be 'bidirectional', 'causal' or 'both', got {show!r}")
    if vary == "num_buckets":
        values = NUM_BUCKETS if grid == () else grid
        span = span or int(1.25 * max_distance)
        fig = knob_figure(_buckets, "num_buckets", num_buckets, values, "num_buckets",
                           {"max_distance": max_distance, "span": span, "show": show})
        return _per_frame_y_range(fig, lambda name: int(name))
    if vary == "max_distance":
        values = MAX_DISTANCES if grid == () else grid
        span = span or int(1.25 * max([max_distance, *(values or ())]))
        fig = knob_figure(_buckets, "max_distance", max_distance, values, "max_distance",
                           {"num_buckets": num_buckets, "span": span, "show": show})
        return _per_frame_y_range(fig, lambda name: num_buckets)
    raise ValueError(f"vary must be 'num_buckets' or 'max_distance', got {vary!r}")


@live_figure(
    int_knob("num_buckets", 32, 4, 128, 2, "num_buckets"), int_knob("max_distance", 128, 8, 1024, 8, "max_distance"),
    toggle_knob("bidirectional", True, _DIRECTIONS, "direction"),
    caption="T5 bucket of each relative position for the chosen settings.",
    alt="Step plot of bucket id against relative position, flat near zero, rising in wider steps further out.",
)
def live_buckets(num_buckets: int, max_distance: int, bidirectional: bool) -> go.Figure:
    """Live form of `fig_buckets`: any num_buckets, max_distance, bidirectional or causal.

    The figure draws both variants, so max_distance is raised to one past the causal exact
    range (num_buckets // 2) where the sliders ask for less (T5's formula needs max_distance
    beyond the exact range), and the figure says so.
    """
    asked, max_distance = max_distance, max(max_distance, _exact(num_buckets, False) + 1)
    mode = "bidirectional" if bidirectional else "causal"
    fig = _buckets(num_buckets, max_distance, int(1.25 * max_distance), mode)
    return fig if asked == max_distance else note_adjustment(
        fig, f"max_distance={asked} is inside the exact range: drawn with max_distance={max_distance}")


# ---------------------------------------------------------------------------
# The (T_q, T_k) bias map of one head
# ---------------------------------------------------------------------------


def _t5_map(head: int, T: int, n_heads: int, num_buckets: int, max_distance: int, bidirectional: bool,
            seed: int) -> go.Figure:
    if not 0 <= head < n_heads:
        raise ValueError(f"head must be in 0..{n_heads - 1}, got {head}")
    bias = t5_bias(T, n_heads, num_buckets, max_distance, bidirectional, seed)  # (H, T, T)
    lim = float(bias.abs().max())  # one colour range for every head
    z = np.round(bias[head].double().numpy(), 2)
    fig = go.Figure(go.Heatmap(
        z=z, x=list(range(T)), y=list(range(T)), colorscale=DIVERGING, zmid=0.0, zmin=-lim, zmax=lim,
        colorbar=dict(title="bias (nats)"),
        hovertemplate="query i=%{y}, key j=%{x}<br>bias %{z}<extra></extra>",
    ))
    kind = "bidirectional" if bidirectional else "causal"
    fig.update_layout(
        title=f"T5 bias b[h, bucket(j − i)] of head {head} of {n_heads} ({kind}, {num_buckets} buckets, random init)",
        height=560, title_font_size=14,
        xaxis=dict(title="key position j (tokens)", constrain="domain"),
        yaxis=dict(title="query position i (tokens)", autorange="reversed", scaleanchor="x"),
    )
    return fig


def fig_t5_bias_map(
    head: int = 0, T: int = 64, n_heads: int = 8, num_buckets: int = 32, max_distance: int = 128,
    bidirectional: bool = True, seed: int = 0, *, heads: Sequence[int] | None = (),
) -> go.Figure:
    """Heatmap of one head's (T, T) T5 bias, rows = queries; slider over `heads` (default: all)."""
    grid = list(range(n_heads)) if heads == () else heads
    fixed = {"T": T, "n_heads": n_heads, "num_buckets": num_buckets, "max_distance": max_distance,
             "bidirectional": bidirectional, "seed": seed}
    return knob_figure(_t5_map, "head", head, grid, "head", fixed)


@live_figure(
    int_knob("head", 0, 0, lambda n_heads: n_heads - 1, label="head"), int_knob("T", 64, 8, 160, 8, "T (tokens)"),
    int_knob("num_buckets", 32, 4, 64, 4, "num_buckets"), int_knob("max_distance", 128, 8, 256, 8, "max_distance"),
    toggle_knob("bidirectional", True, _DIRECTIONS, "direction"),
    caption="One head's T5 bias for the chosen length and bucketing.",
    alt="Heatmap of a T5 bias map: colours constant along every diagonal, bands widening away from it.",
)
def live_t5_bias_map(head: int, T: int, num_buckets: int, max_distance: int, bidirectional: bool, *,
                     n_heads: int = 8) -> go.Figure:
    """Live form of `fig_t5_bias_map`: head, length, buckets, max_distance, direction (max_distance
    inside the exact range is raised past it, and the figure says so)."""
    asked, max_distance = max_distance, max(max_distance, _exact(num_buckets, bidirectional) + 1)
    fig = _t5_map(head, T, n_heads, num_buckets, max_distance, bidirectional, 0)
    return fig if asked == max_distance else note_adjustment(
        fig, f"max_distance={asked} is inside the exact range: drawn with max_distance={max_distance}")


# ---------------------------------------------------------------------------
# Swin: the 2-D table and the gathered (w^2, w^2) bias
# ---------------------------------------------------------------------------


# the diverging colour scale as plotly writes it (a validated trace turns the name into its colour stops)
_DIVERGING_JSON = [list(stop) for stop in go.Heatmap(colorscale=DIVERGING).to_plotly_json()["colorscale"]]


def _swin(window: int, head: int, n_heads: int, seed: int) -> go.Figure:
    if not 0 <= head < n_heads:
        raise ValueError(f"head must be in 0..{n_heads - 1}, got {head}")
    table, bias = swin_bias(window, n_heads, seed)  # ((2w-1)^2, H), (H, w^2, w^2)
    span, w2 = 2 * window - 1, window * window
    lim = 0.05  # the table is N(0, 0.02^2) truncated at +-2 (std units of 1): a fixed range for every window
    grid = np.round(table[:, head].reshape(span, span).double().numpy(), 3)  # rows dy, columns dx
    offsets = list(range(-(window - 1), window))
    common = dict(colorscale=_DIVERGING_JSON, zmid=0.0, zmin=-lim, zmax=lim, type="heatmap")
    data = [
        dict(z=grid, x=offsets, y=offsets, showscale=False, xaxis="x", yaxis="y", **common,
             hovertemplate="dy=%{y}, dx=%{x}<br>bias %{z}<extra></extra>"),
        dict(z=np.round(bias[head].double().numpy(), 3), x=list(range(w2)), y=list(range(w2)), xaxis="x2",
             yaxis="y2", colorbar=dict(title=dict(text="bias")), **common,
             hovertemplate="query cell %{y}, key cell %{x}<br>bias %{z}<extra></extra>"),
    ]
    layout = _swin_layout(window)
    title = {**layout["title"], "text": f"Swin relative bias, window {window}×{window}, head {head} of {n_heads} (random init)"}
    # plain dicts, laid out once per window: make_subplots and the axis updates cost ~50 ms of a live redraw
    return go.Figure(data=data, layout={**layout, "title": title}, _validate=False)


@functools.lru_cache(maxsize=16)
def _swin_layout(window: int) -> dict[str, Any]:
    """The two-panel layout of a window (subplot titles, axes, ranges), built once through plotly's helpers."""
    fig = make_subplots(rows=1, cols=2, column_widths=[0.36, 0.64], horizontal_spacing=0.14,
                        subplot_titles=_swin_titles(window))
    fig.update_layout(_swin_axes(window))
    fig.update_xaxes(title_text="dx (query − key)", row=1, col=1, constrain="domain")
    fig.update_yaxes(title_text="dy (query − key)", row=1, col=1, scaleanchor="x", constrain="domain")
    fig.update_xaxes(title_text="key cell y·w + x", row=1, col=2, constrain="domain")
    fig.update_yaxes(title_text="query cell y·w + x", row=1, col=2, scaleanchor="x2", constrain="domain")
    fig.update_layout(title="", height=520, title_font_size=14)
    fig.update_annotations(font_size=12)
    return fig.to_plotly_json()["layout"]


def _swin_titles(window: int) -> tuple[str, str]:
    span, w2 = 2 * window - 1, window * window
    return f"table: {span}×{span} = {span * span} offsets", f"gathered bias: {w2}×{w2} cell pairs"


def _swin_axes(window: int) -> dict[str, Any]:
    """Axis ranges that fit a window exactly (rows drawn top-down), for the figure and each slider frame."""
    off, cells = window - 0.5, window * window - 0.5
    return {"xaxis": {"range": [-off, off]}, "yaxis": {"range": [off, -off]},
            "xaxis2": {"range": [-0.5, cells]}, "yaxis2": {"range": [cells, -0.5]}}


def fig_swin_bias(
    window: int = 7, head: int = 0, n_heads: int = 4, seed: int = 0, *, windows: Sequence[int] | None = WINDOWS,
) -> go.Figure:
    """Swin's ((2w-1), (2w-1)) table of one head beside the (w^2, w^2) bias it gathers; slider over window."""
    fig = knob_figure(_swin, "window", window, windows, "window", {"head": head, "n_heads": n_heads, "seed": seed})
    base = [a.to_plotly_json() for a in fig.layout.annotations]  # the two subplot titles
    for frame in fig.frames:  # each window gets axes that fit it, and its own subplot titles
        w = int(frame.name)
        titles = [{**a, "text": t} for a, t in zip(base, _swin_titles(w))]
        frame.layout = {**(frame.layout.to_plotly_json() if frame.layout else {}), **_swin_axes(w), "annotations": titles}
    return fig


@live_figure(
    int_knob("window", 7, 1, 12, label="window w"), int_knob("head", 0, 0, lambda n_heads: n_heads - 1, label="head"),
    caption="Swin's table and the bias it gathers, for the chosen window and head.",
    alt="Two heatmaps: a square table indexed by vertical and horizontal offset, and the larger "
        "block-Toeplitz bias gathered from it.",
)
def live_swin_bias(window: int, head: int, *, n_heads: int = 4) -> go.Figure:
    """Live form of `fig_swin_bias`: window size and head."""
    return _swin(window, head, n_heads, 0)
