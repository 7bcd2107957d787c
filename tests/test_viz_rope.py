"""Tests for mlbook.viz.rope: each figure builds with the right traces, draws the library's numbers
(checked against float64 oracles), its static slider steps show different data, the live form
redraws, and bad input is refused with a message.
"""

from __future__ import annotations

import math
import re

import numpy as np
import plotly.graph_objects as go
import pytest
import torch

from mlbook.analysis import rope as R
from mlbook.viz import core
from mlbook.viz import rope as V


def _arrays(trace) -> dict[str, np.ndarray]:
    d = trace.to_plotly_json() if hasattr(trace, "to_plotly_json") else dict(trace)
    out = {}
    for key in ("x", "y", "z"):
        if d.get(key) is not None:
            out[key] = np.asarray([np.nan if v is None else v for v in np.asarray(d[key], dtype=object).ravel()],
                                  dtype=float)
    return out


def _same(traces_a, traces_b) -> bool:
    for ta, tb in zip(traces_a, traces_b):
        a, b = _arrays(ta), _arrays(tb)
        if a.keys() != b.keys() or any(a[k].shape != b[k].shape or not np.array_equal(a[k], b[k], equal_nan=True)
                                       for k in a):
            return False
    return len(traces_a) == len(traces_b)


def _assert_slider(fig: go.Figure, labels: list[str] | None = None) -> list[go.Frame]:
    """One slider, steps naming existing frames, no two frames with the same data, opens on the active frame."""
    (slider,) = fig.layout.sliders
    frames = {f.name: f for f in fig.frames}
    steps = slider.steps
    assert len(frames) == len(steps) >= 2
    if labels is not None:
        assert [s.label for s in steps] == labels
    named = [frames[s.args[0][0]] for s in steps]
    for i in range(len(named)):
        for j in range(i + 1, len(named)):
            assert not _same(named[i].data, named[j].data), (
                f"steps {steps[i].label} and {steps[j].label} show the same data")
    assert _same(fig.data, named[slider.active].data)
    assert len({len(f.data) for f in named}) == 1
    return named


def _by_name(fig_or_frame, name: str):
    (trace,) = [t for t in fig_or_frame.data if t.name == name]
    return trace


def _title(frame: go.Frame) -> str:
    return frame.layout.title.text


# ---------------------------------------------------------------------------
# Rotation diagram
# ---------------------------------------------------------------------------


def _ccw(v, t):
    """Counter-clockwise rotation of a 2-vector by t radians (float64 oracle)."""
    return (v[0] * math.cos(t) - v[1] * math.sin(t), v[1] * math.cos(t) + v[0] * math.sin(t))


def test_rotation_shift_moves_both_arrows_and_keeps_angle_and_score():
    fig = V.fig_rotation_shift(m=0, n=1, c=3)
    frames = _assert_slider(fig, [str(c) for c in V.SHIFTS])
    assert fig.layout.sliders[0].active == V.SHIFTS.index(3)
    scores, angles = set(), set()
    for c, frame in zip(V.SHIFTS, frames):
        q = _by_name(frame, "q rotated to m")
        k = _by_name(frame, "k rotated to n")
        np.testing.assert_allclose([q.x[1], q.y[1]], _ccw(V.Q_PAIR, c * 1.0), atol=2e-3)  # theta_0 = 1 rad/token
        np.testing.assert_allclose([k.x[1], k.y[1]], _ccw(V.K_PAIR, (c + 1) * 1.0), atol=2e-3)
        marker = _by_name(frame, "this (m, n)")
        assert list(marker.x) == [1]
        text = _title(frame)
        assert f"m = {c}, k at n = {c + 1}" in text
        angles.add(re.search(r"angle from q to k ([+-][\d.]+)°", text).group(1))
        scores.add(re.search(r"pair score ([+-][\d.]+)", text).group(1))
    assert len(angles) == 1 and len(scores) == 1, "a common shift must not change the angle or the score"
    # the (0, 1) case is drawn dotted in every frame
    ref_q = _by_name(frames[0], "q at m = 0 (dotted)")
    np.testing.assert_allclose([ref_q.x[1], ref_q.y[1]], V.Q_PAIR, atol=1e-3)


def test_rotation_offset_turns_only_the_key_and_changes_the_score():
    fig = V.fig_rotation_offset(m=3, offset=1)
    frames = _assert_slider(fig, [str(o) for o in V.OFFSETS])
    q_tips = {(_by_name(f, "q rotated to m").x[1], _by_name(f, "q rotated to m").y[1]) for f in frames}
    assert len(q_tips) == 1
    scores = []
    for o, frame in zip(V.OFFSETS, frames):
        marker = _by_name(frame, "this (m, n)")
        assert list(marker.x) == [o]
        scores.append(marker.y[0])
        # the score is |q||k| cos(angle from q to k) with that angle = content angle + o * theta_0
        phi = math.atan2(V.K_PAIR[1], V.K_PAIR[0]) - math.atan2(V.Q_PAIR[1], V.Q_PAIR[0]) + o
        assert marker.y[0] == pytest.approx(math.hypot(*V.Q_PAIR) * math.hypot(*V.K_PAIR) * math.cos(phi), abs=2e-3)
    assert len(set(scores)) == len(scores)


def test_rotation_curve_is_the_score_of_every_offset():
    fig = V._rotation(4, 6, pair=2, d_head=16, base=30.0)
    curve = _by_name(fig, "pair score at each offset")
    theta = 30.0 ** (-4 / 16)
    phi = math.atan2(V.K_PAIR[1], V.K_PAIR[0]) - math.atan2(V.Q_PAIR[1], V.Q_PAIR[0])
    want = [math.hypot(*V.Q_PAIR) * math.hypot(*V.K_PAIR) * math.cos(phi + o * theta) for o in curve.x]
    np.testing.assert_allclose(curve.y, want, atol=2e-3)


def test_rotation_bad_input():
    with pytest.raises(ValueError, match=r"offsets \[-4\] put the key before position 0"):
        V.fig_rotation_offset(m=3, offsets=(-4, 0, 1))
    with pytest.raises(ValueError, match=r"pair must be in 0..7"):
        V._rotation(0, 1, pair=8, d_head=16)
    with pytest.raises(ValueError, match=r"m must be >= 0"):
        V._rotation(-1, 1)


# ---------------------------------------------------------------------------
# Frequency bands
# ---------------------------------------------------------------------------


def test_frequency_bands_draw_the_angles_and_slide_over_the_base():
    fig = V.fig_frequency_bands(d_head=64, T=64, base=10000.0)
    frames = _assert_slider(fig)
    labels = [s.label for s in fig.layout.sliders[0].steps]
    assert {"10,000", "500,000", "1,000,000"} <= set(labels)
    for base, frame in zip(V.BASES, frames):
        heat = [t for t in frame.data if t.type == "heatmap"][0]
        theta = base ** (-2.0 * np.arange(32) / 64)
        want = np.mod(np.outer(theta, np.arange(64)), 2 * np.pi)
        z = np.asarray(heat.z, dtype=float)
        assert z.shape == (32, 64)
        close = np.isclose(z, want, atol=0.006) | np.isclose(np.abs(z - want), 2 * np.pi, atol=0.006)  # wrap at 2 pi
        assert close.all()
        lines = [t for t in frame.data if t.type == "scatter"]
        assert [t.name.split(" (")[0] for t in lines] == [f"pair {i}" for i in V.BAND_PAIRS]
        np.testing.assert_allclose(lines[0].y, np.sin(np.arange(64) * theta[0]), atol=1e-3)


def test_band_pairs_spread_over_the_head():
    assert V.band_pairs(64) == V.BAND_PAIRS
    assert V.band_pairs(128) == (0, 16, 32, 48, 63)
    assert V.band_pairs(4) == (0, 1)


def test_frequency_bands_bad_pairs():
    with pytest.raises(ValueError, match=r"pairs \[40\] are out of range"):
        V.fig_frequency_bands(pairs=(0, 40), bases=None)


# ---------------------------------------------------------------------------
# Pairings and the porting bug
# ---------------------------------------------------------------------------


def _arc_ends(trace, d):
    """(dim a, dim b) joined by each arc of a None-separated arc trace."""
    xs = list(trace.x)
    arcs, cur = [], []
    for v in xs + [None]:
        if v is None:
            if cur:
                arcs.append((round(cur[0] * d - 0.5), round(cur[-1] * d - 0.5)))
            cur = []
        else:
            cur.append(v)
    return sorted(arcs)


@pytest.mark.parametrize("d", [4, 8, 12])
def test_pairings_join_the_right_dims(d):
    fig = V._pairings(d)
    half = _by_name(fig, "half: arc joins the two dims of a pair")
    inter = _by_name(fig, "interleaved: arc joins the two dims of a pair")
    assert _arc_ends(half, d) == [(i, i + d // 2) for i in range(d // 2)]
    assert _arc_ends(inter, d) == [(2 * i, 2 * i + 1) for i in range(d // 2)]
    markers = [t for t in fig.data if t.mode == "markers+text"]
    assert [list(t.marker.color) for t in markers] == [[j % (d // 2) for j in range(d)], [j // 2 for j in range(d)]]


def test_pairings_slider_over_d_head():
    _assert_slider(V.fig_pairings(d_head=8), [str(d) for d in V.PAIRING_D_HEADS])


def test_porting_bug_figure_draws_the_report():
    rep = R.porting_bug(d_model=32, n_heads=2, T=10)
    fig = V.fig_porting_bug(head=0, report=rep)
    frames = _assert_slider(fig, ["0", "1"])
    for h, frame in enumerate(frames):
        ref, conv, raw = frame.data
        np.testing.assert_allclose(ref.y, rep.curve_reference[h].numpy(), atol=1e-3)
        np.testing.assert_allclose(conv.y, ref.y, atol=1e-12)
        assert np.abs(np.asarray(raw.y) - np.asarray(ref.y)).max() > 0.01
        assert "Head" in _title(frame)
    with pytest.raises(ValueError, match=r"head must be in 0..1"):
        V._porting(2, rep)


# ---------------------------------------------------------------------------
# Decay and precision
# ---------------------------------------------------------------------------


def test_decay_figure_traces_and_base_slider():
    fig = V.fig_decay(d_head=16, base=10000.0, max_distance=2048, n_samples=32, bases=(100.0, 10000.0, 1e6))
    frames = _assert_slider(fig, ["100", "10,000", "1,000,000"])
    names = [t.name for t in frames[0].data]
    assert names[2:] == ["one random q", "mean over 32 random q", "expectation: mean over pairs of cos(|m − n| θ_i)"]
    for base, frame in zip((100.0, 10000.0, 1e6), frames):
        x = np.asarray(frame.data[4].x)
        assert x[0] == 1 and x[-1] == 2048
        want = np.cos(np.outer(x, base ** (-2.0 * np.arange(8) / 16))).mean(1)
        np.testing.assert_allclose(frame.data[4].y, want, atol=2e-3)
        low, high, mean = (np.asarray(frame.data[i].y) for i in (1, 0, 3))
        assert (low <= mean + 1e-3).all() and (mean <= high + 1e-3).all()


def test_decay_distances_dense_then_log():
    D = V.decay_distances(4096, 50)
    assert list(D[:65]) == list(range(65))
    assert D[-1] == 4096 and (np.diff(D) > 0).all()


def test_angle_error_figure():
    fig = V.fig_angle_error(pair=8, d_head=64, max_position=4096, pairs=(0, 8, 31))
    frames = _assert_slider(fig, ["0", "8", "31"])
    f32, bf_freq, bf_all = frames[1].data
    assert max(f32.y) < 1e-3
    assert max(bf_all.y) > 1.0
    for t in (f32, bf_freq, bf_all):
        assert (np.diff(np.asarray(t.y)) >= 0).all(), "the largest error up to m can only grow"
    # the last point is the largest error over every position, as analysis.rope.angle_error computes it
    positions = torch.arange(4097)
    want = R.angle_error(positions, 64, 10000.0, "bfloat16", pair=8).max().item()
    assert bf_all.y[-1] == pytest.approx(want, rel=1e-2)
    # pair 0 (theta = 1): float32 is exact, so the curve sits on the floor
    assert max(frames[0].data[0].y) == pytest.approx(1e-9)


# ---------------------------------------------------------------------------
# Live forms and the display path
# ---------------------------------------------------------------------------


@pytest.fixture
def displayed(monkeypatch):
    import IPython.display

    calls = []
    monkeypatch.setattr(IPython.display, "display", lambda *objs, **kw: calls.append((objs, kw)))
    return calls


@pytest.mark.parametrize(
    "make, knob, value, expect",
    [
        (lambda: V.live_rotation(), "m", 10, "q at m = 10"),
        (lambda: V.live_frequency_bands(), "base", 500000.0, "base = 500,000"),
        (lambda: V.live_pairings(), "d_head", 6, "d_head = 6"),
        (lambda: V.live_porting_bug(), "head", 2, "Head 2 of 4"),
        (lambda: V.live_decay(d_head=16), "base", 1000.0, "base = 1,000"),
        (lambda: V.live_angle_error(), "pair", 3, "pair 3"),
    ],
)
def test_live_forms_redraw_on_a_slider_change(monkeypatch, displayed, make, knob, value, expect):
    monkeypatch.delenv(core.STATIC_ENV, raising=False)
    widget = make()
    controls = {c.description.split(" ")[0]: c for c in widget.children[0].children}
    displayed.clear()
    controls[knob].value = value
    html = [objs[0]["text/html"] for objs, kw in displayed if kw.get("raw") and "text/html" in objs[0]]
    assert html and expect in html[-1]


@pytest.mark.parametrize(
    "build",
    [V.fig_rotation_shift, V.fig_rotation_offset, V.fig_frequency_bands, V.fig_pairings, V.fig_decay,
     V.fig_angle_error],
)
def test_static_figures_are_offline_and_small(monkeypatch, displayed, build):
    monkeypatch.setenv(core.STATIC_ENV, "1")
    core.show(build(), caption="c", alt="a", id="x")
    (bundle,) = [objs[0] for objs, kw in displayed if kw.get("raw")]
    html = bundle["text/html"]
    assert not re.search(r"https?://", html)
    assert len(html) < 400_000, f"{build.__name__} stores {len(html)} bytes"
