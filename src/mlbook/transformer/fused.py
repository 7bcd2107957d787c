"""The fused RoPE kernel: apply_rotary's arithmetic compiled by torch.compile into one pass over memory.

`positional.apply_rotary` is the readable expression, x * cos + rot(x) * sin. In eager mode it writes
about six tensor-sized temporaries (the upcast, x * cos, the halves, -x2, the cat, rot * sin, the
sum, the downcast). `rotary_pairs` writes the same rotation per pair, (a, b) -> (a cos - b sin,
b cos + a sin), with no rotated copy of x, and `apply_rotary_fused` runs it compiled by inductor: one
pass that reads x, cos and sin and writes the result. (Compiling apply_rotary itself would still
write rot(x) to memory first, since inductor does not fuse the cat: about 2.5 copies' worth of
traffic.) The numbers are the readable path's, up to one rounding where the compiler contracts a
multiply and an add into one FMA.

As in nanoGPT, the fast path sits beside the readable one and the caller picks:
`MultiHeadAttention.rotate` takes this kernel when `wants_fused(x)`. The switch:

    MLBOOK_ROPE_KERNEL     environment variable: "auto" (default), "fused" or "readable"
    rotary_kernel(mode)    a context manager that overrides it within a block
    "auto"                 fused for tensors of at least FUSED_MIN_NUMEL elements outside autograd,
                           where the one-time compile (seconds) is repaid

Where compiling fails (no C++ compiler, an unsupported device or Python, a torch without inductor)
the failure is remembered per device type, a warning says why once, and the readable path is used
from then on; `fused_rotary_failures()` lists the failures and `reset_fused_rotary()` forgets them
and the compiled kernel (benchmarks time a fresh compile).
"""

from __future__ import annotations

import contextlib
import os
import warnings
from typing import Callable, Iterator

import torch

from mlbook.transformer.positional import ROPE_PAIRINGS, apply_rotary
from mlbook.transformer.validate import check_choice, check_rotary_inputs

__all__ = [
    "ROTARY_KERNELS",
    "ROTARY_KERNEL_ENV",
    "FUSED_MIN_NUMEL",
    "rotary_pairs",
    "apply_rotary_fused",
    "rotary_kernel_mode",
    "rotary_kernel",
    "wants_fused",
    "fused_rotary_failures",
    "reset_fused_rotary",
]

ROTARY_KERNELS: tuple[str, ...] = ("auto", "fused", "readable")
ROTARY_KERNEL_ENV = "MLBOOK_ROPE_KERNEL"
FUSED_MIN_NUMEL = 1 << 22  # 4M elements: 16 MB in float32, e.g. (1, 32, 1024, 128)

_OUT_OF_MEMORY = getattr(torch, "OutOfMemoryError", MemoryError)  # torch.OutOfMemoryError since torch 2.5
_kernel_override: str | None = None  # set within a `rotary_kernel(mode)` block
_compiled: Callable[..., torch.Tensor] | None = None  # rotary_pairs through torch.compile, built on first use
_failures: dict[str, str] = {}  # device type -> why compiling failed there


def rotary_pairs(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, pairing: str = "half") -> torch.Tensor:
    """apply_rotary written per pair, (a, b) -> (a cos - b sin, b cos + a sin), for the compiler.

    Identical arithmetic to `positional.apply_rotary` (a * c + (-b) * s is a * c - b * s exactly), but
    with no rotated copy of x: each output half (or even/odd lane) is an expression of x's two halves,
    so torch.compile writes every output element once instead of materialising rot(x) first.
    Unchecked: `apply_rotary_fused` checks the arguments before calling it.
    """
    xf = x if x.dtype == torch.float64 else x.float()  # (..., T, d_head)
    c, s = cos.to(xf.dtype), sin.to(xf.dtype)  # (T, d_head)
    dt = x.dtype  # each half is cast before it is joined, so the compiler writes x.dtype directly
    if pairing == "half":
        h = x.shape[-1] // 2
        a, b = xf[..., :h], xf[..., h:]  # (..., T, d/2) the two members of every pair
        first, second = (a * c[:, :h] - b * s[:, :h]).to(dt), (b * c[:, h:] + a * s[:, h:]).to(dt)
        return torch.cat([first, second], dim=-1)  # (..., T, d_head)
    a, b = xf[..., 0::2], xf[..., 1::2]  # (..., T, d/2)
    even, odd = (a * c[:, 0::2] - b * s[:, 0::2]).to(dt), (b * c[:, 1::2] + a * s[:, 1::2]).to(dt)
    return torch.stack([even, odd], dim=-1).flatten(-2)  # (..., T, d_head)


def apply_rotary_fused(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, pairing: str = "half") -> torch.Tensor:
    """`positional.apply_rotary` compiled into one kernel; the readable path where compiling fails.

    Same arguments, checks and result as apply_rotary: x (..., T, d_head), cos and sin (T, d_head),
    computed in float32 (float64 for float64 x), returned in x.dtype. The first call per shape
    family compiles (seconds); a compile failure warns once per device type and falls back.
    """
    global _compiled
    check_choice("pairing", pairing, ROPE_PAIRINGS)
    check_rotary_inputs(x, cos, sin)
    if x.device.type in _failures:
        return apply_rotary(x, cos, sin, pairing)  # (..., T, d_head)
    try:
        if _compiled is None:
            # automatic dynamic shapes: the first shape compiles a static kernel, a second one a kernel
            # generic in the dims that changed (B, H, T), keeping d_head static so both halves of a
            # pair are written in one loop
            _compiled = torch.compile(rotary_pairs)
        return _compiled(x, cos, sin, pairing)  # (..., T, d_head)
    except _OUT_OF_MEMORY:
        raise  # not a compile failure: the caller's problem, as on the readable path
    except Exception as err:  # noqa: BLE001 - any compile failure means: use the readable path
        reason = f"{type(err).__name__}: {str(err).strip().splitlines()[0] if str(err).strip() else ''}"[:300]
        _failures[x.device.type] = reason
        warnings.warn(
            f"apply_rotary_fused: the compiled RoPE kernel is unavailable on {x.device.type} ({reason}); "
            f"using the readable path (set {ROTARY_KERNEL_ENV}=readable to skip the attempt)",
            RuntimeWarning,
            stacklevel=2,
        )
        return apply_rotary(x, cos, sin, pairing)  # (..., T, d_head)


def rotary_kernel_mode() -> str:
    """The kernel mode in force: a `rotary_kernel` block's, else $MLBOOK_ROPE_KERNEL, else "auto"."""
    mode = _kernel_override or os.environ.get(ROTARY_KERNEL_ENV, "").strip().lower() or "auto"
    if mode not in ROTARY_KERNELS:
        raise ValueError(
            f"{ROTARY_KERNEL_ENV}={mode!r} is not a RoPE kernel; valid values are "
            f"{', '.join(repr(k) for k in ROTARY_KERNELS)}"
        )
    return mode


@contextlib.contextmanager
def rotary_kernel(mode: str) -> Iterator[None]:
    """Within the block `wants_fused` follows `mode` ("auto", "fused" or "readable"), whatever the environment."""
    global _kernel_override
    check_choice("mode", mode, ROTARY_KERNELS)
    previous, _kernel_override = _kernel_override, mode
    try:
        yield
    finally:
        _kernel_override = previous


def wants_fused(x: torch.Tensor) -> bool:
    """Whether a caller should rotate x with `apply_rotary_fused` rather than `apply_rotary`.

    "readable": never. "fused": always, where the kernel compiles. "auto": for x of at least
    FUSED_MIN_NUMEL elements outside autograd. Never inside a graph torch.compile is already
    tracing (it fuses the readable ops itself) or on a device where compiling failed.
    """
    mode = rotary_kernel_mode()
    if mode == "readable" or x.device.type in _failures:
        return False
    compiler = getattr(torch, "compiler", None)
    if compiler is not None and hasattr(compiler, "is_compiling") and compiler.is_compiling():
        return False
    if mode == "fused":
        return True
    return x.numel() >= FUSED_MIN_NUMEL and not (x.requires_grad and torch.is_grad_enabled())


def fused_rotary_failures() -> dict[str, str]:
    """Device type -> why compiling the kernel failed there, for the devices where it did (a copy)."""
    return dict(_failures)


def reset_fused_rotary() -> None:
    """Forget the compiled kernel and every recorded failure (benchmarks time a fresh compile)."""
    global _compiled
    _compiled = None
    _failures.clear()
