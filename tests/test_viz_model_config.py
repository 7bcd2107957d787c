"""The figure of section 5.1: each scaled shipped config's divisor per pair, against its wavelength."""

from __future__ import annotations

import json

import numpy as np
import plotly.graph_objects as go
import pytest

from mlbook.analysis.model_config import load_config, scaling_divisors
from mlbook.viz.model_config import SCALED_CONFIGS, fig_config_scaling, scaled_configs


def test_divisors_run_from_kept_to_the_factor_in_wavelength_order() -> None:
    """Fast pairs are kept (1), slow ones divided by the scaling's factor, never the other way round; Scout's llama3
    with low = high has no blend band; linear divides every pair."""
    for label, config, _ in scaled_configs():
        wavelengths, divisors = map(np.asarray, scaling_divisors(config))
        assert np.all(np.diff(wavelengths) > 0), label
        assert np.all(np.diff(divisors) >= -1e-5 * divisors[1:]), label  # non-decreasing (float32 frequencies)
    w, d = scaling_divisors(load_config("llama-4-scout"))
    assert set(np.round(d, 4)) == {1.0, 16.0}
    w, d = scaling_divisors(load_config("gemma-3-4b"))
    assert np.allclose(d, 8.0)  # linear: every pair, no anchor (not drawn)
    w, d = scaling_divisors(load_config("deepseek-v3"))
    assert d[0] == pytest.approx(1.0) and d[-1] == pytest.approx(40.0)


def test_an_unscaled_config_divides_nothing() -> None:
    w, d = scaling_divisors(load_config("smollm3-3b"))
    assert np.allclose(d, 1.0) and len(w) == 64


def test_the_figure_draws_one_line_per_scaled_config_on_log_axes() -> None:
    fig = fig_config_scaling()
    assert [t.name for t in fig.data] == [label for label, _, _ in SCALED_CONFIGS]
    # measured in the anchor, every config's bands lie between a thirtieth of it and twice it: kept below, whole above
    for t in fig.data:
        x, y = np.asarray(t.x), np.asarray(t.y)
        assert np.allclose(y[x < 1 / 32], 1.0, rtol=1e-5) and np.allclose(y[x > 2.0], y.max(), rtol=1e-5), t.name
    solid, dashed = fig.data[2], fig.data[3]  # gpt-oss, truncate false and true: the ramp differs
    assert np.abs(np.asarray(solid.y) - np.asarray(dashed.y)).max() > 1.0
    assert fig.layout.xaxis.type == "log" and fig.layout.yaxis.type == "log"
    assert "anchor" in fig.layout.xaxis.title.text and fig.layout.yaxis.title.text
    qwen = fig.data[-1]
    assert max(qwen.y) == pytest.approx(4.0) and len(qwen.x) == 32  # the card's YaRN over the 64 rotating channels
    go.Figure(json.loads(fig.to_json()))  # serialisable and valid
