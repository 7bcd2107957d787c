"""Tests for mlbook.viz.core: `show`, `compact`, `grid_slider`, `live_sliders`, `show_live`,
`show_knob` and `live_figure` (a live figure declared by its knobs).

Fast and offline: no browser, no network, no IPython kernel. `IPython.display.display` is
replaced by a recorder, so each test sees exactly the MIME bundles a notebook would get.
Expected numbers come from oracles (numpy's own significant-digit formatting), not from
typed-in values.
"""

from __future__ import annotations

import copy
import json
import math
import re

import numpy as np
import plotly.graph_objects as go
import pytest

import mlbook.viz.absolute as A  # a real figure with a slider, as sample input
from mlbook.viz import core

PLOTLY_MIME = "application/vnd.plotly.v1+json"
URL = re.compile(r"https?://", re.IGNORECASE)



# ---------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------


@pytest.fixture
def displayed(monkeypatch):
    """Record everything passed to IPython.display.display (imported lazily by mlbook.viz.core)."""
    import IPython.display

    calls: list[tuple[tuple, dict]] = []
    monkeypatch.setattr(IPython.display, "display", lambda *objs, **kw: calls.append((objs, kw)))
    return calls


@pytest.fixture
def static(monkeypatch):
    monkeypatch.setenv(core.STATIC_ENV, "1")


@pytest.fixture
def live(monkeypatch):
    monkeypatch.delenv(core.STATIC_ENV, raising=False)


def _bundles(calls):
    """The raw MIME bundles among recorded display calls."""
    return [objs[0] for objs, kw in calls if kw.get("raw") and isinstance(objs[0], dict)]


def _embedded_figure(html_text: str) -> dict:
    """The figure JSON that figure_html inlines in its <script> (`var fig={...};function draw`)."""
    m = re.search(r"var fig=(\{.*?\});function draw\(", html_text, re.DOTALL)
    assert m, "no inlined figure JSON found in the HTML"
    return json.loads(m.group(1))


def _numeric_arrays(trace) -> dict[str, np.ndarray]:
    """x, y, z, customdata of a trace as float arrays (the data a slider frame swaps)."""
    d = trace.to_plotly_json() if hasattr(trace, "to_plotly_json") else dict(trace)
    out = {}
    for key in ("x", "y", "z", "customdata"):
        if d.get(key) is not None:
            out[key] = np.asarray(d[key], dtype=float)
    return out


def _same_data(traces_a, traces_b) -> bool:
    if len(traces_a) != len(traces_b):
        return False
    for ta, tb in zip(traces_a, traces_b):
        a, b = _numeric_arrays(ta), _numeric_arrays(tb)
        if a.keys() != b.keys():
            return False
        for k in a:
            if a[k].shape != b[k].shape or not np.array_equal(a[k], b[k], equal_nan=True):
                return False
    return True


def _sig_oracle(x: float, digits: int) -> float:
    """numpy's own significant-digit rounding (Dragon4 on the exact binary value)."""
    if x == 0 or not math.isfinite(x):
        return x
    return float(np.format_float_positional(x, precision=digits, unique=False, fractional=False, trim="k"))


def _line_build(scale: float, n: int = 5) -> go.Figure:
    """A tiny knob figure: one line y = scale * x, with fixed axis ranges."""
    x = np.arange(n)
    fig = go.Figure(go.Scatter(x=x, y=scale * x.astype(float), mode="lines"))
    fig.update_layout(title=f"scale {scale}", yaxis_range=[0, 100])
    return fig


def _assert_slider_steps_show_distinct_data(fig: go.Figure, n_values: int | None = None) -> None:
    """One step per value, each naming an existing frame, and no two frames with the same data."""
    assert len(fig.layout.sliders) == 1
    steps = fig.layout.sliders[0].steps
    if n_values is not None:
        assert len(steps) == n_values
    frames = {f.name: f for f in fig.frames}
    assert len(frames) == len(fig.frames) == len(steps), "frame names must be unique, one per step"
    for step in steps:
        assert step.method == "animate"
        (target,) = step.args[0]
        assert target in frames, f"step {step.label!r} points to a missing frame {target!r}"
    named = [frames[s.args[0][0]] for s in steps]
    for i in range(len(named)):
        for j in range(i + 1, len(named)):
            assert not _same_data(named[i].data, named[j].data), (
                f"slider steps {steps[i].label!r} and {steps[j].label!r} show identical data"
            )
    # The figure first shows the frame of the active step.
    active = fig.layout.sliders[0].active
    assert _same_data(fig.data, named[active].data)


# ---------------------------------------------------------------------------
# core.show
# ---------------------------------------------------------------------------

CAPTION = "Angles grow as $\\omega_i t$ for t < T & more"
ALT = 'Heatmap of "PE" values <rows: positions>'


def test_show_static_emits_self_contained_html_figure(static, displayed):
    fig = A.fig_sinusoidal_heatmap(bases=(100.0, 10000.0))
    core.show(fig, caption=CAPTION, alt=ALT, id="pe-heatmap")
    (bundle,) = _bundles(displayed)
    assert set(bundle) == {"text/html", "text/plain"}, "static build must not emit plotly's mimetype"
    h = bundle["text/html"]
    assert h.startswith('<figure class="mlbook-figure"') and "</figure>" in h
    # caption escaped, with $...$ turned into MathJax inline maths
    assert "<figcaption" in h and "Angles grow as \\(\\omega_i t\\) for t &lt; T &amp; more" in h
    assert 'aria-label="Heatmap of &quot;PE&quot; values &lt;rows: positions&gt;"' in h
    assert '<div id="pe-heatmap"' in h and "getElementById('pe-heatmap')" in h
    assert re.search(r"\.newPlot\(el,", h) and "draw(window.Plotly)" in h
    assert not URL.search(h), "the static HTML must not refer to a network address"
    assert "Figure: " + CAPTION == bundle["text/plain"]
    # the inlined figure is the (rounded) figure, frames and slider included
    emb = _embedded_figure(h)
    assert len(emb["frames"]) == 2 and len(emb["layout"]["sliders"][0]["steps"]) == 2
    z = np.asarray(emb["data"][0]["z"], dtype=float)
    np.testing.assert_allclose(z, np.asarray(fig.data[0].z, dtype=float), atol=1e-12)


def test_show_live_adds_plotly_mimetype_and_cdn_fallback(live, displayed):
    fig = _line_build(1.23456789)
    core.show(fig, caption="A line.", alt="A straight line.")
    (bundle,) = _bundles(displayed)
    assert {"text/html", "text/plain", PLOTLY_MIME} <= set(bundle)
    plot = bundle[PLOTLY_MIME]
    assert plot["config"]["displaylogo"] is False
    # digits=4 by default: the mimetype carries the same rounded data as the HTML
    y = np.asarray(plot["data"][0]["y"], dtype=float)
    np.testing.assert_array_equal(y, [_sig_oracle(v, 4) for v in 1.23456789 * np.arange(5)])
    np.testing.assert_array_equal(np.asarray(_embedded_figure(bundle["text/html"])["data"][0]["y"]), y)
    # live HTML (Colab) falls back to plotly's CDN; only the static form must be offline
    assert "cdn.plot.ly" in bundle["text/html"]


def test_show_live_mimetype_is_strict_json_with_gaps_as_null(live, displayed):
    # a line with a gap (NaN) must reach the kernel as strict JSON: numpy arrays as lists, NaN as null
    fig = go.Figure(go.Scatter(x=np.arange(3), y=np.array([1.0, np.nan, 2.0])))
    core.show(fig, caption="A line with a gap.", alt="Two points with a gap between them.")
    (bundle,) = _bundles(displayed)
    text = json.dumps(bundle[PLOTLY_MIME], allow_nan=False)  # raises on NaN or on a numpy array
    assert json.loads(text)["data"][0]["y"] == [1.0, None, 2.0]


def _large_heatmap() -> tuple[go.Figure, np.ndarray]:
    z = np.sin(np.arange(80 * 64, dtype=np.float64).reshape(80, 64) / 7.0)  # 5120 numbers: over TYPED_ARRAY_MIN
    z[np.triu_indices(80, 1, 64)] = np.nan  # blank cells, as in a causal bias map
    return go.Figure(go.Heatmap(z=z)), z


def test_show_live_sends_a_large_float_array_as_a_typed_array(live, displayed):
    # a live redraw sends plotly.js's base64 float32 spec (no decimal text to write twice); the HTML
    # and the mimetype carry the same spec, decoded it is the array in float32, NaN cells kept
    from figure_checks import decoded

    fig, z = _large_heatmap()
    assert z.size >= core.TYPED_ARRAY_MIN
    core.show(fig, caption="A heatmap.", alt="A heatmap with a blank upper triangle.")
    (bundle,) = _bundles(displayed)
    spec = bundle[PLOTLY_MIME]["data"][0]["z"]
    assert spec.keys() == {"dtype", "bdata", "shape"} and spec["dtype"] == "f4" and spec["shape"] == "80,64"
    assert _embedded_figure(bundle["text/html"])["data"][0]["z"] == spec
    np.testing.assert_array_equal(decoded(spec), z.astype(np.float32))
    json.dumps(bundle[PLOTLY_MIME], allow_nan=False)  # still strict JSON
    # a small array stays a list of rounded numbers
    core.show(go.Figure(go.Heatmap(z=z[:8, :8])), caption="A small heatmap.", alt="An 8 by 8 heatmap.")
    assert isinstance(_bundles(displayed)[-1][PLOTLY_MIME]["data"][0]["z"], list)


def test_show_static_keeps_large_arrays_as_rounded_text(static, displayed):
    # the static site's frames, theme switch and phone layout read numbers: no typed arrays there
    fig, z = _large_heatmap()
    core.show(fig, caption="A heatmap.", alt="A heatmap with a blank upper triangle.")
    (bundle,) = _bundles(displayed)
    emb = np.asarray(_embedded_figure(bundle["text/html"])["data"][0]["z"], dtype=float)
    np.testing.assert_allclose(emb, z, rtol=1e-3, equal_nan=True)


def test_show_digits_none_keeps_full_precision(live, displayed):
    core.show(_line_build(1.23456789), caption="c", alt="a", digits=None)
    (bundle,) = _bundles(displayed)
    np.testing.assert_array_equal(bundle[PLOTLY_MIME]["data"][0]["y"], 1.23456789 * np.arange(5))


def test_show_default_id_is_deterministic_and_content_dependent(static, displayed):
    for scale in (1.0, 1.0, 2.0):
        core.show(_line_build(scale), caption="c", alt="a")
    ids = [re.search(r'<div id="([^"]+)"', b["text/html"]).group(1) for b in _bundles(displayed)]
    assert ids[0] == ids[1] != ids[2]
    assert all(re.fullmatch(r"[A-Za-z][A-Za-z0-9_-]*", i) for i in ids)


@pytest.mark.parametrize(
    "kwargs, exc, pattern",
    [
        ({"fig": {"data": []}}, TypeError, r"show\(\) expects a plotly\.graph_objects\.Figure, got dict"),
        ({"caption": ""}, ValueError, r"caption"),
        ({"caption": "   "}, ValueError, r"caption"),
        ({"alt": ""}, ValueError, r"alt text"),
        ({"id": "1starts-with-digit"}, ValueError, r"id='1starts-with-digit'"),
        ({"id": "has space"}, ValueError, r"id='has space'"),
    ],
)
def test_show_rejects_bad_input_naming_the_argument(static, displayed, kwargs, exc, pattern):
    args = {"fig": _line_build(1.0), "caption": "c", "alt": "a", **kwargs}
    with pytest.raises(exc, match=pattern):
        core.show(args.pop("fig"), **args)
    assert not displayed, "nothing may be displayed for rejected input"


# ---------------------------------------------------------------------------
# core.compact
# ---------------------------------------------------------------------------


def _messy_figure() -> go.Figure:
    rng = np.random.default_rng(0)
    z = (rng.standard_normal((7, 5)) * 10.0 ** rng.integers(-5, 5, (7, 5))).astype(np.float32)
    z[0, 0], z[0, 1] = 0.0, np.nan
    y = (rng.standard_normal(11) * 1234.5).tolist()  # a python list of floats
    fig = go.Figure()
    fig.add_heatmap(z=z, x=list(range(5)), y=list(range(7)))
    fig.add_scatter(x=np.arange(11), y=y, marker=dict(size=[3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13]))
    fig.update_layout(xaxis_range=[-0.123456789, 4.987654321])
    return fig


@pytest.mark.parametrize("digits", [2, 4])
def test_compact_rounds_to_significant_digits_and_keeps_shapes(digits):
    fig = _messy_figure()
    before = copy.deepcopy(fig.to_plotly_json())
    out = core.compact(fig, digits)

    z_in, z_out = np.asarray(fig.data[0].z, dtype=np.float64), np.asarray(out.data[0].z, dtype=np.float64)
    assert z_out.shape == z_in.shape
    want = np.vectorize(lambda v: _sig_oracle(float(v), digits))(z_in)
    np.testing.assert_allclose(z_out, want, rtol=1e-12, equal_nan=True)
    assert z_out[0, 0] == 0.0 and np.isnan(z_out[0, 1])
    assert not np.allclose(z_out, z_in, equal_nan=True), "the data were not rounded at all"

    y_in, y_out = np.asarray(fig.data[1].y, dtype=float), np.asarray(out.data[1].y, dtype=float)
    assert y_out.shape == y_in.shape
    np.testing.assert_allclose(y_out, [_sig_oracle(v, digits) for v in y_in], rtol=1e-12)
    np.testing.assert_allclose(out.layout.xaxis.range, [_sig_oracle(v, digits) for v in fig.layout.xaxis.range],
                               rtol=1e-12)
    # integers are left alone
    assert list(out.data[1].marker.size) == list(fig.data[1].marker.size)
    np.testing.assert_array_equal(out.data[1].x, fig.data[1].x)

    # documented as "a copy of fig": the input is untouched
    after = fig.to_plotly_json()
    np.testing.assert_array_equal(after["data"][0]["z"], before["data"][0]["z"])
    assert after["data"][1]["y"] == before["data"][1]["y"]
    assert after["layout"]["xaxis"]["range"] == before["layout"]["xaxis"]["range"]
    assert out is not fig


def test_compact_rejects_non_figure():
    with pytest.raises(TypeError, match=r"compact\(\) expects a plotly\.graph_objects\.Figure, got dict"):
        core.compact({"data": []})


# ---------------------------------------------------------------------------
# core.grid_slider
# ---------------------------------------------------------------------------


def test_grid_slider_one_step_per_value_with_distinct_frames():
    values = [0.5, 1.0, 2.0, 4.0]
    fig = core.grid_slider(_line_build, "scale", values, active=2, label="scale s", fixed={"n": 6})
    _assert_slider_steps_show_distinct_data(fig, len(values))
    slider = fig.layout.sliders[0]
    assert slider.active == 2 and slider.currentvalue.prefix == "scale s = "
    # each frame is exactly build(value): the slider shows the right figure for its label
    for step, v in zip(slider.steps, values):
        frame = next(f for f in fig.frames if f.name == step.args[0][0])
        assert _same_data(frame.data, _line_build(v, n=6).data)
        assert step.label == f"{v:g}"


@pytest.mark.parametrize(
    "kwargs, exc, pattern",
    [
        ({"values": []}, ValueError, r"values"),
        ({"active": 3}, ValueError, r"active=3"),
        ({"active": -1}, ValueError, r"active=-1"),
        ({"build": lambda scale: {"data": []}}, TypeError, r"build\(scale=1\.0\) returned dict"),
        ({"build": lambda scale: None if scale > 1 else _line_build(scale)}, TypeError, r"build\(scale=2\.0\)"),
        ({"build": lambda scale: go.Figure([go.Scatter(y=[1])] * int(scale))}, ValueError, r"traces"),
    ],
)
def test_grid_slider_rejects_bad_input_naming_the_argument(kwargs, exc, pattern):
    args = {"build": _line_build, "name": "scale", "values": [1.0, 2.0, 3.0], **kwargs}
    with pytest.raises(exc, match=pattern):
        core.grid_slider(args.pop("build"), args.pop("name"), args.pop("values"), **args)


# ---------------------------------------------------------------------------
# core.live_sliders / show_live / show_knob
# ---------------------------------------------------------------------------


def test_live_sliders_one_control_per_knob_and_redraws_on_change(live, displayed):
    import ipywidgets as widgets

    calls = []

    def build(scale: float, n: int) -> go.Figure:
        calls.append((scale, n))
        return _line_build(scale, n)

    w = core.live_sliders(build, caption="c", alt="a", scale=[1.0, 2.0, 3.0], n=(2, 10, 1))
    assert isinstance(w, widgets.VBox)
    controls = w.children[0].children
    assert [c.description for c in controls] == ["scale", "n"]
    assert isinstance(controls[0], widgets.SelectionSlider) and isinstance(controls[1], widgets.IntSlider)
    assert len(calls) == 1, "one initial draw"

    n_shown = len(_bundles(displayed))
    controls[0].value = 3.0
    assert calls[-1] == (3.0, controls[1].value)
    controls[1].value = 4
    assert calls[-1] == (3.0, 4) and len(calls) == 3
    bundles = _bundles(displayed)
    assert len(bundles) == n_shown + 2, "each change redraws through show()"
    np.testing.assert_allclose(bundles[-1][PLOTLY_MIME]["data"][0]["y"], 3.0 * np.arange(4))


@pytest.mark.parametrize(
    "knobs, pattern",
    [({}, r"at least one knob"), ({"scale": []}, r"'scale'.*empty"), ({"scale": object()}, r"'scale'.*cannot make")],
)
def test_live_sliders_rejects_bad_knobs(live, displayed, knobs, pattern):
    with pytest.raises(ValueError, match=pattern):
        core.live_sliders(_line_build, caption="c", alt="a", **knobs)


def test_show_live_static_prints_note_and_builds_nothing(static, displayed):
    built = []
    assert core.show_live(lambda: built.append(1)) is None
    assert not built, "the widget factory must not run on the static build"
    (bundle,) = _bundles(displayed)
    assert bundle["text/plain"] == core.LIVE_NOTE and core.LIVE_NOTE in bundle["text/html"]


def test_show_live_live_displays_the_widget(live, displayed):
    import ipywidgets as widgets

    made = []

    def factory():
        made.append(widgets.IntSlider())
        return made[-1]

    assert core.show_live(factory) is None, "returning the widget would display it again as the cell's value"
    (w,) = made
    assert [objs[0] for objs, _ in displayed] == [w]
    # a widget passed directly is displayed as is
    displayed.clear()
    assert core.show_live(w) is None and [objs[0] for objs, _ in displayed] == [w]


def test_show_knob_static_gives_slider_at_default_and_note(static, displayed):
    knobs = {"scale": [1.0, 2.0, 3.0], "n": [4, 6]}
    core.show_knob(_line_build, knobs, caption="c", alt="a", defaults={"scale": 2.0, "n": 6})
    fig_bundle, note = _bundles(displayed)
    emb = _embedded_figure(fig_bundle["text/html"])
    assert emb["layout"]["sliders"][0]["active"] == 1
    np.testing.assert_allclose(emb["data"][0]["y"], 2.0 * np.arange(6))
    assert note["text/plain"] == core.LIVE_NOTE


def test_show_knob_live_widget_starts_at_defaults(live, displayed):
    import ipywidgets as widgets

    knobs = {"scale": [1.0, 2.0, 3.0], "n": [4, 6]}
    core.show_knob(_line_build, knobs, caption="c", alt="a", defaults={"scale": 3.0, "n": 6})
    (w,) = [objs[0] for objs, kw in displayed if not kw.get("raw")]
    assert isinstance(w, widgets.VBox)
    assert [c.value for c in w.children[0].children] == [3.0, 6]


# ---------------------------------------------------------------------------
# core.live_figure: a live figure declared by its knobs
# ---------------------------------------------------------------------------


@core.live_figure(
    core.int_knob("n", 4, 2, lambda top: top, label=lambda top: f"points (up to {top})"),
    core.log_knob("scale", 10.0, 0.0, 2.0, "scale"),
    core.choice_knob("style", "lines", ("lines", "markers")),
    core.toggle_knob("flip", False, (("up", False), ("down", True)), "direction"),
    caption="c", alt="a",
)
def live_line(n: int, scale: float, style: str, flip: bool, *, top: int = 10) -> go.Figure:
    """A line of n points."""
    fig = _line_build(-scale if flip else scale, n)
    fig.data[0].mode = style
    return fig


def test_live_figure_signature_doc_and_parts():
    import inspect

    sig = inspect.signature(live_line)
    assert list(sig.parameters) == ["n", "scale", "style", "flip", "top", "caption", "alt"]
    assert all(p.kind is p.KEYWORD_ONLY for p in sig.parameters.values())
    assert sig.parameters["scale"].default == 10.0 and sig.parameters["top"].default == 10
    assert live_line.__name__ == "live_line" and live_line.__module__ == __name__
    assert "A line of n points." in live_line.__doc__ and "scale: 1 .. 100, log scale; starts at 10.0" in live_line.__doc__
    assert [k.name for k in live_line.knobs] == ["n", "scale", "style", "flip"]
    assert live_line.build(n=3, scale=2.0, style="lines", flip=False).data[0].y.tolist() == [0.0, 2.0, 4.0]


def test_live_figure_widgets_start_at_the_arguments_and_redraw(live, displayed):
    import ipywidgets as widgets

    w = live_line(n=5, scale=2.0, flip=True, top=6)
    n, scale, style, flip = w.children[0].children
    assert isinstance(n, widgets.IntSlider) and (n.value, n.min, n.max, n.description) == (5, 2, 6, "points (up to 6)")
    assert isinstance(scale, widgets.FloatLogSlider) and scale.value == pytest.approx(2.0)
    assert isinstance(style, widgets.SelectionSlider) and style.value == "lines"
    assert isinstance(flip, widgets.ToggleButtons) and flip.value is True
    np.testing.assert_allclose(_bundles(displayed)[-1][PLOTLY_MIME]["data"][0]["y"], -2.0 * np.arange(5))
    style.value = "markers"
    assert _bundles(displayed)[-1][PLOTLY_MIME]["data"][0]["mode"] == "markers"


@pytest.mark.parametrize(
    "kwargs, exc, pattern",
    [
        ({"n": 11}, ValueError, r"live_line: n=11 is outside the slider's range 2 \.\. 10; pick a value in it"),
        ({"n": 7, "top": 6}, ValueError, r"live_line: n=7 is outside the slider's range 2 \.\. 6"),
        ({"n": 2.5}, TypeError, r"live_line: n must be a whole number .* got 2\.5"),
        ({"scale": 1000.0}, ValueError, r"live_line: scale=1000\.0 is outside the slider's range 1 \.\. 100"),
        ({"scale": float("nan")}, ValueError, r"scale=nan is outside"),
        ({"scale": "big"}, TypeError, r"live_line: scale must be a number, got str"),
        ({"style": "bars"}, ValueError, r"live_line: style='bars' is not one of the slider's values \['lines', 'markers'\]"),
        ({"flip": "yes"}, ValueError, r"flip='yes' is not one of the slider's values \[False, True\]"),
    ],
)
def test_live_figure_refuses_starting_values_the_slider_does_not_allow(live, displayed, kwargs, exc, pattern):
    with pytest.raises(exc, match=pattern):
        live_line(**kwargs)


def test_live_figure_rejects_a_bad_declaration():
    with pytest.raises(TypeError, match=r"the knobs \['m'\] are not parameters of the build function"):
        core.live_figure(core.int_knob("m", 1, 0, 3), caption="c", alt="a")(lambda n: None)
    with pytest.raises(ValueError, match=r"knob names repeat"):
        core.live_figure(core.int_knob("n", 1, 0, 3), core.int_knob("n", 1, 0, 3), caption="c", alt="a")
    with pytest.raises(ValueError, match=r"kind must be one of"):
        core.Knob("n", "dial", 1)


def test_every_section_live_figure_is_declared_with_live_figure():
    """Every section's live figures are declared through `live_figure`: each has `.knobs` and `.build`."""
    import importlib

    for name in ("absolute", "after_rope", "alibi", "extension", "learned", "production", "relative", "rope", "sinks",
                 "systems"):
        module = importlib.import_module(f"mlbook.viz.{name}")
        lives = [getattr(module, n) for n in module.__all__ if n.startswith("live_")]
        assert lives, name
        for fn in lives:
            assert fn.knobs and callable(fn.build), f"{name}.{fn.__name__} is not declared with live_figure"



def test_compact_rounds_rows_with_gaps_and_keeps_the_gaps() -> None:
    from mlbook.viz.core import _compact_obj

    rows = [[1.23456789, None, -0.000123456], [None, None], [2.0, 3.14159]]
    out = _compact_obj(rows, 3)
    assert out[0] == [1.23, None, -0.000123] and out[1] == [None, None]
    assert np.asarray(out[2]).tolist() == [2.0, 3.14]


def test_one_torch_thread_restores_the_thread_count():
    """Live redraws build on one torch thread (small tensors; a busy CPU parks worker threads) and leave
    the kernel's own setting as it was, also when the build raises."""
    import torch

    from mlbook.viz.core import one_torch_thread

    before = torch.get_num_threads()
    with one_torch_thread():
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
    with pytest.raises(RuntimeError), one_torch_thread():
        raise RuntimeError("a build that fails")
    assert torch.get_num_threads() == before


def test_gaps_in_float_arrays_are_written_as_null():
    """NaN and inf in a trace array reach the JSON as null (plotly.js draws a gap), without plotly's
    slow decode-and-re-encode pass."""
    from mlbook.viz.core import _figure_dict, _json_for_script

    fig = go.Figure(go.Heatmap(z=np.array([[0.123456, np.nan], [np.inf, -1.0]])))
    text = _json_for_script(_figure_dict(fig, 3))
    assert '"z":[[0.123,null],[null,-1.0]]' in text


def test_plotly_mimetype_is_the_decoded_json():
    """The live bundle's plotly mimetype, built from the figure directly, equals decoding the figure's JSON."""
    from mlbook.viz.core import _figure_dict, _json_for_script, _plain_json

    fig = go.Figure([go.Heatmap(z=np.array([[0.5, np.nan], [1.0, 2.0]]), x=np.arange(2)),
                     go.Scatter(x=[1, 2], y=[np.float64(0.25), None], name="a<b>")])
    d = _figure_dict(fig, 4)
    text = _json_for_script(d)
    assert _plain_json(d, text) == json.loads(text)


def test_label_on_log_axis_moves_the_last_label_to_log10_and_refuses_what_a_log_axis_cannot_show():
    fig = go.Figure(go.Scatter(x=[1, 1000], y=[1, 2]))
    fig.add_vline(x=64, annotation_text="L = 64")
    assert core.label_on_log_axis(fig, "x").layout.annotations[-1].x == pytest.approx(math.log10(64))
    assert fig.layout.shapes[-1].x0 == 64  # the line itself stays at its value
    with pytest.raises(ValueError, match="axis must be 'x' or 'y', got 'z'"):
        core.label_on_log_axis(fig, "z")
    with pytest.raises(ValueError, match="no annotation"):
        core.label_on_log_axis(go.Figure(), "x")
    fig.add_hline(y=0.0, annotation_text="zero")
    with pytest.raises(ValueError, match="cannot place a label at y = 0"):
        core.label_on_log_axis(fig, "y")


def _log_axis_figures():
    from mlbook.benchmarks import load_record
    from mlbook.experiments.registry import load_result
    from mlbook.viz import absolute, exp_sinks, systems

    return {
        "absolute.fig_permutation_equivariance": (absolute.fig_permutation_equivariance, "y"),
        "absolute.fig_wavelengths": (absolute.fig_wavelengths, "y"),
        "systems.fig_slider_benchmark": (lambda: systems.fig_slider_benchmark(load_record("live_sliders")), "x"),
        "exp_sinks.fig_stream_loss": (lambda: exp_sinks.fig_stream_loss(load_result("sinks", "full")), "x"),
    }


@pytest.mark.parametrize("name", list(_log_axis_figures()))
def test_a_line_label_on_a_log_axis_sits_at_its_line(name):
    # these four labelled a line on a log axis at 10**value: the stream-loss axis of the sinks
    # experiment ran to 1e101, the others' labels (goal, context length, tolerance) were off the plot
    build, axis = _log_axis_figures()[name]
    fig = build()
    assert getattr(fig.layout, f"{axis}axis").type == "log"
    (line,) = [s for s in fig.layout.shapes if s.type == "line" and s[f"{axis}ref"] == axis]
    (label,) = [a for a in fig.layout.annotations if a[f"{axis}ref"] == axis]
    assert getattr(label, axis) == pytest.approx(math.log10(getattr(line, f"{axis}0")))
