"""Tests for mlbook.viz.absolute: the figures of sections 1 (why position) and 2.1 (sinusoidal).

Each figure builds and serialises, every static slider's frames differ, the heatmap is the
library's own sinusoidal table, and every live figure redraws when a control moves.
"""

from __future__ import annotations

import json

import numpy as np
import plotly.graph_objects as go
import pytest

import mlbook.viz.absolute as A
from figure_checks import _arrays, _assert_distinct_frames, _last_plot, _same
from mlbook.transformer.positional import sinusoidal_positional_encoding


FIG_NAMES = sorted(n for n in A.__all__ if n.startswith("fig_"))
SLIDER_FIGS = {  # (figure function, keyword arguments) for every static slider form
    "heatmap/base": ("fig_sinusoidal_heatmap", {"vary": "base"}),
    "heatmap/d": ("fig_sinusoidal_heatmap", {"vary": "d"}),
    "similarity/base": ("fig_pe_similarity", {}),
    "rotation/k": ("fig_offset_rotation", {}),
    "wavelengths/base": ("fig_wavelengths", {"vary": "base"}),
    "wavelengths/d_head": ("fig_wavelengths", {"vary": "d_head"}),
}


@pytest.mark.parametrize("name", FIG_NAMES)
def test_every_fig_builds_a_serialisable_figure(name):
    fig = getattr(A, name)()
    assert isinstance(fig, go.Figure)
    assert fig.data and all(_arrays(t) for t in fig.data), "every trace carries data"
    assert fig.layout.title.text
    go.Figure(json.loads(fig.to_json()))  # round-trips through plotly's validators


def test_every_fig_with_a_grid_is_covered():
    """SLIDER_FIGS must list every public figure with a slider grid argument, so none goes untested."""
    import inspect

    grids = {"bases", "ds", "ks", "d_heads"}
    with_grid = {n for n in FIG_NAMES if grids & set(inspect.signature(getattr(A, n)).parameters)}
    assert with_grid and with_grid <= {fn for fn, _ in SLIDER_FIGS.values()}


@pytest.mark.parametrize("key", sorted(SLIDER_FIGS))
def test_static_slider_steps_show_different_data(key):
    fn, kwargs = SLIDER_FIGS[key]
    fig = getattr(A, fn)(**kwargs)
    _assert_distinct_frames(fig, len(fig.frames))


def test_knob_value_outside_grid_is_added_and_shown_first():
    fig = A.fig_offset_rotation(k=5, ks=(1, 2, 8))
    steps = fig.layout.sliders[0].steps
    assert [s.label for s in steps] == ["1", "2", "5", "8"]
    assert steps[fig.layout.sliders[0].active].label == "5"
    assert _same(fig.data, A.fig_offset_rotation(k=5, ks=None).data)


def test_heatmap_frames_equal_library_sinusoidal_table():
    T, d = 100, 64
    fig = A.fig_sinusoidal_heatmap(T=T, d=d, vary="base")
    assert len(fig.frames) == len(A.HEATMAP_BASES)
    for frame in fig.frames:
        base = float(frame.name)
        z = np.asarray(frame.data[0].z, dtype=float)
        pe = sinusoidal_positional_encoding(T, d, base).double().numpy()
        assert z.shape == pe.shape == (T, d)
        assert np.abs(z - pe).max() <= 0.005 + 1e-9, f"base={base:g}: heatmap differs from the library table"
        np.testing.assert_allclose(z * 100, np.round(z * 100), atol=1e-6)  # stored to 2 decimals
    # vary="d": one frame per width, each the library table at that width
    fig = A.fig_sinusoidal_heatmap(T=T, vary="d", base=500.0)
    for frame in fig.frames:
        width = int(frame.name)
        z = np.asarray(frame.data[0].z, dtype=float)
        pe = sinusoidal_positional_encoding(T, width, 500.0).double().numpy()
        assert z.shape == (T, width) and np.abs(z - pe).max() <= 0.005 + 1e-9


@pytest.mark.parametrize("name", sorted(n for n in A.__all__ if n.startswith("live_")))
def test_live_figures_redraw_when_a_control_changes(live, displayed, name):
    import ipywidgets as widgets

    w = getattr(A, name)()
    assert isinstance(w, widgets.VBox)
    controls = w.children[0].children
    first = _last_plot(displayed)["data"]
    ctrl = next(c for c in controls if isinstance(c, widgets.IntSlider))
    ctrl.value = ctrl.value + 2 * ctrl.step if ctrl.value + 2 * ctrl.step <= ctrl.max else ctrl.min
    redrawn = _last_plot(displayed)["data"]
    assert not _same(first, redrawn), f"{name}: changing {ctrl.description} did not change the figure"
