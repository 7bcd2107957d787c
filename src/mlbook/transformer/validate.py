"""Argument checks shared by the whole library: fail early, at the public entry point, naming the argument.

Each check raises TypeError for a value of the wrong type and ValueError for a value out of range,
with a sentence that says which argument, what it got and what is allowed, and returns the value
(converted where that is harmless, e.g. an int base to float) so a caller can check and assign in
one line: `self.n_heads = check_int("n_heads", n_heads, 1)`.
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path
from typing import Sequence

import torch

__all__ = ["check_int", "check_positive_float", "check_real", "check_bool", "check_choice", "check_even_d",
           "check_tensor", "check_rotary_inputs", "check_rotary_dim", "check_drop_lowest", "check_rope_scaling", "check_head_rows", "check_bucket_config",
           "check_token_ids", "check_device", "env_int", "env_flag", "env_folder"]


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


def check_real(name: str, value: object, *, minimum: float | None = None, maximum: float | None = None,
               below: float | None = None) -> float:
    """A finite real number (not a bool) with minimum <= value <= maximum (and value < below), as a float."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number, got {type(value).__name__} ({value!r})")
    if not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be <= {maximum}, got {value}")
    if below is not None and value >= below:
        raise ValueError(f"{name} must be < {below}, got {value}")
    return float(value)


def check_bool(name: str, value: object) -> bool:
    """True or False, nothing else: a string such as "no" is truthy and would silently mean True."""
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, got {type(value).__name__} ({value!r})")
    return value


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


def check_tensor(name: str, value: object, *, integer: bool = False) -> torch.Tensor:
    """A torch.Tensor; with integer=True one holding integers (not float, complex or bool)."""
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(value).__name__}")
    if integer and (value.is_floating_point() or value.is_complex() or value.dtype == torch.bool):
        raise TypeError(f"{name} must hold integers, got dtype {value.dtype}")
    return value


def check_bucket_config(num_buckets: object, max_distance: object, bidirectional: object) -> tuple[int, int]:
    """T5 bucket settings; returns (buckets per direction, exact buckets): exact >= 1 and
    max_distance past the exact range, so that distance 0 has a bucket and the log range is not empty."""
    check_bool("bidirectional", bidirectional)
    check_int("num_buckets", num_buckets, 1)
    per_direction = num_buckets // 2 if bidirectional else num_buckets  # type: ignore[operator]
    exact = per_direction // 2
    if exact < 1:
        raise ValueError(f"num_buckets={num_buckets} is too few: need at least {4 if bidirectional else 2} "
                         f"({'bidirectional' if bidirectional else 'causal'}) so that distance 0 has an exact bucket")
    check_int("max_distance", max_distance, 1)
    if max_distance <= exact:  # type: ignore[operator]
        raise ValueError(f"max_distance must be greater than the exact range ({exact} = num_buckets // "
                         f"{4 if bidirectional else 2}), got {max_distance}")
    return per_direction, exact


def check_rotary_dim(d_head: int, partial_rotary_factor: object) -> int:
    """The rotated width r = int(d_head * partial_rotary_factor), as Hugging Face rounds it: even and >= 2."""
    f = check_real("partial_rotary_factor", partial_rotary_factor, minimum=0.0, maximum=1.0)
    r = int(d_head * f)
    if r < 2 or r % 2:
        raise ValueError(f"partial_rotary_factor={partial_rotary_factor} rotates int({d_head} * "
                         f"{partial_rotary_factor}) = {r} channels; that must be even and >= 2")
    return r


def check_drop_lowest(drop_lowest: object, pairs: int) -> float:
    """p-RoPE's share p of a head's `pairs` rotating pairs whose frequencies are set to 0: 0 (drop none), or a
    p whose round(p * pairs) drops at least one pair and keeps at least one turning."""
    p = check_real("drop_lowest", drop_lowest, minimum=0.0, below=1.0)
    n = round(p * pairs)
    if p > 0 and not 1 <= n <= pairs - 1:
        allowed = (f"0 (keep every pair) or between about {0.5 / pairs:.3g} and {(pairs - 0.5) / pairs:.3g} (drop 1 "
                   f"to {pairs - 1} of them)" if pairs > 1 else "0: a head with one rotating pair cannot drop part of it")
        raise ValueError(f"drop_lowest={p:g} drops round({p:g} * {pairs}) = {n} of the {pairs} rotating pairs, so "
                         + ("nothing would change" if n == 0 else "no pair would turn")
                         + f"; drop_lowest must be {allowed}")
    return p


def check_rope_scaling(value: object) -> object:
    """None or a RopeScaling (mlbook.transformer.rope_scaling, recognised by its `frequencies` method:
    that module imports this one)."""
    if value is not None and not callable(getattr(value, "frequencies", None)):
        raise TypeError(f"rope_scaling must be a RopeScaling (mlbook.transformer.rope_scaling), e.g. "
                        f"RopeScaling('linear', factor=2.0), or None; got {type(value).__name__} ({value!r})")
    return value


def check_head_rows(name: str, value: object, n_heads: object) -> int:
    """A q or k projection weight (or bias) whose n_heads * d_head rows have an even d_head; returns d_head."""
    check_tensor(name, value)
    check_int("n_heads", n_heads, 1)
    rows = value.shape[0]  # type: ignore[union-attr]
    if rows % n_heads != 0 or (rows // n_heads) % 2 != 0:  # type: ignore[operator]
        raise ValueError(f"{name} has {rows} output rows, which is not n_heads ({n_heads}) times an even d_head")
    return rows // n_heads  # type: ignore[operator]


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


def check_token_ids(name: str, idx: object, vocab_size: int) -> torch.Tensor:
    """A (B, T) integer tensor of token ids with B, T >= 1 and every id in 0 .. vocab_size - 1."""
    if not isinstance(idx, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of token ids with shape (B, T), got {type(idx).__name__}")
    if idx.dtype not in (torch.long, torch.int32):
        raise TypeError(f"{name} must hold integer token ids (torch.long or torch.int32), got dtype {idx.dtype}")
    if idx.dim() != 2:
        raise ValueError(f"{name} must have shape (B, T), got {tuple(idx.shape)}; add a batch dimension with "
                         f"{name}[None]")
    if idx.shape[0] == 0 or idx.shape[1] == 0:
        raise ValueError(f"{name} must hold at least one token in each of at least one sequence, got shape "
                         f"{tuple(idx.shape)}")
    lo, hi = int(idx.min()), int(idx.max())
    if lo < 0 or hi >= vocab_size:
        bad = lo if lo < 0 else hi
        raise ValueError(f"{name} holds token id {bad}, outside the vocabulary: ids must be in 0 .. {vocab_size - 1} "
                         f"(vocab_size={vocab_size})")
    return idx


def env_int(variable: str, default: int, minimum: int) -> int:
    """The environment variable `variable` read as an int >= minimum (`default` when unset or blank)."""
    raw = os.environ.get(variable, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"environment variable {variable} must be an integer >= {minimum}, got {raw!r}") from None
    if value < minimum:
        raise ValueError(f"environment variable {variable} must be an integer >= {minimum}, got {raw!r}")
    return value


_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def env_flag(variable: str) -> bool:
    """The environment variable `variable` read as a switch: unset, blank, 0/false/no/off -> False;
    1/true/yes/on -> True (any case); anything else is a ValueError naming the variable."""
    raw = os.environ.get(variable, "").strip().lower()
    if not raw or raw in _FALSE:
        return False
    if raw in _TRUE:
        return True
    raise ValueError(f"environment variable {variable} must be one of {', '.join(_TRUE + _FALSE)} (or unset), "
                     f"got {os.environ[variable]!r}")


DEVICES = "'auto', 'cpu', 'cuda', 'cuda:N', 'mps'"


def check_device(name: str, value: object) -> torch.device:
    """A device that exists here: "auto" (cuda, then mps, then cpu), "cpu", "cuda", "cuda:N", "mps"
    or a torch.device of those kinds; unknown names and absent accelerators are a ValueError."""
    if isinstance(value, torch.device):
        value = str(value)
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a string such as 'cpu' or a torch.device, got {type(value).__name__} "
                        f"({value!r})")
    pref = value.strip().lower()
    mps = getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available()
    if pref == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "mps" if mps else "cpu")
    if not re.fullmatch(r"cpu|mps|cuda(:\d+)?", pref):
        raise ValueError(f"unknown {name} {value!r}; valid values are {DEVICES}")
    if pref.startswith("cuda"):
        if not torch.cuda.is_available():
            raise ValueError(f"{name} {value!r} was asked for but torch.cuda.is_available() is False; use 'cpu' or "
                             f"'auto'")
        index = int(pref.split(":")[1]) if ":" in pref else 0
        if index >= torch.cuda.device_count():
            raise ValueError(f"{name} {value!r} does not exist: this machine has {torch.cuda.device_count()} CUDA "
                             f"device(s), cuda:0 .. cuda:{torch.cuda.device_count() - 1}")
    if pref == "mps" and not mps:
        raise ValueError(f"{name} 'mps' was asked for but is not available; use 'cpu' or 'auto'")
    return torch.device(pref)


def env_folder(variable: str) -> Path | None:
    """The environment variable `variable` read as a folder (None when unset or empty): a value of
    only spaces, or the path of something that is not a folder, is a ValueError naming the variable."""
    raw = os.environ.get(variable)
    if not raw:
        return None
    if not raw.strip():
        raise ValueError(f"environment variable {variable} is blank ({raw!r}); set it to a folder or unset it")
    path = Path(raw).expanduser()
    if path.exists() and not path.is_dir():
        raise ValueError(f"environment variable {variable}={raw!r} names a file, not a folder")
    return path
