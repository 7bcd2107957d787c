"""The one record store of the experiments and the benchmarks, and the one device picker.

A record is one JSON object per run: at least RECORD_KEYS (name, budget, config, results), then
where and how it was made (`machine_info`: device, CPU, threads, versions), the elapsed time, the
date and the command that remakes it (`make_record`). Experiments and benchmarks each keep a
`Registry` of what can run (a config per budget in BUDGETS and a run function) and lay out their
own file names under a results folder; everything else about records happens here:

    PACKAGED_RESULTS          the committed records shipped inside the package (src/mlbook/results)
    results_dir()             where runs write: $MLBOOK_RESULTS; in a clone, the package's results/
                              (a full run updates the committed record); else ~/.cache/mlbook/results
    pick_device(preference)   the device of a run: None means $MLBOOK_DEVICE if set, else "auto"
                              (cuda, then mps, then cpu); a named one is checked (`check_device`)
    check_writable(path)      refuses, before any work starts, a record path that cannot be written
    save_record(record, path) writes through a temporary file; if the folder broke during the run,
                              saves to a fresh temporary folder and warns where: a run is never lost
    read_record(path, kind)   the record, or None: quietly when there is none, with a warning naming
                              the path and the fault when it cannot be used, so the caller falls back
    find_record(paths, ...)   the first usable record among paths (results folder, then packaged)
                              whose config matches
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

import torch

import mlbook
from mlbook.transformer.validate import check_device, env_folder

__all__ = [
    "BUDGETS",
    "RunFn",
    "Registered",
    "Registry",
    "check_budget",
    "PACKAGED_RESULTS",
    "RECORD_KEYS",
    "SAVED_DIGITS",
    "source_checkout",
    "results_dir",
    "pick_device",
    "device_label",
    "machine_info",
    "jsonable",
    "rounded",
    "make_record",
    "record_text",
    "check_writable",
    "save_record",
    "read_record",
    "find_record",
]

BUDGETS: tuple[str, ...] = ("quick", "full")

# (config, device, progress) -> results: what an experiment or a benchmark runs
RunFn = Callable[[dict[str, Any], torch.device, bool], dict[str, Any]]


@dataclass
class Registered:
    """One experiment or benchmark: what it tests (claim), a JSON-able config per budget, its run function."""

    name: str
    title: str
    claim: str
    configs: dict[str, dict[str, Any]]  # budget -> config
    fn: RunFn


class Registry(dict[str, Registered]):
    """Name -> Registered for one kind of run ("experiment", "benchmark"); `load` imports the modules
    that register themselves (the catalog), called before a name is looked up."""

    def __init__(self, kind: str, load: Callable[[], None]) -> None:
        super().__init__()
        self.kind, self.load = kind, load

    def register(self, name: str, title: str, claim: str, configs: dict[str, dict[str, Any]]
                 ) -> Callable[[RunFn], RunFn]:
        """Decorator adding `fn(config, device, progress) -> results` under `name`; every budget needs a config."""
        missing = set(BUDGETS) - set(configs)
        if missing:
            raise ValueError(f"{self.kind} {name!r} needs a config for every budget; missing {sorted(missing)}")

        def wrap(fn: RunFn) -> RunFn:
            self[name] = Registered(name, title, claim, {b: jsonable(c) for b, c in configs.items()}, fn)
            return fn

        return wrap

    def lookup(self, name: str) -> Registered:
        """The registered `name` (after loading the catalog); ValueError naming the valid ones otherwise."""
        self.load()
        if name not in self:
            raise ValueError(f"unknown {self.kind} {name!r}; valid names are {', '.join(sorted(self))}")
        return self[name]


def check_budget(budget: str) -> str:
    """One of BUDGETS; ValueError listing them otherwise."""
    if budget not in BUDGETS:
        raise ValueError(f"unknown budget {budget!r}; valid values are {', '.join(BUDGETS)}")
    return budget


# The committed records ship inside the package (package data), so a reader sees them wherever
# `mlbook` is installed: a clone, `pip install git+...` in Colab, a wheel.
PACKAGED_RESULTS = Path(__file__).resolve().parent / "results"  # src/mlbook/results

RECORD_KEYS: tuple[str, ...] = ("name", "budget", "config", "results")

# Saved numbers keep 6 significant digits: every figure and table shows 2 to 4, and full float64
# reprs made the per-position records several times larger for nothing.
SAVED_DIGITS = 6


def source_checkout() -> Path | None:
    """The repository root when mlbook is imported from a clone (src layout), else None."""
    root = PACKAGED_RESULTS.parents[2]
    return root if (root / "_config.yml").is_file() and (root / "src" / "mlbook").is_dir() else None


def results_dir() -> Path:
    """Where records are written: MLBOOK_RESULTS if set; in a clone, the package's own `results/`
    (so a full-budget run updates the committed record; quick runs go to the git-ignored
    `results/quick/`); otherwise a user cache folder (~/.cache/mlbook/results)."""
    env = env_folder("MLBOOK_RESULTS")  # a blank value or a file there is an error naming the variable
    if env is not None:
        return env
    if source_checkout() is not None:
        return PACKAGED_RESULTS
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "mlbook" / "results"


def pick_device(preference: str | torch.device | None = None) -> torch.device:
    """'auto' picks cuda, then mps, then cpu; otherwise the named device, checked (`validate.check_device`).

    None means $MLBOOK_DEVICE if set, else 'auto'; a bad value there is an error naming the variable.
    Experiments and benchmarks both choose their device here, so both have this one default."""
    if preference is None:
        env = os.environ.get("MLBOOK_DEVICE", "")
        if env.strip():
            return check_device("device in environment variable MLBOOK_DEVICE", env)
        return check_device("device", "auto")
    return check_device("device", preference)


def device_label(device: torch.device) -> str:
    """The device as a record names it: 'cpu', 'mps', or 'cuda (<GPU name>)'."""
    return str(device) if device.type != "cuda" else f"cuda ({torch.cuda.get_device_name(device)})"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_info(device: torch.device) -> dict[str, Any]:
    """Device, CPU model, core and thread counts (torch's, at the time of the call), library versions."""
    return {
        "device": device_label(device),
        "cpu": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "threads": torch.get_num_threads(),
        "mlbook_version": mlbook.__version__,
        "torch_version": torch.__version__,
        "python_version": platform.python_version(),
    }


def jsonable(obj: Any) -> Any:
    """obj as it reads back from JSON (tuples become lists, keys strings); TypeError if it is not JSON."""
    return json.loads(json.dumps(obj))


def rounded(obj: Any) -> Any:
    """Every float in obj (nested dicts and lists) rounded to SAVED_DIGITS significant digits."""
    if isinstance(obj, float):
        return float(f"{obj:.{SAVED_DIGITS}g}")
    if isinstance(obj, dict):
        return {k: rounded(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [rounded(v) for v in obj]
    return obj


def make_record(name: str, budget: str, config: dict[str, Any], results: dict[str, Any], machine: dict[str, Any],
                elapsed_s: float, command: str, **about: Any) -> dict[str, Any]:
    """A record: name, the `about` fields (title, claim, ...), budget, config, results (rounded),
    the machine fields, elapsed_s, created (UTC) and the command that remakes it."""
    return {"name": name, **about, "budget": budget, "config": config, "results": rounded(jsonable(results)),
            **machine, "elapsed_s": round(elapsed_s, 1),
            "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"), "command": command}


def record_text(record: dict[str, Any]) -> str:
    """A record as written to disk: its results rounded to SAVED_DIGITS, one item per line except
    that a list of numbers or strings stays on one line (per-position curves)."""
    return _dump({**record, "results": rounded(record["results"])}, "") + "\n"


def _dump(obj: Any, indent: str) -> str:
    inner = indent + " "
    if isinstance(obj, dict) and obj:
        items = [f"{inner}{json.dumps(k)}: {_dump(v, inner)}" for k, v in obj.items()]
        return "{\n" + ",\n".join(items) + "\n" + indent + "}"
    if isinstance(obj, list) and obj and any(isinstance(v, (dict, list)) for v in obj):
        return "[\n" + ",\n".join(inner + _dump(v, inner) for v in obj) + "\n" + indent + "]"
    return json.dumps(obj)


def check_writable(path: Path) -> None:
    """Refuse, before any work, a record path that cannot be written: its folder cannot be made or
    written to (tried by creating and removing a temporary file there), or a folder stands where the
    record goes. ValueError naming the path and what to do."""
    hint = "set MLBOOK_RESULTS to a writable folder, or pass save=False (--no-save)"
    folder = path.parent
    if path.is_dir():
        raise ValueError(f"cannot save the record: {path} is a folder, not a file; remove it or {hint}")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".write-test-"):
            pass
    except OSError as err:
        raise ValueError(f"cannot save the record in {folder} ({type(err).__name__}: {err.strerror or err}); "
                         f"{hint}") from None


def save_record(record: dict[str, Any], path: Path) -> Path:
    """Write the record to path (through a temporary file) and return where it went; if that fails
    after all (the folder changed during the run), write it to a fresh folder in the system's
    temporary folder (or, failing that, in the working folder) instead and warn where: never lose a
    run. Only when no place at all can be written is it an OSError, naming every place tried."""
    text = record_text(record)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # a temporary name of this process's own: two processes saving the same record at once (two
        # CLI runs into one results folder) would otherwise write one shared temporary file, and the
        # first replace could move the other's half-written file into place
        tmp = path.with_suffix(f".json.{os.getpid()}.tmp")
        tmp.write_text(text)
        tmp.replace(path)
        return path
    except OSError as err:
        tried = [f"{path} ({type(err).__name__}: {err})"]
        for folder in (None, Path.cwd()):  # None: the system's temporary folder (tempfile.gettempdir())
            try:
                rescue = Path(tempfile.mkdtemp(prefix="mlbook-record-", dir=folder)) / path.name
                rescue.write_text(text)
            except OSError as again:
                tried.append(f"a new folder in {folder or tempfile.gettempdir()} ({type(again).__name__}: {again})")
                continue
            warnings.warn(f"could not write the record to {tried[0]}; it was saved to {rescue} instead: copy it "
                          f"to {path} once that is writable", RuntimeWarning, stacklevel=3)
            return rescue
        raise OSError(f"the finished run's record could not be saved anywhere; tried {'; '.join(tried)}") from err


def read_record(path: Path, kind: str = "record") -> dict[str, Any] | None:
    """The record saved at path, or None: None quietly when there is none, and with a warning naming
    the `kind` of record, the path and the fault when it cannot be used (a folder in its place,
    unreadable, not UTF-8, not JSON, not a JSON object, or without the keys RECORD_KEYS), so that
    the caller falls back (to the packaged record)."""
    if not path.exists():
        return None
    fault = None
    record: Any = None
    if not path.is_file():
        fault = "it is not a file"
    else:
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except UnicodeDecodeError as err:
            fault = f"it is not UTF-8 text ({err.reason} at byte {err.start})"
        except json.JSONDecodeError as err:
            fault = f"it is not JSON ({err.msg} at line {err.lineno}, column {err.colno})"
        except OSError as err:
            fault = f"it cannot be read ({type(err).__name__}: {err.strerror or err})"
    if fault is None and not isinstance(record, dict):
        fault = f"it holds a JSON {type(record).__name__}, not an object"
    if fault is None:
        lacking = [k for k in RECORD_KEYS if k not in record]
        if lacking:
            fault = f"it lacks the keys {lacking}"
        elif not isinstance(record["config"], dict) or not isinstance(record["results"], dict):
            fault = "its config and results are not both JSON objects"
    if fault is not None:
        warnings.warn(f"skipping the {kind} {path}: {fault}; using the next one (the packaged record, if any)",
                      RuntimeWarning, stacklevel=3)
        return None
    return record


def find_record(paths: Iterable[Path], kind: str = "record", config: dict[str, Any] | None = None,
                ) -> dict[str, Any] | None:
    """The first record among `paths` that can be read (`read_record`, which warns about the others)
    and, unless config is None, was made with exactly `config`; None if there is none."""
    for path in dict.fromkeys(paths):
        record = read_record(path, kind)
        if record is not None and (config is None or record["config"] == config):
            return record
    return None
