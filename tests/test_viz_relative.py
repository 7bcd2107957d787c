"""Tests for mlbook.viz.relative: bucket figure, T5 bias map, Swin bias (static and live forms).

Each figure is checked against the library numbers it claims to draw (bucket ids from
`relative_position_bucket`, bias maps from the seeded modules), each static slider for one
distinct frame per step, the direction buttons for surviving a slider move, each live form
for redrawing when a control changes, and each public function for rejecting bad input.
"""

from __future__ import annotations


import numpy as np
import pytest
import torch

from mlbook.transformer.positional import relative_position_bucket
from mlbook.viz import core
from mlbook.viz import relative as V

from figure_checks import (PLOTLY_MIME, _arrays, _assert_distinct_frames, _last_plot, _same,  # noqa: F401
                           _signature, _turn)


# ---------------------------------------------------------------------------
# Buckets
# ---------------------------------------------------------------------------


def test_fig_buckets_frames_are_the_library_buckets():
    fig = V.fig_buckets(num_buckets=32, max_distance=128, vary="num_buckets")
    _assert_distinct_frames(fig, len(V.NUM_BUCKETS))
    for frame in fig.frames:
        nb = int(frame.name)
        x = np.asarray(frame.data[0].x, dtype=int)
        for trace, bidirectional in zip(frame.data[:2], (True, False)):
            want = relative_position_bucket(torch.from_numpy(x), bidirectional, nb, 128).numpy()
            assert np.array_equal(np.asarray(trace.y, dtype=int), want)
        assert tuple(frame.layout.yaxis.range) == (-1, nb), "the y axis follows num_buckets"


def test_fig_buckets_max_distance_lines_move_with_the_slider():
    fig = V.fig_buckets(num_buckets=32, max_distance=128, vary="max_distance")
    _assert_distinct_frames(fig, len(V.MAX_DISTANCES))
    for frame in fig.frames:
        md = int(frame.name)
        assert sorted({frame.data[2].x[0], frame.data[3].x[0]}) == [-md, md]
    span = max(V.MAX_DISTANCES) * 1.25
    assert fig.layout.xaxis.range[1] >= span - 1


def test_fig_buckets_direction_buttons_change_visibility_and_survive_the_slider():
    fig = V.fig_buckets()
    (menu,) = fig.layout.updatemenus
    visible = [tuple(b.args[0]["visible"]) for b in menu.buttons]
    assert len(set(visible)) == 3 and all(len(v) == len(fig.data) for v in visible)
    assert [fig.data[0].visible, fig.data[1].visible] == [True, False]
    assert all(t.visible is None for f in fig.frames for t in f.data), "frames must not reset the buttons' choice"
    both = V.fig_buckets(show="both", grid=None)
    assert both.data[0].visible and both.data[1].visible and not both.frames


def test_fig_buckets_bidirectional_legend_names_the_quirks():
    name = V.fig_buckets(grid=None).data[0].name
    assert "91" in name and "16 unused" in name


@pytest.mark.parametrize("kwargs, pattern", [
    ({"vary": "heads"}, "vary"), ({"show": "future"}, "show"), ({"num_buckets": 2, "grid": None}, "num_buckets"),
    ({"max_distance": 4, "grid": None}, "max_distance"),
])
def test_fig_buckets_rejects_bad_input(kwargs, pattern):
    with pytest.raises(ValueError, match=pattern):
        V.fig_buckets(**kwargs)


# ---------------------------------------------------------------------------
# T5 bias map
# ---------------------------------------------------------------------------


def test_fig_t5_bias_map_frames_are_the_module_bias_per_head():
    fig = V.fig_t5_bias_map(T=24, n_heads=4)
    _assert_distinct_frames(fig, 4)
    bias = V.t5_bias(24, 4).double().numpy()
    for frame in fig.frames:
        z = np.asarray(frame.data[0].z, dtype=float)
        h = int(frame.name)
        assert z.shape == (24, 24) and np.abs(z - bias[h]).max() <= 0.005 + 1e-9
        for k in range(-23, 24):
            assert np.ptp(np.diagonal(z, offset=k)) == 0, "constant along every diagonal"


def test_t5_bias_is_seeded_and_leaves_global_rng_alone():
    torch.manual_seed(0)
    a = torch.rand(2)
    torch.manual_seed(0)
    b1 = V.t5_bias(10, 2, seed=3)
    assert torch.equal(torch.rand(2), a)
    assert torch.equal(b1, V.t5_bias(10, 2, seed=3)) and not torch.equal(b1, V.t5_bias(10, 2, seed=4))


def test_fig_t5_bias_map_rejects_bad_head():
    with pytest.raises(ValueError, match="head"):
        V.fig_t5_bias_map(head=8, n_heads=8, heads=None)


# ---------------------------------------------------------------------------
# Swin
# ---------------------------------------------------------------------------


def test_fig_swin_bias_frames_show_table_and_gathered_bias():
    fig = V.fig_swin_bias(window=7, head=1, n_heads=3)
    _assert_distinct_frames(fig, len(V.WINDOWS))
    for frame in fig.frames:
        w = int(frame.name)
        table, bias = V.swin_bias(w, 3)
        left = np.asarray(frame.data[0].z, dtype=float)
        right = np.asarray(frame.data[1].z, dtype=float)
        assert left.shape == (2 * w - 1, 2 * w - 1) and right.shape == (w * w, w * w)
        assert np.abs(left - table[:, 1].reshape(2 * w - 1, 2 * w - 1).double().numpy()).max() <= 5e-4 + 1e-9
        assert np.abs(right - bias[1].double().numpy()).max() <= 5e-4 + 1e-9
        # every gathered value is one of the table's
        assert set(np.round(right.ravel(), 3)) <= set(np.round(left.ravel(), 3))


def test_fig_swin_bias_rejects_bad_input():
    with pytest.raises(ValueError, match="head"):
        V.fig_swin_bias(head=4, n_heads=4, windows=None)
    with pytest.raises(ValueError, match="window"):
        V.fig_swin_bias(window=0, windows=None)


# ---------------------------------------------------------------------------
# Live forms
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("make", [lambda: V.live_buckets(), lambda: V.live_t5_bias_map(T=24),
                                  lambda: V.live_swin_bias(window=4)])
def test_live_forms_redraw_on_every_control(live, displayed, make):
    import ipywidgets as widgets

    w = make()
    assert isinstance(w, widgets.VBox)
    for ctrl in w.children[0].children:
        if not isinstance(ctrl, widgets.ToggleButtons):
            assert _turn(ctrl, displayed), f"moving {ctrl.description} never changed the figure"
            continue
        before = _signature(_last_plot(displayed))
        ctrl.value = not ctrl.value
        after = _last_plot(displayed)
        if len(after["data"]) > 1:  # buckets: the toggle picks which variant is visible
            assert [t.get("visible") for t in after["data"][:2]] == [ctrl.value, not ctrl.value]
        else:
            assert _signature(after) != before, f"changing {ctrl.description} did not change the figure"


def test_live_buckets_survives_settings_the_formula_rejects(live, displayed):
    w = V.live_buckets()
    nb, md, _ = w.children[0].children
    nb.value, md.value = 128, 8  # max_distance below the exact range: raised to one past it
    assert _last_plot(displayed)["data"][0]["y"] is not None


def test_live_bundles_are_json_serialisable(live, displayed):
    """A live kernel sends the figure through Jupyter's JSON encoder, which rejects NaN in arrays."""
    from jupyter_client.session import json_packer

    for fig in (V.fig_buckets(), V.fig_t5_bias_map(T=16), V.fig_swin_bias()):
        core.show(fig, caption="c", alt="a")
        json_packer(displayed[-1][0][0])
