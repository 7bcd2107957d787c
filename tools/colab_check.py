"""`make colab-check`: run every notebook as a Colab reader would, in a Colab-like environment.

    python tools/colab_check.py --venv _build/colab-venv [notebooks/01_x.ipynb ...]

What it sets up (the virtual environment itself comes from tools/colab/requirements.txt,
made by the Makefile: Colab's IPython 7.34, ipywidgets 7.7.1, plotly 5, the pinned torch,
no jupyter-book):

1. A snapshot of the working tree (tracked files and untracked files git does not ignore,
   as they are on disk now) committed to a throwaway git repository under /tmp. The setup
   cells install mlbook from it with `pip install git+file://...@main`, the same path a
   reader's `git+https://...` takes: a clone, a build, package data and all. In CI's clean
   clone the snapshot equals HEAD; on a developer's machine it holds their uncommitted
   changes too, so the code under test is the code on disk.
2. Copies of the notebooks in /tmp/.../content (the working directory, as Colab's /content;
   nothing of the repository is reachable from it), their setup cells rewritten by
   tools/setup_cells.py to install from the snapshot: the canonical cell with one URL changed.
3. A stand-in `google.colab` package, imported at kernel start from an IPython start-up file
   as Colab's kernel does, and mlbook uninstalled, so every setup cell really installs it.

Then nbval runs each notebook top to bottom in live mode (MLBOOK_STATIC unset; MLBOOK_PROBE_MODEL=tiny-random,
so the real-model probe builds its tiny random model instead of downloading one) with the
plugin tools/colab/nbval_colab.py, which also fails on a widget shown twice, on "No saved
full-budget record", and on a setup cell that did not install mlbook, and times each
notebook. Afterwards: Colab's torch, ipywidgets and plotly must be the versions they were
before; tests/test_show_live.py runs again under ipywidgets 7; and from a folder outside the
repository with no MLBOOK_RESULTS, every registered experiment's full-budget record must load
(the records ship as package data).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import setup_cells  # noqa: E402

KEPT = ("torch", "ipywidgets", "plotly", "ipython")


TIMES = ROOT / "tools" / "colab" / "times.json"  # seconds per notebook in a clean-clone make test (--times)


def default_order(notebooks: list[Path], times: Path = TIMES) -> list[Path]:
    """The notebooks, slowest first by the committed times, then any not timed from the last.

    make test runs the site build beside this check, and the site build executes the notebooks
    from the first. They share this build's quick experiment records: whichever reaches an
    experiment first trains its quick run and saves the record, and the other loads it (waiting
    if it is still being trained), instead of both training it (about 280 s of CPU on 2 cores).
    Taking the slowest first (the experiments 23, 26, 25) has each finished before the site build,
    which reaches them last, gets there; from the last notebook instead, the site build waited
    about 45 s for 23 (ci10)."""
    seconds = json.loads(times.read_text(encoding="utf-8")) if times.is_file() else {}
    timed = sorted((p for p in notebooks if p.name in seconds), key=lambda p: (-seconds[p.name], p.name))
    return timed + sorted((p for p in notebooks if p.name not in seconds), reverse=True)


def say(msg: str) -> None:
    print(f"[colab-check] {msg}", flush=True)


def snapshot(dest: Path) -> str:
    """Commit the working tree's files (tracked + untracked-not-ignored) to a new repo at `dest`."""
    files = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                           check=True, capture_output=True).stdout.decode().split("\0")
    n = 0
    for rel in filter(None, files):
        src = ROOT / rel
        if not src.is_file():  # deleted in the working tree but still in the index
            continue
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dest / rel)
        n += 1
    git = ["git", "-C", str(dest), "-c", "user.name=colab-check", "-c", "user.email=colab-check@localhost",
           "-c", "commit.gpgsign=false"]
    subprocess.run(["git", "init", "-q", "-b", "main", str(dest)], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "working tree snapshot for the Colab check"], check=True)
    say(f"snapshot of the working tree: {n} files in {dest}")
    return f"git+file://{dest}@main"


def venv_python(venv: Path, code: str, *, cwd: Path, env: dict[str, str]) -> str:
    return subprocess.run([str(venv / "bin" / "python"), "-c", code], cwd=cwd, env=env, check=True,
                          capture_output=True, text=True).stdout


def versions(venv: Path, cwd: Path, env: dict[str, str]) -> dict[str, str]:
    code = ("import importlib.metadata as m, json\n"
            f"print(json.dumps({{n: m.version(n) for n in {KEPT!r}}}))")
    return json.loads(venv_python(venv, code, cwd=cwd, env=env))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Run the notebooks in a Colab-like environment.")
    ap.add_argument("notebooks", nargs="*", type=Path, help="default: notebooks/*.ipynb")
    ap.add_argument("--venv", type=Path, required=True, help="the Colab-like virtual environment")
    ap.add_argument("--results", type=Path, help="MLBOOK_RESULTS for the run (quick records the site build reuses)")
    ap.add_argument("--times", type=Path, help="write each notebook's time (JSON) here")
    ap.add_argument("--cell-timeout", type=int, default=300)
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder (printed) for inspection")
    args = ap.parse_args(argv)

    venv = args.venv.resolve()
    if not (venv / "bin" / "python").is_file():
        sys.exit(f"no virtual environment at {venv}: run `make colab-check`, which creates it")
    notebooks = [p.resolve() for p in args.notebooks] or default_order(sorted((ROOT / "notebooks").glob("*.ipynb")))
    missing = [str(p) for p in notebooks if not p.is_file()]
    if missing:
        sys.exit(f"no such notebook: {', '.join(missing)}")

    tmp = Path(tempfile.mkdtemp(prefix="mlbook-colab-"))
    failures: list[str] = []
    try:
        url = snapshot(tmp / "repo")

        content = tmp / "content"
        content.mkdir()
        block = setup_cells.canonical_block(url)
        for nb in notebooks:
            try:
                text = setup_cells.rewrite_notebook_text(nb.read_text(encoding="utf-8"), block, nb.name)
            except setup_cells.SetupCellError as exc:
                raise SystemExit(f"[colab-check] cannot point the setup cell at the snapshot: {exc}") from None
            (content / nb.name).write_text(text, encoding="utf-8")
        (content / "pytest.ini").write_text("[pytest]\n")  # rootdir here; no repository config applies

        # Colab's kernel imports google.colab at start-up; so does this one.
        purelib = subprocess.run([str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                 check=True, capture_output=True, text=True).stdout.strip()
        shutil.rmtree(Path(purelib) / "google" / "colab", ignore_errors=True)
        shutil.copytree(ROOT / "tools" / "colab" / "google" / "colab", Path(purelib) / "google" / "colab",
                        ignore=shutil.ignore_patterns("__pycache__"))
        startup = tmp / "ipython" / "profile_default" / "startup"
        startup.mkdir(parents=True)
        (startup / "00-google-colab.py").write_text("import google.colab  # as Colab's kernel does\n")
        runner = tmp / "runner"
        runner.mkdir()
        for module in ("nbval_colab.py", "cpu_bounds.py"):  # the plugin, and the CPU bounds it applies
            shutil.copy2(ROOT / "tools" / "colab" / module, runner / module)

        env = {k: v for k, v in os.environ.items()
               if k not in {"MLBOOK_STATIC", "MLBOOK_RESULTS", "PYTHONPATH", "VIRTUAL_ENV", "JUPYTER_PATH",
                            "IPYTHONDIR", "PYTHONHOME"}}
        env.update(PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}", VIRTUAL_ENV=str(venv),
                   IPYTHONDIR=str(tmp / "ipython"), XDG_CACHE_HOME=str(tmp / "cache"), PYTHONUNBUFFERED="1",
                   MPLBACKEND="module://matplotlib_inline.backend_inline", PYDEVD_DISABLE_FILE_VALIDATION="1")
        subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "uninstall", "-q", "-y", "mlbook"],
                       env=env, cwd=content, check=False, capture_output=True)
        before = versions(venv, content, env)
        say("Colab-like environment: " + ", ".join(f"{k} {v}" for k, v in before.items()))
        extra = venv_python(venv, "import importlib.util as u; print(bool(u.find_spec('jupyter_book')), "
                                  "bool(u.find_spec('mlbook')))", cwd=content, env=env).split()
        wrong = [f"{k} {before[k]} (Colab has 7.x)" for k in ("ipywidgets", "ipython") if not before[k].startswith("7.")]
        wrong += ["jupyter-book is installed (Colab has none)"] if extra[0] == "True" else []
        wrong += ["mlbook is importable before any setup cell ran"] if extra[1] == "True" else []
        if wrong:
            raise SystemExit("[colab-check] the environment is not Colab-like: " + "; ".join(wrong))

        # The real-model probe (notebooks/14_real_model.ipynb) downloads nothing here: it runs on the
        # tiny random Llama it builds in-process (mlbook.analysis.probe.probe_model_name reads this).
        run_env = dict(env, PYTHONPATH=str(runner), MLBOOK_COLAB_EXPECT_URL=url, MLBOOK_PROBE_MODEL="tiny-random")
        if args.results:
            args.results.mkdir(parents=True, exist_ok=True)
            run_env["MLBOOK_RESULTS"] = str(args.results.resolve())
        if args.times:
            args.times.parent.mkdir(parents=True, exist_ok=True)
            run_env["MLBOOK_COLAB_TIMES"] = str(args.times.resolve())
        cmd = [str(venv / "bin" / "python"), "-m", "pytest", "-p", "nbval_colab", "-p", "no:cacheprovider",
               "--nbval-lax", "--nbval-current-env", f"--nbval-cell-timeout={args.cell_timeout}", "-q",
               *[nb.name for nb in notebooks]]
        say(f"running {len(notebooks)} notebook(s) with nbval in {content} (live mode)")
        start = time.perf_counter()
        if subprocess.run(cmd, cwd=content, env=run_env).returncode != 0:
            failures.append("a notebook failed under the Colab-like environment (see above)")
        say(f"notebooks done in {time.perf_counter() - start:.0f} s")

        after = versions(venv, content, env)
        changed = {k: (before[k], after[k]) for k in KEPT if before[k] != after[k]}
        if changed:
            failures.append("the setup cell replaced Colab's own packages: "
                            + ", ".join(f"{k} {a} -> {b}" for k, (a, b) in changed.items()))

        installed = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "show", "mlbook"], env=env,
                                   cwd=content, capture_output=True, text=True)
        if installed.returncode != 0:
            failures.append("mlbook is not installed after the notebooks ran: no setup cell installed it")
        else:
            say("show_live under this environment's ipywidgets:")
            if subprocess.run([str(venv / "bin" / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider",
                               "--noconftest", "--rootdir", str(content), "-c", str(content / "pytest.ini"),
                               str(ROOT / "tests" / "test_show_live.py")], cwd=content, env=env).returncode != 0:
                failures.append("tests/test_show_live.py failed under the Colab-like environment")
            probe = (
                "import json, mlbook\n"
                "from mlbook.experiments import catalog  # noqa: F401  (registers every experiment)\n"
                "from mlbook.experiments.registry import REGISTRY, load_result, results_dir\n"
                "print(json.dumps({'package': mlbook.__file__, 'results_dir': str(results_dir()),\n"
                "  'missing': sorted(n for n in REGISTRY if load_result(n, 'full') is None),\n"
                "  'found': sorted(n for n in REGISTRY if load_result(n, 'full') is not None)}))\n"
            )
            try:
                info = json.loads(venv_python(venv, probe, cwd=tmp, env=env))
            except subprocess.CalledProcessError as exc:
                failures.append(f"loading the saved full-budget records outside the repository failed:\n{exc.stderr}")
            else:
                say(f"outside the repository: mlbook from {info['package']}, results_dir() = {info['results_dir']}; "
                    f"full-budget records found for {', '.join(info['found']) or 'none'}")
                src = str(ROOT / "src")
                if info["package"].startswith(src) or info["results_dir"].startswith(src):
                    failures.append(f"the probe outside the repository still used the repository: {info}")
                if info["missing"] or not info["found"]:
                    failures.append("saved full-budget records are unreachable outside the repository for: "
                                    + (", ".join(info["missing"]) or "every experiment (none registered?)"))
    finally:
        if args.keep:
            say(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)

    for f in failures:
        print(f"[colab-check] FAILED: {f}", file=sys.stderr)
    if not failures:
        say("passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
