"""Figures of Experiment 7 (notebooks/26_exp_after_rope): RoPE, NoPE, partial rotary, p-RoPE and the NoPE/RoPE
and local/global stacks."""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from mlbook.experiments import exp_after_rope
from mlbook.experiments.common import mean_sd
from mlbook.viz.core import LINE_COLORS, SEQUENTIAL

__all__ = ["fig_after_rope_lengths", "fig_pair_usage"]

_DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")


def _results(record: Any) -> dict[str, Any]:
    if not isinstance(record, dict) or record.get("name") != "after_rope":
        raise ValueError("record must be an after_rope record (mlbook.experiments.load_result('after_rope', ...))")
    return record["results"]


def fig_after_rope_lengths(record: dict[str, Any], method: str = "all") -> go.Figure:
    """Left: loss per quarter-L block of positions on the same 4L windows. Right: passkey accuracy in each
    (length, distance) cell. Mean ± sd over seeds; `method` picks one method against RoPE, or "all"."""
    r = _results(record)
    if method != "all" and method not in r["methods"]:
        raise ValueError(f"method must be 'all' or one of {', '.join(r['methods'])}, got {method!r}")
    shown = r["methods"] if method == "all" else ["rope"] + ([method] if method != "rope" else [])
    # every method's traces are always there (a slider needs the same traces at every value); the
    # ones not picked are hidden
    L = r["train_len"]
    cells = [f"{n}:{d}" for n, d in r["passkey_cells"]]
    fig = make_subplots(rows=1, cols=2, subplot_titles=("loss by position", "passkey, all digits (length:distance)"),
                        horizontal_spacing=0.14)
    for m in r["methods"]:
        i = r["methods"].index(m)
        rows = r["results"][m]
        n_bins = len(rows[0]["loss_by_quarter_L"])
        x = [(b + 0.5) * L / 4 for b in range(n_bins)]
        loss = [mean_sd(row["loss_by_quarter_L"][b] for row in rows) for b in range(n_bins)]
        acc = [mean_sd(row["passkey"][j] for row in rows) for j in range(len(cells))]
        style = dict(color=LINE_COLORS[i % len(LINE_COLORS)], dash=_DASHES[i % len(_DASHES)])
        for col, xs, stats in ((1, x, loss), (2, cells, acc)):
            fig.add_trace(go.Scatter(
                x=xs, y=[s["mean"] for s in stats], mode="lines+markers", name=r["labels"][m], legendgroup=m,
                showlegend=col == 1, line=style, marker=dict(symbol=i), visible=m in shown,
                error_y={"type": "data", "array": [s["sd"] or 0.0 for s in stats], "visible": True},
            ), row=1, col=col)
    fig.add_vline(x=L, line=dict(color="grey", dash="dot"), row=1, col=1)
    fig.update_xaxes(title="position (characters)", row=1, col=1)
    fig.update_xaxes(title="input length : key distance (characters)", type="category", row=1, col=2)
    fig.update_yaxes(title="loss (nats per character)", row=1, col=1)
    fig.update_yaxes(title="accuracy (fraction)", range=[0, 1.05], row=1, col=2)
    n = len(r["seeds"])
    # the legend above the panels: below them it ran into the slider's labels on a desktop column
    fig.update_layout(height=660, margin=dict(t=250, b=60),
                      title=dict(text=f"Trained at L = {L}: loss and retrieval past L<br><sup>mean ± sd over "
                                      f"{n} seed{'s' if n != 1 else ''}; dotted line: L</sup>", y=0.985, yanchor="top", pad=dict(t=16)),
                      legend=dict(orientation="h", y=1.10, yanchor="bottom", x=0))
    return fig


def fig_pair_usage(record: dict[str, Any], method: str = "rope", which: str = "q") -> go.Figure:
    """Barbero et al.'s probe: mean norm of q (or k) in each frequency pair, per layer, mean over seeds."""
    r = _results(record)
    if method not in exp_after_rope.PROBED or method not in r["methods"]:
        raise ValueError(f"method must be one of {', '.join(exp_after_rope.PROBED)}, got {method!r}")
    if which not in ("q", "k"):
        raise ValueError(f"which must be 'q' or 'k', got {which!r}")
    rows = r["results"][method]
    table = rows[0]["pair_norms"][which]
    z = [[sum(row["pair_norms"][which][layer][p] for row in rows) / len(rows) for p in range(len(table[0]))]
         for layer in range(len(table))]
    fig = go.Figure(go.Heatmap(
        z=z, x=[f"{p}" for p in range(len(table[0]))], y=[f"layer {i}" for i in range(len(table))],
        colorscale=SEQUENTIAL, colorbar=dict(title="mean norm"),
        hovertemplate="pair %{x}, %{y}: %{z:.2f}<extra></extra>",
    ))
    note = " (the last quarter of pairs has frequency 0)" if method.startswith("prope") else ""
    fig.update_layout(height=360, margin=dict(t=80),
                      title=dict(text=f"{r['labels'][method]}: norm of {which} per frequency pair<br>"
                                      f"<sup>pair 0 turns fastest, the last pair slowest{note}</sup>"),
                      xaxis_title="frequency pair (fast to slow)")
    return fig
