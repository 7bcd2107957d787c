"""The Colab check's own judgement: which cell outputs it fails (tools/colab/nbval_colab.py).

`make colab-check` runs the notebooks themselves; these tests feed the plugin the outputs a
kernel sends (as nbval collects them) and check it flags exactly what a Colab reader should
not see: one widget shown twice, and the phrase the experiment pages print when the saved
full-budget record is missing.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools" / "colab"))  # the plugin imports cpu_bounds, its neighbour (as in the runner)
_spec = importlib.util.spec_from_file_location("nbval_colab", ROOT / "tools" / "colab" / "nbval_colab.py")
assert _spec and _spec.loader
plugin = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(plugin)

WIDGET = plugin.WIDGET_MIME


def view(model_id: str, kind: str = "display_data") -> dict[str, Any]:
    return {"output_type": kind, "data": {WIDGET: {"model_id": model_id, "version_major": 2},
                                          "text/plain": "VBox(children=(...))"}, "metadata": {}}


def text(s: str) -> dict[str, Any]:
    return {"output_type": "stream", "name": "stdout", "text": s}


def test_one_view_per_widget_passes() -> None:
    assert plugin.problems_in([view("a"), view("b"), text("ok\n")]) == []


@pytest.mark.parametrize("second", ["display_data", "execute_result"])
def test_the_same_widget_shown_twice_fails(second: str) -> None:
    (problem,) = plugin.problems_in([view("a"), text("x"), view("a", second)])
    assert "widget displayed 2 times" in problem and "a" in problem


@pytest.mark.parametrize(
    "output",
    [
        text("No saved full-budget record for 'extrapolation'; make one with: python -m ...\n"),
        {"output_type": "display_data", "data": {"text/html": "<p>No saved full-budget result matches</p>",
                                                  "text/plain": "x"}},
        {"output_type": "execute_result", "data": {"text/plain": ["'No saved full-budget record ", "for x'"]}},
    ],
    ids=["stream", "html", "plain-as-lines"],
)
def test_a_missing_full_budget_record_fails(output: dict[str, Any]) -> None:
    (problem,) = plugin.problems_in([output])
    assert "No saved full-budget" in problem and "package" in problem


def test_a_quick_budget_message_is_not_mistaken_for_a_missing_full_record() -> None:
    assert plugin.problems_in([text("No saved quick-budget record for 'x'; running it now\n")]) == []


def test_snapshot_commits_the_working_tree_as_it_is_on_disk(tmp_path: Path) -> None:
    """The setup cells install from this snapshot: it must be the code on disk, not HEAD."""
    import subprocess
    import sys

    sys.path.insert(0, str(ROOT / "tools"))
    import colab_check

    url = colab_check.snapshot(tmp_path / "repo")
    assert url == f"git+file://{tmp_path / 'repo'}@main"
    tracked = subprocess.run(["git", "-C", str(ROOT), "ls-files", "--cached", "--others", "--exclude-standard"],
                             capture_output=True, text=True, check=True).stdout.split()
    on_disk = [f for f in tracked if (ROOT / f).is_file()]
    committed = subprocess.run(["git", "-C", str(tmp_path / "repo"), "ls-tree", "-r", "--name-only", "main"],
                               capture_output=True, text=True, check=True).stdout.split()
    assert sorted(committed) == sorted(on_disk)
    for rel in ("pyproject.toml", "src/mlbook/viz/core.py", "tools/colab_check.py"):
        assert (tmp_path / "repo" / rel).read_bytes() == (ROOT / rel).read_bytes(), rel
    assert not any(f.startswith((".venv/", "_build/")) for f in committed), "ignored folders must stay out"
    assert any(f.startswith("src/mlbook/results/full/") and f.endswith(".json") for f in committed), (
        "the committed full-budget records must be in the snapshot (they ship as package data)"
    )


def test_the_old_lower_case_wording_is_caught_too() -> None:
    (problem,) = plugin.problems_in([text("no saved full-budget result; create it with: python -m ...\n")])
    assert "full-budget" in problem


def test_default_order_takes_the_slowest_notebooks_first_then_the_untimed_from_the_last(tmp_path: Path) -> None:
    """So the Colab check has each slow quick run trained before the site build (first to last) reaches it."""
    import json
    import sys

    sys.path.insert(0, str(ROOT / "tools"))
    import colab_check

    times = tmp_path / "times.json"
    times.write_text(json.dumps({"01_a.ipynb": 5.0, "23_exp.ipynb": 96.0, "26_exp.ipynb": 70.0, "02_b.ipynb": 5.0}))
    names = ["01_a.ipynb", "02_b.ipynb", "03_new.ipynb", "23_exp.ipynb", "26_exp.ipynb", "27_new.ipynb"]
    order = colab_check.default_order([tmp_path / n for n in names], times)
    assert [p.name for p in order] == ["23_exp.ipynb", "26_exp.ipynb", "01_a.ipynb", "02_b.ipynb",
                                       "27_new.ipynb", "03_new.ipynb"]
    assert colab_check.default_order([tmp_path / n for n in names], tmp_path / "none.json") == sorted(
        (tmp_path / n for n in names), reverse=True), "without a times file: the last notebook first"
    committed = json.loads(colab_check.TIMES.read_text())
    on_disk = {p.name for p in (ROOT / "notebooks").glob("*.ipynb")}
    assert set(committed) == on_disk, f"tools/colab/times.json names {sorted(set(committed) ^ on_disk)} wrongly"


# --- `# NBVAL_CHECK_OUTPUT` cells whose numbers depend on the CPU (tools/colab/cpu_bounds.py) ----------
def test_a_bounded_cell_passes_within_its_bound_and_fails_beyond_it() -> None:
    bound = plugin.cpu_bounds.CpuBound("99_x", "c0", "round-off", 1e-6, 0.0, 0.0, "test")
    ref = [text("correct 1.2e-07; positions reset 4.2e-01, first off at step 1\n")]
    assert plugin.outputs_within([text("correct 8.9e-08; positions reset 4.2e-01, first off at step 1\n")],
                                 ref, bound)
    for other in ("correct 8.9e-08; positions reset 4.3e-01, first off at step 1\n",  # a real number moved
                  "correct 8.9e-08; positions reset 4.2e-01, first off at step 2\n",  # an integer
                  "correct 8.9e-08; positions kept 4.2e-01, first off at step 1\n"):  # a word
        assert not plugin.outputs_within([text(other)], ref, bound)
    assert not plugin.outputs_within([text(ref[0]["text"]), text("more\n")] + [
        {"output_type": "stream", "name": "stderr", "text": "warning\n"}], ref, bound)  # another stream


def test_nbvals_comparison_applies_the_bound_of_the_listed_cell_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """The plugin wraps nbval's IPyNbCell.compare_outputs: nbval's exact verdict first, then, for a
    cell listed in cpu_bounds.py, the bound."""
    import nbval.plugin

    class Cell:  # what the wrapper reads of nbval's cell item; nbval's own comparison says "differs"
        def __init__(self, notebook: str, cell_id: str) -> None:
            self.fspath, self.cell, self.comparison_traceback = f"/content/{notebook}", {"id": cell_id}, []

        def compare_outputs(self, test: Any, ref: Any, skip_compare: Any = None) -> bool:
            self.comparison_traceback = ["differs"]
            return test == ref

    monkeypatch.setattr(nbval.plugin, "IPyNbCell", Cell)
    monkeypatch.setattr(plugin.cpu_bounds, "BOUNDS",
                        (plugin.cpu_bounds.CpuBound("11_systems", "42ed877f", "round-off", 1e-6, 0.0, 0.0, "test"),))
    plugin.pytest_configure(None)  # type: ignore[arg-type]
    ref, near = [text("correct 1.2e-07\n")], [text("correct 8.9e-08\n")]
    listed, other = Cell("11_systems.ipynb", "42ed877f"), Cell("11_systems.ipynb", "another")
    assert listed.compare_outputs(near, ref) and listed.comparison_traceback == []
    assert not other.compare_outputs(near, ref) and other.comparison_traceback == ["differs"]
    assert not listed.compare_outputs([text("correct 2.2e-06\n")], ref)
    assert "cpu_bounds.py" in listed.comparison_traceback[-1]
