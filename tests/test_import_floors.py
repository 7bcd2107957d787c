"""The package's floors and its public seams, checked from the source.

Floors (CONVENTIONS.md): transformer at the bottom; records (the one record store) on it; data,
chapter_tests, experiments and benchmarks on those; analysis above them; viz draws on everything
below it; exercises check the reader against the library, never through viz. Importing any module below viz must not load plotly.

Seams: a helper two modules need is public, so no module imports another module's
leading-underscore name (`from mlbook.x import _y`, a private module `mlbook.x._y`) or reads a
leading-underscore attribute of an mlbook module or object it imported (`m._y`, `Cls._y`).
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "mlbook"

# What each top-level part of mlbook may import from the others (its own part is always allowed).
ALLOWED: dict[str, set[str]] = {
    "transformer": set(),
    "records": {"transformer"},  # the one record store and device picker of experiments and benchmarks
    "data": {"transformer"},
    "chapter_tests": {"transformer"},
    "experiments": {"transformer", "records", "data", "benchmarks"},
    "benchmarks": {"transformer", "records", "data", "experiments"},
    "analysis": {"transformer", "records", "data", "experiments", "benchmarks"},
    "exercises": {"transformer", "records", "data", "chapter_tests", "experiments", "benchmarks", "analysis"},
    "viz": {"transformer", "records", "data", "chapter_tests", "experiments", "benchmarks", "analysis"},
}
BELOW_VIZ = sorted(set(ALLOWED) - {"viz"})


def _modules() -> list[tuple[str, Path]]:
    """(dotted name, path) of every module under src/mlbook."""
    out = []
    for path in sorted(SRC.rglob("*.py")):
        parts = ("mlbook",) + path.relative_to(SRC).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out.append((".".join(parts), path))
    return out


def _part(dotted: str) -> str | None:
    """The top-level part of mlbook a dotted name belongs to ("mlbook.viz.core" -> "viz")."""
    parts = dotted.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "mlbook" else None


def _absolute(module: str, path: Path, node: ast.ImportFrom) -> str:
    """The absolute module an ImportFrom names, resolving `from . import x` and `from ..a import b`."""
    if not node.level:
        return node.module or ""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    package = package[: len(package) - (node.level - 1)]
    return ".".join(package + ([node.module] if node.module else []))


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _imports(module: str, path: Path) -> list[tuple[int, str, list[tuple[str, str | None]]]]:
    """(line, imported mlbook module, [(name, asname)]) for every import of mlbook in the file;
    for `import mlbook.a.b` the names list is empty."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = _absolute(module, path, node)
            if base == "mlbook" or base.startswith("mlbook."):
                out.append((node.lineno, base, [(a.name, a.asname) for a in node.names]))
        elif isinstance(node, ast.Import):
            out += [(node.lineno, a.name, []) for a in node.names if a.name == "mlbook" or a.name.startswith("mlbook.")]
    return out


def test_every_part_imports_only_the_floors_below_it():
    offenders = []
    for module, path in _modules():
        part = _part(module)
        if part is None or part not in ALLOWED:
            continue
        for line, base, names in _imports(module, path):
            targets = {base} if base != "mlbook" else {f"mlbook.{n}" for n, _ in names}
            for target in targets:
                other = _part(target)
                if other and other != part and other in ALLOWED and other not in ALLOWED[part]:
                    offenders.append(f"{path.relative_to(SRC.parent)}:{line}: {part} imports {target}")
    assert not offenders, "imports that go up a floor:\n" + "\n".join(sorted(set(offenders)))


def test_nothing_below_viz_imports_viz():
    offenders = [
        f"{path.relative_to(SRC.parent)}:{line}: imports {base}"
        for module, path in _modules()
        if _part(module) in BELOW_VIZ
        for line, base, names in _imports(module, path)
        if base.startswith("mlbook.viz") or (base == "mlbook" and any(n == "viz" for n, _ in names))
    ]
    assert not offenders, "modules below viz that import it:\n" + "\n".join(offenders)


def test_importing_analysis_exercises_experiments_does_not_load_plotly():
    """In a fresh interpreter: `import mlbook.analysis`, then every module below viz and every
    exercise module one by one; plotly must never appear in sys.modules."""
    names = ["mlbook.analysis"] + [
        m for m, _ in _modules()
        if _part(m) in BELOW_VIZ and not m.endswith("__main__")
    ]
    script = (
        "import importlib, json, sys\n"
        f"names = {names!r}\n"
        "culprits = []\n"
        "for name in names:\n"
        "    importlib.import_module(name)\n"
        "    if 'plotly' in sys.modules:\n"
        "        culprits.append(name)\n"
        "        break\n"
        "print(json.dumps({'checked': len(names), 'culprits': culprits}))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["checked"] > 30
    assert not result["culprits"], f"importing {result['culprits'][0]} loads plotly"


def test_no_module_uses_another_modules_private_names():
    offenders = []
    for module, path in _modules():
        bound: dict[str, str] = {}  # local name -> the mlbook module or object it was imported as
        for line, base, names in _imports(module, path):
            if any(_private(part) for part in base.split(".")):
                offenders.append(f"{path.relative_to(SRC.parent)}:{line}: imports private module {base}")
            if not names:  # import mlbook.a.b [as c]
                continue
            for name, asname in names:
                if _private(name):
                    offenders.append(f"{path.relative_to(SRC.parent)}:{line}: from {base} import {name}")
                else:
                    bound[asname or name] = f"{base}.{name}"
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name == "mlbook" or a.name.startswith("mlbook."):
                        bound[a.asname or a.name.split(".")[0]] = a.name if a.asname else "mlbook"
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Attribute) and _private(node.attr)):
                continue
            root = node.value
            while isinstance(root, ast.Attribute):
                if _private(root.attr):
                    break
                root = root.value
            if isinstance(root, ast.Name) and root.id in bound:
                offenders.append(f"{path.relative_to(SRC.parent)}:{node.lineno}: {ast.unparse(node)} "
                                 f"({root.id} is {bound[root.id]})")
    assert not offenders, "private names used across modules:\n" + "\n".join(sorted(set(offenders)))


def test_the_private_name_check_catches_what_it_should(tmp_path, monkeypatch):
    """The scanner itself: a planted module with each kind of offence is reported."""
    pkg = tmp_path / "mlbook"
    (pkg / "analysis").mkdir(parents=True)
    (pkg / "analysis" / "__init__.py").write_text("")
    (pkg / "analysis" / "bad.py").write_text(
        "import mlbook.transformer.positional as P\n"
        "from mlbook.viz.core import _fmt\n"
        "from mlbook.exercises._common import verdict\n"
        "from mlbook.transformer.models import GPT\n"
        "x = P._hidden\n"
        "y = GPT._init_weights\n"
        "z = P.frequency_ladder\n"
    )
    monkeypatch.setattr(sys.modules[__name__], "SRC", pkg)
    with pytest.raises(AssertionError) as err:
        test_no_module_uses_another_modules_private_names()
    report = str(err.value)
    for offence in ("import _fmt", "private module mlbook.exercises._common", "P._hidden", "GPT._init_weights"):
        assert offence in report
    assert "frequency_ladder" not in report
    with pytest.raises(AssertionError, match="imports mlbook.viz.core"):
        test_nothing_below_viz_imports_viz()
