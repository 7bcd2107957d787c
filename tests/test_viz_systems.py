"""Tests for mlbook.viz.systems (page 11): figures build with the right traces, static slider
frames differ, the live form carries every knob, numbers in titles come from the library, bad
input is rejected.

Benchmark figures are drawn from small synthetic records with the benchmarks' structure (and
from the committed records when they exist).
"""

from __future__ import annotations

import math

import plotly.graph_objects as go
import pytest

from mlbook.benchmarks import load_record
from mlbook.viz import systems as VS


def _frames_differ(fig: go.Figure) -> bool:
    ys = [tuple(tuple(t.y) if t.y is not None else tuple(t.x) for t in f.data) for f in fig.frames]
    return len(set(ys)) == len(ys)


def _controls(widget) -> dict[str, object]:
    return {c.description: c for c in widget.children[0].children}


# ---------------------------------------------------------------------------
# Cost figure
# ---------------------------------------------------------------------------


def test_position_cost_figure_traces_and_frames() -> None:
    fig = VS.fig_position_cost(4096, d_models=(1024, 4096))
    assert [f.name for f in fig.frames] == ["1024", "4096"]
    assert fig.layout.sliders[0].active == 1
    names = [t.name for t in fig.data]
    assert any("RoPE 6BTd" in n for n in names) and any("8BTd²" in n for n in names)
    assert any("materialised bias" in n for n in names)
    assert _frames_differ(fig)
    single = VS.fig_position_cost(2048, d_models=None)
    rope = next(t for t in single.data if t.name.startswith("RoPE"))
    proj = next(t for t in single.data if t.name.startswith("attention projections"))
    assert all(math.isclose(r / p, 3 / (4 * 2048)) for r, p in zip(rope.y, proj.y))
    assert "3/(4d) = 0.00037" in single.layout.title.text
    with pytest.raises(ValueError, match=r"d_model \(1000\) must be a multiple of d_head \(128\)"):
        VS.fig_position_cost(1000, d_models=None)


def test_live_position_cost_knobs() -> None:
    w = VS.live_position_cost()
    assert set(_controls(w)) == {"d (width)", "d_head", "batch B"}


# ---------------------------------------------------------------------------
# Benchmark figures from synthetic records
# ---------------------------------------------------------------------------


def _attention_record() -> dict:
    Ts = [512, 1024]
    variants = ["sdpa", "rope_sdpa", "t5_bias", "t5_flex"]
    rows = []
    for T in Ts:
        for k, v in enumerate(variants):
            ms = (T / 512) ** 2 * (1 + k)
            rows.append({"T": T, "variant": v, "times": {"median_ms": ms, "min_ms": ms, "p25_ms": ms, "p75_ms": ms},
                         "peak_bytes": (k + 1) * T * 1024, "first_call_s": 0.1, "compile_s": 2.0 if "flex" in v else None})
    med = {(r["T"], r["variant"]): r["times"]["median_ms"] for r in rows}
    return {
        "name": "attention_position", "device": "cpu", "threads": 2,
        "config": {"B": 1, "H": 8, "d_head": 64, "dtype": "float32"},
        "results": {"variants": variants, "rows": rows,
                    "ratio_to_sdpa": {str(T): {v: med[(T, v)] / med[(T, "sdpa")] for v in variants} for T in Ts},
                    "max_abs_diff": {str(T): {"t5": 1e-6} for T in Ts}, "tolerance": 1e-4,
                    "bias_bytes_analytic": {str(T): 8 * T * T * 4 for T in Ts}, "memory_method": "rss-hwm"},
    }


def test_attention_benchmark_figure_and_table() -> None:
    rec = _attention_record()
    fig = VS.fig_attention_benchmark(rec)
    assert len(fig.data) == 2 * 4 + 1  # time and memory per variant, plus the analytic bias line
    assert fig.data[0].name == VS.VARIANT_LABELS["sdpa"] and list(fig.data[0].x) == [512, 1024]
    measured, relative = (b.args[0]["y"] for b in fig.layout.updatemenus[0].buttons)
    assert measured != relative
    assert relative[0] == [1.0, 1.0]  # SDPA relative to itself
    assert relative[4] == [3.0, 3.0]  # t5_bias time: 3x the SDPA
    table = VS.attention_table(rec)
    assert "T5 bias tensor" in table and "agree to 1.0e-06" in table
    ratio_block = table.split("time / time of SDPA")[1].split("peak memory")[0]
    assert next(line for line in ratio_block.splitlines() if line.startswith("T5 bias tensor")).split()[-2:] == ["3.00", "3.00"]
    with pytest.raises(ValueError, match="record must be a saved 'attention_position' benchmark record"):
        VS.fig_attention_benchmark({"name": "rope_apply", "results": {}})


def test_score_mod_overhead_divides_by_flex_without_a_score_mod() -> None:
    rec = _attention_record()
    with pytest.raises(ValueError, match="no FlexAttention variants"):
        VS.score_mod_overhead(rec)  # t5_flex without plain flex: nothing to divide by
    for row in rec["results"]["rows"]:
        if row["variant"] == "t5_flex":
            flex = {**row, "variant": "flex", "times": {k: v / 2 for k, v in row["times"].items()}}
            rec["results"]["rows"].append(flex)
    rec["results"]["variants"].append("flex")
    assert VS.score_mod_overhead(rec) == {"t5_flex": {512: 2.0, 1024: 2.0}}
    summary = VS.score_mod_summary(rec)
    assert "forward only" in summary and summary.splitlines()[-1].split() == ["1,024", "2.00x"]


def _rope_record() -> dict:
    cases = []
    for dtype in ("float32", "bfloat16"):
        for mb in (8.0, 32.0):
            ratios = {"copy": 1.0, "copy_into": 0.5, "readable": 5.0 if dtype == "float32" else 7.0, "fused": 1.1,
                      "fused_into": 0.65, "hf": 5.5}
            cases.append({"dtype": dtype, "pairing": "half", "shape": [1, 32, 512, 128], "mb_per_tensor": mb,
                          "times": {v: {"median_ms": r * mb} for v, r in ratios.items()}, "ratio_to_copy": ratios,
                          "max_abs_diff_fused_vs_readable": 0.0})
    return {"name": "rope_apply", "device": "cpu", "threads": 2, "config": {"shapes": [[1, 32, 512, 128]]},
            "results": {"cases": cases, "goal_ratio": 1.2, "compile_cold": True,
                        "compile": {"float32/half": {"compile_s": 9.5, "first_call_s": 9.6},
                                    "bfloat16/half": {"error": "RuntimeError: no compiler"}}}}


def test_rope_benchmark_figure_dropdown_and_table() -> None:
    fig = VS.fig_rope_benchmark(_rope_record())
    buttons = fig.layout.updatemenus[0].buttons
    assert [b.label for b in buttons] == ["float32/half", "bfloat16/half"]
    vis = [b.args[0]["visible"] for b in buttons]
    assert vis[0] != vis[1] and sum(vis[0]) == sum(vis[1]) == 5
    into = [t for t in fig.data if t.name == VS.ROPE_LABELS["fused_into"]]
    assert [list(t.y) for t in into] == [[0.65, 0.65], [0.65, 0.65]]  # the in-place kernel is drawn too
    readable = [t for t in fig.data if t.name == VS.ROPE_LABELS["readable"]]
    assert [list(t.y) for t in readable] == [[5.0, 5.0], [7.0, 7.0]]  # the picker shows different data
    table = VS.rope_table(_rope_record())
    assert "1.10x" in table and "compile float32/half: 9.5 s (cold cache)" in table
    assert "fused_into" in table.splitlines()[1] and "0.65x" in table
    assert "fused kernel unavailable for bfloat16/half: RuntimeError: no compiler" in table


def test_slider_benchmark_figure_and_table() -> None:
    rec = {"name": "live_sliders", "device": "cpu", "threads": 2, "results": {
        "goal_p95_ms": 50.0, "over_goal": ["a.live_x"],
        "figures": {"a.live_x": {"p95_ms": 80.0, "max_ms": 120.0, "slowest_knobs": "T=400", "errors": []},
                    "b.live_y": {"p95_ms": 10.0, "max_ms": 12.0, "slowest_knobs": "d=2", "errors": ["d=0: ValueError: no"]},
                    "c.live_z": {"error": "IndexError: boom"}}}}
    fig = VS.fig_slider_benchmark(rec)
    assert list(fig.data[0].y) == ["b.live_y", "a.live_x"] and list(fig.data[0].x) == [10.0, 80.0]
    table = VS.slider_table(rec)
    assert table.splitlines()[2].startswith("a.live_x") and "1 over the 50 ms p95 goal" in table
    assert "c.live_z: fails" in table and "b.live_y: fails at 1 setting(s): d=0" in table


@pytest.mark.parametrize("name", ["rope_apply", "attention_position", "live_sliders"])
def test_figures_from_committed_records(name: str) -> None:
    record = load_record(name, "full")
    if record is None:
        pytest.skip(f"no committed full record for {name}")
    fig = {"rope_apply": VS.fig_rope_benchmark, "attention_position": VS.fig_attention_benchmark,
           "live_sliders": VS.fig_slider_benchmark}[name](record)
    assert len(fig.data) > 0


def test_a_wrong_slider_record_names_the_tool_that_makes_it() -> None:
    with pytest.raises(ValueError, match=r"tools/bench_sliders\.py"):
        VS.slider_table({"name": "rope_apply", "results": {}})
