"""mlbook installs in Colab today: pyproject.toml's pins against Colab's published pip freeze.

Every notebook's setup cell runs `pip install git+<repository>` in Colab with the runtime's torch,
ipywidgets and plotly held at their installed versions (tools/setup_cells.py). A dependency whose
specifier excludes the version Colab preinstalls makes that install fail (or replace Colab's
package) for every reader, so each one is checked against the freezes in tools/colab/backend-info/,
the CPU runtime's and the GPU runtime's.
"""

from __future__ import annotations

import importlib.util
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
BACKEND_INFO = ROOT / "tools" / "colab" / "backend-info"
_spec = importlib.util.spec_from_file_location("colab_requirements", ROOT / "tools" / "colab_requirements.py")
assert _spec and _spec.loader
tool = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tool)
sys.path.insert(0, str(ROOT / "tools"))
import setup_cells  # noqa: E402

PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
RUNTIMES = {"cpu": "pip-freeze.txt", "gpu": "pip-freeze.gpu.txt"}
COLAB_PYTHON = tool.read_python(BACKEND_INFO / "os-info.txt")


def freeze(runtime: str) -> dict[str, str | None]:
    return tool.read_freeze(BACKEND_INFO / RUNTIMES[runtime])


def colab_environment() -> dict[str, str]:
    """Environment markers as in Colab's runtime (Linux, x86_64, its Python)."""
    return {"python_version": COLAB_PYTHON, "python_full_version": f"{COLAB_PYTHON}.0", "sys_platform": "linux",
            "platform_system": "Linux", "platform_machine": "x86_64", "os_name": "posix",
            "implementation_name": "cpython", "platform_python_implementation": "CPython", "extra": ""}


@pytest.mark.parametrize("runtime", sorted(RUNTIMES))
@pytest.mark.parametrize("spec", PROJECT["dependencies"])
def test_every_dependency_admits_the_version_colab_preinstalls(spec: str, runtime: str) -> None:
    req = Requirement(spec)
    if req.marker is not None and not req.marker.evaluate(colab_environment()):
        pytest.skip(f"{spec}: its marker excludes Colab")
    colab = freeze(runtime).get(tool.canonical(req.name))
    if colab is None:
        pytest.skip(f"Colab's {runtime} runtime does not preinstall {req.name}: the setup cell installs it")
    assert req.specifier.contains(Version(colab), prereleases=True), (
        f"pyproject.toml asks for {spec}, Colab's {runtime} runtime has {req.name}=={colab}: "
        "every notebook's setup cell would fail or replace it")


@pytest.mark.parametrize("runtime", sorted(RUNTIMES))
@pytest.mark.parametrize("name", ["torch", "ipywidgets", "plotly"])
def test_the_packages_the_setup_cell_holds_are_preinstalled_and_mlbook_depends_on_them(name: str,
                                                                                     runtime: str) -> None:
    """The setup cell pins these three at the runtime's versions; the pins above must then admit them."""
    assert f'for name in ("torch", "ipywidgets", "plotly")' in setup_cells.canonical_block("git+https://x/y@main")
    assert freeze(runtime).get(name), f"Colab's {runtime} runtime has no {name}"
    assert name in {tool.canonical(Requirement(s).name) for s in PROJECT["dependencies"]}


def test_requires_python_admits_colabs_python() -> None:
    from packaging.specifiers import SpecifierSet

    assert Version(COLAB_PYTHON) in SpecifierSet(PROJECT["requires-python"]), (
        f"pyproject.toml's requires-python {PROJECT['requires-python']} excludes Colab's Python {COLAB_PYTHON}")


def test_the_oracle_tests_run_against_the_transformers_colab_preinstalls() -> None:
    (pin,) = [Requirement(s) for s in PROJECT["optional-dependencies"]["test"] if Requirement(s).name == "transformers"]
    assert str(pin.specifier) == f"=={freeze('cpu')['transformers']}"
