"""The notebooks' setup cell: generated from _config.yml, the same in every notebook, and it
installs mlbook in Colab or stops the notebook with a message that names the URL and cause.

The cell's code runs here in a subprocess of this Python, with a stand-in `google.colab`
in `sys.modules` (as Colab's kernel has it) and, where pip itself is not under test,
`subprocess.run` replaced by a recorder. One test lets the real pip fail on a URL that
does not exist. tools/setup_cells.py, which writes the cell, is tested on copies.
"""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import setup_cells  # noqa: E402

URL = setup_cells.config_url()
BLOCK = setup_cells.canonical_block(URL)
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


# ---------------------------------------------------------------------------
# Every notebook carries the canonical cell
# ---------------------------------------------------------------------------


def test_config_url_is_the_repository_and_branch_of_config_yml() -> None:
    import yaml

    repo = yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]
    assert URL == f"git+{repo['url'].rstrip('/')}@{repo['branch']}"
    assert f'MLBOOK_URL = "{URL}"' in BLOCK


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_setup_cell_is_the_canonical_one(path: Path) -> None:
    source = setup_cells.first_code_source(path)
    assert source.startswith(BLOCK), (
        f"{path.name}: the first code cell does not start with the canonical setup block for {URL}; "
        "run `make setup-cells`"
    )
    rest = source[len(BLOCK):]
    assert rest == "" or rest.startswith("\n"), f"{path.name}: code continues on the setup block's last line"
    assert "google.colab" not in rest and "pip install" not in rest, f"{path.name}: a second install below the setup block"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_setup_cell_opens_folded_in_colab_and_jupyterlab(path: Path) -> None:
    """Colab shows a `# @title` cell with metadata cellView "form" as its title line alone;
    JupyterLab hides a cell's source under nbformat's jupyter.source_hidden."""
    cell = next(c for c in json.loads(path.read_text(encoding="utf-8"))["cells"] if c["cell_type"] == "code")
    first_line = "".join(cell["source"]).split("\n", 1)[0]
    assert first_line.startswith("# @title Set up the book's environment (run me first)"), first_line
    assert cell["metadata"].get("cellView") == "form", f"{path.name}: Colab would show the setup code"
    assert cell["metadata"].get("jupyter", {}).get("source_hidden") is True, f"{path.name}: JupyterLab would show it"


def test_every_notebook_is_up_to_date_for_the_tool() -> None:
    stale = [p.name for p in NOTEBOOKS
             if setup_cells.rewrite_notebook_text(p.read_text(encoding="utf-8"), BLOCK, p.name) != p.read_text(encoding="utf-8")]
    assert not stale, f"setup cells out of date (run `make setup-cells`): {stale}"


# ---------------------------------------------------------------------------
# What the cell does
# ---------------------------------------------------------------------------

RECORDER = """
import json, subprocess, sys, types
sys.modules["google.colab"] = types.ModuleType("google.colab")
calls = []
def fake_run(cmd, **kw):
    constraints = open(cmd[cmd.index("-c") + 1]).read() if "-c" in cmd else None
    calls.append({"cmd": cmd, "kw": sorted(kw), "constraints": constraints})
    return subprocess.CompletedProcess(cmd, RC, stdout="", stderr=PIP_SAYS)
subprocess.run = fake_run
try:
    exec(compile(BLOCK, "setup-cell", "exec"), {"__name__": "__main__"})
    outcome = None
except BaseException as exc:
    outcome = [type(exc).__name__, str(exc)]
print("RESULT " + json.dumps({"calls": calls, "outcome": outcome}))
"""


def _run_block(prelude: str, block: str = BLOCK, python_flags: tuple[str, ...] = ()) -> tuple[dict, str]:
    code = prelude + f"\nBLOCK = {block!r}\n" + (RECORDER if "RC =" in prelude else
                                                     "exec(compile(BLOCK, 'setup-cell', 'exec'), {})\n")
    proc = subprocess.run([sys.executable, *python_flags, "-c", code], capture_output=True, text=True, timeout=300)
    result = next((json.loads(ln[7:]) for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), {})
    return result, proc.stdout + proc.stderr


def test_in_colab_it_installs_with_pip_in_a_subprocess_keeping_torch_ipywidgets_plotly() -> None:
    result, log = _run_block('RC = 0\nPIP_SAYS = ""')
    assert result["outcome"] is None, log
    (call,) = result["calls"]
    cmd = call["cmd"]
    assert cmd[:4] == [sys.executable, "-m", "pip", "install"] and cmd[-1] == URL
    pins = dict(line.split("==") for line in call["constraints"].split())
    assert pins == {n: importlib.metadata.version(n) for n in ("torch", "ipywidgets", "plotly")}, (
        "pip must be constrained to the runtime's own torch, ipywidgets and plotly"
    )
    assert f"mlbook installed from {URL}" in log


def test_outside_colab_with_mlbook_installed_it_does_nothing() -> None:
    code = "import subprocess\nsubprocess.run = lambda *a, **k: (_ for _ in ()).throw(AssertionError('pip ran'))\n"
    _, log = _run_block(code)
    assert "Error" not in log and "pip ran" not in log, log


def test_outside_colab_without_mlbook_it_says_how_to_install() -> None:
    _, log = _run_block("", python_flags=("-S",))  # -S: no site-packages, so no mlbook
    assert "ModuleNotFoundError" in log and f'pip install "{URL}"' in log, log


@pytest.mark.parametrize(
    "pip_says, cause",
    [
        ("fatal: unable to access 'https://github.com/x/': Could not resolve host: github.com", "cannot reach the network"),
        ("remote: Repository not found.\nfatal: repository 'https://github.com/x/' not found", "URL is wrong"),
        ("ERROR: Package 'mlbook' requires a different Python: 3.8.10 not in '>=3.10'", "older than mlbook needs"),
        ("ERROR: ResolutionImpossible: for help visit ...", "conflict with the preinstalled"),
        ("ERROR: something nobody foresaw", "see pip's output"),
    ],
    ids=["network", "bad-url", "old-python", "conflict", "unknown"],
)
def test_a_failed_install_stops_the_notebook_naming_url_and_cause(pip_says: str, cause: str) -> None:
    result, log = _run_block(f"RC = 1\nPIP_SAYS = {pip_says!r}")
    assert result["outcome"] is not None, f"a failed install must stop the notebook:\n{log}"
    kind, message = result["outcome"]
    assert kind == "RuntimeError" and URL in message and cause in message, message
    assert pip_says.splitlines()[-1] in log, "pip's own output must be shown"


def test_real_pip_failure_on_a_missing_repository(tmp_path: Path) -> None:
    missing = f"git+file://{tmp_path}/no-such-repo@main"
    block = setup_cells.canonical_block(missing)
    code = "import sys, types\nsys.modules['google.colab'] = types.ModuleType('google.colab')\n"
    _, log = _run_block(code, block)
    assert "RuntimeError: Could not install mlbook from " + missing in log, log
    assert "URL is wrong" in log, log


# ---------------------------------------------------------------------------
# The tool: idempotent, and it touches nothing but the first code cell's source
# ---------------------------------------------------------------------------

LEGACY = 'import sys\n\nif "google.colab" in sys.modules:  # in Colab only\n    %pip install -q "git+https://example.org/x"\n\nimport torch\n\nfrom mlbook.viz import show'


def _nb(first_source: str, *, outputs: list | None = None, metadata: dict | None = None) -> str:
    cells = [
        {"cell_type": "markdown", "id": "m1", "metadata": {}, "source": ["# 9.9 Title\n", "Text ü."]},
        {"cell_type": "code", "execution_count": 1, "id": "c1", "metadata": metadata or {"tags": ["x"]},
         "outputs": outputs or [], "source": first_source.splitlines(keepends=True)},
        {"cell_type": "code", "execution_count": 2, "id": "c2", "metadata": {},
         "outputs": [{"name": "stdout", "output_type": "stream", "text": ["4\n"]}],
         "source": ["import sys\n", 'if "google.colab" in sys.modules:\n', "    print(2 + 2)"]},
    ]
    nb = {"cells": cells, "metadata": {"kernelspec": {"name": "python3"}}, "nbformat": 4, "nbformat_minor": 5}
    return json.dumps(nb, sort_keys=True, indent=1, ensure_ascii=False) + "\n"


def test_tool_converts_the_old_cell_keeping_imports_outputs_and_other_cells() -> None:
    raw = _nb(LEGACY, outputs=[{"name": "stdout", "output_type": "stream", "text": ["hi\n"]}])
    new = setup_cells.rewrite_notebook_text(raw, BLOCK)
    before, after = json.loads(raw), json.loads(new)
    assert "".join(after["cells"][1]["source"]) == BLOCK + "\n\nimport torch\n\nfrom mlbook.viz import show"
    assert after["cells"][1]["metadata"] == {"tags": ["x"], **setup_cells.FOLDED}, "existing metadata is kept"
    after["cells"][1]["source"] = before["cells"][1]["source"]
    after["cells"][1]["metadata"] = before["cells"][1]["metadata"]
    assert after == before, "only the first code cell's source and folding metadata may change"
    assert setup_cells.rewrite_notebook_text(new, BLOCK) == new, "a second run must change nothing"


def test_tool_replaces_an_outdated_block_and_keeps_bytes_elsewhere() -> None:
    old = setup_cells.canonical_block("git+https://example.org/old@main") + "\n\nimport torch"
    raw = _nb(old, metadata={"tags": ["x"], **setup_cells.FOLDED})
    new = setup_cells.rewrite_notebook_text(raw, BLOCK)
    assert setup_cells.first_code_source_text(new) == BLOCK + "\n\nimport torch"
    old_lines, new_lines = raw.splitlines(), new.splitlines()
    assert [ln for ln in old_lines if "example.org" not in ln] == [ln for ln in new_lines if URL not in ln]


def test_tool_replaces_a_block_of_the_earlier_untitled_form() -> None:
    untitled = BLOCK.split("\n", 1)[1].replace(URL, "git+https://example.org/old@main")
    assert untitled.startswith(setup_cells.MARK)
    new = setup_cells.rewrite_notebook_text(_nb(untitled + "\n\nimport torch"), BLOCK)
    assert setup_cells.first_code_source_text(new) == BLOCK + "\n\nimport torch"
    assert setup_cells.rewrite_notebook_text(new, BLOCK) == new


def test_block_opens_with_a_colab_form_title() -> None:
    title = BLOCK.split("\n", 1)[0]
    assert title == setup_cells.BEGIN and title.startswith("# @title ") and 'display-mode: "form"' in title


def test_tool_puts_the_block_on_top_of_a_cell_without_setup() -> None:
    new = setup_cells.rewrite_notebook_text(_nb("import torch"), BLOCK)
    assert setup_cells.first_code_source_text(new) == BLOCK + "\n\nimport torch"


@pytest.mark.parametrize(
    "source, pattern",
    [
        ("%pip install mlbook\nimport torch", "does not recognise"),
        ("x = 1\n" + BLOCK, "above the setup block"),
        (setup_cells.BEGIN + "\nimport sys", "no end line"),
    ],
)
def test_tool_refuses_what_it_cannot_rewrite_safely(source: str, pattern: str) -> None:
    with pytest.raises(setup_cells.SetupCellError, match=pattern):
        setup_cells.rewrite_notebook_text(_nb(source), BLOCK)


def test_tool_refuses_a_json_layout_it_cannot_reproduce() -> None:
    raw = _nb("import torch").replace('\n "metadata"', '\n\n "metadata"', 1)
    with pytest.raises(setup_cells.SetupCellError, match="layout"):
        setup_cells.rewrite_notebook_text(raw, BLOCK)


def test_tool_check_mode_reports_and_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "99_x.ipynb"
    path.write_text(_nb(LEGACY), encoding="utf-8")
    before = path.read_bytes()
    assert setup_cells.main(["--check", str(path)]) == 1 and path.read_bytes() == before
    assert setup_cells.main([str(path)]) == 0 and path.read_bytes() != before
    assert setup_cells.main(["--check", str(path)]) == 0


def test_block_is_valid_python_without_ipython_magics() -> None:
    compile(BLOCK, "setup-cell", "exec")
    assert "%pip" not in BLOCK and "!pip" not in BLOCK
    assert textwrap.dedent(BLOCK) == BLOCK


def test_in_colab_an_mlbook_already_installed_from_the_url_is_not_reinstalled(tmp_path: Path) -> None:
    dist = tmp_path / "mlbook-0.1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: mlbook\nVersion: 0.1.0\n")
    repo, rev = URL[len("git+"):].rsplit("@", 1)
    (dist / "direct_url.json").write_text(json.dumps(
        {"url": repo, "vcs_info": {"vcs": "git", "requested_revision": rev, "commit_id": "0" * 40}}))
    result, log = _run_block(f"import sys\nsys.path.insert(0, {str(tmp_path)!r})\nRC = 1\nPIP_SAYS = 'must not run'")
    assert result["outcome"] is None and result["calls"] == [], log
    assert f"mlbook already installed from {URL}" in log
