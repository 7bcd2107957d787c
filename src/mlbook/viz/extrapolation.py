"""Figures for experiments 1-3: the permutation probe, length extrapolation, context extension.

Each function takes a saved experiment record (`load_result(...)` / `load_or_run(...)`) and
returns a plotly figure for `mlbook.viz.show` (or `show_knob`, whose knobs are the keyword
arguments). Every number comes from the record through the experiment module's own summaries;
error bars and bands are one standard deviation across seeds.
"""

from __future__ import annotations

from typing import Any, Sequence

import plotly.graph_objects as go

from mlbook.experiments import exp_context_extension, exp_extrapolation, exp_permutation
from mlbook.experiments.common import TUNED_BETAS
from mlbook.transformer.rope_scaling import yarn_bands
from mlbook.viz.core import LINE_COLORS, rgba

__all__ = [
    "SCHEME_COLORS",
    "permutation_accuracy_figure",
    "permutation_position_figure",
    "extrapolation_figure",
    "extrapolation_curves_figure",
    "context_extension_figure",
    "yarn_bands_figure",
]

LOSS_AXIS = "loss (nats/char)"
LENGTH_AXIS = "evaluation length (tokens)"

# One fixed Okabe-Ito colour per scheme, so every figure agrees.
SCHEME_COLORS: dict[str, str] = {
    "none": LINE_COLORS[7], "sinusoidal": LINE_COLORS[1], "sinusoidal_unscaled": LINE_COLORS[6],
    "learned": LINE_COLORS[3], "t5": LINE_COLORS[2], "rope": LINE_COLORS[0], "alibi": LINE_COLORS[5],
    "reference": LINE_COLORS[4], "t5_fit": LINE_COLORS[2], "rope_1head": LINE_COLORS[0],
}
_VARIANT_COLORS: dict[str, str] = {
    "none": LINE_COLORS[7], "linear": LINE_COLORS[0], "ntk": LINE_COLORS[1], "dynamic": LINE_COLORS[2],
    "yarn": LINE_COLORS[3], "yarn_tuned": LINE_COLORS[5], "reference": LINE_COLORS[4],
}
_MODEL_COLORS: dict[str, str] = {
    "encoder_none": LINE_COLORS[7], "encoder_learned": LINE_COLORS[2], "gpt_learned": LINE_COLORS[0],
    "gpt_zeroed": LINE_COLORS[5], "gpt_none": LINE_COLORS[1],
}
_DASHES = ("solid", "dash", "dot", "dashdot", "longdash")


def _band(fig: go.Figure, x: Sequence[float], mean: Sequence[float | None], sd: Sequence[float | None], color: str,
          name: str, dash: str = "solid", group: str | None = None, showlegend: bool = True) -> None:
    """A line at the mean with a shaded band of +- one sd (two traces: band, then line)."""
    lo = [None if m is None or s is None else m - s for m, s in zip(mean, sd)]
    hi = [None if m is None or s is None else m + s for m, s in zip(mean, sd)]
    fig.add_trace(go.Scatter(x=list(x) + list(x)[::-1], y=hi + lo[::-1], fill="toself", fillcolor=rgba(color, 0.18),
                             line={"width": 0}, hoverinfo="skip", showlegend=False, legendgroup=group or name,
                             name=f"{name} ± sd"))
    fig.add_trace(go.Scatter(x=list(x), y=list(mean), mode="lines", name=name, legendgroup=group or name,
                             showlegend=showlegend, line={"color": color, "dash": dash}))


def _check_record(record: Any, name: str) -> dict[str, Any]:
    if not isinstance(record, dict) or "results" not in record or record.get("name", name) != name:
        raise TypeError(f"expected a saved {name!r} experiment record (a dict from load_result), got {type(record).__name__}")
    return record["results"]


def _subtitle(record: dict[str, Any]) -> str:
    seeds = record["results"].get("seeds", [])
    return f"{record.get('budget', '?')} budget, {len(seeds)} seed{'s' if len(seeds) != 1 else ''}"


def _title(title: str, subtitle: str) -> dict[str, Any]:
    """A two-line title, the second line smaller."""
    return {"text": f"{title}<br><sup>{subtitle}</sup>", "font": {"size": 15}}


_LEGEND_RIGHT = {"x": 1.02, "y": 1.0, "xanchor": "left", "font": {"size": 11}}


# -- experiment 1: permutation probe ----------------------------------------------------------


def permutation_accuracy_figure(record: dict[str, Any]) -> go.Figure:
    """Probe accuracy per model: mean over seeds with ± sd error bars, the chance rate, and on each bar
    a dash at the order-blind guesser that sees what that model sees (bidirectional for the encoders,
    causal for the GPTs; exact expectation averaged over the scored positions)."""
    r = _check_record(record, "permutation")
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
    fig.update_layout(title=_title(f"Lag-{r['lag']} copy probe: accuracy on held-out sequences",
                                   f"{_subtitle(record)}; mean ± sd"), height=440, margin={"t": 80},
                      yaxis={"title": "token accuracy (fraction)", "range": [0, 1.05]}, xaxis={"title": "model"},
                      legend=_LEGEND_RIGHT, template="plotly_white")
    return fig


def permutation_position_figure(record: dict[str, Any], seed: str = "mean") -> go.Figure:
    """Probe accuracy at each position, one line per model: the mean ± sd over seeds, or one seed; beside
    them the order-blind guessers (exact expectation): the causal one, whose bag x[0..i-1] grows with i so
    its accuracy falls along the sequence, and the bidirectional one, the same at every position."""
    r = _check_record(record, "permutation")
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
        _band(fig, x, mean, sd, _MODEL_COLORS.get(name, LINE_COLORS[i]), e["label"], _DASHES[i % len(_DASHES)])
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
    fig.update_layout(title=_title("Probe accuracy by position", f"{which}; {_subtitle(record)}"), height=460,
                      xaxis={"title": "position i of the target x[i - lag] (tokens)"}, margin={"t": 80},
                      yaxis={"title": "token accuracy (fraction)", "range": [0, 1.05]},
                      legend=_LEGEND_RIGHT, template="plotly_white")
    return fig


# -- experiment 2: length extrapolation -------------------------------------------------------

_EX_METRICS = {"tail": "loss on positions past L (at L: all positions)", "mean": "loss over all positions",
               "tail_minus_head": "tail minus head of the same windows"}


# Variants share their scheme's colour and differ by dash: a second T5 or RoPE setting, the reference.
_SCHEME_DASH: dict[str, str] = {"reference": "dash", "t5_fit": "dot", "rope_1head": "dot"}


def extrapolation_figure(record: dict[str, Any], metric: str = "tail") -> go.Figure:
    """Metric against evaluation length per scheme, mean ± sd error bars over seeds.

    metric: "tail" (positions L..T-1; at T = L the whole window), "mean" (all positions) or
    "tail_minus_head" (tail minus positions 0..L-1 of the same windows; below 0 = no degradation).
    Schemes that cannot run at a length have no point there."""
    if metric not in _EX_METRICS:
        raise ValueError(f"metric must be one of {', '.join(_EX_METRICS)}, got {metric!r}")
    r = _check_record(record, "extrapolation")
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
        title=_title(_EX_METRICS[metric].capitalize(), f"{_subtitle(record)}; bars: ± sd"), height=460,
        margin={"t": 80}, 
        xaxis={"title": LENGTH_AXIS, "tickvals": lengths, "ticktext": [str(T) for T in lengths]},
        yaxis={"title": LOSS_AXIS if metric != "tail_minus_head" else "tail − head (nats/char)",
               "range": [lo - pad, hi + pad]},
        legend=_LEGEND_RIGHT, template="plotly_white",
    )
    return fig


def extrapolation_curves_figure(record: dict[str, Any], bin_width: int = 8) -> go.Figure:
    """Loss at each position of the same 4L windows (bins of `bin_width` positions), mean ± sd band
    over seeds per scheme; models that cannot run past L stop there."""
    from mlbook.experiments.common import binned, mean_sd

    r = _check_record(record, "extrapolation")
    if isinstance(bin_width, bool) or not isinstance(bin_width, int) or bin_width < 1:
        raise ValueError(f"bin_width must be a positive int, got {bin_width!r}")
    L = r["train_len"]
    fig = go.Figure()
    for i, (name, entry) in enumerate(r["schemes"].items()):
        curves = [binned(s["curve"], bin_width) for s in entry["per_seed"]]
        x = curves[0]["position"]
        stats = [mean_sd(v) for v in zip(*(c["loss"] for c in curves))]
        _band(fig, x, [st["mean"] for st in stats], [st["sd"] for st in stats], SCHEME_COLORS.get(name) or LINE_COLORS[i % len(LINE_COLORS)],
              entry["label"], _SCHEME_DASH.get(name, "solid"))
    fig.add_vline(x=L, line={"dash": "dot", "color": "gray"}, annotation_text=f"L = {L}")
    fig.add_hline(y=r["unigram"], line={"color": "gray", "dash": "dot"}, annotation_text="unigram",
                  annotation_position="bottom right")
    fig.update_layout(
        title=_title("Loss by position on the same windows", f"bins of {bin_width}; {_subtitle(record)}; bands: ± sd"),
        height=460, xaxis_title="position in the window (tokens)", margin={"t": 80}, legend=_LEGEND_RIGHT,
        yaxis={"title": LOSS_AXIS, "range": [0.8, max(3.6, r["unigram"] + 0.3)]}, template="plotly_white",
    )
    return fig


# -- experiment 3: context extension ----------------------------------------------------------


def context_extension_figure(record: dict[str, Any], metric: str = "mean") -> go.Figure:
    """Metric against length per RoPE variant, mean ± sd error bars: solid before, dashed after the
    fine-tune; the model trained at the target length as a dotted reference."""
    if metric not in ("mean", "tail", "tail_minus_head"):
        raise ValueError(f"metric must be 'mean', 'tail' or 'tail_minus_head', got {metric!r}")
    r = _check_record(record, "context_extension")
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
        title=_title(f"Loss over {what}", f"solid: no fine-tune; dashed: after {r['finetune']['steps']} steps at "
                                          f"{r['finetune_len']}; {_subtitle(record)}; bars: ± sd"), height=520,
        margin={"t": 80},
        xaxis={"title": LENGTH_AXIS, "type": "log", "tickvals": xs, "ticktext": [str(T) for T in xs]},
        yaxis={"title": LOSS_AXIS if metric != "tail_minus_head" else "tail − head (nats/char)",
               "range": [lo - pad, hi + pad]},
        legend={**_LEGEND_RIGHT, "font": {"size": 10}}, template="plotly_white",
    )
    return fig


def yarn_bands_figure(beta_fast: float = TUNED_BETAS["beta_fast"], d_head: int = 16, train_len: int = 128,
                      base: float = 10000.0, beta_slow: float = TUNED_BETAS["beta_slow"]) -> go.Figure:
    """YaRN's blend weight r_i per RoPE pair (0 keep, 1 interpolate) for beta_fast, beside the
    paper's 32 / 1, from the library's `yarn_ramp`; hover shows each pair's turns within L."""
    chosen = yarn_bands(d_head, base, train_len, beta_fast, beta_slow).as_record()  # the numbers a record stores
    paper = yarn_bands(d_head, base, train_len, 32.0, 1.0).as_record()
    pairs = list(range(d_head // 2))
    fig = go.Figure()
    for b, color, name in ((paper, LINE_COLORS[3], "paper: beta_fast 32, beta_slow 1"),
                           (chosen, LINE_COLORS[5], f"beta_fast {beta_fast:g}, beta_slow {beta_slow:g}")):
        fig.add_trace(go.Bar(x=pairs, y=b["ramp"], name=name, marker_color=color,
                             customdata=b["turns"],
                             hovertemplate="pair %{x}<br>r = %{y:.2f}<br>%{customdata:.2f} turns within L<extra></extra>"))
    fig.update_layout(
        title=_title(f"YaRN ramp per pair, d_head = {d_head}, L = {train_len}",
                     f"beta_fast {beta_fast:g}: keep {chosen['keep']}, blend {chosen['blend']}, interpolate "
                     f"{chosen['interpolate']}"), height=420, barmode="group", margin={"t": 80},
        xaxis={"title": "RoPE pair i (0 = fastest)", "tickvals": pairs},
        yaxis={"title": "ramp r_i (0 keep, 1 interpolate)", "range": [0, 1.05]},
        legend=_LEGEND_RIGHT, template="plotly_white",
    )
    return fig
