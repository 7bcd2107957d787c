"""Shared plumbing for the exercise checkers: one verdict line, and calls that never raise."""

from __future__ import annotations

from typing import Callable

import torch

__all__ = ["_verdict", "_call", "_as_float"]


def _verdict(ok: bool, message: str) -> bool:
    print(("Correct. " if ok else "Not yet. ") + message)
    return ok


def _call(fn: Callable, *args: object) -> tuple[object, str | None]:
    try:
        return fn(*args), None
    except Exception as exc:  # the reader's code: report it, do not crash the cell
        return None, f"{type(exc).__name__}: {exc}"


def _as_float(value: object) -> float | None:
    if isinstance(value, torch.Tensor):
        return float(value.detach()) if value.numel() == 1 else None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None
