"""Figures for section 2.2: which rows of a learned table train, and the silent decoding bug.

The numbers come from `mlbook.analysis.learned` (a `TailRowReport` from a short training run,
`DriftCurves` from cached against full-forward decoding); this module arranges and draws them.
Static forms are plotly sliders over a short grid (`grid_slider`); live forms are ipywidgets.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from mlbook.analysis.learned import DriftCurves, TailRowReport
from mlbook.viz.core import LINE_COLORS, choice_knob, grid_slider, int_knob, legend_below, live_figure

__all__ = [
    "snapshot_steps",
    "fig_tail_rows",
    "live_tail_rows",
    "fig_decode_drift",
    "live_decode_drift",
]


def snapshot_steps(total: int, n: int = 5) -> list[int]:
    """About n training steps spread geometrically up to `total` (always including it)."""
    if total < 1:
        raise ValueError(f"total must be >= 1, got {total}")
    raw = np.unique(np.round(np.geomspace(max(1, total / 2 ** (n - 1)), total, n)).astype(int))
    return [int(s) for s in raw]


# ---------------------------------------------------------------------------
# Tail rows: gradient steps and sequences per row
# ---------------------------------------------------------------------------


def _tail(report: TailRowReport, step: int) -> go.Figure:
    if not 1 <= step <= report.steps:
        raise ValueError(f"step must be in 1..{report.steps} (the run's length), got {step}")
    p = np.arange(report.T_max)
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.09, subplot_titles=(
        "steps in which the row received a gradient",
        "training sequences that reached the row (log scale)",
    ))
    fig.add_bar(x=p, y=report.updates(step).numpy(), name="measured", marker_color=LINE_COLORS[0], row=1, col=1,
                legendgroup="measured", hovertemplate="row %{x}<br>%{y} steps<extra></extra>")
    fig.add_scatter(x=p, y=np.round(report.expected_updates(step).numpy(), 1), mode="lines", row=1, col=1,
                    name=f"expected: steps·(1 − (1 − P(L > p))^B), B = {report.batch_size}",
                    line=dict(color=LINE_COLORS[5], width=2), hovertemplate="row %{x}<br>expected %{y}<extra></extra>")
    examples = report.examples(step).numpy().astype(float)
    fig.add_bar(x=p, y=np.where(examples > 0, examples, np.nan), name="measured", marker_color=LINE_COLORS[0],
                row=2, col=1, legendgroup="measured", showlegend=False,
                hovertemplate="row %{x}<br>%{y} sequences<extra></extra>")
    fig.add_scatter(x=p, y=np.round(report.expected_examples(step).numpy(), 1), mode="lines", row=2, col=1,
                    name="expected: steps·B·P(L > p)", line=dict(color=LINE_COLORS[1], width=2, dash="dash"),
                    hovertemplate="row %{x}<br>expected %{y}<extra></extra>")
    top = report.steps * report.batch_size
    fig.update_yaxes(title_text="steps", range=[0, report.steps * 1.05], row=1, col=1)
    fig.update_yaxes(title_text="sequences", type="log", range=[-0.2, math.log10(top) + 0.2], row=2, col=1)
    fig.update_xaxes(title_text="row p of the table (position, tokens)", range=[-0.7, report.T_max - 0.3], row=2, col=1)
    fig.update_layout(
        title=f"Learned table, T_max = {report.T_max}, short sequences: after {step} of {report.steps} steps",
        title_font_size=14, bargap=0.1,
    )
    fig.update_annotations(font_size=12)
    return legend_below(fig, height=760, rows=3)


def _check_report(report: TailRowReport) -> TailRowReport:
    if not isinstance(report, TailRowReport):
        raise TypeError(f"report must be a TailRowReport (from train_tail_rows), got {type(report).__name__}")
    return report


def fig_tail_rows(report: TailRowReport, step: int | None = None, *, steps: Sequence[int] | None = ()) -> go.Figure:
    """Per row of the table: steps with a gradient and sequences that reached it, measured in the
    run against the expectation from the length distribution; slider over the training step."""
    _check_report(report)
    step = report.steps if step is None else step
    grid = snapshot_steps(report.steps) if steps == () else steps
    if grid is None:
        return _tail(report, step)
    values = sorted(set(grid) | {step})
    return grid_slider(lambda step: _tail(report, step), "step", values, active=values.index(step),
                       label="training step")


@live_figure(
    int_knob("step", lambda report: _check_report(report).steps, 1, lambda report: report.steps, label="training step"),
    caption="Gradient steps and sequences per row of the learned table, at the chosen training step.",
    alt="Two bar charts against row index: counts high and flat for early rows, falling towards the last rows.",
)
def live_tail_rows(step: int, report: TailRowReport) -> go.Figure:
    """Live form of `fig_tail_rows`: any training step of the run (starts at the last)."""
    return _tail(report, step)


# ---------------------------------------------------------------------------
# The decoding bug: cached against full-forward logits, per step
# ---------------------------------------------------------------------------


def _drift(curves: DriftCurves, T: int, atol: float) -> go.Figure:
    x = curves.positions.numpy()
    buggy = curves.buggy.numpy()  # (B, S)
    floor = 1e-8
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.1, row_heights=[0.65, 0.35],
                        subplot_titles=("teacher-forced: max |cached − full-forward logit| per step (log scale)",
                                        "free-running greedy text with the bug still identical to the correct text"))
    lo, med, hi = (np.quantile(buggy, q, axis=0) for q in (0.1, 0.5, 0.9))
    fig.add_scatter(x=x, y=np.maximum(lo, floor), mode="lines", line=dict(width=0, color=LINE_COLORS[5]),
                    showlegend=False, hoverinfo="skip", row=1, col=1)
    fig.add_scatter(x=x, y=np.maximum(hi, floor), mode="lines", fill="tonexty", line=dict(width=0, color=LINE_COLORS[5]),
                    fillcolor="rgba(213,94,0,0.2)", name="positions reset to 0: 10–90% of sequences",
                    hoverinfo="skip", row=1, col=1)
    fig.add_scatter(x=x, y=np.maximum(med, floor), mode="lines+markers", name="positions reset to 0: median sequence",
                    line=dict(color=LINE_COLORS[5], width=2), marker=dict(size=4), row=1, col=1,
                    hovertemplate="position %{x}<br>median %{y:.3g}<extra></extra>")
    fig.add_scatter(x=x, y=np.maximum(curves.correct.numpy(), floor), mode="lines+markers",
                    name="correct offsets: worst sequence", line=dict(color=LINE_COLORS[0], width=2),
                    marker=dict(size=4), row=1, col=1, hovertemplate="position %{x}<br>%{y:.2g}<extra></extra>")
    fig.add_scatter(x=[-0.5, T - 0.5], y=[atol, atol], mode="lines", name=f"the check's tolerance, {atol:g}",
                    line=dict(color="black", dash="dash", width=1), hoverinfo="skip", row=1, col=1)
    fig.add_scatter(x=x, y=curves.still_identical.numpy(), mode="lines+markers", line_shape="hv",
                    name="positions reset to 0: continuation identical so far", line=dict(color=LINE_COLORS[2], width=2),
                    marker=dict(size=4), row=2, col=1,
                    hovertemplate="token predicted at position %{x}<br>%{y:.0%} of sequences identical<extra></extra>")
    fig.add_scatter(x=[curves.n_prompt - 0.5] * 2, y=[1e-9, 1e3], mode="lines", name="end of the prompt (prefill)",
                    line=dict(color="grey", dash="dot", width=1), hoverinfo="skip", row=1, col=1)
    fig.update_yaxes(type="log", range=[-8.2, 1.3], exponentformat="power", title_text="|Δ logit|", row=1, col=1)
    fig.update_yaxes(range=[0, 1.05], tickformat=".0%", title_text="identical", row=2, col=1)
    fig.update_xaxes(range=[-0.5, T - 0.5], row=1, col=1)
    fig.update_xaxes(title_text="position of the token fed at this step (tokens)", range=[-0.5, T - 0.5], row=2, col=1)
    fig.update_layout(
        title=f"Cached vs full-forward decoding, {buggy.shape[0]} sequences, prompt of {curves.n_prompt}",
        title_font_size=14,
    )
    fig.update_annotations(font_size=12)
    return legend_below(fig, height=820, rows=6)


def _check_curves(curves: Mapping[int, DriftCurves]) -> dict[int, DriftCurves]:
    if not isinstance(curves, Mapping) or not curves or not all(isinstance(c, DriftCurves) for c in curves.values()):
        raise TypeError("curves must be a non-empty dict {n_prompt: DriftCurves} (from analysis.learned.drift_curves)")
    return dict(sorted(curves.items()))


def _length(curves: dict[int, DriftCurves]) -> int:
    """Positions drawn: one past the last position of the longest curves."""
    return int(max(int(c.positions[-1]) for c in curves.values())) + 1


_ATOLS: tuple[float, ...] = (1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1)  # the live tolerance slider's values


def _atol_grid(atol: float) -> list[float]:
    """The tolerance slider's values, with the starting `atol` sorted in."""
    if isinstance(atol, bool) or not isinstance(atol, (int, float)) or not 0 < atol < math.inf:
        raise ValueError(f"atol must be a positive number (a tolerance on |Δ logit|), got {atol!r}")
    return sorted(set(_ATOLS) | {float(atol)})


def fig_decode_drift(curves: Mapping[int, DriftCurves], n_prompt: int | None = None, *, atol: float = 1e-4) -> go.Figure:
    """Per step, the logits' distance from the full forward pass (correct and buggy decoding) and
    how often the bug leaves the top token unchanged; slider over the prompt length (the keys)."""
    curves = _check_curves(curves)
    keys = list(curves)
    n_prompt = keys[0] if n_prompt is None else n_prompt
    if n_prompt not in curves:
        raise ValueError(f"n_prompt={n_prompt} has no curves; computed for {keys}")
    T = _length(curves)
    if len(keys) == 1:
        return _drift(curves[n_prompt], T, atol)
    return grid_slider(lambda n_prompt: _drift(curves[n_prompt], T, atol), "n_prompt", keys,
                       active=keys.index(n_prompt), label="prompt length")


@live_figure(
    choice_knob("n_prompt", lambda curves: min(_check_curves(curves)), lambda curves: list(_check_curves(curves)),
                "n_prompt"),
    choice_knob("atol", 1e-4, _atol_grid, "atol"),
    caption="Cached against full-forward logits for the chosen prompt length and tolerance.",
    alt="Log-scale line chart of logit differences per position: tiny for correct decoding, large with the bug.",
)
def live_decode_drift(n_prompt: int, atol: float, curves: Mapping[int, DriftCurves]) -> go.Figure:
    """Live form of `fig_decode_drift`: prompt length (among the computed ones) and the tolerance."""
    curves = _check_curves(curves)
    return _drift(curves[n_prompt], _length(curves), atol)
