"""What the experiment pages' figures share: the record check, the seed count, a mean ± sd band,
two-line titles, the legend on the right, the dashes and the colour of each scheme.

Each `mlbook.viz.exp_<name>` module draws the figures of one experiment page from its saved
record (`load_result(...)` / `load_or_run(...)`); nothing there trains or recomputes a
measurement. Error bars and bands are one standard deviation across seeds.
"""

from __future__ import annotations

from typing import Any, Sequence

import plotly.graph_objects as go

from mlbook.viz.core import LINE_COLORS, rgba

__all__ = [
    "LOSS_AXIS",
    "LENGTH_AXIS",
    "SCHEME_COLORS",
    "DASHES",
    "LEGEND_RIGHT",
    "record_results",
    "budget_and_seeds",
    "seeds_text",
    "band",
    "two_line_title",
    "finish_layout",
]

LOSS_AXIS = "loss (nats/char)"
LENGTH_AXIS = "evaluation length (tokens)"

# One fixed Okabe-Ito colour per scheme, so every figure agrees.
SCHEME_COLORS: dict[str, str] = {
    "none": LINE_COLORS[7], "sinusoidal": LINE_COLORS[1], "sinusoidal_unscaled": LINE_COLORS[6],
    "learned": LINE_COLORS[3], "t5": LINE_COLORS[2], "rope": LINE_COLORS[0], "alibi": LINE_COLORS[5],
    "reference": LINE_COLORS[4], "t5_fit": LINE_COLORS[2], "rope_1head": LINE_COLORS[0],
}
DASHES = ("solid", "dash", "dot", "dashdot", "longdash")
LEGEND_RIGHT = {"x": 1.02, "y": 1.0, "xanchor": "left", "font": {"size": 11}}


def record_results(record: Any, name: str) -> dict[str, Any]:
    """The results of a saved `name` experiment record; TypeError naming what was passed otherwise."""
    if not isinstance(record, dict) or "results" not in record or record.get("name", name) != name:
        raise TypeError(f"expected a saved {name!r} experiment record (a dict from load_result), got {type(record).__name__}")
    return record["results"]


def budget_and_seeds(record: dict[str, Any]) -> str:
    """'full budget, 5 seeds'."""
    seeds = record["results"].get("seeds", [])
    return f"{record.get('budget', '?')} budget, {len(seeds)} seed{'s' if len(seeds) != 1 else ''}"


def seeds_text(results: dict[str, Any]) -> str:
    """'5 seeds' for a record's results."""
    n = len(results["seeds"])
    return f"{n} seed{'s' if n != 1 else ''}"


def band(fig: go.Figure, x: Sequence[float], mean: Sequence[float | None], sd: Sequence[float | None], color: str,
         name: str, dash: str = "solid", *, mode: str = "lines", group: str | None = None, showlegend: bool = True,
         row: int | None = None, col: int | None = None) -> None:
    """A line at the mean and a shaded band of ± one sd (two traces: band, then line); `row`, `col`
    place it in a subplot."""
    lo = [None if m is None or s is None else m - s for m, s in zip(mean, sd)]
    hi = [None if m is None or s is None else m + s for m, s in zip(mean, sd)]
    kw = {} if row is None else {"row": row, "col": col}
    fig.add_trace(go.Scatter(x=list(x) + list(x)[::-1], y=hi + lo[::-1], fill="toself", fillcolor=rgba(color, 0.18),
                             line={"width": 0}, hoverinfo="skip", showlegend=False, legendgroup=group or name,
                             name=f"{name} ± sd"), **kw)
    fig.add_trace(go.Scatter(x=list(x), y=list(mean), mode=mode, name=name, legendgroup=group or name,
                             showlegend=showlegend, line={"color": color, "dash": dash}), **kw)


def two_line_title(title: str, subtitle: str) -> dict[str, Any]:
    """A two-line title, the second line smaller."""
    return {"text": f"{title}<br><sup>{subtitle}</sup>", "font": {"size": 15}}


def finish_layout(fig: go.Figure, height: int = 400, title: str = "", subtitle: str = "", **kw: Any) -> go.Figure:
    """White template, a two-line title (the second smaller), the legend to the right of the plot
    (a slider sits below it), margins that keep both visible."""
    text = title if not subtitle else f"{title}<br><sup>{subtitle}</sup>"
    fig.update_layout(height=height, margin=dict(l=60, r=20, t=80, b=50), template="plotly_white",
                      title={"text": text, "font": {"size": 15}}, legend=dict(x=1.02, y=1.0, xanchor="left",
                                                                           font={"size": 11}), **kw)
    return fig
