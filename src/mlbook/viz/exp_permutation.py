"""Figures of Experiment 1 (notebooks/20_exp_permutation): the lag-copy permutation probe."""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go

from mlbook.experiments import exp_permutation
from mlbook.viz.core import LINE_COLORS
from mlbook.viz.exp_common import DASHES, LEGEND_RIGHT, band, budget_and_seeds, record_results, two_line_title

__all__ = [
    "fig_permutation_accuracy",
    "fig_permutation_position",
]


_MODEL_COLORS: dict[str, str] = {
    "encoder_none": LINE_COLORS[7], "encoder_learned": LINE_COLORS[2], "gpt_learned": LINE_COLORS[0],
    "gpt_zeroed": LINE_COLORS[5], "gpt_none": LINE_COLORS[1],
}


def fig_permutation_accuracy(record: dict[str, Any]) -> go.Figure:
    """Probe accuracy per model: mean over seeds with ± sd error bars, the chance rate, and on each bar
    a dash at the order-blind guesser that sees what that model sees (bidirectional for the encoders,
    causal for the GPTs; exact expectation averaged over the scored positions)."""
    r = record_results(record, "permutation")
    s = exp_permutation.summary(record)
    b = exp_permutation.order_blind_baselines(record)
    names = list(r["models"])
    labels = [r["models"][n]["label"] for n in names]
    fig = go.Figure(go.Bar(
        x=labels, y=[s[n]["accuracy"]["mean"] for n in names],
        error_y={"type": "data", "array": [s[n]["accuracy"]["sd"] or 0.0 for n in names], "visible": True},
        marker_color=[_MODEL_COLORS.get(n, LINE_COLORS[0]) for n in names], name="accuracy (mean ± sd)",
        showlegend=False,
    ))
    level = {"bidirectional": b["bidirectional"], "causal": b["causal_mean"]}
    guess = [level["bidirectional" if n.startswith("encoder") else "causal"] for n in names]
    fig.add_trace(go.Scatter(
        x=labels, y=guess, mode="markers", name="order-blind guesser<br>seeing what the model sees",
        marker={"symbol": "line-ew", "size": 44, "line": {"width": 3, "color": "black"}},
        hovertemplate="order-blind guesser: %{y:.3f}<extra></extra>",
    ))
    fig.add_hline(y=r["chance"], line={"dash": "dot", "color": "gray"}, annotation_text=f"chance 1/{r['n_symbols']}",
                  annotation_position="top left")
    fig.update_layout(title=two_line_title(f"Lag-{r['lag']} copy probe: accuracy on held-out sequences",
                                           f"{budget_and_seeds(record)}; mean ± sd"), height=440, margin={"t": 80},
                      yaxis={"title": "token accuracy (fraction)", "range": [0, 1.05]}, xaxis={"title": "model"},
                      legend=LEGEND_RIGHT, template="plotly_white")
    return fig


def fig_permutation_position(record: dict[str, Any], seed: str = "mean") -> go.Figure:
    """Probe accuracy at each position, one line per model: the mean ± sd over seeds, or one seed; beside
    them the order-blind guessers (exact expectation): the causal one, whose bag x[0..i-1] grows with i so
    its accuracy falls along the sequence, and the bidirectional one, the same at every position."""
    r = record_results(record, "permutation")
    seeds = [str(x) for x in r["seeds"]]
    if seed != "mean" and str(seed) not in seeds:
        raise ValueError(f"seed must be 'mean' or one of {', '.join(seeds)}, got {seed!r}")
    fig = go.Figure()
    T = r["seq_len"]
    x = list(range(r["lag"], T))
    for i, (name, e) in enumerate(r["models"].items()):
        if seed == "mean":
            pp = exp_permutation.per_position(record, name)
            mean, sd = pp["mean"][r["lag"]:], pp["sd"][r["lag"]:]
        else:
            row = next(s for s in e["per_seed"] if str(s["seed"]) == str(seed))
            mean, sd = row["per_position"][r["lag"]:], [None] * len(x)
        band(fig, x, mean, sd, _MODEL_COLORS.get(name, LINE_COLORS[i]), e["label"], DASHES[i % len(DASHES)])
    b = exp_permutation.order_blind_baselines(record)
    fig.add_trace(go.Scatter(x=x, y=[round(v, 4) for v in b["causal"][r["lag"]:]], mode="lines+markers",
                             name="order-blind guesser, causal (GPTs)",
                             line={"color": "black", "width": 2, "dash": "dot"}, marker={"size": 5}))
    fig.add_trace(go.Scatter(x=x, y=[round(b["bidirectional"], 4)] * len(x), mode="lines",
                             name="order-blind guesser, bidirectional (encoders)",
                             line={"color": "gray", "width": 2, "dash": "dash"}))
    fig.add_hline(y=r["chance"], line={"dash": "dot", "color": "gray"}, annotation_text="chance",
                  annotation_position="bottom right")
    which = "mean ± sd over seeds" if seed == "mean" else f"seed {seed}"
    fig.update_layout(title=two_line_title("Probe accuracy by position", f"{which}; {budget_and_seeds(record)}"), height=460,
                      xaxis={"title": "position i of the target x[i - lag] (tokens)"}, margin={"t": 80},
                      yaxis={"title": "token accuracy (fraction)", "range": [0, 1.05]},
                      legend=LEGEND_RIGHT, template="plotly_white")
    return fig
