"""Install into a virtual environment with uv where it can, with pip where it cannot.

    python tools/install.py VENV [pip install arguments: -r FILE, -e SPEC, -c FILE, --no-deps, -q ...]

The Makefile's environments (.venv, the Colab-like one, the lab and pdf extras) are installed
through this. uv resolves and installs the same releases as pip from the same places (the same
`pip freeze`, checked for .venv and the Colab-like environment), about ten times faster on the
book's 2-core machine: .venv 101 s with pip in a clean-clone `make test`, 11 s with uv and an empty
uv cache; the Colab-like environment 57 s with pip, 8 s with uv. The install of .venv is the first
thing `make test` does, and everything else waits for it.

* uv itself comes from the package index through the environment's own pip (pinned below), so
  nothing beyond Python and pip is needed.
* pip's settings on the machine (`pip config list`: index-url, extra-index-url, find-links,
  constraint, cert; from the config files' [global] and [install] sections and PIP_* variables,
  the most specific winning as in pip)
  are handed to uv, and uv chooses a release across all indexes as pip does
  (--index-strategy unsafe-best-match). So a local wheel directory, a mirror or a version cap that
  pip would use, uv uses too; where none is set, both use PyPI.
* --no-compile is pip's flag; uv never byte-compiles unless asked, so it is dropped.
* If uv cannot be installed or its install fails, the same arguments go to pip, and the script
  says so: slower, never different.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

UV = "uv==0.13.9"
# `pip config list` prints "section.key=value", the config files already merged; of the sections
# pip's install reads, least specific first (a later one's value replaces an earlier one's):
# [global], then [install], then the PIP_* environment variables (":env:")
SCOPES = ("global", "install", ":env:")
FORWARDED = {"index-url": "--index-url", "extra-index-url": "--extra-index-url", "find-links": "--find-links",
             "constraint": "--constraint"}


def say(msg: str) -> None:
    print(f"[install] {msg}", flush=True)


def pip_settings(python: Path) -> dict[str, str]:
    """pip's effective settings that decide where packages come from: key -> value."""
    out = subprocess.run([str(python), "-m", "pip", "config", "list"], capture_output=True, text=True)
    found: dict[str, dict[str, str]] = {}
    for line in out.stdout.splitlines():
        name, sep, value = line.partition("=")
        scope, dot, key = name.rpartition(".")
        if not sep or not dot:
            continue
        found.setdefault(key, {})[scope] = value.strip().strip("'\"")
    return {key: next(by_scope[s] for s in reversed(SCOPES) if s in by_scope)
            for key, by_scope in found.items() if any(s in by_scope for s in SCOPES)}


def uv_command(uv: Path, python: Path, args: list[str], settings: dict[str, str]) -> list[str]:
    cmd = [str(uv), "pip", "install", "--python", str(python), "--index-strategy", "unsafe-best-match"]
    for key, flag in FORWARDED.items():
        for value in shlex.split(settings.get(key, "")):
            cmd += [flag, value]
    return cmd + [a for a in args if a != "--no-compile"]


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        sys.exit("usage: python tools/install.py VENV [pip install arguments ...]")
    venv, args = Path(argv[0]), argv[1:]
    python = venv / "bin" / "python"
    if not python.is_file():
        sys.exit(f"VENV: no Python at {python}: create the environment first (python -m venv {venv})")
    pip = [str(python), "-m", "pip", "install", *args]
    uv = venv / "bin" / "uv"
    if os.environ.get("MLBOOK_INSTALL_WITH_PIP"):
        say("MLBOOK_INSTALL_WITH_PIP is set: installing with pip")
        return subprocess.run(pip).returncode
    if not uv.is_file():
        got = subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", UV],
                             capture_output=True, text=True)
        if got.returncode != 0 or not uv.is_file():
            say(f"could not install {UV} ({(got.stderr or got.stdout).strip()[-500:]}); installing with pip")
            return subprocess.run(pip).returncode
    settings = pip_settings(python)
    env = dict(os.environ)
    if settings.get("cert"):
        env.setdefault("SSL_CERT_FILE", settings["cert"])
    cmd = uv_command(uv, python, args, settings)
    say(" ".join(shlex.quote(c) for c in cmd))
    if subprocess.run(cmd, env=env).returncode == 0:
        return 0
    say("uv failed (above); installing the same with pip")
    return subprocess.run(pip).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
