"""Argument checks shared by the whole library: fail early, at the public entry point, naming the argument.

Each check raises TypeError for a value of the wrong type and ValueError for a value out of range,
with a sentence that says which argument, what it got and what is allowed, and returns the value
(converted where that is harmless, e.g. an int base to float) so a caller can check and assign in
one line: `self.n_heads = check_int("n_heads", n_heads, 1)`.
"""

from __future__ import annotations

import math
from typing import Sequence

import torch

__all__ = ["check_int", "check_positive_float", "check_choice", "check_even_d", "check_rotary_inputs"]


def check_int(name: str, value: object, minimum: int) -> int:
    """An int (not a bool) >= minimum."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} ({value!r})")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return value


def check_positive_float(name: str, value: object, *, above: float = 0.0) -> float:
    """A finite real number (not a bool) > above, returned as a float."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number, got {type(value).__name__} ({value!r})")
    if not math.isfinite(value) or value <= above:
        raise ValueError(f"{name} must be a finite number > {above}, got {value}")
    return float(value)


def check_choice(name: str, value: object, choices: Sequence[str]) -> str:
    """One of `choices`; the error lists them all."""
    if value not in choices:
        raise ValueError(f"unknown {name} {value!r}; valid values are {', '.join(repr(c) for c in choices)}")
    return value  # type: ignore[return-value]


def check_even_d(name: str, value: object) -> int:
    """An even int >= 2: a width whose dimensions are encoded or rotated in pairs."""
    check_int(name, value, 2)
    if value % 2 != 0:  # type: ignore[operator]
        raise ValueError(f"{name} must be even (dimensions are rotated or encoded in pairs), got {value}")
    return value  # type: ignore[return-value]


def check_rotary_inputs(x: object, cos: object, sin: object) -> None:
    """x (..., T, d_head) and the tables cos, sin (T, d_head): floating-point tensors, d_head even."""
    if not isinstance(x, torch.Tensor) or not isinstance(cos, torch.Tensor) or not isinstance(sin, torch.Tensor):
        raise TypeError("x, cos and sin must be torch.Tensors")
    for name, t in (("x", x), ("cos", cos), ("sin", sin)):
        if not t.is_floating_point():
            raise TypeError(f"{name} must be a floating-point tensor (rotation mixes the two members of a pair), "
                            f"got dtype {t.dtype}")
    if cos.shape != sin.shape or cos.dim() != 2:
        raise ValueError(f"cos and sin must both be (T, d_head), got {tuple(cos.shape)} and {tuple(sin.shape)}")
    if cos.shape[-1] % 2 != 0:
        raise ValueError(f"d_head must be even (dimensions are rotated in pairs), "
                         f"got cos and sin of width {cos.shape[-1]}")
    if x.dim() < 2 or x.shape[-2:] != cos.shape:
        raise ValueError(f"x must end in (T, d_head) = {tuple(cos.shape)} to match cos/sin, got shape {tuple(x.shape)}")
