"""The six experiments are registered with both budgets, and their full budgets have five seeds; experiments
and benchmarks keep their records in one store and pick devices with one picker (mlbook.records)."""

from __future__ import annotations

import ast
from pathlib import Path

from mlbook import records
from mlbook.experiments import registry

SRC = Path(__file__).resolve().parents[1] / "src" / "mlbook"
TOOLS = Path(__file__).resolve().parents[1] / "tools"


def test_experiments_1_to_3_are_registered_with_both_budgets_and_five_full_seeds() -> None:
    registry.get_experiment("permutation")  # imports the catalog
    for name in ("permutation", "extrapolation", "context_extension"):
        exp = registry.REGISTRY[name]
        assert set(exp.configs) == set(registry.BUDGETS)
        assert len(exp.configs["full"]["seeds"]) >= 5


def test_experiments_4_to_6_are_registered_with_both_budgets_and_five_full_seeds() -> None:
    for name in ("t5_length", "sinks", "passkey"):
        registry.get_experiment(name)
        assert set(registry.REGISTRY[name].configs) == {"quick", "full"}
        assert len(registry.REGISTRY[name].configs["full"]["seeds"]) >= 5


def test_experiments_and_benchmarks_share_one_record_store_and_one_device_picker() -> None:
    """The registries use mlbook.records, and no module of experiments/, benchmarks/ or the book's benchmark
    tool defines its own record reading, writing, results folder or device picking."""
    from mlbook.benchmarks import registry as bench

    for name in ("results_dir", "read_record", "check_writable", "record_text", "pick_device", "PACKAGED_RESULTS"):
        assert getattr(registry, name) is getattr(records, name), name
    for name in ("results_dir", "find_record", "check_writable", "save_record", "pick_device", "machine_info",
                 "PACKAGED_RESULTS"):
        assert getattr(bench, name) is getattr(records, name), name
    own = {"results_dir", "_results_dir", "read_record", "find_record", "save_record", "_save_record", "check_writable",
           "record_text", "pick_device", "_pick_device", "machine_info", "_cpu_model", "_source_checkout", "_dump",
           "_rounded", "_jsonable"}
    files = sorted((SRC / "experiments").glob("*.py")) + sorted((SRC / "benchmarks").glob("*.py"))
    files += sorted(TOOLS.glob("bench_*.py"))
    offenders = [f"{path.relative_to(SRC.parents[1])}: defines {node.name}" for path in files
                 for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                 if isinstance(node, ast.FunctionDef) and node.name in own]
    assert not offenders, "record or device plumbing outside mlbook.records:\n" + "\n".join(offenders)


def test_save_record_writes_through_a_temporary_file_of_its_own_process(tmp_path: Path, monkeypatch) -> None:
    # two processes saving one record at once must not share a temporary file: each writes its
    # own and moves it into place, and none is left behind
    import os

    moved: list[str] = []
    real_replace = Path.replace

    def replace(self: Path, target: Path) -> Path:
        moved.append(self.name)
        return real_replace(self, target)

    monkeypatch.setattr(Path, "replace", replace)
    out = records.save_record({"name": "x", "results": {}}, tmp_path / "x.json")
    assert out == tmp_path / "x.json" and out.is_file()
    assert moved == [f"x.json.{os.getpid()}.tmp"]
    assert [p.name for p in tmp_path.iterdir()] == ["x.json"]
