"""Tests for mlbook.viz.learned: the tail-row figure and the decoding-drift figure (static and live).

Built from a small real training run and a small model (seconds), checked against the
report's own counts and the drift curves they claim to draw; each static slider for one
distinct frame per step; each live form for redrawing; bad input for a clear error.
"""

from __future__ import annotations


import numpy as np
import pytest
import torch

from mlbook.analysis import learned as L
from mlbook.transformer.models import GPT, GPTConfig
from mlbook.viz import core
from mlbook.viz import learned as V

from figure_checks import (PLOTLY_MIME, _arrays, _assert_distinct_frames, _last_plot, _same,  # noqa: F401
                           _signature, _turn)


@pytest.fixture(scope="module")
def report() -> L.TailRowReport:
    return L.train_tail_rows(T_max=16, mean_len=4.0, steps=10, batch_size=4, d_model=16, n_layers=1, seed=0,
                             corpus_chars=4_000)


@pytest.fixture(scope="module")
def curves() -> dict[int, L.DriftCurves]:
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=31, d_model=16, n_heads=2, n_layers=1, max_len=32, positional="learned"))
    x = torch.randint(0, 31, (5, 14), generator=torch.Generator().manual_seed(0))
    return {n: L.drift_curves(model, x, n) for n in (1, 4)}


def test_snapshot_steps():
    assert V.snapshot_steps(120) == [8, 15, 30, 60, 120]
    assert V.snapshot_steps(1) == [1]
    assert V.snapshot_steps(10)[-1] == 10
    with pytest.raises(ValueError, match="total"):
        V.snapshot_steps(0)


def test_fig_tail_rows_frames_are_the_report_counts(report):
    fig = V.fig_tail_rows(report)
    steps = V.snapshot_steps(report.steps)
    _assert_distinct_frames(fig, len(steps))
    for frame in fig.frames:
        s = int(frame.name)
        bars, expected, seq_bars, seq_expected = frame.data
        assert np.array_equal(np.asarray(bars.y, dtype=int), report.updates(s).numpy())
        assert np.allclose(np.asarray(expected.y, dtype=float), np.round(report.expected_updates(s).numpy(), 1))
        ex = report.examples(s).numpy().astype(float)
        got = np.asarray(seq_bars.y, dtype=float)
        assert np.array_equal(np.isnan(got), ex == 0) and np.array_equal(got[ex > 0], ex[ex > 0])
        assert np.allclose(np.asarray(seq_expected.y, dtype=float), np.round(report.expected_examples(s).numpy(), 1))


def test_fig_tail_rows_single_and_bad_input(report):
    fig = V.fig_tail_rows(report, step=3, steps=None)
    assert not fig.frames and str(report.steps) in fig.layout.title.text
    with pytest.raises(ValueError, match="step"):
        V.fig_tail_rows(report, step=report.steps + 1, steps=None)
    with pytest.raises(TypeError, match="TailRowReport"):
        V.fig_tail_rows({"updates": []})


def test_fig_decode_drift_frames_are_the_curves(curves):
    fig = V.fig_decode_drift(curves, n_prompt=4)
    _assert_distinct_frames(fig, 2)
    assert fig.layout.sliders[0].active == 1
    for frame in fig.frames:
        c = curves[int(frame.name)]
        lo, hi, med, correct, tol, same, prompt_end = frame.data
        buggy = c.buggy.numpy()
        assert np.allclose(np.asarray(med.y, dtype=float), np.maximum(np.median(buggy, axis=0), 1e-8))
        assert np.allclose(np.asarray(correct.y, dtype=float), np.maximum(c.correct.numpy(), 1e-8))
        assert np.allclose(np.asarray(same.y, dtype=float), c.still_identical.numpy())
        assert np.array_equal(np.asarray(med.x, dtype=int), c.positions.numpy())
        assert np.allclose(np.asarray(tol.y, dtype=float), 1e-4)
        assert np.allclose(np.asarray(prompt_end.x, dtype=float), c.n_prompt - 0.5)


@pytest.mark.parametrize("call, exc, pattern", [
    (lambda c: V.fig_decode_drift({}), TypeError, "curves"),
    (lambda c: V.fig_decode_drift(c, n_prompt=2), ValueError, "n_prompt"),
    (lambda c: V.fig_decode_drift({1: "x"}), TypeError, "curves"),
])
def test_fig_decode_drift_rejects_bad_input(curves, call, exc, pattern):
    with pytest.raises(exc, match=pattern):
        call(curves)


def test_live_tail_rows_redraws(live, displayed, report):
    import ipywidgets as widgets

    w = V.live_tail_rows(report)
    assert isinstance(w, widgets.VBox)
    (ctrl,) = w.children[0].children
    assert _turn(ctrl, displayed)


def test_live_decode_drift_redraws_on_both_controls(live, displayed, curves):
    import ipywidgets as widgets

    w = V.live_decode_drift(curves)
    n_prompt, atol = w.children[0].children
    assert isinstance(n_prompt, widgets.SelectionSlider)
    for ctrl in (n_prompt, atol):
        before = _signature(_last_plot(displayed))
        ctrl.value = ctrl.options[-1][1]
        assert _signature(_last_plot(displayed)) != before, f"changing {ctrl.description} did not change the figure"


def test_live_bundles_are_json_serialisable(live, displayed, report, curves):
    """A live kernel sends the figure through Jupyter's JSON encoder, which rejects NaN in arrays."""
    from jupyter_client.session import json_packer

    for fig in (V.fig_tail_rows(report), V.fig_decode_drift(curves)):
        core.show(fig, caption="c", alt="a")
        json_packer(displayed[-1][0][0])
