"""Tests for mlbook.viz.sinks: the softmax-parking bars and the cache diagram.

Each figure builds, its static slider steps show different data equal to the analysis at that
step, labels show the position each scheme gives, live forms redraw, and bad input fails.
"""

from __future__ import annotations

import json

import numpy as np
import plotly.graph_objects as go
import pytest

from mlbook.analysis import sinks as S
from mlbook.viz import sinks as V

PLOTLY_MIME = "application/vnd.plotly.v1+json"


def _xy(trace) -> tuple:
    d = trace.to_plotly_json() if hasattr(trace, "to_plotly_json") else dict(trace)
    return tuple(tuple(np.asarray(d.get(k) if d.get(k) is not None else [], dtype=object).tolist()) for k in ("x", "y", "text"))


def _frames(fig: go.Figure) -> dict[str, go.Frame]:
    steps = fig.layout.sliders[0].steps
    frames = {f.name: f for f in fig.frames}
    assert len(frames) == len(steps) == len(fig.frames)
    return {s.label: frames[s.args[0][0]] for s in steps}


def _assert_steps_differ(fig: go.Figure) -> None:
    named = list(_frames(fig).values())
    sigs = [tuple(_xy(t) for t in f.data) for f in named]
    assert len(set(sigs)) == len(sigs), "two slider steps show the same data"
    assert tuple(_xy(t) for t in fig.data) == sigs[fig.layout.sliders[0].active]


# ---------------------------------------------------------------------------
# Softmax parking
# ---------------------------------------------------------------------------


def test_softmax_parking_frames_equal_analysis():
    fig = V.fig_softmax_parking(0.0, 3.0)
    _assert_steps_differ(fig)
    for label, frame in _frames(fig).items():
        ex = S.softmax_parking(float(label), 3.0)
        np.testing.assert_allclose(np.asarray(frame.data[0].y, dtype=float), ex.weights, atol=5e-4)
        np.testing.assert_allclose(np.asarray(frame.data[1].y, dtype=float), ex.weights_evicted, atol=5e-4)
    assert list(fig.data[0].x)[0] == "‹s›"  # not "<s>", which plotly would draw as strike-through
    go.Figure(json.loads(fig.to_json()))


def test_softmax_parking_single_figure():
    fig = V.fig_softmax_parking(2.0, 1.0, relevances=None)
    assert not fig.frames and len(fig.data) == 2 and "relevance 2" in fig.layout.title.text


# ---------------------------------------------------------------------------
# Cache diagram
# ---------------------------------------------------------------------------


def _row_traces(frame_data, scheme_index: int):
    """(in-range, out-of-range, evicted, summary) traces of one scheme's row."""
    return frame_data[4 * scheme_index : 4 * scheme_index + 4]


def _shown(trace) -> tuple[list[int], list[str]]:
    """The x and labels of a row's points that are drawn in the plot (spare points sit left of it, unlabelled)."""
    kept = [(int(x), t) for x, t in zip(trace.x, trace.text) if x >= 0]
    assert all(not t.strip() for x, t in zip(trace.x, trace.text) if x < 0), "a parked point carries no label"
    return [x for x, _ in kept], [t for _, t in kept]


@pytest.mark.parametrize("vary", ["t", "n_sink", "window"])
def test_cache_diagram_frames_show_each_schemes_contents(vary):
    fig = V.fig_cache_diagram(t=20, n_sink=4, window=8, vary=vary)
    _assert_steps_differ(fig)
    for label, frame in _frames(fig).items():
        kw = {"t": 20, "n_sink": 4, "window": 8, vary: int(label)}
        rep = S.cache_report(kw["t"], kw["n_sink"], kw["window"])
        for k, view in enumerate(rep.views):
            inside, outside, evicted, summary = _row_traces(frame.data, k)
            (xi, ti), (xo, to) = _shown(inside), _shown(outside)
            assert sorted(xi + xo) == sorted(view.kept), f"{vary}={label}: {view.scheme} holds the wrong tokens"
            labels = dict(zip(xi + xo, [int(s) for s in ti + to]))
            assert labels == dict(zip(view.kept, view.given)), "each token is labelled with its given position"
            assert sorted(int(x) for x in evicted.x if x >= 0) == list(view.evicted)
            assert ("in range" in summary.text[0]) == rep.in_range(view)
        query = frame.data[-1]
        assert set(np.asarray(query.x, dtype=float)) == {kw["t"] - 1.0}
    # each legend entry rides on a trace with points in it (plotly leaves an empty trace out of the legend)
    for label, frame in _frames(fig).items():
        shown = {tr.name.split(",")[0] + ("" if "beyond" not in tr.name else " beyond") for tr in frame.data
                 if tr.showlegend is not False and len(tr.x)}
        assert shown == {"kept", "kept beyond", "evicted", "the query (newest token)"}, f"{vary}={label}: legend {shown}"
    # the same names in every frame (a legend that changes size has plotly lay out the figure again)
    assert len({tuple(tr.name for tr in frame.data) for frame in fig.frames}) == 1
    # every frame draws each trace with as many points (a slider step then only moves them)
    counts = {tuple(len(tr.x) for tr in frame.data) for frame in fig.frames}
    assert len(counts) == 1, f"traces change their number of points between frames: {counts}"


def test_cache_diagram_colours_out_of_range_keys():
    fig = V.fig_cache_diagram(t=32, n_sink=4, window=8, steps=None)
    rows = {sch: _row_traces(fig.data, k) for k, sch in enumerate(S.SCHEMES)}
    assert len(rows["sink_slot"][1].x) == 0  # slot positions: nothing out of range
    assert len(rows["sink_text"][1].x) == 4  # text positions: the four sinks are 31 tokens back
    assert sorted(rows["sink_text"][1].x) == [0, 1, 2, 3]


def test_cache_diagram_bad_input():
    with pytest.raises(ValueError, match="vary must be"):
        V.fig_cache_diagram(vary="L")
    with pytest.raises(ValueError, match="t must be >= 1"):
        V.fig_cache_diagram(t=0, steps=None)


# ---------------------------------------------------------------------------
# Live forms
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["live_softmax_parking", "live_cache_diagram"])
def test_live_figures_redraw_when_a_control_changes(live, displayed, name):
    import ipywidgets as widgets

    w = getattr(V, name)()
    controls = w.children[0].children
    first = [o[0] for o, kw in displayed if kw.get("raw")][-1][PLOTLY_MIME]["data"]
    for ctrl in controls:
        ctrl.value = ctrl.max
        last = [o[0] for o, kw in displayed if kw.get("raw")][-1][PLOTLY_MIME]["data"]
        assert json.dumps(first, sort_keys=True, default=str) != json.dumps(last, sort_keys=True, default=str), (
            f"{name}: moving {ctrl.description} changed nothing")
        first = last
    assert isinstance(w, widgets.VBox)
