"""Write the canonical Colab setup cell into every notebook, from _config.yml.

The first code cell of each notebook starts with one generated block, the same in every
notebook except for nothing at all: it is built from `repository.url` and `repository.branch`
in `_config.yml`, the only place the URL is written. The notebook's own imports stay below
the block in the same cell.

    python tools/setup_cells.py            # rewrite the block in notebooks/*.ipynb
    python tools/setup_cells.py --check    # list notebooks whose block is out of date (exit 1)
    python tools/setup_cells.py --url git+file:///tmp/x@main DIR/*.ipynb   # point copies elsewhere

The block opens with a Colab form title, and the tool sets the cell's metadata so that the
notebook opens on one line in Colab ("cellView": "form", what Colab stores when a cell shows
its form only; the `{ display-mode: "form" }` annotation asks the same in the source) and in
JupyterLab (nbformat's `jupyter.source_hidden`). A reader clicks the title to see the code.
The site collapses the block behind a toggle (book/_ext/mlbook_site.py, from BEGIN and END).

Safe and idempotent: only the `source` of the first code cell and those two metadata keys
change; its outputs, every other cell and the file's JSON layout stay byte-identical (a
notebook whose layout this tool cannot reproduce is refused, not rewritten). A first code cell
that still has the old `%pip install` setup lines, or a block of an earlier version of this
tool, gets them replaced; one with no setup at all gets the block on top.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

# The block's first line: a Colab form title, so Colab shows this one line until it is opened.
BEGIN = '# @title Set up the book\'s environment (run me first) { display-mode: "form" }'
MARK = "# --- setup: written by `make setup-cells` from _config.yml; edit that, not this ---"
END = "# --- end of setup ---"
# First lines of blocks this tool wrote before (replaced like an outdated block).
_OLD_BEGINS = (MARK,)
# Cell metadata that shows the block folded: Colab's form view, JupyterLab's hidden source.
FOLDED = {"cellView": "form", "jupyter": {"source_hidden": True}}

# The body of the block. {url} is a pip requirement such as git+https://github.com/o/r@main.
_TEMPLATE = '''\
{begin}
{mark}
import importlib.util
import sys

MLBOOK_URL = "{url}"


def install_mlbook(url: str) -> None:
    """pip-install mlbook from `url` in a subprocess; keep the runtime's torch, ipywidgets, plotly."""
    import importlib.metadata
    import subprocess
    import tempfile

    keep = []  # pins: pip may add what is missing but never replaces these three
    for name in ("torch", "ipywidgets", "plotly"):
        try:
            keep.append(f"{{name}}=={{importlib.metadata.version(name)}}")
        except importlib.metadata.PackageNotFoundError:
            pass
    with tempfile.NamedTemporaryFile("w", suffix="-constraints.txt", delete=False) as pins:
        pins.write("\\n".join(keep) + "\\n")
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "-c", pins.name, url],
                         capture_output=True, text=True)
    if pip.returncode == 0:
        importlib.invalidate_caches()
        print(f"mlbook installed from {{url}}")
        return
    log = pip.stdout + pip.stderr
    print(log[-3000:], file=sys.stderr)
    causes = [
        (("Could not resolve host", "Temporary failure in name resolution", "Network is unreachable"),
         "this runtime cannot reach the network; reconnect the runtime and run the cell again"),
        (("not found", "does not appear to be a git repository", "could not read Username"),
         "the repository URL is wrong, private or not published yet; a fork sets repository.url "
         "in _config.yml and runs `make setup-cells`"),
        (("requires a different Python",), "this Python is older than mlbook needs (3.10 or newer)"),
        (("ResolutionImpossible", "conflict"),
         "mlbook's requirements conflict with the preinstalled torch, ipywidgets or plotly"),
    ]
    cause = next((why for signs, why in causes if any(s in log for s in signs)), "see pip's output above")
    raise RuntimeError(f"Could not install mlbook from {{url}}. Likely cause: {{cause}}. "
                       "The notebook stops here: nothing below works without mlbook.") from None


def installed_from():
    """The pip URL the installed mlbook came from, if it came from git (pip's direct_url.json)."""
    import importlib.metadata
    import json

    try:
        info = json.loads(importlib.metadata.distribution("mlbook").read_text("direct_url.json") or "{{}}")
    except importlib.metadata.PackageNotFoundError:
        return None
    vcs = info.get("vcs_info")
    if not vcs:
        return None
    rev = vcs.get("requested_revision")
    return f"{{vcs['vcs']}}+{{info['url']}}" + (f"@{{rev}}" if rev else "")


if "google.colab" in sys.modules:  # in Colab: install mlbook into this runtime, once
    if installed_from() == MLBOOK_URL:
        print(f"mlbook already installed from {{MLBOOK_URL}} in this runtime")
    else:
        install_mlbook(MLBOOK_URL)
elif importlib.util.find_spec("mlbook") is None:
    raise ModuleNotFoundError(f"mlbook is not installed in this Python: pip install \\"{{MLBOOK_URL}}\\"")
{end}'''

# The setup lines notebooks had before this tool: `import sys`, then an
# `if "google.colab" in sys.modules:` block whose body runs `%pip install ...`.
_LEGACY = re.compile(
    r'\A\s*import sys[ \t]*\n(?:[ \t]*\n)*if "google\.colab" in sys\.modules:[^\n]*\n(?:[ \t]+[^\n]*\n|[ \t]*\n)*'
)


class SetupCellError(ValueError):
    pass


def config_url(root: Path = ROOT) -> str:
    """The pip requirement for mlbook from _config.yml: git+<repository.url>@<repository.branch>."""
    import yaml

    cfg = yaml.safe_load((root / "_config.yml").read_text())
    repo = cfg.get("repository") or {}
    url = str(repo.get("url") or "").rstrip("/")
    if not url.startswith(("https://", "http://")):
        raise SetupCellError(f"_config.yml: repository.url must be an https URL of the book's repository, got {url!r}")
    branch = str(repo.get("branch") or "").strip()
    return f"git+{url}" + (f"@{branch}" if branch else "")


def canonical_block(url: str) -> str:
    """The generated block (no trailing newline) that installs mlbook from `url`."""
    if not url or any(c in url for c in "\"\\\n"):
        raise SetupCellError(f"the install URL must be non-empty, without quotes, backslashes or newlines; got {url!r}")
    return _TEMPLATE.format(begin=BEGIN, mark=MARK, end=END, url=url)


def rewrite_source(source: str, block: str) -> str:
    """`source` of a first code cell with its setup block replaced by `block` (the rest kept)."""
    lines = source.split("\n")
    starts = [k for k, line in enumerate(lines) if line == BEGIN or line in _OLD_BEGINS]
    if starts:
        i = starts[0]
        if END not in lines[i:]:
            raise SetupCellError(f"the setup block starts ({BEGIN!r}) but has no end line ({END!r})")
        j = i + lines[i:].index(END)
        before, after = "\n".join(lines[:i]), "\n".join(lines[j + 1 :])
        if before.strip():
            raise SetupCellError("code stands above the setup block in the first code cell")
        return block + ("\n" + after if after else "")
    m = _LEGACY.match(source)
    if m:
        rest = source[m.end() :].lstrip("\n")
    elif "google.colab" in source or "%pip" in source or "pip install" in source:
        raise SetupCellError("the first code cell installs something in a form this tool does not recognise; "
                             "remove those lines by hand, then run it again")
    else:
        rest = source.lstrip("\n")
    return block + ("\n\n" + rest if rest.strip() else "")


def _layouts() -> list[dict[str, Any]]:
    return [dict(indent=i, sort_keys=s, ensure_ascii=a) for i in (1, 2, 4) for s in (True, False) for a in (False, True)]


def _dump(nb: Any, layout: dict[str, Any], newline: bool) -> str:
    return json.dumps(nb, **layout) + ("\n" if newline else "")


def rewrite_notebook_text(raw: str, block: str, name: str = "notebook") -> str:
    """The notebook's JSON text with its first code cell's setup block set to `block`."""
    nb = json.loads(raw)
    layout = next(
        ((lay, nl) for lay in _layouts() for nl in (True, False) if _dump(nb, lay, nl) == raw), None
    )
    if layout is None:
        raise SetupCellError(f"{name}: its JSON layout is not one this tool can reproduce byte for byte; "
                             "save it once with Jupyter or nbformat, then run the tool again")
    code = [c for c in nb.get("cells", []) if c.get("cell_type") == "code"]
    if not code:
        raise SetupCellError(f"{name}: has no code cell to hold the setup block")
    cell = code[0]
    src = cell["source"]
    text = "".join(src) if isinstance(src, list) else str(src)
    try:
        new = rewrite_source(text, block)
    except SetupCellError as exc:
        raise SetupCellError(f"{name}: {exc}") from None
    metadata = cell.setdefault("metadata", {})
    folded = {**metadata, "cellView": FOLDED["cellView"],
              "jupyter": {**metadata.get("jupyter", {}), **FOLDED["jupyter"]}}
    if new == text and folded == metadata:
        return raw
    cell["source"] = new.splitlines(keepends=True) if isinstance(src, list) else new
    cell["metadata"] = folded
    return _dump(nb, *layout)


def first_code_source(path: Path) -> str:
    """The source of the notebook's first code cell ('' if it has none)."""
    return first_code_source_text(path.read_text(encoding="utf-8"))


def first_code_source_text(raw: str) -> str:
    cells = json.loads(raw).get("cells", [])
    code = [c for c in cells if c.get("cell_type") == "code"]
    if not code:
        return ""
    src = code[0]["source"]
    return "".join(src) if isinstance(src, list) else str(src)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("notebooks", nargs="*", type=Path, help="default: notebooks/*.ipynb")
    ap.add_argument("--check", action="store_true", help="change nothing; exit 1 if a notebook is out of date")
    ap.add_argument("--url", help="install from this pip requirement instead of _config.yml's repository")
    args = ap.parse_args(argv)
    paths = args.notebooks or sorted((ROOT / "notebooks").glob("*.ipynb"))
    block = canonical_block(args.url or config_url())
    stale, failed = [], []
    for path in paths:
        raw = path.read_text(encoding="utf-8")
        try:
            new = rewrite_notebook_text(raw, block, path.name)
        except SetupCellError as exc:
            failed.append(str(exc))
            continue
        if new != raw:
            stale.append(path.name)
            if not args.check:
                path.write_text(new, encoding="utf-8")
    for msg in failed:
        print(f"error: {msg}", file=sys.stderr)
    verb = "out of date" if args.check else "rewritten"
    print(f"setup cells: {len(paths) - len(stale) - len(failed)} up to date, {len(stale)} {verb}"
          + (f" ({', '.join(stale)})" if stale else "") + (f", {len(failed)} refused" if failed else ""))
    return 1 if failed or (args.check and stale) else 0


if __name__ == "__main__":
    sys.exit(main())
