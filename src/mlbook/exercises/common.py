"""The exercise checkers' shared call guard: one verdict line, and calls that never raise.

    verdict(ok, message)     prints "Correct. ..." or "Not yet. ..." and returns ok
    call_answer(fn, *args)   the reader's fn(*args) as (value, None), or (None, "Error: message"); fn gets
                             copies of the arguments, is stopped after TIME_LIMIT_S seconds (AnswerTimedOut),
                             and changing an argument in place is reported (InputModified)
    run_limited(fn, ...)     fn(...) stopped with AnswerTimedOut after TIME_LIMIT_S seconds
    as_float(value)          a Python number or one-element tensor as a float, else None
    guarded(checker)         a checker that reports an answer it could not compare instead of raising

Every checker module imports these from here; a checker never raises into a notebook cell.
"""

from __future__ import annotations

import copy
import functools
import signal
import threading
import time
from typing import Any, Callable, TypeVar

import torch

__all__ = ["verdict", "call_answer", "run_limited", "as_float", "guarded", "TIME_LIMIT_S", "AnswerTimedOut",
           "InputModified"]

# Every reference answer returns in well under a second on a 2-core CPU; an answer still running after
# this long is stuck (an endless loop, a huge tensor) and is stopped instead of hanging the notebook.
TIME_LIMIT_S = 10.0


class AnswerTimedOut(Exception):
    """The reader's function did not return within the time limit."""


class InputModified(Exception):
    """The reader's function changed one of its arguments in place."""

_F = TypeVar("_F", bound=Callable[..., bool])


def verdict(ok: bool, message: str) -> bool:
    """Print one verdict line ("Correct. " or "Not yet. " then `message`) and return `ok`."""
    print(("Correct. " if ok else "Not yet. ") + message)
    return ok


def run_limited(fn: Callable, *args: Any, time_limit_s: float | None = None, **kwargs: Any) -> Any:
    """fn(*args, **kwargs), stopped with AnswerTimedOut after time_limit_s (default TIME_LIMIT_S) seconds.

    On the main thread of a Unix process (a notebook kernel) a SIGALRM timer interrupts the call; elsewhere
    the call runs in a daemon thread that is abandoned, still running, when the time is up."""
    limit = TIME_LIMIT_S if time_limit_s is None else time_limit_s
    message = (f"your function did not return within {limit:g} s and was stopped (an endless loop, or far "
               f"more work than the exercise needs?)")
    if hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread():
        def on_alarm(signum: int, frame: object) -> None:
            raise AnswerTimedOut(message)

        previous = signal.signal(signal.SIGALRM, on_alarm)
        outer, _ = signal.setitimer(signal.ITIMER_REAL, limit)  # an enclosing timer's remaining time, or 0
        start = time.monotonic()
        try:
            return fn(*args, **kwargs)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
            if outer > 0:  # give an enclosing timer (e.g. a test runner's) back what it had left
                signal.setitimer(signal.ITIMER_REAL, max(outer - (time.monotonic() - start), 1e-3))
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn(*args, **kwargs)
        except BaseException as exc:  # noqa: BLE001 - handed back to the caller's thread
            box["error"] = exc

    worker = threading.Thread(target=target, daemon=True)
    worker.start()
    worker.join(limit)
    if worker.is_alive():
        raise AnswerTimedOut(message)
    if "error" in box:
        raise box["error"]
    return box["value"]


def _same(a: object, b: object) -> bool:
    """Whether argument a still equals its untouched copy b (tensors compared exactly, NaN equal to NaN)."""
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.shape == b.shape and a.dtype == b.dtype and bool(
            torch.equal(a, b) if not a.is_floating_point() else torch.allclose(a, b, rtol=0, atol=0, equal_nan=True))
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - not comparable: nothing to report
        return True


def call_answer(fn: Callable, *args: object) -> tuple[object, str | None]:
    """fn(*args) as (value, None), or (None, "ExceptionType: message") if the reader's code raised.

    fn gets copies of the tensors, lists and dicts among args, so the checker's own inputs (and any
    reference computed from them, before or after) stay as they were; fn is stopped after TIME_LIMIT_S
    seconds (AnswerTimedOut); an argument that fn changed in place is reported as InputModified."""
    given = [copy.deepcopy(a) if isinstance(a, (torch.Tensor, list, tuple, dict)) else a for a in args]
    try:
        value = run_limited(fn, *given)
    except Exception as exc:  # the reader's code: report it, do not crash the cell
        return None, f"{type(exc).__name__}: {exc}"
    for i, (before, after) in enumerate(zip(args, given)):
        if not _same(after, before):
            what = f"a tensor of shape {tuple(before.shape)}" if isinstance(before, torch.Tensor) else type(before).__name__
            return None, (f"{InputModified.__name__}: you modified the input: argument {i + 1} ({what}) was changed "
                          f"in place; leave the arguments as they are (work on a copy, x = x.clone(), or use "
                          f"out-of-place operations such as x * 2 instead of x.mul_(2))")
    return value, None


def as_float(value: object) -> float | None:
    """A Python int or float, or a one-element tensor, as a float; anything else gives None."""
    if isinstance(value, torch.Tensor):
        return float(value.detach()) if value.numel() == 1 else None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None


def guarded(checker: _F) -> _F:
    """Whatever the reader's answer does to the comparison code, report it instead of raising."""
    @functools.wraps(checker)
    def wrapper(fn: Callable) -> bool:
        try:
            return checker(fn)
        except Exception as exc:  # an answer of a kind the checks did not foresee
            return verdict(False, f"Your answer could not be compared ({type(exc).__name__}: {exc}); return a "
                                  "plain real-valued torch.Tensor of the shape asked for.")
    return wrapper  # type: ignore[return-value]
