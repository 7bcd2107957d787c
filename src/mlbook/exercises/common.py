"""The exercise checkers' shared call guard: one verdict line, and calls that never raise.

    verdict(ok, message)     prints "Correct. ..." or "Not yet. ..." and returns ok
    call_answer(fn, *args)   the reader's fn(*args) as (value, None), or (None, "Error: message")
    as_float(value)          a Python number or one-element tensor as a float, else None
    guarded(checker)         a checker that reports an answer it could not compare instead of raising

Every checker module imports these from here; a checker never raises into a notebook cell.
"""

from __future__ import annotations

import functools
from typing import Callable, TypeVar

import torch

__all__ = ["verdict", "call_answer", "as_float", "guarded"]

_F = TypeVar("_F", bound=Callable[..., bool])


def verdict(ok: bool, message: str) -> bool:
    """Print one verdict line ("Correct. " or "Not yet. " then `message`) and return `ok`."""
    print(("Correct. " if ok else "Not yet. ") + message)
    return ok


def call_answer(fn: Callable, *args: object) -> tuple[object, str | None]:
    """fn(*args) as (value, None), or (None, "ExceptionType: message") if the reader's code raised."""
    try:
        return fn(*args), None
    except Exception as exc:  # the reader's code: report it, do not crash the cell
        return None, f"{type(exc).__name__}: {exc}"


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
