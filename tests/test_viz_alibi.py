"""Tests for mlbook.viz.alibi: slopes, penalties with effective windows, bias maps (static and live).

Each figure is checked against the library numbers it claims to draw (`alibi_slopes`,
`alibi_bias`, `mlbook.analysis.alibi`), each static slider for one distinct frame per step,
each live form for redrawing when a control changes, and bad input for a clear error.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from mlbook.analysis.alibi import effective_window, naive_slopes
from mlbook.transformer.positional import alibi_bias, alibi_slopes
from mlbook.viz import alibi as V
from mlbook.viz import core

from figure_checks import (PLOTLY_MIME, _arrays, _assert_distinct_frames, _last_plot, _same,  # noqa: F401
                           _signature, _turn)


def test_fig_alibi_slopes_frames_are_the_library_slopes():
    fig = V.fig_alibi_slopes(n_heads=8)
    _assert_distinct_frames(fig, len(V.HEAD_COUNTS))
    for frame in fig.frames:
        H = int(frame.name)
        n = 2 ** int(math.log2(H))
        power, extra, naive = frame.data
        assert np.allclose(np.asarray(power.y, dtype=float), alibi_slopes(H)[:n].numpy())
        assert np.array_equal(np.asarray(power.x, dtype=int), np.arange(n))
        assert np.allclose(np.asarray(extra.y, dtype=float), alibi_slopes(H)[n:].numpy()) if H > n else len(extra.y) == 0
        assert np.allclose(np.asarray(naive.y, dtype=float), naive_slopes(H).numpy())


def test_fig_alibi_slopes_title_says_whether_h_is_a_power_of_two():
    assert "power of two" in V.fig_alibi_slopes(8, head_counts=None).layout.title.text
    assert "recipe" in V.fig_alibi_slopes(12, head_counts=None).layout.title.text


def test_fig_alibi_penalty_lines_and_windows():
    fig = V.fig_alibi_penalty(n_heads=8, nats=3.0)
    _assert_distinct_frames(fig, len(V.NATS))
    m = alibi_slopes(8).double().numpy()
    for frame in fig.frames:
        nats = float(frame.name)
        for h in range(8):
            x = np.asarray(frame.data[h].x, dtype=float)
            assert np.allclose(np.asarray(frame.data[h].y, dtype=float), np.round(m[h] * x, 4))
        marks = frame.data[8]
        assert np.array_equal(np.asarray(marks.x, dtype=int), effective_window(8, nats).numpy())
        assert np.allclose(np.asarray(frame.data[9].y, dtype=float), nats)


def test_fig_alibi_bias_map_frames_are_the_library_bias_with_future_blank():
    fig = V.fig_alibi_bias_map(n_heads=8, T=16)
    _assert_distinct_frames(fig, 8)
    bias = alibi_bias(8, 16, 16)[0].double().numpy()
    future = np.triu(np.ones((16, 16), dtype=bool), 1)
    for frame in fig.frames:
        h = int(frame.name)
        z = np.asarray(frame.data[0].z, dtype=float)
        assert np.isnan(z[future]).all() and not np.isnan(z[~future]).any()
        assert np.allclose(z[~future], np.round(bias[h][~future], 3))
        assert frame.data[0].zmin == -8.0 and frame.data[0].zmax == 0.0


@pytest.mark.parametrize("call, pattern", [
    (lambda: V.fig_alibi_bias_map(head=8, n_heads=8, heads=None), "head"),
    (lambda: V.fig_alibi_penalty(nats=0.0, nats_grid=None), "nats"),
    (lambda: V.fig_alibi_slopes(0, head_counts=None), "n_heads"),
    (lambda: V._penalty(12, 3.0, max_heads=8), "max_heads"),
])
def test_alibi_figures_reject_bad_input(call, pattern):
    with pytest.raises(ValueError, match=pattern):
        call()


@pytest.mark.parametrize("make", [lambda: V.live_alibi_slopes(), lambda: V.live_alibi_penalty(),
                                  lambda: V.live_alibi_bias_map(T=16)])
def test_live_forms_redraw_on_every_control(live, displayed, make):
    import ipywidgets as widgets

    w = make()
    assert isinstance(w, widgets.VBox)
    for ctrl in w.children[0].children:
        assert _turn(ctrl, displayed), f"moving {ctrl.description} never changed the figure"


def test_live_bundles_are_json_serialisable(live, displayed):
    """A live kernel sends the figure through Jupyter's JSON encoder, which rejects NaN in arrays."""
    from jupyter_client.session import json_packer

    for fig in (V.fig_alibi_slopes(), V.fig_alibi_penalty(), V.fig_alibi_bias_map(T=16)):
        core.show(fig, caption="c", alt="a")
        json_packer(displayed[-1][0][0])
