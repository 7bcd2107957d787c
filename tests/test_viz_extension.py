"""Tests for mlbook.viz.extension: the figures of section 2.6 (context extension).

Each figure builds, carries the traces it claims, its static slider steps show different data
that equals the library's numbers at that step, the method picker's buttons really change which
traces are visible (and the slider frames leave visibility alone, so a choice survives a slider
move), live forms redraw when a control moves, and bad input fails with a message.
"""

from __future__ import annotations

import json
import math

import numpy as np
import plotly.graph_objects as go
import pytest

from mlbook.analysis import extension as E
from mlbook.viz import extension as X

from figure_checks import decoded

PLOTLY_MIME = "application/vnd.plotly.v1+json"


def _arrays(trace) -> dict[str, np.ndarray]:
    d = trace.to_plotly_json() if hasattr(trace, "to_plotly_json") else dict(trace)
    return {k: np.asarray(decoded(d[k]), dtype=float) for k in ("x", "y") if d.get(k) is not None and len(decoded(d[k]))}


def _same(traces_a, traces_b) -> bool:
    if len(traces_a) != len(traces_b):
        return False
    for a, b in zip(traces_a, traces_b):
        xa, xb = _arrays(a), _arrays(b)
        if xa.keys() != xb.keys() or any(xa[k].shape != xb[k].shape or not np.allclose(xa[k], xb[k]) for k in xa):
            return False
    return True


def _frames(fig: go.Figure) -> dict[str, go.Frame]:
    steps = fig.layout.sliders[0].steps
    frames = {f.name: f for f in fig.frames}
    assert len(frames) == len(steps) == len(fig.frames)
    return {s.label: frames[s.args[0][0]] for s in steps}


def _assert_steps_differ(fig: go.Figure) -> None:
    named = list(_frames(fig).values())
    for i in range(len(named)):
        for j in range(i + 1, len(named)):
            assert not _same(named[i].data, named[j].data), f"frames {named[i].name} and {named[j].name} are identical"
    active = fig.layout.sliders[0].active
    assert _same(fig.data, named[active].data), "the figure opens on the active step"


def _by_name(traces, name: str):
    return next(t for t in traces if t.name == name)


# ---------------------------------------------------------------------------
# fig_angle_coverage
# ---------------------------------------------------------------------------


def test_angle_coverage_frames_equal_library_angles():
    fig = X.fig_angle_coverage(128, 10000.0, 8192, 4.0)
    _assert_steps_differ(fig)
    theta = 10000.0 ** (-np.arange(64) / 64)
    for label, frame in _frames(fig).items():
        s = float(label)
        seen, needed = (np.asarray(t.y, dtype=float) for t in frame.data)
        np.testing.assert_allclose(seen, 8192 * theta, rtol=1e-5)
        np.testing.assert_allclose(needed, (round(s * 8192) - 1) * theta, rtol=1e-5)
    # the never-wrapped pairs are shaded: the band starts at pair 50
    assert fig.layout.shapes[0].x0 == pytest.approx(49.5)
    go.Figure(json.loads(fig.to_json()))


def test_angle_coverage_single_figure_and_bad_factor():
    fig = X.fig_angle_coverage(factor=3.0, factors=None)
    assert not fig.frames and len(fig.data) == 2
    with pytest.raises(ValueError, match="factor"):
        X.fig_angle_coverage(factor=0.5, factors=None)


# ---------------------------------------------------------------------------
# fig_context_scaling: slider over s and method picker
# ---------------------------------------------------------------------------


def test_context_scaling_traces_and_frames_match_library():
    fig = X.fig_context_scaling(128, 10000.0, 8192, 4.0)
    n = len(E.METHODS)
    assert len(fig.data) == 2 * n + 2  # ratio and wavelength per method, lines at L and L'
    _assert_steps_differ(fig)
    lam = 2 * math.pi / 10000.0 ** (-np.arange(64) / 64)
    k_dyn, k_ntk = E.METHODS.index("dynamic"), E.METHODS.index("ntk")
    for label, frame in _frames(fig).items():
        s = float(label)
        n = round(s * 8192)  # by default dynamic NTK is drawn at n = s L, the others' effective factor
        ratios = E.frequency_ratios(128, 10000.0, s, original_max_len=8192, seq_len=n)
        for k, m in enumerate(E.METHODS):
            np.testing.assert_allclose(np.asarray(frame.data[2 * k].y, dtype=float), ratios[m], rtol=1e-6)
            np.testing.assert_allclose(np.asarray(frame.data[2 * k + 1].y, dtype=float), lam / ratios[m], rtol=1e-5)
        # the default dynamic n equals s L, so (alpha = 1) dynamic coincides with static NTK in every frame
        assert frame.data[2 * k_dyn].name == "dynamic NTK at n = sL" and f"n = sL = {n:,}" in frame.layout.title.text
        np.testing.assert_allclose(np.asarray(frame.data[2 * k_dyn].y, dtype=float),
                                   np.asarray(frame.data[2 * k_ntk].y, dtype=float), rtol=1e-5)
        # PI is the flat line at 1/s; the L' reference line sits at s L
        np.testing.assert_allclose(np.asarray(frame.data[2].y, dtype=float), 1 / s, rtol=1e-6)
        assert np.asarray(frame.data[-1].y, dtype=float)[0] == pytest.approx(round(s * 8192))


def test_context_scaling_fixed_dynamic_length():
    # an explicit seq_len pins dynamic NTK to one sequence length n in every frame
    fig = X.fig_context_scaling(128, 10000.0, 8192, 4.0, seq_len=2 * 8192)
    k_dyn = E.METHODS.index("dynamic")
    for label, frame in _frames(fig).items():
        assert frame.data[2 * k_dyn].name == "dynamic NTK at n = 16,384"
        ratios = E.frequency_ratios(128, 10000.0, float(label), original_max_len=8192, seq_len=2 * 8192)
        np.testing.assert_allclose(np.asarray(frame.data[2 * k_dyn].y, dtype=float), ratios["dynamic"], rtol=1e-6)


def test_context_scaling_method_picker_changes_visibility():
    fig = X.fig_context_scaling()
    (menu,) = fig.layout.updatemenus
    buttons = menu.buttons
    assert [b.label for b in buttons] == [label for label, _ in X.METHOD_PICKS]
    visibles = [tuple(b.args[0]["visible"]) for b in buttons]
    assert len(set(visibles)) == len(visibles), "every button shows a different set of traces"
    assert all(b.method == "restyle" for b in buttons)
    for (label, chosen), vis in zip(X.METHOD_PICKS, visibles):
        assert len(vis) == len(fig.data)
        shown = {fig.data[i].legendgroup for i, v in enumerate(vis) if v and fig.data[i].legendgroup}
        assert shown == set(chosen), label
        assert all(vis[-2:]), "the L and L' reference lines stay visible"
    # frames never carry 'visible', so a picked set survives a move of the slider
    for frame in fig.frames:
        assert all(t.visible is None for t in frame.data)


def test_context_scaling_shades_yarn_bands():
    fig = X.fig_context_scaling(beta_fast=32.0, beta_slow=1.0)
    bands = E.yarn_bands(128, 10000.0, 8192, 32.0, 1.0)
    edges = sorted({(sh.x0, sh.x1) for sh in fig.layout.shapes})
    assert edges == [(-0.5, 25.5), (25.5, 49.5), (49.5, 63.5)]
    assert bands.keep[-1] == 25 and bands.interpolate[0] == 50
    assert len(fig.layout.shapes) == 6  # three bands, in both panels
    texts = {a.text for a in fig.layout.annotations}
    assert {"YaRN keeps θ_i", "YaRN blends", "YaRN: θ_i / s"} <= texts


def test_context_scaling_subset_and_bad_input():
    fig = X.fig_context_scaling(methods=("none", "linear"), factors=None, picker=False)
    assert len(fig.data) == 6 and not fig.layout.updatemenus
    with pytest.raises(ValueError, match="unknown method 'rope'"):
        X.fig_context_scaling(methods=("rope",))
    with pytest.raises(ValueError, match="methods is empty"):
        X.fig_context_scaling(methods=())
    with pytest.raises(ValueError, match="factor"):
        X.fig_context_scaling(factor=0.0, factors=None)


# ---------------------------------------------------------------------------
# fig_score_fit
# ---------------------------------------------------------------------------


def test_score_fit_frames_follow_the_ridge():
    fig = X.fig_score_fit(64, 10000.0, 512, 256, 4.0, ridges=(1e-8, 1e-4, 1e-1))
    _assert_steps_differ(fig)
    frames = _frames(fig)
    peaks = {}
    for label, frame in frames.items():
        fit = E.fit_attention_score(64, 10000.0, 512, 256, ridge=float(label), seed=0)
        ext = np.abs(fit.score(np.arange(4 * 512)))
        top = np.asarray(frame.data[0].y, dtype=float)
        assert top.max() == pytest.approx(ext.max(), rel=1e-9)  # the envelope keeps every peak
        np.testing.assert_allclose(np.asarray(frame.data[1].y, dtype=float), fit.targets)  # the targets
        peaks[float(label)] = ext[512:].max()
    assert peaks[1e-8] > peaks[1e-1], "less regularisation, wilder extrapolation"


def test_score_fit_bad_input():
    with pytest.raises(ValueError, match="n_points"):
        X.fig_score_fit(original_max_len=100, n_points=200, ridges=None)


# ---------------------------------------------------------------------------
# Live forms
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["live_angle_coverage", "live_context_scaling", "live_score_fit"])
def test_live_figures_redraw_when_a_control_changes(live, displayed, name):
    import ipywidgets as widgets

    kwargs = {"original_max_len": 512, "n_points": 128} if name == "live_score_fit" else {}
    w = getattr(X, name)(**kwargs)
    assert isinstance(w, widgets.VBox)
    controls = w.children[0].children
    bundles = [o[0] for o, kw in displayed if kw.get("raw")]
    first = bundles[-1][PLOTLY_MIME]["data"]
    ctrl = next(c for c in controls if isinstance(c, (widgets.FloatSlider, widgets.IntSlider)))
    ctrl.value = ctrl.max
    bundles = [o[0] for o, kw in displayed if kw.get("raw")]
    assert not _same(first, bundles[-1][PLOTLY_MIME]["data"]), f"{name}: moving {ctrl.description} changed nothing"


def test_live_context_scaling_has_every_knob(live, displayed):
    w = X.live_context_scaling()
    names = {c.description for c in w.children[0].children}
    assert {"s = L'/L", "base", "d_head", "L (trained)", "beta_fast", "beta_slow", "dynamic: n / L"} <= names
    # like with like by default: dynamic NTK starts at n / L = s
    sliders = {c.description: c.value for c in w.children[0].children}
    assert sliders["dynamic: n / L"] == sliders["s = L'/L"] == 4.0


def test_score_on_grid_matches_attention_score():
    """The live figure's fast grid evaluation is the same sum as attention_score, to rounding."""
    from mlbook.analysis.extension import fit_attention_score
    from mlbook.viz.extension import _score_on_grid

    fit = fit_attention_score(64, 10000.0, 512, 256, 1e-6, 1)
    for n, step in [(1, 1.0), (7, 1.0), (2048, 1.0), (2048, 0.25)]:
        exact = fit.score(np.arange(n) * step)
        assert np.allclose(_score_on_grid(fit, n, step), exact, rtol=0, atol=1e-9 * max(1.0, np.abs(exact).max()))
