"""Tests for tools/bench_sliders.py, the live-slider benchmark of the book: it visits every control's
extremes and reports a figure that fails, finds the book's live figures, and its committed record
tools/results/live_sliders.json has the benchmark record format."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("bench_sliders", ROOT / "tools" / "bench_sliders.py")
BS = importlib.util.module_from_spec(_spec)
sys.modules["bench_sliders"] = BS
_spec.loader.exec_module(BS)


def test_slider_benchmark_visits_extremes_and_reports_failures() -> None:
    import ipywidgets as widgets

    from mlbook.viz.core import live_sliders
    from mlbook.viz.absolute import fig_offset_rotation

    calls: list[tuple[int, str]] = []

    def build(n: int, mode: str):
        calls.append((n, mode))
        if n == 9 and mode == "b":
            raise ValueError("n=9 with mode b is not drawable")
        return fig_offset_rotation(ks=None)

    def make():
        return live_sliders(build, caption="c", alt="a", n=widgets.IntSlider(value=3, min=1, max=9, description="n"),
                            mode=widgets.Dropdown(options=["a", "b"], value="a", description="mode"))

    import IPython.display as ipd

    original = ipd.display
    report = BS.time_live_figure(make)
    assert ipd.display is original  # display is restored
    seen = set(calls)
    assert {(1, "a"), (9, "a"), (3, "b")} <= seen  # each control at both extremes, the others at default
    assert report["controls"] == ["n", "mode"]
    assert report["n_redraws"] >= 5 and report["p95_ms"] <= report["max_ms"]
    assert report["max_payload_kb"] > 1
    assert any("not drawable" in e for e in report["errors"])


def test_discover_live_figures_finds_the_book_figures() -> None:
    found = BS.discover_live_figures()
    assert "absolute.live_sinusoidal_heatmap" in found
    assert "systems.live_position_cost" in found and "production.live_kv_cache" in found
    assert all(name.split(".")[1].startswith("live_") for name in found)


def test_extremes_of_each_control_kind() -> None:
    import ipywidgets as widgets

    assert BS.extremes(widgets.IntSlider(value=3, min=1, max=9)) == [1, 9]
    assert BS.extremes(widgets.FloatLogSlider(value=100, base=10, min=1, max=4)) == [10.0, 10000.0]
    assert BS.extremes(widgets.SelectionSlider(options=[("x", 2), ("y", 5)], value=2)) == [2, 5]
    assert BS.extremes(widgets.Checkbox(value=True)) == [False, True]


def test_the_committed_record_has_the_benchmark_record_format() -> None:
    record = json.loads(BS.RECORD.read_text())
    assert BS.RECORD == ROOT / "tools" / "results" / "live_sliders.json"
    assert record["name"] == BS.NAME and record["budget"] == "full" and record["config"] == BS.CONFIGS["full"]
    for key in ("title", "claim", "results", "elapsed_s", "created", "command"):
        assert key in record, key
    assert record["results"]["figures"] and record["results"]["goal_p95_ms"] == BS.GOAL_P95_MS
