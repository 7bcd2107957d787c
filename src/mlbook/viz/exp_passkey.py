"""Figures of Experiment 6 (notebooks/25_exp_passkey): passkey retrieval against corpus loss."""

from __future__ import annotations

from typing import Any

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from mlbook.experiments import exp_passkey
from mlbook.experiments.common import mean_sd
from mlbook.viz.core import LINE_COLORS, SEQUENTIAL
from mlbook.viz.exp_common import DASHES, band, finish_layout, record_results, seeds_text

__all__ = [
    "fig_passkey_heatmaps",
    "fig_passkey_vs_loss",
]


def _passkey_finetune(record: dict[str, Any]) -> str:
    """'after 30 steps at 512 on passkey and text' (or 'on text only', the earlier design)."""
    r = record["results"]
    mix = "passkey and text" if "passkey" in exp_passkey.finetune_mix(record) else "text only"
    return f"after {r['finetune']['steps']} steps at {r['finetune_len']} on {mix}"


def fig_passkey_heatmaps(record: dict[str, Any], phase: str = "zero_shot") -> go.Figure:
    """All-digits passkey accuracy on the (context length x key depth) grid of every method, mean over seeds
    (hover: ± sd): one heatmap whose rows are the methods' lengths, method by method, so that five or more
    methods stay readable on a phone."""
    r = record_results(record, "passkey")
    if phase not in r["phases"]:
        raise ValueError(f"phase must be one of {', '.join(r['phases'])}, got {phase!r}")
    methods = r["methods"]
    depths = [f"{d:g}" for d in r["depths"]]
    rows, z, sd = [], [], []
    for m in methods:
        g = exp_passkey.grid(record, phase, m)
        for i, n in enumerate(r["lengths"]):
            rows.append(f"{exp_passkey.SHORT[m]} · {n}")
            z.append(g["mean"][i])
            sd.append(g["sd"][i])
    z_arr = np.round(np.asarray(z), 3)  # (methods x lengths, depths)
    sd_arr = np.round(np.nan_to_num(np.asarray(sd)), 2)
    fig = go.Figure(go.Heatmap(z=z_arr, x=depths, y=rows, zmin=0, zmax=1, colorscale=SEQUENTIAL,
                               colorbar=dict(title="accuracy"), text=np.round(z_arr, 2), texttemplate="%{text}",
                               customdata=sd_arr,
                               hovertemplate="%{y}, depth %{x}<br>accuracy %{z:.2f} ± %{customdata}<extra></extra>"))
    fig.update_xaxes(title="key depth (0: start of the context, 1: next to the question)", tickangle=0)
    fig.update_yaxes(title="method · context length", autorange="reversed")
    what = "no fine-tuning" if phase == "zero_shot" else _passkey_finetune(record)
    return finish_layout(fig, height=160 + 24 * len(rows),
                         title=f"Passkey accuracy, all five digits right; mean over {seeds_text(r)}", subtitle=what)


def fig_passkey_vs_loss(record: dict[str, Any], phase: str = "zero_shot") -> go.Figure:
    """Left: corpus loss against context length. Right: passkey accuracy (mean over depths) against
    length. Both mean ± sd over seeds (error bars)."""
    r = record_results(record, "passkey")
    if phase not in r["phases"]:
        raise ValueError(f"phase must be one of {', '.join(r['phases'])}, got {phase!r}")
    fig = make_subplots(rows=1, cols=2, subplot_titles=("corpus loss", "passkey accuracy, all digits"))
    for i, m in enumerate(r["methods"]):
        s = exp_passkey.summary(record, phase, m)
        style = dict(color=LINE_COLORS[i], dash=DASHES[i % 4])
        for col, key in ((1, "loss"), (2, "accuracy")):
            fig.add_trace(go.Scatter(
                x=r["lengths"], y=[v["mean"] for v in s[key]], mode="lines+markers", name=r["labels"][m],
                legendgroup=m, showlegend=col == 1, line=style, marker=dict(symbol=i),
                error_y={"type": "data", "array": [v["sd"] or 0.0 for v in s[key]], "visible": True},
            ), row=1, col=col)
    for c in (1, 2):
        fig.update_xaxes(title="context length (tokens)", tickvals=r["lengths"], row=1, col=c)
    fig.update_yaxes(title="loss (nats per character)", row=1, col=1)
    fig.update_yaxes(title="accuracy (fraction)", range=[0, 1.05], row=1, col=2)
    what = "no fine-tuning" if phase == "zero_shot" else _passkey_finetune(record)
    return finish_layout(fig, height=440, title="Corpus loss and passkey retrieval against length",
                         subtitle=f"{what}; mean ± sd over {seeds_text(r)}")
