"""Figures of Experiment 2 (notebooks/21_exp_extrapolation): loss past the training length, per scheme."""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go

from mlbook.experiments import exp_extrapolation
from mlbook.viz.core import LINE_COLORS
from mlbook.viz.exp_common import (
    LEGEND_RIGHT, LENGTH_AXIS, LOSS_AXIS, SCHEME_COLORS, band, budget_and_seeds, record_results, two_line_title,
)

__all__ = [
    "fig_extrapolation",
    "fig_extrapolation_curves",
]


_EX_METRICS = {"tail": "loss on positions past L (at L: all positions)", "mean": "loss over all positions",
               "tail_minus_head": "tail minus head of the same windows"}


# Variants share their scheme's colour and differ by dash: a second T5 or RoPE setting, the reference.
_SCHEME_DASH: dict[str, str] = {"reference": "dash", "t5_fit": "dot", "rope_1head": "dot"}


def fig_extrapolation(record: dict[str, Any], metric: str = "tail") -> go.Figure:
    """Metric against evaluation length per scheme, mean ± sd error bars over seeds.

    metric: "tail" (positions L..T-1; at T = L the whole window), "mean" (all positions) or
    "tail_minus_head" (tail minus positions 0..L-1 of the same windows; below 0 = no degradation).
    Schemes that cannot run at a length have no point there."""
    if metric not in _EX_METRICS:
        raise ValueError(f"metric must be one of {', '.join(_EX_METRICS)}, got {metric!r}")
    r = record_results(record, "extrapolation")
    L, lengths = r["train_len"], r["eval_lengths"]
    s = exp_extrapolation.summary(record)
    fig = go.Figure()
    values = []
    for name, entry in r["schemes"].items():
        if metric == "tail":
            stats = [s[name]["mean"][str(lengths[0])]] + [s[name]["tail"][str(T)] for T in lengths[1:]]
        else:
            stats = [s[name][metric][str(T)] for T in lengths]
        ys = [st["mean"] for st in stats]
        values += [y for y in ys if y is not None]
        fig.add_trace(go.Scatter(
            x=lengths, y=ys, mode="lines+markers", name=entry["label"],
            error_y={"type": "data", "array": [st["sd"] or 0.0 for st in stats], "visible": True},
            line={"color": SCHEME_COLORS.get(name), "dash": _SCHEME_DASH.get(name, "solid")},
        ))
    if metric == "tail_minus_head":
        fig.add_hline(y=0.0, line={"color": "gray", "dash": "dot"})
        lo, hi = min(values + [0.0]), max(values + [0.0])
    else:
        fig.add_hline(y=r["unigram"], line={"color": "gray", "dash": "dot"}, annotation_text="unigram (no context)",
                      annotation_position="bottom right")
        lo, hi = min(values), max(values + [r["unigram"]])
    fig.add_vline(x=L, line={"dash": "dot", "color": "gray"}, annotation_text=f"L = {L}")
    pad = 0.05 * (hi - lo or 1.0)
    fig.update_layout(
        title=two_line_title(_EX_METRICS[metric].capitalize(), f"{budget_and_seeds(record)}; bars: ± sd"), height=460,
        margin={"t": 80}, 
        xaxis={"title": LENGTH_AXIS, "tickvals": lengths, "ticktext": [str(T) for T in lengths]},
        yaxis={"title": LOSS_AXIS if metric != "tail_minus_head" else "tail − head (nats/char)",
               "range": [lo - pad, hi + pad]},
        legend=LEGEND_RIGHT, template="plotly_white",
    )
    return fig


def fig_extrapolation_curves(record: dict[str, Any], bin_width: int = 8) -> go.Figure:
    """Loss at each position of the same 4L windows (bins of `bin_width` positions), mean ± sd band
    over seeds per scheme; models that cannot run past L stop there."""
    from mlbook.experiments.common import binned, mean_sd

    r = record_results(record, "extrapolation")
    if isinstance(bin_width, bool) or not isinstance(bin_width, int) or bin_width < 1:
        raise ValueError(f"bin_width must be a positive int, got {bin_width!r}")
    L = r["train_len"]
    fig = go.Figure()
    for i, (name, entry) in enumerate(r["schemes"].items()):
        curves = [binned(s["curve"], bin_width) for s in entry["per_seed"]]
        x = curves[0]["position"]
        stats = [mean_sd(v) for v in zip(*(c["loss"] for c in curves))]
        band(fig, x, [st["mean"] for st in stats], [st["sd"] for st in stats], SCHEME_COLORS.get(name) or LINE_COLORS[i % len(LINE_COLORS)],
             entry["label"], _SCHEME_DASH.get(name, "solid"))
    fig.add_vline(x=L, line={"dash": "dot", "color": "gray"}, annotation_text=f"L = {L}")
    fig.add_hline(y=r["unigram"], line={"color": "gray", "dash": "dot"}, annotation_text="unigram",
                  annotation_position="bottom right")
    fig.update_layout(
        title=two_line_title("Loss by position on the same windows", f"bins of {bin_width}; {budget_and_seeds(record)}; bands: ± sd"),
        height=460, xaxis_title="position in the window (tokens)", margin={"t": 80}, legend=LEGEND_RIGHT,
        yaxis={"title": LOSS_AXIS, "range": [0.8, max(3.6, r["unigram"] + 0.3)]}, template="plotly_white",
    )
    return fig
