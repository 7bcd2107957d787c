"""Figures of Experiment 3 (notebooks/22_exp_context_extension): fine-tuning a RoPE model to a longer
context with each scaling, and the YaRN ramp the tuned betas give."""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go

from mlbook.experiments import exp_context_extension
from mlbook.experiments.common import TUNED_BETAS
from mlbook.transformer.rope_scaling import yarn_bands
from mlbook.viz.core import LINE_COLORS
from mlbook.viz.exp_common import LEGEND_RIGHT, LENGTH_AXIS, LOSS_AXIS, budget_and_seeds, record_results, two_line_title

__all__ = [
    "fig_context_extension",
    "fig_yarn_bands",
]


_VARIANT_COLORS: dict[str, str] = {
    "none": LINE_COLORS[7], "linear": LINE_COLORS[0], "ntk": LINE_COLORS[1], "dynamic": LINE_COLORS[2],
    "yarn": LINE_COLORS[3], "yarn_tuned": LINE_COLORS[5], "reference": LINE_COLORS[4],
}


def fig_context_extension(record: dict[str, Any], metric: str = "mean") -> go.Figure:
    """Metric against length per RoPE variant, mean ± sd error bars: solid before, dashed after the
    fine-tune; the model trained at the target length as a dotted reference."""
    if metric not in ("mean", "tail", "tail_minus_head"):
        raise ValueError(f"metric must be 'mean', 'tail' or 'tail_minus_head', got {metric!r}")
    r = record_results(record, "context_extension")
    L, lengths = r["train_len"], r["eval_lengths"]
    idx = [i for i, T in enumerate(lengths) if metric == "mean" or T > L]
    xs = [lengths[i] for i in idx]
    fig = go.Figure()
    values = []
    for phase, dash in (("before", "solid"), ("after", "dash")):
        stats = exp_context_extension.summary(record, phase, metric)
        for name, st in stats.items():
            label = r["reference"]["label"] if name == "reference" else r["variants"][name]["label"]
            ys = [st[i]["mean"] for i in idx]
            values += [y for y in ys if y is not None]
            fig.add_trace(go.Scatter(
                x=xs, y=ys, mode="lines+markers", legendgroup=name,
                name=label if name == "reference" else f"{label}, {phase}",
                error_y={"type": "data", "array": [st[i]["sd"] or 0.0 for i in idx], "visible": True},
                line={"color": _VARIANT_COLORS.get(name), "dash": "dot" if name == "reference" else dash},
                marker={"symbol": "circle" if phase == "before" else "diamond"},
            ))
    if metric == "mean":
        fig.add_hline(y=r["unigram"], line={"color": "gray", "dash": "dot"}, annotation_text="unigram (no context)",
                      annotation_position="bottom right")
        values.append(r["unigram"])
    if metric == "tail_minus_head":
        fig.add_hline(y=0.0, line={"color": "gray", "dash": "dot"})
        values.append(0.0)
    lo, hi = min(values), max(values)
    pad = 0.05 * (hi - lo or 1.0)
    what = {"mean": "all positions", "tail": f"positions past {L}", "tail_minus_head": "tail minus head"}[metric]
    fig.update_layout(
        title=two_line_title(f"Loss over {what}", f"solid: no fine-tune; dashed: after {r['finetune']['steps']} steps at "
                                                  f"{r['finetune_len']}; {budget_and_seeds(record)}; bars: ± sd"), height=520,
        margin={"t": 80},
        xaxis={"title": LENGTH_AXIS, "type": "log", "tickvals": xs, "ticktext": [str(T) for T in xs]},
        yaxis={"title": LOSS_AXIS if metric != "tail_minus_head" else "tail − head (nats/char)",
               "range": [lo - pad, hi + pad]},
        legend={**LEGEND_RIGHT, "font": {"size": 10}}, template="plotly_white",
    )
    return fig


def fig_yarn_bands(beta_fast: float = TUNED_BETAS["beta_fast"], d_head: int = 16, train_len: int = 128,
                      base: float = 10000.0, beta_slow: float = TUNED_BETAS["beta_slow"]) -> go.Figure:
    """YaRN's blend weight w_i per RoPE pair (0 keep, 1 interpolate) for beta_fast, beside the
    paper's 32 / 1, from the library's `yarn_ramp`; hover shows each pair's turns within L."""
    chosen = yarn_bands(d_head, base, train_len, beta_fast, beta_slow).as_record()  # the numbers a record stores
    paper = yarn_bands(d_head, base, train_len, 32.0, 1.0).as_record()
    pairs = list(range(d_head // 2))
    fig = go.Figure()
    for b, color, name in ((paper, LINE_COLORS[3], "paper: beta_fast 32, beta_slow 1"),
                           (chosen, LINE_COLORS[5], f"beta_fast {beta_fast:g}, beta_slow {beta_slow:g}")):
        fig.add_trace(go.Bar(x=pairs, y=b["ramp"], name=name, marker_color=color,
                             customdata=b["turns"],
                             hovertemplate="pair %{x}<br>w = %{y:.2f}<br>%{customdata:.2f} turns within L<extra></extra>"))
    fig.update_layout(
        title=two_line_title(f"YaRN ramp per pair, d_head = {d_head}, L = {train_len}",
                             f"beta_fast {beta_fast:g}: keep {chosen['keep']}, blend {chosen['blend']}, interpolate "
                             f"{chosen['interpolate']}"), height=420, barmode="group", margin={"t": 80},
        xaxis={"title": "RoPE pair i (0 = fastest)", "tickvals": pairs},
        yaxis={"title": "ramp w_i (0 keep, 1 interpolate)", "range": [0, 1.05]},
        legend=LEGEND_RIGHT, template="plotly_white",
    )
    return fig
