"""Figures for experiments 1-3: permutation sensitivity, length extrapolation, context extension.

Each function takes a saved experiment record (`load_or_run(...)` / `load_result(...)`) and
returns a plotly figure for `mlbook.viz.show`.
"""

from __future__ import annotations

import math
from typing import Any

import plotly.graph_objects as go

from mlbook.viz.core import LINE_COLORS

__all__ = [
    "SCHEME_COLORS",
    "permutation_figure",
    "extrapolation_figure",
    "extrapolation_curves_figure",
    "context_extension_figure",
]

LOSS_AXIS = "loss (nats/char)"
LENGTH_AXIS = "evaluation length (tokens)"

# One fixed Okabe-Ito colour per scheme, so every figure of the chapter agrees.
SCHEME_COLORS: dict[str, str] = {
    "none": LINE_COLORS[7], "sinusoidal": LINE_COLORS[1], "learned": LINE_COLORS[3],
    "t5": LINE_COLORS[2], "rope": LINE_COLORS[0], "alibi": LINE_COLORS[5],
}
_VARIANT_COLORS: dict[str, str] = {
    "none": LINE_COLORS[7], "linear": LINE_COLORS[0], "ntk": LINE_COLORS[1], "dynamic": LINE_COLORS[2],
    "yarn": LINE_COLORS[5],
}
_DASHES = ("solid", "dash", "dot", "dashdot", "longdash")


def _subtitle(record: dict[str, Any]) -> str:
    return f"{record['budget']} budget, seed {record['config']['seed']}"


def permutation_figure(record: dict[str, Any]) -> go.Figure:
    """Mean |out(reverse x) - reverse out(x)| at each position, log scale, one line per model."""
    r = record["results"]
    fig = go.Figure()
    for i, row in enumerate(r["rows"].values()):
        ys = [max(v, 1e-18) for v in row["per_position"]]  # a log axis cannot show an exact 0
        fig.add_trace(go.Scatter(x=list(range(len(ys))), y=ys, mode="lines", name=row["label"].strip(),
                                 line={"color": LINE_COLORS[i % len(LINE_COLORS)], "dash": _DASHES[i % len(_DASHES)]}))
    fig.update_layout(
        title=f"Output change under reversal ({_subtitle(record)})", height=420,
        xaxis_title="position in the reversed sequence (tokens)",
        yaxis={"title": "mean |difference| (log scale)", "type": "log", "exponentformat": "power"},
        legend={"orientation": "h", "y": -0.25},
    )
    return fig


def extrapolation_figure(record: dict[str, Any], metric: str = "tail") -> go.Figure:
    """Loss against evaluation length for every scheme; metric "mean" (all positions) or "tail"
    (positions beyond the trained length L only). Schemes that cannot run at a length have no point."""
    if metric not in ("mean", "tail"):
        raise ValueError(f"metric must be 'mean' or 'tail', got {metric!r}")
    r = record["results"]
    L, lengths = r["train_len"], r["eval_lengths"]
    fig = go.Figure()
    values = [v for s in r["schemes"].values() for v in s["mean"] + s["tail"] if v is not None]  # both metrics:
    for name, s in r["schemes"].items():  # the same y range whichever is shown, so a slider does not rescale
        ys = s["mean"] if metric == "mean" else [s["mean"][0]] + s["tail"][1:]
        fig.add_trace(go.Scatter(x=lengths, y=ys, mode="lines+markers", name=name,
                                 line={"color": SCHEME_COLORS.get(name)}, connectgaps=False))
    lo, hi = min(values), min(max(values), min(values) + 3.0)  # clip runaway losses: the table has them
    what = "all positions" if metric == "mean" else f"positions beyond L = {L} (at 1x: all)"
    fig.add_vline(x=L, line={"dash": "dot", "color": "gray"}, annotation_text=f"L = {L}")
    fig.update_layout(
        title=f"Loss over {what} ({_subtitle(record)})", height=420,
        xaxis={"title": LENGTH_AXIS, "tickvals": lengths, "ticktext": [str(T) for T in lengths]},
        yaxis={"title": LOSS_AXIS, "range": [lo - 0.05, hi + 0.1]},
    )
    return fig


def extrapolation_curves_figure(record: dict[str, Any]) -> go.Figure:
    """Loss at each position (binned) of the longest window each scheme could run."""
    r = record["results"]
    L = r["train_len"]
    fig = go.Figure()
    lows, highs = [], []
    for name, s in r["schemes"].items():
        c = s["curve"]
        lows.append(min(c["loss"]))
        highs.append(max(c["loss"]))
        fig.add_trace(go.Scatter(x=c["position"], y=c["loss"], mode="lines", name=f"{name} (to {s['curve_length']})",
                                 line={"color": SCHEME_COLORS.get(name)}))
    fig.add_vline(x=L, line={"dash": "dot", "color": "gray"}, annotation_text=f"L = {L}")
    hi = min(max(highs), min(lows) + 3.5)
    fig.update_layout(
        title=f"Loss by position, bins of {r['bin_width']} ({_subtitle(record)})", height=420,
        xaxis_title="position in the window (tokens)", yaxis={"title": LOSS_AXIS, "range": [min(lows) - 0.1, hi]},
    )
    return fig


def context_extension_figure(record: dict[str, Any], metric: str = "mean") -> go.Figure:
    """Loss against evaluation length per RoPE variant: solid before, dashed after the fine-tune."""
    if metric not in ("mean", "tail"):
        raise ValueError(f"metric must be 'mean' or 'tail', got {metric!r}")
    r = record["results"]
    L, lengths = r["train_len"], r["eval_lengths"]
    fig = go.Figure()
    values = [y for v in r["variants"].values() for ph in ("before", "after") for m in ("mean", "tail")
              for y in v[ph][m] if y is not None and math.isfinite(y)]  # one y range for both metrics
    for name, v in r["variants"].items():
        for phase, dash in (("before", "solid"), ("after", "dash")):
            ys = v[phase][metric] if metric == "mean" else [v[phase]["mean"][0]] + v[phase]["tail"][1:]
            fig.add_trace(go.Scatter(
                x=lengths, y=ys, mode="lines+markers", name=f"{v['label']}, {phase}",
                legendgroup=name, line={"color": _VARIANT_COLORS.get(name), "dash": dash},
                marker={"symbol": "circle" if phase == "before" else "diamond"},
            ))
    lo, hi = min(values), min(max(values), min(values) + 3.0)
    what = "all positions" if metric == "mean" else f"positions beyond {L} (at {L}: all)"
    fig.update_layout(
        title=f"Loss over {what}; solid: no fine-tune, dashed: after {r['finetune_steps']} steps at "
              f"{r['finetune_len']} ({_subtitle(record)})", height=460,
        xaxis={"title": LENGTH_AXIS, "type": "log", "tickvals": lengths, "ticktext": [str(T) for T in lengths]},
        yaxis={"title": LOSS_AXIS, "range": [lo - 0.05, hi + 0.1]},
        legend={"font": {"size": 10}},
    )
    return fig
