"""Checks shared by the figure tests (tests/test_viz_*.py): that a static slider's frames are
distinct and match its steps, and that turning a live control redraws different data."""

from __future__ import annotations

import base64
import json

import numpy as np
import plotly.graph_objects as go

PLOTLY_MIME = "application/vnd.plotly.v1+json"


def decoded(v):
    """A plotly.js typed-array spec ({"dtype", "bdata", "shape"}, what a live kernel sends for a large
    float array) as the numpy array plotly.js decodes; anything else unchanged."""
    if isinstance(v, dict) and "bdata" in v:
        a = np.frombuffer(base64.b64decode(v["bdata"]), dtype=np.dtype(v["dtype"]).newbyteorder("<"))
        return a.reshape([int(n) for n in v["shape"].split(",")]) if "shape" in v else a
    return v


def _arrays(trace) -> dict[str, np.ndarray]:
    d = trace.to_plotly_json() if hasattr(trace, "to_plotly_json") else dict(trace)
    return {k: np.asarray(decoded(d[k]), dtype=float) for k in ("x", "y", "z") if d.get(k) is not None}


def _same(a, b) -> bool:
    if len(a) != len(b):
        return False
    for ta, tb in zip(a, b):
        x, y = _arrays(ta), _arrays(tb)
        if x.keys() != y.keys() or any(x[k].shape != y[k].shape or not np.array_equal(x[k], y[k], equal_nan=True) for k in x):
            return False
    return True


def _assert_distinct_frames(fig: go.Figure, n: int) -> None:
    steps = fig.layout.sliders[0].steps
    assert len(steps) == len(fig.frames) == n
    frames = {f.name: f for f in fig.frames}
    assert [s.args[0][0] for s in steps] == list(frames)
    named = list(frames.values())
    for i in range(n):
        for j in range(i + 1, n):
            assert not _same(named[i].data, named[j].data), f"frames {named[i].name} and {named[j].name} are identical"
    assert _same(fig.data, named[fig.layout.sliders[0].active].data)
    go.Figure(json.loads(fig.to_json()))  # serialisable and valid


def _last_plot(calls) -> dict:
    """The plotly JSON of the last figure shown (live mode adds plotly's mimetype to the bundle)."""
    return [objs[0][PLOTLY_MIME] for objs, kw in calls
            if kw.get("raw") and isinstance(objs[0], dict) and PLOTLY_MIME in objs[0]][-1]


def _signature(fig_json: dict) -> str:
    """The plotted data (x, y, z and the colour floor of every trace), exactly."""
    def plain(v):
        return np.asarray(v).tolist() if v is not None else None

    return json.dumps([[plain(t.get(k)) for k in ("x", "y", "z", "zmin")] for t in fig_json["data"]])


def _turn(ctrl, displayed) -> bool:
    """Move a slider to its neighbours and ends in turn; True once the plotted data changes."""
    before = _signature(_last_plot(displayed))
    start = ctrl.value
    for v in (start + ctrl.step, start - ctrl.step, ctrl.max, ctrl.min):
        if ctrl.min <= v <= ctrl.max and v != start:
            ctrl.value = v
            if _signature(_last_plot(displayed)) != before:
                return True
    return False
