"""Write the Colab check's pins from Colab's published runtime: one command and a diff per upgrade.

    python tools/colab_requirements.py tools/colab/backend-info/pip-freeze.txt
    python tools/colab_requirements.py --check tools/colab/backend-info/pip-freeze.txt   # exit 1 if not current
    python tools/colab_requirements.py --torch 2.13.0 FREEZE     # where Colab's torch cannot be installed here

(`make colab-requirements`, `FREEZE=path` for another freeze.) Colab publishes its runtime in the
repository googlecolab/backend-info: `pip-freeze.txt` (what `pip freeze` prints in the CPU
runtime) and `os-info.txt` (the OS and the Python version). A copy lives in
tools/colab/backend-info/, with the commit it was read from.

What it writes:

* `tools/colab/requirements.txt` and `tools/colab/requirements-nodeps.txt`: every `name==version`
  line takes the version Colab's freeze lists for that package (names compared as pip compares
  them: case, `-`, `_` and `.` alike). Comments, blank lines and the order of the lines are kept,
  and so is an inline comment after a pin.
* `tools/colab/python-version`: Colab's Python as `major.minor` (from `os-info.txt` beside the
  freeze, or `--os-info`). The Makefile makes the Colab-like environment with that Python.

The rules:

* A line whose comment says `not in Colab` (nbval, the runner) is the check's own: it keeps its
  version. If Colab's freeze does list that package, the tool stops: the comment would be false.
* A pinned package that the freeze does not list stops the tool with an error naming the file,
  the line and the package: Colab does not preinstall it, so the check must not pretend it does.
* torch: Colab installs it from its own wheel URL (`torch @ https://.../torch-2.11.0%2Bcpu-...whl`);
  the version comes from the wheel's name, without the local label (`+cpu`, `+cu128`), which no
  package index here serves. `--torch VERSION` pins another release instead, for a machine where
  Colab's cannot be installed; the line then says which version Colab has.
* Only `name==version` lines are rewritten; any other requirement line (a range, a URL, an option)
  stops the tool, naming it.
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
from pathlib import Path
from urllib.parse import unquote, urlsplit

ROOT = Path(__file__).resolve().parents[1]
COLAB = ROOT / "tools" / "colab"
REQUIREMENTS = (COLAB / "requirements.txt", COLAB / "requirements-nodeps.txt")
PYTHON_VERSION = COLAB / "python-version"
DEFAULT_FREEZE = COLAB / "backend-info" / "pip-freeze.txt"
NOT_IN_COLAB = "not in colab"  # the marker, compared in lower case

# name[extras]==version, then anything (spaces, `; marker`, `# comment`)
_PIN = re.compile(r"^(?P<name>[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)(?P<extras>\[[^\]]*\])?"
                  r"(?P<op>\s*==\s*)(?P<version>[^\s;#]+)(?P<rest>.*)$")
_FREEZE_PIN = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*(?P<version>\S+)\s*$")
_FREEZE_URL = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)\s+@\s+(?P<url>\S+)\s*$")
_PYTHON = re.compile(r"^Python (?P<version>(?P<minor>\d+\.\d+)\.\d+\S*)\s*$", re.MULTILINE)


class ColabRequirementsError(ValueError):
    """A freeze or requirements file the tool cannot turn into pins; the message names file and line."""


def canonical(name: str) -> str:
    """A package name as pip compares names (PEP 503): lower case, runs of `-`, `_`, `.` as one `-`."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _wheel_version(name: str, url: str) -> str | None:
    """The version in a wheel URL's file name (`torch-2.11.0%2Bcpu-cp313-...whl` -> `2.11.0+cpu`)."""
    filename = unquote(urlsplit(url).path.rsplit("/", 1)[-1])
    if not filename.endswith(".whl"):
        return None
    parts = filename[: -len(".whl")].split("-")
    if len(parts) < 5 or canonical(parts[0]) != canonical(name):
        return None
    return parts[1]


def read_freeze(path: Path) -> dict[str, str | None]:
    """Canonical name -> version of every package in a `pip freeze` file.

    `name==version` lines give their version; `name @ URL` lines the version in the wheel's file
    name, or None where the URL names none (a git checkout, a local sdist)."""
    if not path.is_file():
        raise ColabRequirementsError(f"{path}: no such file: give Colab's pip-freeze.txt "
                                     "(googlecolab/backend-info; a copy is in tools/colab/backend-info/)")
    found: dict[str, str | None] = {}
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#") or line.startswith("-e "):
            continue
        if m := _FREEZE_PIN.match(line):
            found[canonical(m["name"])] = m["version"]
        elif m := _FREEZE_URL.match(line):
            found[canonical(m["name"])] = _wheel_version(m["name"], m["url"])
        else:
            raise ColabRequirementsError(f"{path}:{number}: not a line `pip freeze` writes "
                                         f"(name==version or name @ URL): {raw!r}")
    if not found:
        raise ColabRequirementsError(f"{path}: lists no package: is it a pip freeze?")
    return found


def read_python(os_info: Path) -> str:
    """Colab's Python as `major.minor`, from the `Python 3.13.15` line of os-info.txt."""
    if not os_info.is_file():
        raise ColabRequirementsError(f"{os_info}: no such file: Colab's os-info.txt (beside pip-freeze.txt in "
                                     "googlecolab/backend-info) gives the Python version; name it with --os-info")
    m = _PYTHON.search(os_info.read_text(encoding="utf-8"))
    if not m:
        raise ColabRequirementsError(f"{os_info}: no line 'Python X.Y.Z' (what `python --version` prints)")
    return m["minor"]


def without_local_label(version: str) -> str:
    """`2.11.0+cpu` -> `2.11.0`: package indexes serve no local versions."""
    return version.split("+", 1)[0]


def rewrite(text: str, freeze: dict[str, str | None], *, source: str, freeze_name: str,
            torch: str | None = None) -> str:
    """`text` (a requirements file) with every pin at Colab's version; `source` names it in errors."""
    out = []
    for number, line in enumerate(text.splitlines(keepends=True), 1):
        body = line.rstrip("\r\n")
        stripped = body.strip()
        if not stripped or stripped.startswith("#"):
            out.append(line)
            continue
        m = _PIN.match(stripped)
        if not m:
            raise ColabRequirementsError(
                f"{source}:{number}: only `name==version` pins and comments can follow Colab's freeze; "
                f"got {stripped!r}")
        name, key = m["name"], canonical(m["name"])
        comment = m["rest"].partition("#")[2]
        colab = freeze.get(key)
        if NOT_IN_COLAB in comment.lower():
            if key in freeze:
                raise ColabRequirementsError(
                    f"{source}:{number}: {name} is marked 'not in Colab', but {freeze_name} lists "
                    f"{name}=={colab}: drop the mark, and the line takes Colab's version")
            out.append(line)
            continue
        if key not in freeze:
            raise ColabRequirementsError(
                f"{source}:{number}: pins {name}, which {freeze_name} does not list: Colab does not "
                f"preinstall it. Remove the line, or mark it '# not in Colab' if the check needs it anyway")
        if colab is None:
            raise ColabRequirementsError(
                f"{source}:{number}: {freeze_name} lists {name} from a URL that names no version")
        version = without_local_label(colab)
        rest = m["rest"]
        if key == "torch" and torch is not None and torch != version:
            version = torch
            note = f"# Colab has torch {colab}; {torch} pinned instead (colab_requirements.py --torch)"
            rest = f"  {note}" if not rest.strip() else f"{rest}; {note[2:]}"
        newline = line[len(body):]
        indent = body[: len(body) - len(body.lstrip())]
        out.append(f"{indent}{name}{m['extras'] or ''}{m['op']}{version}{rest}{newline}")
    return "".join(out)


def outputs(freeze_path: Path, os_info: Path | None = None, *, torch: str | None = None,
            requirements: tuple[Path, ...] | None = None,
            python_version: Path | None = None) -> dict[Path, str]:
    """Each file the tool writes -> its new text (nothing written)."""
    requirements = REQUIREMENTS if requirements is None else requirements
    python_version = PYTHON_VERSION if python_version is None else python_version
    freeze = read_freeze(freeze_path)
    os_info = os_info if os_info is not None else freeze_path.with_name("os-info.txt")
    new = {python_version: read_python(os_info) + "\n"}
    for path in requirements:
        if not path.is_file():
            raise ColabRequirementsError(f"{path}: no such file (the Colab check's requirements)")
        new[path] = rewrite(path.read_text(encoding="utf-8"), freeze, source=_shown(path),
                            freeze_name=_shown(freeze_path), torch=torch)
    return new


def _shown(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Write tools/colab/requirements*.txt and python-version "
                                             "from Colab's pip-freeze.txt and os-info.txt.")
    ap.add_argument("freeze", nargs="?", type=Path, default=DEFAULT_FREEZE,
                    help=f"Colab's pip-freeze.txt (default: {_shown(DEFAULT_FREEZE)})")
    ap.add_argument("--os-info", type=Path, help="Colab's os-info.txt (default: beside the freeze)")
    ap.add_argument("--torch", metavar="VERSION",
                    help="pin this torch instead of Colab's (where Colab's cannot be installed here)")
    ap.add_argument("--check", action="store_true", help="write nothing; exit 1 and show the diff if out of date")
    args = ap.parse_args(argv)
    try:
        new = outputs(args.freeze, args.os_info, torch=args.torch)
    except ColabRequirementsError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    changed = 0
    for path, text in new.items():
        old = path.read_text(encoding="utf-8") if path.is_file() else ""
        if old == text:
            continue
        changed += 1
        sys.stdout.writelines(difflib.unified_diff(old.splitlines(keepends=True), text.splitlines(keepends=True),
                                                   f"a/{_shown(path)}", f"b/{_shown(path)}"))
        if not args.check:
            path.write_text(text, encoding="utf-8")
    verb = "differ from" if args.check else "rewritten from"
    print(f"{changed} file(s) {verb} {_shown(args.freeze)}" if changed else
          f"the Colab check's pins are those of {_shown(args.freeze)}")
    return 1 if args.check and changed else 0


if __name__ == "__main__":
    sys.exit(main())
