"""tools/install.py: uv gets the package sources pip would use, and pip takes over when uv cannot."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
import install  # noqa: E402

PIP_CONFIG = """global.extra-index-url='file:///opt/a/simple file:///opt/b/simple'
global.find-links='/opt/global-wheels'
global.constraint='/etc/pip/constraints.txt'
global.timeout='60'
:env:.find-links='/opt/wheels'
install.index-url='https://mirror.example/simple'
global.index-url='https://ignored.example/simple'
"""


def test_the_most_specific_pip_setting_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: SimpleNamespace(stdout=PIP_CONFIG, returncode=0))
    settings = install.pip_settings(Path("python"))
    assert settings["find-links"] == "/opt/wheels", "a PIP_FIND_LINKS variable beats the config file"
    assert settings["index-url"] == "https://mirror.example/simple", "pip install's [install] section beats [global]"
    assert settings["extra-index-url"] == "file:///opt/a/simple file:///opt/b/simple"


def test_uv_gets_every_source_and_constraint_and_chooses_across_indexes_as_pip() -> None:
    settings = {"index-url": "https://mirror.example/simple", "extra-index-url": "file:///a file:///b",
                "find-links": "/opt/wheels", "constraint": "/etc/c.txt", "timeout": "60"}
    cmd = install.uv_command(Path("uv"), Path("py"), ["-q", "--no-compile", "-r", "requirements.txt", "-e", ".[test]"], settings)
    joined = " ".join(cmd)
    assert "--index-strategy unsafe-best-match" in joined
    assert "--index-url https://mirror.example/simple" in joined
    assert "--extra-index-url file:///a --extra-index-url file:///b" in joined
    assert "--find-links /opt/wheels" in joined and "--constraint /etc/c.txt" in joined
    assert "--no-compile" not in cmd, "pip's flag: uv does not know it (and never compiles unasked)"
    assert cmd[-5:] == ["-q", "-r", "requirements.txt", "-e", ".[test]"]


def test_pip_installs_when_uv_cannot_be_had(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "python").write_text("")
    calls = []

    def run(cmd, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(cmd)
        return SimpleNamespace(returncode=1 if "uv==" in " ".join(cmd) else 0, stdout="", stderr="no index")

    monkeypatch.delenv("MLBOOK_INSTALL_WITH_PIP", raising=False)
    monkeypatch.setattr(subprocess, "run", run)
    assert install.main([str(tmp_path), "-r", "requirements.txt"]) == 0
    assert calls[-1] == [str(tmp_path / "bin" / "python"), "-m", "pip", "install", "-r", "requirements.txt"]


def test_a_missing_environment_is_named() -> None:
    with pytest.raises(SystemExit, match="VENV: no Python at"):
        install.main(["/nonexistent/venv", "-r", "requirements.txt"])
