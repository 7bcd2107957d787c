"""Tests for tools/bench_sliders.py, the book's live-slider benchmark (it times the notebooks' figures,
not the library): it visits every control's extremes and reports a figure that fails, finds the book's
live figures, writes through the one record store (refusing an unwritable folder before timing
anything), and its committed record is what page 11 reads through `mlbook.benchmarks.load_record`."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path

import pytest

from mlbook import records
from mlbook.benchmarks import registry as R

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("bench_sliders", ROOT / "tools" / "bench_sliders.py")
BS = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
sys.modules["bench_sliders"] = BS
_spec.loader.exec_module(BS)  # type: ignore[union-attr]


def test_slider_benchmark_visits_extremes_and_reports_failures() -> None:
    import ipywidgets as widgets

    from mlbook.viz.absolute import fig_offset_rotation
    from mlbook.viz.core import live_sliders

    calls: list[tuple[int, str]] = []

    def build(n: int, mode: str):  # type: ignore[no-untyped-def]
        calls.append((n, mode))
        if n == 9 and mode == "b":
            raise ValueError("n=9 with mode b is not drawable")
        return fig_offset_rotation(ks=None)

    def make():  # type: ignore[no-untyped-def]
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


def test_the_library_does_not_carry_the_book_benchmark() -> None:
    assert not (ROOT / "src" / "mlbook" / "benchmarks" / "sliders.py").exists()
    R.load_catalog()
    assert BS.NAME not in R.BENCHMARKS and BS.NAME in R.BOOK_RECORDS
    assert R.command_for(BS.NAME) == "python tools/bench_sliders.py"


def test_the_committed_record_is_read_through_the_record_store() -> None:
    record = R.load_record(BS.NAME, "full")
    if record is None:
        pytest.skip("no committed live_sliders record")
    assert record["name"] == BS.NAME and record["budget"] == "full" and record["config"] == BS.CONFIGS["full"]
    for key in ("title", "claim", "results", "elapsed_s", "created", "command"):
        assert key in record, key
    assert record["results"]["figures"] and record["results"]["goal_p95_ms"] == BS.GOAL_P95_MS
    assert R.describe_record(record).endswith("remake with: python tools/bench_sliders.py")


@pytest.fixture
def fake_sliders(monkeypatch, tmp_path):  # type: ignore[no-untyped-def]
    """MLBOOK_RESULTS in tmp; run_sliders replaced by a stub that counts its calls."""
    monkeypatch.setenv("MLBOOK_RESULTS", str(tmp_path / "results"))
    calls: list[dict] = []

    def stub(config, device, progress=True):  # type: ignore[no-untyped-def]
        calls.append(config)
        return {"figures": {}, "goal_p95_ms": BS.GOAL_P95_MS, "over_goal": [], "worst_p95_ms": 12.3456789}

    monkeypatch.setattr(BS, "run_sliders", stub)
    return calls


def test_the_tool_writes_through_the_record_store(fake_sliders, tmp_path) -> None:
    record = BS.run("quick", progress=False, note="busy")
    path = tmp_path / "results" / "quick" / "bench" / "live_sliders.json"
    assert path.read_text() == records.record_text(record) and record["note"] == "busy"
    assert record["command"] == "python tools/bench_sliders.py --quick" and record["results"]["worst_p95_ms"] == 12.3457
    assert R.load_record(BS.NAME, "quick") == record


def test_an_unwritable_results_folder_is_refused_before_anything_is_timed(fake_sliders, tmp_path, monkeypatch,
                                                                          capsys) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("a file where a folder must go")
    monkeypatch.setenv("MLBOOK_RESULTS", str(blocker / "results"))
    with pytest.raises(ValueError, match=r"cannot save the record in .*blocker/results/bench"):
        BS.run("full", progress=False)
    with pytest.raises(SystemExit) as info:
        BS.main([])
    assert info.value.code == 2 and re.search(r"cannot save the record", capsys.readouterr().err)
    assert fake_sliders == []  # nothing timed
    assert json.loads(json.dumps(BS.run("quick", progress=False, save=False)))["budget"] == "quick"  # --no-save runs
