"""The committed-outputs check's own judgement (tools/notebook_outputs.py), on made-up outputs.

`make outputs-check` compares the outputs committed in notebooks/*.ipynb with the site
build's executions; `make outputs` writes fresh ones. These tests execute no notebook: they
feed the comparison outputs as nbclient stores them and check that it lets through exactly
what legitimately varies between two runs (timings, dates, how streams are split, float64
round-off, a figure's layout) and catches the rest (a changed number in text or in a
figure, a missing figure, a committed error).
"""

from __future__ import annotations

import copy
import importlib.util
import json
import math
import os
import re
import sys
from pathlib import Path
from typing import Any

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("notebook_outputs", ROOT / "tools" / "notebook_outputs.py")
assert _spec and _spec.loader
tool = importlib.util.module_from_spec(_spec)
sys.modules["notebook_outputs"] = tool  # dataclasses look their module up by name
_spec.loader.exec_module(tool)

v4 = nbformat.v4


def stream(text: str, name: str = "stdout") -> Any:
    return v4.new_output("stream", name=name, text=text)


def notebook(*cells_outputs: list[Any], sources: list[str] | None = None) -> Any:
    """A notebook with a markdown cell, then one code cell per list of outputs."""
    nb = v4.new_notebook()
    nb.cells.append(v4.new_markdown_cell("# Title", id="md0"))
    for i, outs in enumerate(cells_outputs):
        src = sources[i] if sources else f"print({i})"
        nb.cells.append(v4.new_code_cell(src, id=f"c{i}", outputs=list(outs), execution_count=i + 1))
    return nb


def compare(committed: list[Any], fresh: list[Any]) -> list[str]:
    return tool.compare_notebooks(notebook(committed), notebook(fresh), "notebooks/99_x.ipynb")


def record(elapsed: float, per_seed: list[float], created: str) -> dict[str, Any]:
    return {"budget": "quick", "results": {"seeds": list(range(len(per_seed))), "seconds_per_seed": per_seed},
            "device": "cpu", "threads": 1, "elapsed_s": elapsed, "created": created,
            "mlbook_version": "0.1.0", "torch_version": "2.13.0+cpu"}


# --- sanitisers ------------------------------------------------------------------------------
@pytest.mark.parametrize("s", tool.SANITISERS, ids=[s.name for s in tool.SANITISERS])
def test_each_sanitiser_rewrites_what_it_covers(s: Any) -> None:
    assert s.covers and s.pattern.search(s.example), f"{s.name}: its example does not match"
    assert s.pattern.sub(s.replacement, s.example) != s.example
    assert tool.sanitise(s.example) != s.example


def test_sanitiser_names_are_unique() -> None:
    names = [s.name for s in tool.SANITISERS]
    assert len(names) == len(set(names))


@pytest.mark.parametrize("text", [
    "loss@64 2.183 ± 0.012, tail@256 2.294 ± 0.006",
    "The saved full-budget run of 'extrapolation' took 521 s (about 9 min) on cpu",  # from a committed record
    "float32/half            8 MB  2.09 ms      0.99x",  # a committed benchmark record
    "rope_apply, full budget, measured 2026-11-30 in 77 s",
    "per-offset table, T = 512, 8 heads:      8,184 per stack",
    "j - i: [-90, -91, -127] -> buckets [14, 15, 15]",
])
def test_sanitisers_leave_results_alone(text: str) -> None:
    """Numbers that come from code or committed records are compared exactly."""
    assert tool.sanitise(text) == text


# --- text ----------------------------------------------------------------------------------------
def test_a_timing_and_date_change_is_not_caught_even_when_it_rewraps_the_line() -> None:
    from mlbook.experiments.registry import describe_record

    a = describe_record(record(532.6, [168.2, 179.5, 184.9], "2026-11-30T06:58:47+00:00"))
    b = describe_record(record(1532.6, [1168.2, 1179.5, 1184.9], "2027-01-02T23:59:59+00:00"))
    assert len(a.splitlines()[0].split()) != len(b.splitlines()[0].split()), "the test needs a re-wrap"
    assert compare([stream(a + "\nscheme loss 2.183\n")], [stream(b + "\nscheme loss 2.183\n")]) == []


def test_a_changed_number_is_caught_with_notebook_cell_id_and_diff() -> None:
    (problem,) = compare([stream("with positions:  dog 1.49, bites 0.03\n")],
                         [stream("with positions:  dog 1.50, bites 0.03\n")])
    assert problem.startswith("notebooks/99_x.ipynb, cell 1 (id c0)")
    assert "-with positions:  dog 1.49, bites 0.03" in problem
    assert "+with positions:  dog 1.50, bites 0.03" in problem


def test_a_changed_number_next_to_a_timing_is_caught() -> None:
    from mlbook.experiments.registry import describe_record

    a = describe_record(record(88.0, [87.5], "2026-11-30T05:16:41+00:00"))
    b = describe_record(record(90.1, [89.9], "2026-11-30T06:00:00+00:00"))
    assert compare([stream(a + "\n2.240\n")], [stream(b + "\n2.241\n")])
    assert compare([stream(a)], [stream(b.replace("seeds [0]", "seeds [0, 1]"))])


def test_only_whitespace_near_a_masked_value_may_move() -> None:
    """Re-wrapping is allowed where a sanitiser rewrote the text, nowhere else."""
    assert compare([stream("a table\ncol  1.0\n")], [stream("a table\ncol 1.0\n")])


def test_how_the_kernel_split_the_streams_does_not_matter() -> None:
    one = [stream("line 1\nline 2\n"), stream("warning\n", "stderr")]
    split = [stream("line 1\n"), stream("warning\n", "stderr"), stream("line 2\n")]
    assert compare(one, split) == []
    assert compare(one, [stream("line 1\nline 2\n")])  # a missing stderr line is caught


def test_progress_bars_and_carriage_returns_are_ignored() -> None:
    bar = "train:  10%|#         | 12/120 [00:01<00:09, 11.2it/s]\rtrain:  50%|#####     | 60/120 [00:05<00:05]\r"
    assert compare([stream("done\n")], [stream(bar + "\n"), stream("done\n")]) == []


def test_a_committed_error_output_fails_even_where_the_run_fails_alike() -> None:
    err = v4.new_output("error", ename="ValueError", evalue="boom", traceback=["..."])
    problems = compare([stream("x\n"), err], [stream("x\n"), err])
    assert len(problems) == 1 and "hold an error" in problems[0] and "ValueError: boom" in problems[0]
    assert "cell 1 (id c0)" in problems[0]


def test_changed_code_is_not_compared_as_if_it_were_the_same() -> None:
    a = notebook([stream("1\n")], sources=["print(1)"])
    b = notebook([stream("1\n")], sources=["print(2)"])
    (problem,) = tool.compare_notebooks(a, b, "n.ipynb")
    assert "not of this notebook's current code" in problem


# --- figures -------------------------------------------------------------------------------------
def figure(y: list[float], *, title: str = "t", caption: str = "What to notice.", div_id: str = "fig-a",
           frames: list[float] | None = None) -> Any:
    """A display_data output as mlbook.viz.show makes it in static mode."""
    from mlbook.viz.core import figure_html

    fig = {"data": [{"type": "scatter", "x": list(range(len(y))), "y": y, "uid": div_id}],
           "layout": {"title": {"text": title}, "template": {"layout": {"font": {"size": 12}}}}}
    if frames is not None:
        fig["frames"] = [{"name": "1", "data": [{"type": "scatter", "y": frames}]}]
    html = figure_html(fig, caption=caption, alt="A line.", div_id=div_id, static=True)
    return v4.new_output("display_data", data={"text/html": html, "text/plain": f"Figure: {caption}"})


def test_a_figure_with_the_same_data_but_another_layout_and_id_is_equal() -> None:
    assert compare([figure([1.0, 2.0], title="old", div_id="fig-1")],
                   [figure([1.0, 2.0], title="new", div_id="fig-2")]) == []


def test_a_changed_figure_value_is_caught() -> None:
    (problem,) = compare([figure([1.0, 2.0, 3.0])], [figure([1.0, 2.01, 3.0])])
    assert "-data[0].y = [1.0, 2.0, 3.0]" in problem and "+data[0].y = [1.0, 2.01, 3.0]" in problem


def test_a_changed_slider_frame_is_caught() -> None:
    assert compare([figure([1.0], frames=[0.5, 0.6])], [figure([1.0], frames=[0.5, 0.7])])


def test_figure_data_is_compared_to_four_significant_digits_and_round_off_as_zero() -> None:
    assert compare([figure([1.23456, 2.2e-16])], [figure([1.23461, 4.4e-16])]) == []
    assert compare([figure([1.2345])], [figure([1.2355])])


def test_a_missing_figure_or_a_changed_caption_is_caught() -> None:
    assert compare([figure([1.0]), figure([2.0])], [figure([1.0])])
    assert compare([figure([1.0], caption="Old caption.")], [figure([1.0], caption="New caption.")])


def test_images_are_compared_by_type_and_count() -> None:
    def png(data: str) -> Any:
        return v4.new_output("display_data", data={"image/png": data, "text/plain": "<Figure>"})

    assert compare([png("iVBORw0KGgoAAAA")], [png("iVBORw0KGgoBBBB")]) == []
    assert compare([png("iVBORw0KGgoAAAA")], [])


# --- make outputs: writing back --------------------------------------------------------------------
def test_refresh_keeps_outputs_that_differ_only_in_timings_so_the_file_is_byte_identical() -> None:
    committed = notebook([stream("quick run: 88.0 s in all; created 2026-11-30T05:16:41+00:00\n")])
    committed.cells[1].metadata["execution"] = {"iopub.status.idle": "2026-11-29T14:30:31.962229Z"}
    run = notebook([stream("quick run: 91.3 s in all; created 2026-12-01T10:00:00+00:00\n")])
    merged, changed = tool.merge_outputs(committed, run)
    assert changed == [] and merged.cells[1].outputs == committed.cells[1].outputs
    assert "execution" not in merged.cells[1].metadata
    again, _ = tool.merge_outputs(merged, run)
    assert nbformat.writes(again) == nbformat.writes(merged)


def test_refresh_writes_changed_outputs_and_merges_streams() -> None:
    committed = notebook([stream("No saved full-budget record for 'x'\n")])
    run = notebook([stream("Trained at L = 64:\n"), stream("0.03 ± 0.01\n")])
    merged, changed = tool.merge_outputs(committed, run)
    assert changed == [1]
    assert [o.text for o in merged.cells[1].outputs] == ["Trained at L = 64:\n0.03 ± 0.01\n"]
    assert merged.cells[0].source == "# Title"


def test_refresh_refuses_a_notebook_whose_code_changed_while_it_ran() -> None:
    with pytest.raises(tool.ChangedMeanwhile):
        tool.merge_outputs(notebook([stream("1\n")], sources=["print(1)"]),
                           notebook([stream("2\n")], sources=["print(2)"]))


# --- the check against a jupyter-cache (as the site build leaves it) ----------------------------
def test_check_reads_the_site_builds_cache(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from jupyter_cache import get_cache
    from jupyter_cache.base import CacheBundleIn

    cache_dir = tmp_path / "cache"
    committed = notebook([stream("dog 1.49\n")], [figure([1.0, 2.0])])
    path = tmp_path / "99_x.ipynb"
    nbformat.write(committed, path)
    executed = notebook([stream("dog 1.50\n")], [figure([1.0, 2.0], title="other layout")])
    get_cache(str(cache_dir)).cache_notebook_bundle(CacheBundleIn(executed, str(path)), check_validity=False)

    assert tool.check([path], cache_dir) == 1
    err = capsys.readouterr().err
    assert "cell 1 (id c0)" in err and "+dog 1.50" in err and "cell 2" not in err
    assert 'make outputs NOTEBOOKS="' in err and "99_x.ipynb" in err

    nbformat.write(notebook([stream("dog 1.50\n")], [figure([1.0, 2.0])]), path)
    assert tool.check([path], cache_dir) == 0

    nbformat.write(notebook([stream("dog 1.50\n")], [figure([1.0, 2.0])], sources=["print(1)", "edited()"]), path)
    assert tool.check([path], cache_dir) == 1
    assert "no executed copy" in capsys.readouterr().err


def test_check_without_a_cache_says_what_to_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "99_x.ipynb"
    nbformat.write(notebook([stream("1\n")]), path)
    assert tool.check([path], tmp_path / "nothing") == 2
    assert "site build" in capsys.readouterr().err
    assert not (tmp_path / "nothing").exists()


def test_the_kernel_environment_is_the_site_builds() -> None:
    env = tool.kernel_env(Path("/r"))
    assert env["MLBOOK_STATIC"] == "1" and env["MLBOOK_RESULTS"] == "/r"
    assert env["OMP_NUM_THREADS"] == env["MKL_NUM_THREADS"] == "1"
    assert "MLBOOK_BUDGET" not in env


def test_the_outputs_the_notebooks_hold_can_be_compared() -> None:
    """Every output in the committed notebooks turns into items that equal themselves (no
    sanitiser or parser trips over what the notebooks really hold), and each figure of
    mlbook.viz is compared by its data."""
    figures = 0
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        for _, cell in tool._code_cells(nb):
            items = tool.output_items(cell.get("outputs", []))
            assert tool.items_match(items, tool.output_items(copy.deepcopy(cell.get("outputs", [])))), path.name
            figures += sum(it.label.endswith("figure data") for it in items)
            html = sum("mlbook-figure" in "".join(o.get("data", {}).get("text/html", ""))
                       for o in cell.get("outputs", []))
            assert sum(it.label.endswith("figure data") for it in items) >= html, (path.name, cell.get("id"))
    assert figures > 0


@pytest.mark.parametrize("output", [
    stream("No saved full-budget record for 't5_length'; make one with:\n  python -m mlbook.experiments run ...\n"),
    v4.new_output("execute_result", data={"text/plain": "'No saved full-budget record for x'"}, execution_count=1),
])
def test_a_committed_missing_full_budget_record_fails_even_where_the_build_prints_it_too(output: Any) -> None:
    (problem,) = compare([output], [output])
    assert "cell 1 (id c0)" in problem and "src/mlbook/results/full/" in problem


def test_a_quick_budget_message_is_not_a_missing_full_record() -> None:
    out = stream("No saved quick-budget record for 'x'\n")
    assert compare([out], [out]) == []


def test_refresh_writes_back_then_leaves_the_file_alone_and_refuses_a_missing_record(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """`make outputs` end to end, with the kernel replaced by canned outputs."""
    import jupyter_cache.executors.utils as executors

    for key in ("MLBOOK_STATIC", "MLBOOK_RESULTS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        monkeypatch.setenv(key, "restored after the test")
    monkeypatch.delenv("MLBOOK_BUDGET", raising=False)
    printed = {"text": "took 1.0 s in all; created 2026-11-30T05:16:41+00:00\nloss 2.183\n"}
    seen_env: dict[str, str] = {}

    def run(nb: Any, cwd: str, **kw: Any) -> Any:
        seen_env.update(os.environ)
        for i, (_, cell) in enumerate(tool._code_cells(nb)):
            cell.outputs, cell.execution_count = [stream(printed["text"])], i + 1
        return executors.ExecutionResult(nb, cwd, 0.1)

    monkeypatch.setattr(executors, "single_nb_execution", run)
    path = tmp_path / "99_x.ipynb"
    stale = notebook([stream("No saved full-budget record for 'x'\n")])
    stale.cells[1].metadata["execution"] = {"iopub.status.idle": "2026-11-29T14:30:31.962229Z"}
    nbformat.write(stale, path)

    assert tool.refresh([path], tmp_path / "results") == 0
    assert seen_env["MLBOOK_STATIC"] == "1" and seen_env["OMP_NUM_THREADS"] == "1"
    assert seen_env["MLBOOK_RESULTS"] == str((tmp_path / "results").resolve())
    first = path.read_bytes()
    cell = nbformat.read(path, as_version=4).cells[1]
    assert cell.outputs[0].text == printed["text"] and "execution" not in cell.metadata
    assert first.decode() == nbformat.writes(nbformat.reads(first.decode(), as_version=4)) + "\n"

    printed["text"] = "took 93.4 s in all; created 2026-12-01T08:00:00+00:00\nloss 2.183\n"  # timings only
    assert tool.refresh([path], tmp_path / "results") == 0
    assert path.read_bytes() == first, "an unchanged notebook must stay byte-identical"

    printed["text"] = "No saved full-budget record for 'x'; make one with: ...\n"
    assert tool.refresh([path], tmp_path / "results") == 1
    assert path.read_bytes() == first and "nothing written" in capsys.readouterr().err


# --- cells whose numbers depend on the CPU (tools/colab/cpu_bounds.py) ----------------------------
bounds = tool.cpu_bounds
_NUM = bounds.NUMBER


def _bound(atol: float = 0.02, rtol: float = 0.0, line_rtol: float = 0.0) -> Any:
    return bounds.CpuBound("99_x", "c0", "a quick run's losses", atol, rtol, line_rtol, "made up for a test")


def compare_bounded(committed: list[Any], fresh: list[Any], bound: Any, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    monkeypatch.setattr(bounds, "BOUNDS", (bound,))
    return compare(committed, fresh)


TABLE = "scheme     L=32    4L\nRoPE      2.234  2.496\nALiBi     2.142  2.372\n(seeds [0], 120 steps)\n"


def test_a_bounded_cell_lets_its_decimals_move_within_the_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    moved = TABLE.replace("2.234", "2.236").replace("2.496", "2.49").replace("  2.372", "   2.38")  # columns move
    assert compare_bounded([stream(TABLE)], [stream(moved)], _bound(), monkeypatch) == []
    monkeypatch.undo()
    assert compare([stream(TABLE)], [stream(moved)])  # a cell listed nowhere: exact


@pytest.mark.parametrize("change", [
    ("2.496", "2.530"),  # beyond atol 0.02
    ("RoPE", "NoPE"),  # a label
    ("[0]", "[1]"),  # an integer: the seeds
    ("120 steps", "121 steps"),
    ("2.142  2.372\n", "2.142  2.372  2.400\n"),  # one more value
    ("2.142", "2"),  # a decimal printed as an integer
])
def test_a_bounded_cell_still_fails_on_anything_else(change: tuple[str, str],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    (problem,) = compare_bounded([stream(TABLE)], [stream(TABLE.replace(*change))], _bound(), monkeypatch)
    assert "cell 1 (id c0)" in problem and "cpu_bounds.py" in problem


def test_line_rtol_scales_with_the_largest_value_on_the_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """A curve whose values pass near 0 moves by a share of its own scale, not of each value."""
    a = "data[0].y = [50000.0, 12.0, 0.5]\ndata[1].y = [0.5, 0.25]\n"
    b = "data[0].y = [50200.0, 210.0, 0.6]\ndata[1].y = [0.5, 0.25]\n"
    bound = _bound(atol=1e-4, rtol=1e-3, line_rtol=1e-2)
    assert compare_bounded([stream(a)], [stream(b)], bound, monkeypatch) == []
    assert compare_bounded([stream(a)], [stream(b.replace("[0.5, 0.25]", "[0.6, 0.25]"))], bound, monkeypatch)


def test_rows_have_their_own_atol_and_a_mask_hides_only_what_it_names(monkeypatch: pytest.MonkeyPatch) -> None:
    text = ("Seeds below 0.5: RoPE seed 0; PI seed 0\n- per digit: chance 0.1\n"
            "RoPE   64   1.512   0.65\nRoPE  128   2.217   0.00\n")
    bound = bounds.CpuBound("99_x", "c0", "test", 0.0, 0.0, 0.0, "test",
                            rows=((r"^RoPE\s+64\b", (0.15, 0.5)), (r"^RoPE", (0.15,))), mask=r"^Seeds below .*?(?=^- )")
    ok = text.replace("RoPE seed 0; PI seed 0", "PI seed 0").replace("0.65", "0.31").replace("2.217", "2.162")
    assert compare_bounded([stream(text)], [stream(ok)], bound, monkeypatch) == []
    for bad in (ok.replace("0.31", "0.10"),  # past the row's 0.5
                ok.replace("1.512", "1.700"),  # a loss past 0.15
                ok.replace("   0.00", "   0.20"),  # another row's accuracy past 0.15
                ok.replace("chance 0.1", "chance 0.2"),  # outside every row: exact
                ok.replace("- per digit", "- per token")):  # text after the mask
        assert compare_bounded([stream(text)], [stream(bad)], bound, monkeypatch), bad


def test_an_exact_zero_printed_as_0_counts_as_a_decimal(monkeypatch: pytest.MonkeyPatch) -> None:
    bound = _bound(atol=1e-12)
    assert compare_bounded([stream("gap 1.11e-15 at 3\n")], [stream("gap 0 at 3\n")], bound, monkeypatch) == []
    assert compare_bounded([stream("gap 1.11e-15 at 3\n")], [stream("gap 1.11e-15 at 0\n")], bound, monkeypatch)


def test_a_bounded_figure_is_compared_by_its_data(monkeypatch: pytest.MonkeyPatch) -> None:
    bound = _bound(atol=1e-6, rtol=2e-3)
    assert compare_bounded([figure([0.8147, 1e-6])], [figure([0.8148, 1.7e-6])], bound, monkeypatch) == []
    assert compare_bounded([figure([0.8147, 1e-6])], [figure([0.83, 1e-6])], bound, monkeypatch)
    assert compare_bounded([figure([0.8147, 1e-6])], [figure([0.8147, 1e-6, 0.5])], bound, monkeypatch)


def _committed_cell(b: Any) -> tuple[Path, Any]:
    path = ROOT / "notebooks" / f"{b.notebook}.ipynb"
    nb = nbformat.read(path, as_version=4)
    return path, next(c for c in nb.cells if c.get("id") == b.cell)


@pytest.mark.parametrize("b", bounds.BOUNDS, ids=[f"{b.notebook}-{b.cell}" for b in bounds.BOUNDS])
def test_each_bound_names_a_cell_with_decimals_says_what_and_was_measured(b: Any) -> None:
    path, cell = _committed_cell(b)
    assert cell.cell_type == "code"
    decimals = [t for it in tool.output_items(cell.outputs) for t in _NUM.findall(it.text) if bounds._is_decimal(t)]
    assert decimals, f"{path.name} {b.cell}: no decimal number to bound"
    assert b.what and b.measured and min(b.atol, b.rtol, b.line_rtol) >= 0
    assert len({(x.notebook, x.cell) for x in bounds.BOUNDS}) == len(bounds.BOUNDS)


@pytest.mark.parametrize("b", bounds.BOUNDS, ids=[f"{b.notebook}-{b.cell}" for b in bounds.BOUNDS])
def test_each_bounded_cell_still_fails_when_a_number_moves_past_its_bound(b: Any) -> None:
    """As a code change would: every decimal number of the committed cell shifted by twice
    what its bound allows (a changed constant moves them all), then only the largest one;
    both must fail the check, and the committed outputs themselves pass."""
    path, cell = _committed_cell(b)
    name = f"notebooks/{path.name}"
    nb = nbformat.read(path, as_version=4)
    top = max([b.atol] + [x for _, atols in b.rows for x in atols])  # the loosest atol of any row

    def shifted(only_largest: bool) -> Any:
        out = copy.deepcopy(nb)
        target = next(c for c in out.cells if c.get("id") == b.cell)
        for o in target.outputs:
            if only_largest and o.get("output_type") != "stream":
                continue
            if o.get("output_type") == "stream":  # what the check compares: timings and dates masked
                o["text"] = tool.sanitise(tool._text(o["text"]))
            largest = max((abs(float(t)) for t in _NUM.findall(tool._text(o.get("text", "")) + json_text(o))
                           if bounds._is_decimal(t) and math.isfinite(float(t))), default=0.0)

            def push(m: Any) -> str:
                t = m.group(0)
                if not bounds._is_decimal(t) or not math.isfinite(float(t)):
                    return t
                v = float(t)
                if only_largest and abs(v) != largest:
                    return t
                step = 2 * (top + b.rtol * abs(v) + b.line_rtol * largest) + 1e-3 * abs(v) + 1e-9
                return repr(v + step)
            rewrite(o, push)
        return out

    assert tool.compare_notebooks(nb, copy.deepcopy(nb), name) == []
    has_text = any(o.get("output_type") == "stream" for o in cell.outputs)
    for only_largest in (False, True) if has_text else (False,):
        problems = tool.compare_notebooks(nb, shifted(only_largest), name)
        assert any(f"(id {b.cell})" in p and "cpu_bounds.py" in p for p in problems), (only_largest, problems)


def json_text(out: Any) -> str:
    return " ".join(tool._text(v) for v in (out.get("data") or {}).values() if isinstance(v, (str, list)))


def rewrite(out: Any, push: Any) -> None:
    """Every number in a stream's text, and in a figure's JSON inside HTML, rewritten by `push`."""
    if out.get("output_type") == "stream":
        out["text"] = _NUM.sub(push, tool._text(out["text"]))
    for mime, value in (out.get("data") or {}).items():
        if mime == "text/html":
            html = tool._text(value)
            for m in reversed(list(tool._FIG_START.finditer(html))):
                fig, end = json.JSONDecoder().raw_decode(html, m.end())
                text = json.dumps(fig)
                new = json.dumps(_rewrite_json(fig, push))
                assert text != new or not fig.get("data")
                html = html[: m.end()] + new + html[end:]
            out["data"][mime] = html
        elif mime == "text/plain":
            out["data"][mime] = _NUM.sub(push, tool._text(value))


def _rewrite_json(value: Any, push: Any) -> Any:
    if isinstance(value, float):
        return float(_NUM.sub(push, repr(value)))
    if isinstance(value, list):
        return [_rewrite_json(v, push) for v in value]
    if isinstance(value, dict):
        if set(value) >= {"dtype", "bdata"}:
            return _rewrite_json(tool._round(value), push)
        return {k: _rewrite_json(v, push) for k, v in value.items()}
    return value


def test_a_code_change_in_a_bounded_cell_is_caught_in_a_real_kernel(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Change a constant, expect a failure: a notebook printing a number from a module beside
    it, executed as the site build executes notebooks, committed, then executed again after the
    constant changed within its CPU bound (passes) and beyond it (fails)."""
    monkeypatch.setattr(bounds, "BOUNDS", (bounds.CpuBound("99_x", "c0", "a loss", 0.02, 0.0, 0.0, "test"),))
    nb = notebook([], sources=["import constants\nprint(f'RoPE loss at 4L: {constants.LOSS:.3f} (seeds [0])')"])
    path = tmp_path / "99_x.ipynb"
    nbformat.write(nb, path)

    def run(loss: float) -> Any:
        (tmp_path / "constants.py").write_text(f"LOSS = {loss}\n")
        res = tool._execute(path, timeout=60)
        assert res.err is None, res.exc_string
        return res.nb

    committed = run(2.496)
    assert "2.496" in tool._text(committed.cells[1].outputs[0]["text"])
    assert tool.compare_notebooks(committed, run(2.498), "notebooks/99_x.ipynb") == []
    (problem,) = tool.compare_notebooks(committed, run(2.61), "notebooks/99_x.ipynb")
    assert "-RoPE loss at 4L: 2.496" in problem and "+RoPE loss at 4L: 2.610" in problem


ROWED = [b for b in bounds.BOUNDS if b.rows]


@pytest.mark.parametrize("b", ROWED, ids=[f"{b.notebook}-{b.cell}" for b in ROWED])
def test_a_tight_row_of_a_real_cell_catches_a_move_past_its_own_atol(b: Any) -> None:
    """The rows keep their own teeth: each row's numbers moved by twice that row's largest atol
    (and the rest of the cell left alone) fail the check."""
    path, _ = _committed_cell(b)
    nb = nbformat.read(path, as_version=4)
    for pattern, atols in b.rows:
        out = copy.deepcopy(nb)
        target = next(c for c in out.cells if c.get("id") == b.cell)
        step = 2 * max(atols) + 1e-3
        moved = 0
        for o in target.outputs:
            if o.get("output_type") != "stream":
                continue
            lines = tool.sanitise(tool._text(o["text"])).splitlines(keepends=True)
            for i, line in enumerate(lines):
                # only the lines this row is the first to match, as the bound applies it
                if next((p for p, _ in b.rows if re.search(p, line)), None) == pattern:
                    lines[i] = _NUM.sub(lambda m: repr(float(m.group(0)) + step) if bounds._is_decimal(m.group(0))
                                        else m.group(0), line)
                    moved += 1
            o["text"] = "".join(lines)
        assert moved, f"{pattern!r} matches no line of {path.name} {b.cell}"
        problems = tool.compare_notebooks(nb, out, f"notebooks/{path.name}")
        assert any(f"(id {b.cell})" in p for p in problems), pattern
