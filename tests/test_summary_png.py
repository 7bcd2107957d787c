"""Plots from the command line: every committed record draws as a PNG (matplotlib's Agg canvas,
no browser), and the two command lines write it beside the JSON they save."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import pytest

from mlbook.experiments import summary_png

ROOT = Path(__file__).resolve().parents[1]
FULL = sorted((ROOT / "src" / "mlbook" / "results" / "full").glob("*.json"))
BENCH = sorted((ROOT / "src" / "mlbook" / "results" / "bench").glob("*.json"))
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _check_png(path: Path) -> tuple[int, int]:
    """(width, height) of a valid PNG file: signature, IHDR first, IEND last, and it decodes."""
    data = path.read_bytes()
    assert len(data) > 10_000, f"{path.name}: {len(data)} bytes, too small to hold a drawing"
    assert data[:8] == PNG_SIGNATURE and data[12:16] == b"IHDR" and data[-8:-4] == b"IEND", f"{path.name}: not a PNG"
    width, height = struct.unpack(">II", data[16:24])
    import matplotlib.image

    pixels = matplotlib.image.imread(path)
    assert pixels.shape[:2] == (height, width) and pixels.std() > 0.01, f"{path.name}: blank image"
    return width, height


def _load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


@pytest.mark.parametrize("path", FULL, ids=[p.stem for p in FULL])
def test_every_committed_experiment_record_draws(path: Path, tmp_path: Path) -> None:
    record = _load(path)
    assert not summary_png.is_benchmark(record)
    panels = summary_png.headline_comparisons(record)
    assert panels, f"{path.stem}: no headline comparison"
    for title, rows in panels:
        for label, c in rows:
            assert label and c["mean"] is not None, (title, label)
            if c["ci95"] is not None:  # the interval drawn is the one the verdict rule reads
                lo, hi = c["ci95"]
                expect = "indistinguishable" if lo <= 0.0 <= hi else ("lower" if hi < 0 else "higher")
                assert c["verdict"] == expect, (title, label, c)
    out = summary_png.write_beside(record, tmp_path / path.name)
    assert out == tmp_path / f"{path.stem}.png"
    width, height = _check_png(out)
    assert width >= 800 and height >= 300


@pytest.mark.parametrize("path", BENCH, ids=[p.stem for p in BENCH])
def test_every_committed_benchmark_record_draws(path: Path, tmp_path: Path) -> None:
    record = _load(path)
    assert summary_png.is_benchmark(record)
    _check_png(summary_png.write_beside(record, tmp_path / path.name))


def test_a_record_without_comparisons_is_refused_with_a_reason() -> None:
    record = _load(FULL[0])
    record = {**record, "name": "no_such_experiment"}
    with pytest.raises(ValueError, match="no_such_experiment"):
        summary_png.experiment_figure(record)


def test_drawing_leaves_pyplot_alone() -> None:
    """Agg canvas only: no pyplot import, so nothing changes the caller's backend or opens a window."""
    import ast

    tree = ast.parse(Path(summary_png.__file__).read_text(encoding="utf-8"))
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert not any(m.startswith("matplotlib.pyplot") or m.startswith("plotly") for m in imported), imported


def test_experiments_cli_writes_the_png_beside_the_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    import mlbook.experiments.__main__ as cli

    path = next(p for p in FULL if p.stem == "extrapolation")
    record = _load(path)
    saved = tmp_path / "full" / path.name
    monkeypatch.setattr(cli, "get_experiment", lambda name: None)
    monkeypatch.setattr(cli, "run_experiment", lambda *a, **k: record)
    monkeypatch.setattr(cli, "result_path", lambda name, budget: saved)
    assert cli.main(["run", "extrapolation", "--budget", "full"]) == 0
    _check_png(saved.with_suffix(".png"))
    assert str(saved.with_suffix(".png")) in capsys.readouterr().err, "the command line names the picture"
    saved.with_suffix(".png").unlink()
    assert cli.main(["run", "extrapolation", "--budget", "full", "--no-save"]) == 0
    assert not saved.with_suffix(".png").exists(), "--no-save writes nothing"


def test_benchmarks_cli_writes_the_png_beside_the_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import mlbook.benchmarks.__main__ as cli

    path = next(p for p in BENCH if p.stem.startswith("rope_apply"))
    record = _load(path)
    monkeypatch.setattr(cli, "get_benchmark", lambda name: None)
    monkeypatch.setattr(cli, "run_benchmark", lambda *a, **k: record)
    monkeypatch.setattr(cli, "record_path", lambda name, budget, device: tmp_path / "bench" / f"{name}.json")
    assert cli.main(["run", "rope_apply"]) == 0
    _check_png(tmp_path / "bench" / "rope_apply.png")


def test_readme_shows_a_summary_drawn_from_a_committed_record() -> None:
    import re

    shown = re.findall(r"!\[[^\]]+\]\((book/_static/summary_[a-z_]+\.png)\)", (ROOT / "README.md").read_text())
    assert shown, "the README shows one PNG summary"
    for rel in shown:
        name = rel.rsplit("summary_", 1)[1][: -len(".png")]
        assert (ROOT / "src" / "mlbook" / "results" / "full" / f"{name}.json").is_file(), f"{rel}: no committed record"
        _check_png(ROOT / rel)
