"""Figures for section 2.7, attention sinks and streaming caches.

    fig_softmax_parking / live_softmax_parking   one hand-built attention row: where the mass goes
                                                 with the sink kept and with it evicted; slider over
                                                 the relevance of one content token
    fig_cache_diagram / live_cache_diagram       which tokens a full cache, a sliding window and a
                                                 sink cache hold after t tokens, the position each is
                                                 given, and the largest offset (rotation) each needs;
                                                 slider over t (or n_sink, or the window)

Numbers come from `mlbook.analysis.sinks` (which reads the library's `SinkCache`); this module
only arranges and draws them. Experiment figures (measured sink mass, streaming loss) live in
`mlbook.viz.exp_sinks`.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import plotly.graph_objects as go

from mlbook.analysis.sinks import PARKING_TOKENS, SCHEME_LABELS, SCHEMES, cache_report, softmax_parking
from mlbook.viz.core import LINE_COLORS, float_knob, grid_slider, int_knob, knob_values, live_figure

__all__ = [
    "RELEVANCES",
    "STEPS",
    "fig_softmax_parking",
    "live_softmax_parking",
    "fig_cache_diagram",
    "live_cache_diagram",
]

RELEVANCES: tuple[float, ...] = (0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0)
STEPS: tuple[int, ...] = (6, 12, 13, 16, 20, 24)


# ---------------------------------------------------------------------------
# Where softmax parks its mass
# ---------------------------------------------------------------------------


def _parking(relevance: float, sink_score: float) -> go.Figure:
    ex = softmax_parking(relevance, sink_score)
    x = [t.replace("<", "‹").replace(">", "›") for t in PARKING_TOKENS]  # plotly would read <s> as strike-through
    fig = go.Figure()
    fig.add_bar(x=x, y=np.round(ex.weights, 3), name="sink kept", marker_color=LINE_COLORS[0],
                text=[f"{w:.2f}" for w in ex.weights], textposition="outside",
                hovertemplate="%{x}: weight %{y:.3f} (sink kept)<extra></extra>")
    fig.add_bar(x=x, y=np.round(ex.weights_evicted, 3), name="sink evicted (renormalised over the rest)",
                marker=dict(color=LINE_COLORS[1], pattern_shape="/"),
                text=[f"{w:.2f}" if i else "" for i, w in enumerate(ex.weights_evicted)], textposition="outside",
                hovertemplate="%{x}: weight %{y:.3f} (sink evicted)<extra></extra>")
    out, out_ev = float(np.linalg.norm(ex.output)), float(np.linalg.norm(ex.output_evicted))
    fig.update_layout(
        title=(f"relevance {relevance:g}: the sink holds {ex.weights[0]:.0%}<br>"
               f"<sup>|Σ w v| = {out:.2f} kept, {out_ev:.2f} evicted</sup>"),
        height=470, title_font_size=14, barmode="group", margin=dict(t=120),
        xaxis_title="key token (‹s›: the first token of the text, the sink)",
        yaxis_title="weight (each colour sums to 1)", yaxis_range=[0, 1.12],
        legend=dict(orientation="h", y=1.0, yanchor="bottom", x=1, xanchor="right"),
    )
    return fig


def fig_softmax_parking(
    relevance: float = 0.0, sink_score: float = 3.0, *, relevances: Sequence[float] | None = RELEVANCES,
) -> go.Figure:
    """Bars of one attention row over <s>, the, cat, sat, on, mat, with the sink kept and evicted.

    Slider over how much the query's score for 'cat' is raised (0: nothing relevant). None for
    one figure at `relevance`.
    """
    if relevances is None:
        return _parking(relevance, sink_score)
    values = knob_values(float(relevance), relevances)
    fig = grid_slider(_parking, "relevance", values, active=values.index(float(relevance)),
                      label="relevance of 'cat'", fixed={"sink_score": sink_score})
    fig.layout.sliders[0].update(pad=dict(t=60))
    return fig


@live_figure(
    float_knob("relevance", 0.0, 0.0, 8.0, 0.25, "relevance of 'cat'"),
    float_knob("sink_score", 3.0, -2.0, 8.0, 0.25, "sink score"),
    caption="One attention row with the sink kept and evicted.",
    alt="Grouped bars of attention weights over six tokens, with and without the first token.",
)
def live_softmax_parking(relevance: float, sink_score: float) -> go.Figure:
    """Live form of `fig_softmax_parking`: the relevance of 'cat' and the sink's score."""
    return _parking(relevance, sink_score)


# ---------------------------------------------------------------------------
# The cache diagram
# ---------------------------------------------------------------------------

_IN, _OUT = LINE_COLORS[0], LINE_COLORS[5]
# In a figure with a slider, each row's tokens are drawn with as many points in every frame (the
# spare ones blank and parked out of sight, left of the axis): a step then moves points instead
# of redrawing the figure (book/_static/mlbook.js, quick steps).
_PARKED_X = -100.0


def _row_points(report: Any) -> list[list[tuple[np.ndarray, np.ndarray, np.ndarray]]]:
    """Per view: (text position, given position, offset to the query) of the tokens kept in range,
    kept beyond the trained range, and evicted (given and offset unused for those)."""
    out = []
    for v in report.views:
        kept, given = np.array(v.kept), np.array(v.given)
        offset = given[-1] - given  # (n,) query minus key, in the positions RoPE sees
        ok = offset <= report.trained_len - 1
        ev = np.array(v.evicted, dtype=int)
        out.append([(kept[ok], given[ok], offset[ok]), (kept[~ok], given[~ok], offset[~ok]), (ev, ev, ev)])
    return out


def _cache_slots(reports: Sequence[Any]) -> list[int]:
    """The most points each (row, kind) trace holds over the reports: the size every frame pads to."""
    counts = [[len(x) for view in _row_points(r) for x, _, _ in view] for r in reports]
    return [max(c) for c in zip(*counts)]


def _cache(t: int, n_sink: int, window: int, trained_len: int | None, x_max: int,
           slots: Sequence[int] | None = None) -> go.Figure:
    report = cache_report(t, n_sink, window, trained_len)
    L = report.trained_len
    rows = {sch: len(SCHEMES) - 1 - k for k, sch in enumerate(SCHEMES)}  # first scheme on top
    fig = go.Figure()
    size = 18 if x_max <= 20 else (16 if x_max <= 26 else 12)
    font = 9 if x_max <= 26 else 8
    points = _row_points(report)
    # each kind's legend entry rides on the row with the most such points (plotly leaves an empty
    # trace out of the legend: the full cache, on top, never evicts)
    held = [[len(points[k][m][0]) if slots is None else slots[3 * k + m] for k in range(len(points))] for m in range(3)]
    legend_row = [int(np.argmax(h)) for h in held]

    def padded(j: int, x: np.ndarray, *cols: np.ndarray) -> tuple[np.ndarray, ...]:
        spare = 0 if slots is None else slots[j] - len(x)
        return (np.concatenate([x.astype(float), np.full(spare, _PARKED_X)]),
                *(np.concatenate([c, np.zeros(spare, dtype=c.dtype)]) for c in cols))

    for k, v in enumerate(report.views):
        y = float(rows[v.scheme])
        # the legend's names do not change with L (the title gives it): a legend that changed size
        # at a slider step would have plotly lay out the whole figure again
        for m, (name, color, symbol) in enumerate((("kept, offset to the query ≤ L - 1", _IN, "square"),
                                                   ("kept, offset beyond the trained range", _OUT, "diamond"))):
            x, given, offset = padded(3 * k + m, *points[k][m])
            texts = [str(p) if xi != _PARKED_X else " " for p, xi in zip(given, x)]  # plotly drops an empty text
            fig.add_scatter(
                x=x, y=np.full(len(x), y), mode="markers+text",
                text=texts, textposition="middle center",
                textfont=dict(size=font, color="white"), name=name, legendgroup=("in range", "beyond")[m], showlegend=k == legend_row[m],
                marker=dict(size=size, symbol=symbol, color=color),
                customdata=np.stack([given, offset], axis=-1) if len(x) else None,
                hovertemplate="text position %{x}<br>given position %{customdata[0]}<br>"
                              "offset to the query %{customdata[1]}<extra></extra>",
            )
        (ev,) = padded(3 * k + 2, points[k][2][0])
        fig.add_scatter(
            x=ev, y=np.full(len(ev), y), mode="markers", name="evicted", legendgroup="evicted",
            showlegend=k == legend_row[2], marker=dict(size=size - 6, symbol="x-thin", line=dict(width=1.5, color="#999")),
            hovertemplate="text position %{x}: evicted<extra></extra>",
        )
        inside = report.in_range(v)
        summary = (f"<b>{'in range' if inside else 'OUT of range'}</b>: positions {min(v.given)}..{v.max_position}, "
                   f"largest offset {v.max_offset} = {v.max_offset / (L - 1):.2f} × (L - 1), "
                   f"largest angle {v.max_offset}·θ_i")
        fig.add_scatter(x=np.array([-0.6]), y=np.array([y + 0.42]), mode="text", text=[summary],
                        textposition="middle right", textfont=dict(size=11, color=_IN if inside else _OUT),
                        showlegend=False, hoverinfo="skip")
    fig.add_scatter(x=np.full(len(SCHEMES), float(t - 1)), y=np.arange(len(SCHEMES), dtype=float), mode="markers",
                    name="the query (newest token)",
                    marker=dict(size=size + 10, symbol="circle-open", color="black", line=dict(width=2)),
                    hoverinfo="skip")
    fig.update_yaxes(tickvals=list(rows.values()), ticktext=[SCHEME_LABELS[sch].replace(", ", ",<br>") for sch in SCHEMES],
                     range=[-0.5, len(SCHEMES) - 0.3], showgrid=False, zeroline=False)
    fig.update_xaxes(range=[-0.8, x_max - 0.2], title_text="text position in the stream (label: the position RoPE is given)",
                     dtick=1 if x_max <= 16 else (2 if x_max <= 28 else 4), zeroline=False)
    fig.update_layout(
        title=dict(text=(f"t = {t} tokens streamed, n_sink = {n_sink}, window = {window}; "
                         f"trained length L = {L}"), y=0.98, yanchor="top"),
        height=520, title_font_size=14,
        legend=dict(orientation="h", y=1.02, yanchor="bottom", x=0, xanchor="left", font=dict(size=11)),
        margin=dict(l=120, t=110, r=20),
    )
    return fig


def fig_cache_diagram(
    t: int = 20, n_sink: int = 4, window: int = 8, trained_len: int | None = None, *, vary: str = "t",
    steps: Sequence[int] | None = STEPS, n_sinks: Sequence[int] = (0, 1, 2, 4, 6), windows: Sequence[int] = (4, 8, 12, 16),
) -> go.Figure:
    """What four caches hold after t tokens: full, sliding window (same memory as the sink cache),
    sink cache with text positions, sink cache with slot positions (StreamingLLM, the library).

    Each kept token is labelled with the position RoPE is given and coloured by whether its
    offset to the query fits in the trained range (L = n_sink + window unless trained_len is
    given). vary="t": slider over `steps`; "n_sink" over `n_sinks`; "window" over `windows`;
    steps=None with vary="t" gives one figure.
    """
    if vary == "t":
        if steps is None:
            return _cache(t, n_sink, window, trained_len, t)
        values = knob_values(t, steps)
        slots = _cache_slots([cache_report(v, n_sink, window, trained_len) for v in values])
        fig = grid_slider(_cache, "t", values, active=values.index(t), label="tokens streamed t",
                          fixed=dict(n_sink=n_sink, window=window, trained_len=trained_len, x_max=max(values), slots=slots))
    elif vary == "n_sink":
        values = knob_values(n_sink, n_sinks)
        slots = _cache_slots([cache_report(t, v, window, trained_len) for v in values])
        fig = grid_slider(_cache, "n_sink", values, active=values.index(n_sink), label="n_sink",
                          fixed=dict(t=t, window=window, trained_len=trained_len, x_max=t, slots=slots))
    elif vary == "window":
        values = knob_values(window, windows)
        slots = _cache_slots([cache_report(t, n_sink, v, trained_len) for v in values])
        fig = grid_slider(_cache, "window", values, active=values.index(window), label="window W",
                          fixed=dict(t=t, n_sink=n_sink, trained_len=trained_len, x_max=t, slots=slots))
    else:
        raise ValueError(f"vary must be 't', 'n_sink' or 'window', got {vary!r}")
    fig.layout.sliders[0].update(pad=dict(t=50))
    return fig


@live_figure(
    int_knob("t", 20, 1, 64, label="tokens streamed t"), int_knob("window", 8, 2, 32, label="window W"),
    int_knob("n_sink", 4, 0, 8, label="n_sink"),
    caption="What each cache holds after t tokens, and the positions it gives them.",
    alt="Four rows of token markers, one per cache scheme, labelled with the position each token is given.",
)
def live_cache_diagram(t: int, window: int, n_sink: int) -> go.Figure:
    """Live form of `fig_cache_diagram`: t, window W and n_sink (trained length L = n_sink + W)."""
    return _cache(t, n_sink, window, None, max(t, n_sink + window))
