"""Checkers for section 3's retype drills: RoPE, the sinusoidal table, ALiBi, T5 buckets.

Each checker takes the reader's functions, runs property and oracle checks on them, and when
something is off compares the output with the usual mistakes (a flipped sine sign, the other
pair layout, base^(-i/d), power-of-two-only slopes, a bucket off by one, ...) to name the one
that was made. It prints one line and returns a bool, and never raises:

    "Not implemented yet. ..."   the stub is untouched (it raises NotImplementedError): nothing failed
    "Not yet. <what is wrong, where, and how to fix it>"
    "Correct. ..."               every check passed, including the chapter's named test(s)

The reference for each check is the library (`mlbook.transformer.positional`) or a float64 /
complex oracle; the mistakes are derived from the library's own frequencies and rotations, so
no formula is written twice. `check_rope_property_test` grades the property test the RoPE drill
asks for first: it must pass the library's RoPE and fail RoPEs that break the property.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import torch

from mlbook import chapter_tests
from mlbook.exercises.common import (InputModified, call_checked, describe, error_text, failure, fmt_pair, guarded,
                                     pair_kinds, pair_kinds_message, rtol_for, significant_bits, tensor_answer, verdict)
from mlbook.transformer import positional as P

__all__ = [
    "check_rope_property_test",
    "check_rope_drill",
    "check_sinusoidal_drill",
    "check_alibi_drill",
    "check_bucket_drill",
]


# ---------------------------------------------------------------------------
# Shared plumbing
# ---------------------------------------------------------------------------


def _try(fn: Callable, *args: Any, **kwargs: Any) -> tuple[Any, BaseException | None]:
    """The reader's fn(*args, **kwargs) on copies of the arguments, stopped after the time limit: (value, None),
    or (None, the exception), an InputModified one if fn changed an argument in place."""
    return call_checked(fn, *args, **kwargs)


def _is_stub(exc: BaseException | None) -> bool:
    return isinstance(exc, NotImplementedError)


def _err(exc: BaseException) -> str:
    return error_text(exc)


def _raised(call: str, exc: BaseException) -> str:
    """'call raised Error: ...', or 'call: you modified the input: ...'."""
    return failure(call, error_text(exc))


def _not_implemented(message: str) -> bool:
    print("Not implemented yet. " + message)
    return False


def _join(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _fmt(values: torch.Tensor | list, digits: int = 4) -> str:
    vals = values.tolist() if isinstance(values, torch.Tensor) else list(values)
    return "[" + ", ".join(f"{v:.{digits}g}" if isinstance(v, float) else str(v) for v in vals) + "]"


def _close(a: torch.Tensor, b: torch.Tensor, atol: float = 1e-5) -> bool:
    return a.shape == b.shape and bool(torch.allclose(a.double(), b.double(), atol=atol, rtol=0))


def _near(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal to float32 accuracy: relative 7.6e-6 (rtol_for(float32)), absolute 1e-6 near zero."""
    return a.shape == b.shape and bool(torch.allclose(a.double(), b.double(), rtol=rtol_for(torch.float32), atol=1e-6))


def _run_named(test: Callable[..., None], **kwargs: Any) -> str | None:
    """Run one of the chapter's named tests on the reader's code: None if it passes, else the reason."""
    _, exc = _try(test, **kwargs)
    return None if exc is None else _err(exc)


# ---------------------------------------------------------------------------
# Drill (a): RoPE. The reader writes rotate_half(x), apply_rotary(x, cos, sin) and
# RotaryEmbedding(d_head, base=10000.0) with forward(T, offset=0) -> (cos, sin), half layout.
# ---------------------------------------------------------------------------


def _lib_tables(d: int, base: float, offset: int, T: int) -> tuple[torch.Tensor, torch.Tensor]:
    return P.RotaryEmbedding(d, base)(T, offset)  # (T, d) each, float32, half layout


def _table_from(theta: torch.Tensor, positions: torch.Tensor, layout: str = "half") -> torch.Tensor:
    """Angles (T, d) float64 for per-pair frequencies theta (d/2,) in a pair layout."""
    ang = positions.double()[:, None] * theta.double()[None, :]  # (T, d/2)
    return torch.cat([ang, ang], dim=-1) if layout == "half" else ang.repeat_interleave(2, dim=-1)  # (T, d)


def _theta(d: int, base: float) -> torch.Tensor:
    return P.frequency_ladder(d, base).double()  # (d/2,) base^(-2i/d), the library's frequencies


def _rope_table_mistakes(d: int, base: float, offset: int, T: int) -> list[tuple[str, torch.Tensor]]:
    """Angle tables (T, d) of the usual RotaryEmbedding mistakes, each derived from the library's theta."""
    th = _theta(d, base)
    pos = torch.arange(offset, offset + T)
    half_rate = P.frequency_ladder(2 * d, base).double()  # (d,) base^(-j/d), j = 0 .. d-1
    out = [
        ("interleaved", _table_from(th, pos, "interleaved")),
        ("sign", -_table_from(th, pos)),
        ("sign+interleaved", -_table_from(th, pos, "interleaved")),
        ("exp_i", _table_from(half_rate[: d // 2], pos)),  # base^(-i/d): i where 2i belongs
        ("exp_4i", _table_from(th * th, pos)),  # base^(-4i/d): arange(0, d, 2) and another factor 2
        ("positive_exponent", _table_from(1.0 / th, pos)),
        ("no_cat", pos.double()[:, None] * half_rate[None, :]),  # d frequencies, one per column, not shared
        ("offset_ignored", _table_from(th, torch.arange(T))),
        ("offset_plus_one", _table_from(th, pos + 1)),
    ]
    if base != 10000.0:
        out.append(("base_ignored", _table_from(_theta(d, 10000.0), pos)))
    return out


_ROPE_TABLE_MESSAGES = {
    "interleaved": (
        "RotaryEmbedding lays the angles out interleaved (repeat_interleave: columns 2i and 2i+1 share an "
        "angle), the GPT-J/RoFormer layout; the drill pairs dimension i with i + d/2 (GPT-NeoX, LLaMA), so "
        "the table must be torch.cat([angles, angles], dim=-1)."
    ),
    "sign": (
        "Your sin table is -sin(m*theta_i): every pair turns by -m*theta_i. Scores still depend only on m - n, "
        "so the relative-position test passes, but the rotation is the mirror image of the standard one and a "
        "checkpoint trained with RoPE would break. Return (angles.cos(), angles.sin()) with angles = +m*theta_i."
    ),
    "sign+interleaved": (
        "Two things in RotaryEmbedding: the angles are interleaved (repeat_interleave) instead of "
        "cat([angles, angles]), and the sine has the wrong sign (-m*theta_i)."
    ),
    "exp_i": (
        "Base exponent off by a factor of two: your frequencies are base^(-i/d_head), with i the pair index. "
        "theta_i = base^(-2i/d_head): torch.arange(0, d_head, 2) already gives 2i, so use it as the exponent "
        "numerator directly, base ** (-torch.arange(0, d_head, 2) / d_head). (The rotation is still a valid "
        "relative encoding, so only an oracle with the exact theta_i catches this.)"
    ),
    "exp_4i": (
        "Base exponent doubled: your frequencies are base^(-4i/d_head). torch.arange(0, d_head, 2) is already "
        "2i; multiplying it by 2 again squares every theta_i. Use base ** (-torch.arange(0, d_head, 2) / d_head)."
    ),
    "positive_exponent": (
        "Your frequencies grow with i (base^(+2i/d_head)): the exponent needs its minus sign, "
        "theta_i = base^(-2i/d_head), so pair 0 turns at 1 radian per token and the last pair slowest."
    ),
    "no_cat": (
        "Angles not shared across halves: each of the d_head columns has its own frequency, so column i and "
        "column i + d/2 (the two halves of pair i) turn by different angles and the pair is no longer rotated "
        "rigidly. Compute d_head/2 frequencies, theta_i = base^(-2i/d_head), then "
        "angles = torch.cat([angles, angles], dim=-1)."
    ),
    "offset_ignored": (
        "forward(T, offset) ignores offset: rows must be the positions offset .. offset + T - 1 "
        "(torch.arange(offset, offset + T)). During cached decoding the new token sits at position "
        "cache length, not 0."
    ),
    "offset_plus_one": (
        "Positions off by one: row 0 of forward(T, offset) must be position offset (angle 0 when offset = 0), "
        "not offset + 1. Use torch.arange(offset, offset + T)."
    ),
    "base_ignored": (
        "RotaryEmbedding(d_head, base=500.0) gives the tables of base 10000: use the base argument when "
        "building inv_freq."
    ),
}


def _diagnose_rotate_half(rotate_half: Callable) -> str | None:
    """None if rotate_half is right; else the mistake, named."""
    x = torch.arange(8.0)
    got, exc = _try(rotate_half, x)
    if exc is not None:
        return _raised("rotate_half(torch.arange(8.0))", exc) + "."
    got, problem = tensor_answer(got, "rotate_half(torch.arange(8.0))", "a torch.Tensor shaped like x")
    if problem is not None:
        return problem
    if tuple(got.shape) != (8,):
        return (f"rotate_half(torch.arange(8.0)) has shape {tuple(got.shape)}; it must keep the shape (8,): "
                "split the last dimension into two halves and concatenate them back.")
    if got.dtype != x.dtype:
        return (f"rotate_half(torch.arange(8.0)) returns {got.dtype} for a {x.dtype} x: rotate_half only moves and "
                "negates numbers, so it returns x's dtype (no .to(), no new tensor of another dtype).")
    want = P.rotate_half(x)
    if torch.equal(got.float(), want):
        y = torch.randn(2, 3, 5, 16, generator=torch.Generator().manual_seed(0))  # (B, H, T, d_head)
        got4, exc = _try(rotate_half, y)
        if isinstance(exc, InputModified):
            return _raised("rotate_half(x) with x (2, 3, 5, 16)", exc) + "."
        got4, problem = tensor_answer(got4, "rotate_half(x) with x (2, 3, 5, 16)") if exc is None else (None, None)
        if problem is not None:
            return problem
        if exc is not None or not _close(got4, P.rotate_half(y), 0.0):
            return ("rotate_half is right on a 1-D vector but not on a (B, H, T, d_head) tensor: split the LAST "
                    "dimension, x[..., :d // 2] and x[..., d // 2:] with d = x.shape[-1], and concatenate on "
                    "dim=-1." + (f" (It raised {_err(exc)}.)" if exc is not None else ""))
        return None
    g = got.double().tolist()
    shown = f"rotate_half([0, 1, ..., 7]) gave {_fmt(g, 3)}, expected [-4, -5, -6, -7, 0, 1, 2, 3]"
    if torch.equal(got.float(), -want):
        return (f"Sign of the sine term: {shown}. Yours returns [x2, -x1], the quarter turn the other way, so "
                "x * cos + rotate_half(x) * sin turns every pair by -m*theta_i. Scores still depend only on "
                "m - n (the relative-position test passes), but the rotation is mirrored and pretrained "
                "weights break. Negate the second half and put it first: torch.cat([-x2, x1], dim=-1).")
    if torch.equal(got.float(), P.rotate_interleaved(x)) or torch.equal(got.float(), -P.rotate_interleaved(x)):
        return (f"Pairing mixed up: {shown}. Yours rotates adjacent dimensions (2i, 2i+1) (the interleaved "
                "GPT-J/RoFormer layout); the drill's layout (GPT-NeoX, LLaMA) pairs dimension i with i + d/2: "
                "x1, x2 = x[..., :d//2], x[..., d//2:] and return torch.cat([-x2, x1], dim=-1).")
    if torch.equal(got.float(), torch.cat([x[4:], x[:4]])):
        return (f"Missing minus: {shown}. Swapping the halves is a reflection, not a quarter turn; "
                "rotate_half(rotate_half(x)) must be -x. Return torch.cat([-x2, x1], dim=-1).")
    if torch.equal(got.float(), x):
        return f"rotate_half returns its input unchanged: {shown}."
    return f"{shown}: the first half of the output is minus the second half of the input, the second half is the first half."


def _tables(out: object, where: str) -> tuple[torch.Tensor | None, torch.Tensor | None, str | None]:
    """(cos, sin, None) from what forward returned, each a real tensor on the CPU; else (None, None, why not)."""
    if not (isinstance(out, (tuple, list)) and len(out) == 2):
        what = describe(out)
        return None, None, (f"{where} must return a pair (cos, sin) of tensors, each (T, d_head); it returned "
                            f"{what}. Return angles.cos(), angles.sin().")
    tables = []
    for name, t in zip(("cos", "sin"), out):
        t, problem = tensor_answer(t, f"{name} from {where}", "a torch.Tensor (T, d_head)")
        if problem is not None:
            return None, None, problem + " Return (angles.cos(), angles.sin())."
        if not t.is_floating_point():
            return None, None, f"{where} returns a {t.dtype} {name} table; cos and sin are float32 tables."
        tables.append(t)
    return tables[0], tables[1], None


def _diagnose_rope_tables(RotaryEmbedding: Callable) -> tuple[str | None, bool]:
    """(message or None, table_is_interleaved) for the reader's RotaryEmbedding."""
    d = 16
    for base, offset, T in ((10000.0, 0, 6), (10000.0, 5, 6), (500.0, 3, 7)):
        args = (d,) if base == 10000.0 else (d, base)
        rope, exc = _try(RotaryEmbedding, *args)
        if exc is not None:
            call = f"RotaryEmbedding({', '.join(map(repr, args))})"
            return f"{_raised(call, exc)}. The drill's signature is RotaryEmbedding(d_head, base=10000.0).", False
        out, exc = _try(rope, T, offset=offset)
        where = f"RotaryEmbedding({', '.join(map(repr, args))})({T}, offset={offset})"
        if exc is not None:
            return f"{_raised(where, exc)}.", False
        cos, sin, problem = _tables(out, where)
        if problem is not None:
            return problem, False
        if tuple(cos.shape) == (T, d // 2):
            return (f"{where} returns cos of shape {tuple(cos.shape)} = (T, d_head/2): the angles are not shared "
                    "across the two halves. Both halves of pair i (columns i and i + d/2) must see the angle "
                    "m*theta_i: angles = torch.cat([angles, angles], dim=-1) gives (T, d_head)."), False
        if tuple(cos.shape) != (T, d) or tuple(sin.shape) != (T, d):
            return (f"{where} returns cos {tuple(cos.shape)} and sin {tuple(sin.shape)}; each must be "
                    f"(T, d_head) = ({T}, {d}), one row per position."), False
        low = next((t.dtype for t in (cos, sin) if t.dtype in _LOW_PRECISION), None)
        if low is not None:
            return (f"Angles in low precision: {where} returns {low} tables. m*theta_i must be computed in "
                    "float32 (positions and inv_freq), and the tables returned in float32: "
                    f"{_precision_words(low)}"), False
        pos = torch.arange(offset, offset + T)
        ref_cos, ref_sin = _lib_tables(d, base, offset, T)
        c, s = cos.double(), sin.double()
        if not (torch.isfinite(c).all() and torch.isfinite(s).all()):
            return f"{where} returns tables with NaN or inf: every entry is the cos or sin of a finite angle.", False
        if _close(c, ref_cos) and _close(s, ref_sin):
            if cos.dtype != torch.float32 or sin.dtype != torch.float32:
                wrong = cos.dtype if cos.dtype != torch.float32 else sin.dtype
                return (f"Right values, but {where} returns {wrong} tables; the drill asks for float32. "
                        f"x * cos with float32 x would come out {wrong}: q and k turn {wrong}, and the attention "
                        f"matmul with float32 values then fails (expected both float32). Compute the angles in "
                        f"{wrong} if you like, but return angles.cos().float(), angles.sin().float()."), False
            continue
        if _close(c, ref_sin) and _close(s, ref_cos):
            return f"{where} returns (sin, cos): return the cosines first, (angles.cos(), angles.sin()).", False
        if not _close(c * c + s * s, torch.ones_like(c), 1e-4):
            return (f"{where}: cos^2 + sin^2 is not 1, so cos and sin are not of the same angle (did you return "
                    "the angles themselves, or scale them?). Return angles.cos(), angles.sin()."), False
        for name, ang in _rope_table_mistakes(d, base, offset, T):
            tol = 1e-5 + ang.abs() * 2.0**-21  # float32 rounding of a large angle m*theta
            if ((c - ang.cos()).abs() <= tol).all() and ((s - ang.sin()).abs() <= tol).all():
                return f"{where}: " + _ROPE_TABLE_MESSAGES[name], name in ("interleaved", "sign+interleaved")
        if not _close(c[:, : d // 2], c[:, d // 2 :]):
            return (f"{where}: columns i and i + d/2 hold different angles, so the two halves of a pair are "
                    "not turned together. Compute d_head/2 angles m*theta_i and lay them out as "
                    "torch.cat([angles, angles], dim=-1)."), False
        lows = {name: max(float((c - lc).abs().max()), float((s - ls).abs().max()))
                for name, (lc, ls) in _low_precision_tables(d, offset, T, base).items()}
        low_name = min(lows, key=lows.get)
        if lows[low_name] < 1e-5:
            low = next(t for t in _LOW_PRECISION if low_name.endswith(_name(t)))
            return (f"Angles in {_name(low)} ({low_name}): {where} is close to the right tables but off by up to "
                    f"{max(float((c - ref_cos).abs().max()), float((s - ref_sin).abs().max())):.2g} already at "
                    f"these small positions. {_precision_words(low)} Build positions and inv_freq in float32 and "
                    "multiply in float32."), False
        ref = _table_from(_theta(d, base), pos)
        right = [_close(c[:, i], ref_cos[:, i]) and _close(s[:, i], ref_sin[:, i]) for i in range(d // 2)]
        zero = [_close(c[:, i], torch.ones(T)) and _close(s[:, i], torch.zeros(T)) for i in range(d // 2)]
        idle = [i for i in range(d // 2) if zero[i] and not right[i]]
        if idle and all(r or z for r, z in zip(right, zero)):
            return (f"{where}: partial rotation: pairs {idle} get angle 0 at every position (cos 1, sin 0), so "
                    f"they are never rotated; pairs {[i for i in range(d // 2) if right[i]]} are right. Every "
                    "one of the d_head/2 pairs turns, at its own theta_i = base^(-2i/d_head): build all d_head/2 "
                    "frequencies, torch.arange(0, d_head, 2), not a slice of them."), False
        ang = torch.atan2(s, c)  # (T, d) the reader's angles, wrapped to (-pi, pi]
        gap = ((ang - ref + math.pi) % (2 * math.pi) - math.pi).abs()  # (T, d)
        t, col = divmod(int(gap.argmax()), d)
        shown, expected = fmt_pair(float(ang[t, col]), float(ref[t, col]))
        return (f"{where}: the angle at position {offset + t}, column {col} is {shown} rad (mod "
                f"2 pi), expected m*theta_i = {expected} with theta_i = base^(-2i/d_head), "
                f"i = {col % (d // 2)}."), False
    return None, False


_LOW_PRECISION = (torch.bfloat16, torch.float16)


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _precision_words(dtype: torch.dtype) -> str:
    """Why `dtype` cannot hold RoPE's angles, in numbers (positions near 16,000, the check's offset)."""
    bits = significant_bits(dtype)  # significant bits: bf16 8, float16 11
    spacing = 2 ** (13 - (bits - 1))  # between 8192 and 16384 (where 16,000 lies) numbers are this far apart
    turns = spacing / 2 / (2 * math.pi)
    overflow = "; past 65,504 float16 overflows to inf (cos and sin of inf are NaN)" if dtype == torch.float16 else ""
    return (f"{_name(dtype)} keeps {bits} significant bits, so near position 16,000 a position (and m*theta_i) is "
            f"rounded to a multiple of {spacing}: off by up to {spacing // 2} radians, "
            f"{'about ' + format(turns, '.0f') + ' full turns' if turns >= 1 else 'more than half a turn'}{overflow}.")


def _low_precision_tables(d: int, offset: int, T: int,
                          base: float = 10000.0) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """(cos, sin) float64 of the usual low-precision recipes: positions and the product in a low dtype, only the
    positions, or only inv_freq in it, for bf16 and float16."""
    theta = P.frequency_ladder(d, base)  # (d/2,) float32
    out = {}
    for dtype in _LOW_PRECISION:
        pos = torch.arange(offset, offset + T)
        for recipe, ang in (("positions and product", pos.to(dtype)[:, None] * theta.to(dtype)[None, :]),
                            ("positions", pos.to(dtype).float()[:, None] * theta[None, :]),
                            ("inv_freq", pos.float()[:, None] * theta.to(dtype).float()[None, :])):
            ang = torch.cat([ang, ang], dim=-1).double()  # (T, d)
            out[f"{recipe} in {_name(dtype)}"] = (ang.cos(), ang.sin())
    return out


def _precision_error(rope: Any, d: int, offset: int, T: int) -> tuple[float | None, str | None]:
    """(max |error| of rope(T, offset) against float64 cos/sin, None), or (None, what went wrong)."""
    where = f"RotaryEmbedding({d})({T}, offset={offset})"
    out, exc = _try(rope, T, offset=offset)
    if exc is not None:
        return None, f"{_raised(where, exc)}."
    cos, sin, problem = _tables(out, where)
    if problem is not None:
        return None, problem
    if tuple(cos.shape) != (T, d) or tuple(sin.shape) != (T, d):
        return None, _short_tables(rope, d, offset, T, tuple(cos.shape))
    ang = _table_from(chapter_tests.theta64(d), torch.arange(offset, offset + T))  # float64 oracle
    c, s = cos.double(), sin.double()
    if not (torch.isfinite(c).all() and torch.isfinite(s).all()):
        return None, (f"{where} returns NaN or inf: the angles overflowed (float16 stops at 65,504) or were "
                      "computed from a table that does not reach this position.")
    err = max(float((c - ang.cos()).abs().max()), float((s - ang.sin()).abs().max()))
    return err, None


def _rows(rope: Any, offset: int) -> int | None:
    """How many rows rope(1, offset) returns (None if it fails)."""
    out, exc = _try(rope, 1, offset=offset)
    if exc is not None or not isinstance(out, (tuple, list)) or not out or not isinstance(out[0], torch.Tensor):
        return None
    return int(out[0].shape[0]) if out[0].dim() else None


def _short_tables(rope: Any, d: int, offset: int, T: int, shape: tuple) -> str:
    """The message for tables of the wrong shape at a large offset: a table cached for a fixed length."""
    where = f"RotaryEmbedding({d})({T}, offset={offset})"
    lo, hi = 0, offset  # rope(1, lo) has a row; find the first position with none
    if _rows(rope, lo) != 1 or _rows(rope, hi) == 1:
        return (f"{where} returns tables of shape {shape}, not (T, d_head) = ({T}, {d}): forward(T, offset) must "
                "return one row for each position offset .. offset + T - 1, whatever the offset.")
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if _rows(rope, mid) == 1 else (lo, mid)
    return (f"{where} returns tables of shape {shape}, not ({T}, {d}): your tables were cached for positions "
            f"0 .. {lo} ({lo + 1} positions) and slicing past their end returns fewer rows without an error. "
            f"A decoder reaches position {offset} in a long chat: compute the angles for positions offset .. "
            "offset + T - 1 in forward (or grow the cache when offset + T exceeds it, as Hugging Face's "
            "dynamic RoPE does).")


def _name_low_precision(rope: Any, d: int, offset: int, T: int) -> str:
    """The low-precision recipe ('positions in float16', ...) rope's tables match, else ''. Two windows of
    positions, offset and offset + 5: at 16,000 .. 16,003 float16 and bfloat16 both round every position to
    16,000, at 16,005 .. 16,008 they differ."""
    gaps: dict[str, float] = {}
    for start in (offset, offset + 5):
        out, exc = _try(rope, T, offset=start)
        cos, sin, problem = _tables(out, "") if exc is None else (None, None, "")
        if problem is not None or cos is None or tuple(cos.shape) != (T, d) or tuple(sin.shape) != (T, d):
            return ""
        for name, (c, s) in _low_precision_tables(d, start, T).items():
            gap = max(float((cos.double() - c).abs().max()), float((sin.double() - s).abs().max()))
            gaps[name] = max(gaps.get(name, 0.0), gap)
    name = min(gaps, key=gaps.get)
    return name if gaps[name] < 1e-2 else ""


def _diagnose_rope_precision(RotaryEmbedding: Callable) -> str | None:
    """Angles must stay float32: at positions near 16,000 cos/sin within 1e-2 of float64, also after the module
    is cast with .to(torch.bfloat16) or .to(torch.float16), as a model cast to half precision does."""
    d, offset, T = 128, 16000, 4
    where = f"RotaryEmbedding({d})({T}, offset={offset})"
    for cast in (None,) + _LOW_PRECISION:
        rope, exc = _try(RotaryEmbedding, d)
        if exc is not None:
            return _raised(f"RotaryEmbedding({d})", exc) + "."
        if cast is not None:
            if not hasattr(rope, "to"):
                return None
            moved, exc = _try(rope.to, cast)
            if exc is not None:
                return _raised(f"rope.to({cast})", exc) + "."
            rope = moved if moved is not None else rope
        err, problem = _precision_error(rope, d, offset, T)
        if problem is not None:
            return problem if cast is None else f"After rope.to({cast}): {problem}"
        if err <= 1e-2:
            continue
        recipe = _name_low_precision(rope, d, offset, T)
        dtype = cast if cast is not None else next((t for t in _LOW_PRECISION if recipe.endswith(_name(t))), None)
        words = _precision_words(dtype) if dtype is not None else ""
        if cast is None:
            named = f"Angles in {_name(dtype)} ({recipe})" if dtype is not None else "Angles in low precision"
            words += " " if words else ""
            return (f"{named}: {where} is off by up to {err:.2f} from the float64 cos/sin. {words}Build positions "
                    "and inv_freq in float32 (torch.arange(offset, offset + T, dtype=torch.float32)) and multiply "
                    "in float32; only q and k follow the model's dtype.")
        freq = getattr(rope, "inv_freq", None)
        why = (f" Your inv_freq buffer is now {cast}: .to() casts every floating-point buffer. {words}"
               if isinstance(freq, torch.Tensor) and freq.dtype == cast else f" {words}")
        return (f"Angles in {cast} once the model is cast: after rope.to({cast}), as model.to({cast}) does, "
                f"{where} is off by up to {err:.2f} from the float64 cos/sin.{why} Keep the frequencies float32 "
                "whatever the model dtype: override _apply so that .to() moves inv_freq to the new device but "
                "keeps float32, as mlbook's RotaryEmbedding._apply does, or recompute inv_freq in forward.")
    return None


def _diagnose_apply_rotary(apply_rotary: Callable) -> str | None:
    d, offset, T = 16, 3, 7
    x = torch.randn(2, 3, T, d, generator=torch.Generator().manual_seed(1))  # (B, H, T, d_head)
    cos, sin = _lib_tables(d, 10000.0, offset, T)  # (T, d) each
    got, exc = _try(apply_rotary, x, cos, sin)
    call = "apply_rotary(x, cos, sin) with x (2, 3, 7, 16) and cos, sin (7, 16)"
    if exc is not None:
        hint = (" cos and sin are (T, d_head) and broadcast against x (B, H, T, d_head) as they are, or as "
                "cos[None, None]." if not isinstance(exc, InputModified) and ("size" in str(exc) or "shape" in str(exc))
                else "")
        return f"{_raised(call, exc)}.{hint}"
    got, problem = tensor_answer(got, call, "a tensor shaped like x, (2, 3, 7, 16)")
    if problem is not None:
        return problem
    if tuple(got.shape) != tuple(x.shape):
        return f"{call} must return a tensor shaped like x, (2, 3, 7, 16); got {tuple(got.shape)}."
    if got.dtype in _LOW_PRECISION or not got.is_floating_point():
        return (f"{call} returns {got.dtype} for a {x.dtype} x: return x's dtype. The rotation mixes the two "
                "members of a pair, so it needs x's precision; do not cast.")
    rh, ri = P.rotate_half(x), P.rotate_interleaved(x)
    if _close(got, P.apply_rotary(x, cos, sin)):
        if got.dtype != x.dtype:
            return (f"Right values, but {call} returns {got.dtype} for a {x.dtype} x: return x's dtype. A {got.dtype} "
                    f"q or k makes the scores {got.dtype}, and the attention matmul with {x.dtype} values then fails "
                    "(expected both float32).")
        return None
    mistakes = (
        (x * cos - rh * sin, "Sign of the sine term: you compute x * cos - rotate_half(x) * sin, which turns each "
                             "pair by -m*theta_i. For a pair (a, b) the rotation is (a cos - b sin, b cos + a sin), "
                             "and rotate_half already supplies the minus: x * cos + rotate_half(x) * sin."),
        (x * sin + rh * cos, "cos and sin swapped: x multiplies cos and rotate_half(x) multiplies sin, "
                             "x * cos + rotate_half(x) * sin."),
        (x * cos + x * sin, "rotate_half is missing: the sine term multiplies rotate_half(x), not x: "
                            "x * cos + rotate_half(x) * sin."),
        (x * cos + ri * sin, "Pairing mixed up: you rotate adjacent dimensions (2i, 2i+1) while cos and sin are "
                             "laid out for pairs (i, i + d/2). Use rotate_half: x * cos + rotate_half(x) * sin."),
        (x * cos, "The sine term is missing: x * cos + rotate_half(x) * sin."),
        (x * cos - ri * sin, "Pairing mixed up (adjacent dimensions rotated) and the sine term's sign flipped: "
                             "x * cos + rotate_half(x) * sin."),
    )
    for want, message in mistakes:
        if _close(got, want):
            return message
    h = d // 2
    problem = pair_kinds_message(pair_kinds(x, got, cos[:, :h], sin[:, :h], 1e-5), f"in {call}")
    if problem is not None:
        return problem
    for r in (d // 2, d // 4):  # GPT-NeoX-style partial rotary: the first r dims rotated on their own, the rest kept
        part = torch.cat([P.apply_rotary(x[..., :r], cos[:, :r], sin[:, :r]), x[..., r:]], dim=-1)
        part_half = torch.cat([P.apply_rotary(x[..., :r], torch.cat([cos[:, : r // 2]] * 2, -1),
                                              torch.cat([sin[:, : r // 2]] * 2, -1)), x[..., r:]], dim=-1)
        if _close(got, part) or _close(got, part_half):
            return (f"Partial rotation in {call}: you rotate only the first {r} of the {d} dims and pass the other "
                    f"{d - r} through unchanged (GPT-NeoX's rotary_pct, partial_rotary_factor = {r / d:g}). The "
                    "drill rotates every pair (x_i, x_(i+d/2)) of the whole head: x * cos + rotate_half(x) * sin "
                    "on the full last dimension.")
    gap = float((got.double() - P.apply_rotary(x, cos, sin).double()).abs().max())
    return (f"{call} differs from the rotation (a cos t - b sin t, b cos t + a sin t) of each pair (x_i, x_(i+d/2)) "
            f"by up to {gap:.3g}: compute x * cos + rotate_half(x) * sin.")


@guarded
def check_rope_drill(rotate_half: Callable, apply_rotary: Callable, RotaryEmbedding: Callable) -> bool:
    """Check the RoPE drill: rotate_half(x), apply_rotary(x, cos, sin), RotaryEmbedding(d_head, base).

    Half layout (pairs (i, i + d/2)), theta_i = base^(-2i/d_head), forward(T, offset) -> (cos, sin)
    each (T, d_head) float32. Checks rotate_half on its own, the tables against the library's
    (and the usual mistakes), float32 accuracy at position 16,000 also after .to(torch.bfloat16) and
    .to(torch.float16), the tables' dtype (float64 tables would break attention),
    apply_rotary against the rotation, then the chapter's test_rotate_half,
    test_rope_relative_position_property and test_rope_matches_complex_multiplication on the
    reader's three together.
    """
    _, rh_exc = _try(rotate_half, torch.arange(8.0))
    rope, re_exc = _try(RotaryEmbedding, 16)
    if re_exc is None:
        _, re_exc = _try(rope, 4, offset=0)
    x = torch.zeros(1, 1, 4, 16)
    cos, sin = _lib_tables(16, 10000.0, 0, 4)
    _, ar_exc = _try(apply_rotary, x, cos, sin)
    stubs = [name for name, exc in (("rotate_half", rh_exc), ("RotaryEmbedding", re_exc), ("apply_rotary", ar_exc))
             if _is_stub(exc)]

    if "rotate_half" not in stubs:
        problem = _diagnose_rotate_half(rotate_half)
        if problem is not None:
            if "Pairing mixed up" in problem and "RotaryEmbedding" not in stubs:
                _, interleaved = _diagnose_rope_tables(RotaryEmbedding)
                if interleaved:
                    problem += (" (Your RotaryEmbedding is interleaved too, so together they are a consistent "
                                "GPT-J-style RoPE: valid, but not the layout of LLaMA checkpoints; "
                                "convert_rotary_weights converts between the two.)")
            return verdict(False, problem)
    if "RotaryEmbedding" not in stubs:
        problem, _ = _diagnose_rope_tables(RotaryEmbedding)
        if problem is None:
            problem = _diagnose_rope_precision(RotaryEmbedding)
        if problem is not None:
            return verdict(False, problem)
    if "apply_rotary" not in stubs:
        problem = _diagnose_apply_rotary(apply_rotary)
        if problem is not None:
            return verdict(False, problem)
    if stubs:
        done = [n for n in ("rotate_half", "RotaryEmbedding", "apply_rotary") if n not in stubs]
        so_far = f" What you have written so far ({_join(done)}) passes its checks." if done else ""
        return _not_implemented(f"{_join(stubs)} still raise{'s' if len(stubs) == 1 else ''} "
                                f"NotImplementedError: write {'it' if len(stubs) == 1 else 'them'} in the cell "
                                f"above and run this cell again.{so_far}")

    named = [
        ("test_rotate_half", chapter_tests.test_rotate_half, {"rotate_half": rotate_half}),
        ("test_rope_relative_position_property", chapter_tests.test_rope_relative_position_property,
         {"RotaryEmbedding": RotaryEmbedding, "apply_rotary": apply_rotary}),
    ] + [
        (f"test_rope_matches_complex_multiplication[offset={o}]", chapter_tests.test_rope_matches_complex_multiplication,
         {"offset": o, "RotaryEmbedding": RotaryEmbedding, "apply_rotary": apply_rotary}) for o in (0, 37, 4000)
    ]
    for name, test, kwargs in named:
        reason = _run_named(test, **kwargs)
        if reason is not None:
            return verdict(False, f"Your three pieces pass their own checks but {name} fails on them: {reason}.")
    return verdict(True, "rotate_half, RotaryEmbedding and apply_rotary match the library and the complex "
                         "rotation e^(i m theta_i), keep float32 angles at position 16,000 (also after "
                         ".to(torch.bfloat16) and .to(torch.float16)), and pass test_rotate_half, "
                         "test_rope_relative_position_property and test_rope_matches_complex_multiplication.")


# ---------------------------------------------------------------------------
# Drill (a), first step: grade the reader's property test against broken RoPEs
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Mutant:
    name: str
    breaks_property: bool  # True: scores no longer depend on m - n only (a relative-position test must fail)
    explanation: str


def _mutant_rope(kind: str) -> tuple[Callable, Callable, Callable]:
    """(rotate_half, apply_rotary, RotaryEmbedding) of the library with one mistake planted."""

    class Rope:
        def __init__(self, d_head: int, base: float = 10000.0) -> None:
            self.d_head, self.base = d_head, base

        def __call__(self, T: int, offset: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
            d, base = self.d_head, self.base
            pos = torch.arange(offset, offset + T)
            if kind == "no_rotation":
                return torch.ones(T, d), torch.zeros(T, d)
            if kind == "offset_ignored":
                return P.RotaryEmbedding(d, base)(T, 0)
            if kind == "no_cat":
                ang = pos.float()[:, None] * P.frequency_ladder(2 * d, base)[None, :]  # (T, d) own angle per column
            elif kind == "exp_i":
                ang = _table_from(P.frequency_ladder(2 * d, base)[: d // 2], pos).float()
            elif kind == "bf16":
                ang = (pos.to(torch.bfloat16)[:, None] * P.frequency_ladder(d, base).to(torch.bfloat16)[None, :])
                ang = torch.cat([ang, ang], dim=-1).float()
            else:
                cos, sin = P.RotaryEmbedding(d, base)(T, offset)
                return cos, (-sin if kind == "sign" else sin)
            return ang.cos(), ang.sin()

    def rotate(x: torch.Tensor) -> torch.Tensor:
        return P.rotate_interleaved(x) if kind == "pairing" else P.rotate_half(x)

    def apply(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        return x * cos + rotate(x) * sin

    return rotate, apply, Rope


_MUTANTS = (
    _Mutant("no_rotation", True, "a RoPE that does not rotate at all (cos = 1, sin = 0)"),
    _Mutant("offset_ignored", True, "a RoPE whose forward(T, offset) ignores offset"),
    _Mutant("pairing", True, "a RoPE that rotates adjacent pairs (2i, 2i+1) with tables laid out for (i, i + d/2)"),
    _Mutant("no_cat", True, "a RoPE whose two halves of a pair turn by different angles"),
    _Mutant("bf16", False, "a RoPE with angles computed in bf16"),
    _Mutant("sign", False, "a RoPE with the sine sign flipped"),
    _Mutant("exp_i", False, "a RoPE with theta_i = base^(-i/d) instead of base^(-2i/d)"),
)


@guarded
def check_rope_property_test(test: Callable[[Callable, Callable, Callable], None]) -> bool:
    """Grade the reader's property test test(rotate_half, apply_rotary, RotaryEmbedding), which raises on failure.

    It must pass on the library's RoPE and fail (raise) on RoPEs that break the relative-position
    property: no rotation, offset ignored, pairing mixed up, angles not shared across halves. The
    verdict also says which of the subtler mistakes it catches (bf16 angles, a flipped sine sign,
    base^(-i/d)); the last two keep scores relative, so only an exact oracle can see them.
    """

    def lib_apply(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        return P.apply_rotary(x, cos, sin, "half")

    def lib_rope(d_head: int, base: float = 10000.0) -> P.RotaryEmbedding:
        return P.RotaryEmbedding(d_head, base)

    _, exc = _try(test, P.rotate_half, lib_apply, lib_rope)
    if _is_stub(exc):
        return _not_implemented("Write your relative-position test in the cell above (it receives rotate_half, "
                                "apply_rotary and RotaryEmbedding, and asserts) and run this cell again.")
    if exc is not None:
        hint = (" If it is a tolerance: float32 rounding grows with the position, so compare scores with "
                "math.isclose(a, b, rel_tol=1e-4)." if isinstance(exc, AssertionError) else "")
        return verdict(False, f"Your test fails on a correct RoPE (the library's): {_err(exc)}.{hint}")
    caught = {m.name: _try(test, *_mutant_rope(m.name))[1] is not None for m in _MUTANTS}
    missed = [m for m in _MUTANTS if m.breaks_property and not caught[m.name]]
    if missed:
        m = missed[0]
        fix = {
            "no_rotation": "assert that two different offsets give different scores, e.g. score(3, 1) != score(3, 2)",
            "offset_ignored": "assert that two different offsets give different scores, e.g. score(3, 1) != score(3, 2)",
            "pairing": ("compare two pairs of positions with the same offset, e.g. score(3, 1) == score(103, 101), "
                        "with random q and k of a realistic d_head (64)"),
            "no_cat": ("compare two pairs of positions with the same offset, e.g. score(3, 1) == score(103, 101), "
                       "with random q and k of a realistic d_head (64)"),
        }[m.name]
        return verdict(False, f"Your test passes {m.explanation}, which breaks the relative-position property: "
                              f"{fix}.")
    extra = [m for m in _MUTANTS if not m.breaks_property]
    got = [m.explanation.removeprefix("a RoPE with ") for m in extra if caught[m.name]]
    not_got = [m.name for m in extra if not caught[m.name]]
    also = f" It also catches {', '.join(got)}." if got else ""
    if {"sign", "exp_i"} & set(not_got):
        also += (" Like any relative-position test it cannot see a flipped sine sign or theta_i = base^(-i/d): "
                 "both still make scores depend on m - n only. The oracle test (test_rope_matches_complex_"
                 "multiplication, the exact rotation e^(i m theta_i)) catches them.")
    if "bf16" in not_got:
        also += " Add a pair of positions in the thousands (e.g. 4003 and 4001) to catch bf16 angles."
    return verdict(True, "Your test passes the library's RoPE and fails RoPEs that do not rotate, ignore the "
                         "offset, mix up the pairing, or turn the halves of a pair by different angles." + also)


# ---------------------------------------------------------------------------
# Drill (b): sinusoidal_positional_encoding(T, d_model, base=10000.0) -> (T, d_model) float32
# ---------------------------------------------------------------------------


def _sin_table(T: int, d: int, theta: torch.Tensor, *, layout: str = "interleaved", swap: bool = False,
               start: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """(T, d) float64 table of a convention (sin/cos of t * theta_i, interleaved or in halves), and a
    per-entry tolerance that grows with the angle (a float32 angle t * theta is only good to ~|angle| * 2^-24)."""
    ang = torch.arange(start, start + T, dtype=torch.float64)[:, None] * theta.double()[None, :]  # (T, d/2)
    first, second = (ang.cos(), ang.sin()) if swap else (ang.sin(), ang.cos())
    if layout == "halves":
        table, spread = torch.cat([first, second], dim=-1), torch.cat([ang, ang], dim=-1)  # (T, d)
    else:
        table, spread = torch.stack([first, second], -1).reshape(T, d), ang.repeat_interleave(2, dim=-1)  # (T, d)
    return table, 1e-4 + spread.abs() * 2.0**-19


_SIN_MESSAGES = {
    "swap": ("sin and cos swapped: column 2i must hold sin(t*w_i) and column 2i+1 cos(t*w_i), so row 0 is "
             "(0, 1, 0, 1, ...)."),
    "halves": ("Layout: you put all the sines in the first half and all the cosines in the second (the "
               "tensor2tensor layout). The table here interleaves them: pe[:, 0::2] = sin, pe[:, 1::2] = cos."),
    "halves+swap": ("Layout and order: cosines first, then sines, each in a half. Interleave them instead, "
                    "sine first: pe[:, 0::2] = sin, pe[:, 1::2] = cos."),
    "exp_i": ("Base exponent off by a factor of two: your frequencies are base^(-i/d_model) with i the pair index. "
              "w_i = base^(-2i/d_model): build the exponent from the even column indices, "
              "torch.arange(0, d_model, 2) / d_model."),
    "exp_4i": ("Base exponent doubled: your frequencies are base^(-4i/d_model). torch.arange(0, d_model, 2) is "
               "already 2i; do not multiply it by 2 again."),
    "positive": ("Your frequencies grow with i: t * base^(2i/d) instead of t / base^(2i/d). The slowest pair is "
                 "the last one, w_i = base^(-2i/d_model)."),
    "start1": "Positions off by one: row t encodes position t, starting at 0 (row 0 is (0, 1, 0, 1, ...)).",
    "base_ignored": "sinusoidal_positional_encoding(T, d_model, base=500.0) gives the base-10000 table: use base.",
    "swap+exp_i": ("Two things: sin and cos are swapped (sin belongs at column 2i), and the exponent is "
                   "base^(-i/d_model) instead of base^(-2i/d_model)."),
}


@guarded
def check_sinusoidal_drill(fn: Callable[[int, int, float], torch.Tensor]) -> bool:
    """Check fn(T, d_model, base=10000.0) -> the (T, d_model) float32 table PE[t, 2i] = sin(t w_i),
    PE[t, 2i+1] = cos(t w_i), w_i = base^(-2i/d_model), then the chapter's
    test_sinusoidal_values_and_linear_offset_property on it.
    """
    for T, d, base in ((50, 16, 10000.0), (20, 8, 500.0)):
        call = f"fn({T}, {d}, {base:g})"
        pe, exc = _try(fn, T, d, base)
        if _is_stub(exc):
            return _not_implemented("sinusoidal_positional_encoding still raises NotImplementedError: write it in "
                                    "the cell above and run this cell again.")
        if exc is not None:
            return verdict(False, f"{_raised(call, exc)}.")
        pe, problem = tensor_answer(pe, call)
        if problem is not None:
            return verdict(False, problem)
        if tuple(pe.shape) == (d, T):
            return verdict(False, f"{call} has shape {tuple(pe.shape)} = (d_model, T): rows are positions, so the "
                                  f"table is (T, d_model) = ({T}, {d}). Take the outer product positions x "
                                  "frequencies, not the other way round.")
        if tuple(pe.shape) != (T, d):
            return verdict(False, f"{call} has shape {tuple(pe.shape)}; it must be (T, d_model) = ({T}, {d}).")
        ref = P.sinusoidal_positional_encoding(T, d, base)
        got = pe.double()
        if not pe.is_floating_point():
            return verdict(False, f"{call} returns {pe.dtype}: sines and cosines need a float table; return float32.")
        if not torch.isfinite(got).all():
            return verdict(False, f"{call} contains NaN or inf: every entry is the sin or cos of a finite angle.")
        th = _theta(d, base)
        oracle, tol = _sin_table(T, d, th)  # float64 values, tolerance for a float32 angle t * w_i
        if _close(got, ref, 1e-5) or bool(((got - oracle).abs() <= tol).all()):
            if pe.dtype != torch.float32:
                return verdict(False, f"Values right, dtype {pe.dtype}: return float32 (torch.arange(T, "
                                      "dtype=torch.float32)), the dtype of the embeddings it is added to: a "
                                      f"{pe.dtype} table turns the sum {pe.dtype}, and the float32 layers after it "
                                      "then fail on the dtype.")
            continue
        if pe.dtype in _LOW_PRECISION and _close(got, ref, 2e-2):
            return verdict(False, f"{call} is {pe.dtype}: right up to rounding (off by up to "
                                  f"{float((got - ref).abs().max()):.2g}), but {_name(pe.dtype)} keeps "
                                  f"{significant_bits(pe.dtype)} significant bits, too few for angles t * w_i at "
                                  "large t. Compute in float32 and return float32.")
        candidates = {
            "swap": _sin_table(T, d, th, swap=True),
            "halves": _sin_table(T, d, th, layout="halves"),
            "halves+swap": _sin_table(T, d, th, layout="halves", swap=True),
            "exp_i": _sin_table(T, d, P.frequency_ladder(2 * d, base)[: d // 2]),
            "exp_4i": _sin_table(T, d, th * th),
            "positive": _sin_table(T, d, 1.0 / th),
            "start1": _sin_table(T, d, th, start=1),
            "swap+exp_i": _sin_table(T, d, P.frequency_ladder(2 * d, base)[: d // 2], swap=True),
        }
        if base != 10000.0:
            candidates["base_ignored"] = _sin_table(T, d, _theta(d, 10000.0))
        for name, (table, tol) in candidates.items():
            if ((got - table).abs() <= tol).all():
                return verdict(False, f"{call}: " + _SIN_MESSAGES[name])
        t, c = divmod(int((got - oracle).abs().argmax()), d)  # the largest difference
        kind = "sin" if c % 2 == 0 else "cos"
        shown, expected = fmt_pair(float(got[t, c]), float(oracle[t, c]), 5)
        return verdict(False, f"{call}: PE[{t}, {c}] = {shown}, expected {kind}({t} * w_{c // 2}) = "
                              f"{expected}, with w_i = base^(-2i/d_model).")
    reason = _run_named(chapter_tests.test_sinusoidal_values_and_linear_offset_property,
                        sinusoidal_positional_encoding=fn)
    if reason is not None:
        return verdict(False, f"The values match but test_sinusoidal_values_and_linear_offset_property fails: {reason}.")
    return verdict(True, "sin at column 2i, cos at 2i+1, w_i = base^(-2i/d_model), float32, and "
                         "test_sinusoidal_values_and_linear_offset_property passes (PE[t+k] = M(k) PE[t]).")


# ---------------------------------------------------------------------------
# Drill (c): alibi_slopes(n_heads) -> (H,) and alibi_bias(n_heads, T_q, T_k) -> (1, H, T_q, T_k)
# ---------------------------------------------------------------------------


def _geometric(n_heads: int) -> torch.Tensor:
    """2^(-8h/H) for h = 1..H for any H: right for powers of two, the naive extension otherwise."""
    start = float(P.alibi_slopes(1)[0]) ** (1.0 / n_heads)  # (2^-8)^(1/H) = 2^(-8/H)
    return torch.tensor([start ** (h + 1) for h in range(n_heads)], dtype=torch.float64)


def _diagnose_slopes(alibi_slopes: Callable) -> str | None:
    for H in (8, 4, 16, 12, 6, 24):
        got, exc = _try(alibi_slopes, H)
        call = f"alibi_slopes({H})"
        if exc is not None:
            if H & (H - 1):
                return (f"Power-of-two-only slopes: {call} raised {_err(exc)}. For H heads that are not a power "
                        "of two, the ALiBi paper takes the slopes of the largest power of two n < H, then every "
                        "other slope of the 2n-head sequence until there are H (for 12 heads: the 8 slopes "
                        "1/2 .. 1/256, then 2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5).")
            return f"{_raised(call, exc)}."
        got, problem = tensor_answer(got, call, f"a tensor of shape (H,) = ({H},), one slope per head")
        if problem is not None:
            return problem
        if tuple(got.shape) != (H,):
            return f"{call} must return a tensor of shape (H,) = ({H},), one slope per head; got {tuple(got.shape)}."
        want = P.alibi_slopes(H).double()
        g = got.double()
        if not got.is_floating_point():
            return f"{call} returns {got.dtype}: slopes are fractions 2^(-8h/H); return float32."
        if not torch.isfinite(g).all():
            return f"{call} contains NaN or inf: every slope is a positive fraction, 2^(-8h/H)."
        if _near(g, want):
            if got.dtype in _LOW_PRECISION:
                return (f"Right slopes here, but {call} returns {got.dtype}; the drill asks for float32. "
                        f"{_name(got.dtype)} keeps {significant_bits(got.dtype)} significant bits: slopes that are not "
                        "powers of two (for 12 heads 2^-0.5, 2^-1.5, ...) get rounded. Return float32.")
            if got.dtype != torch.float32:
                return (f"Right slopes, but {call} returns {got.dtype}; the drill asks for float32. The bias built "
                        f"from them would be {got.dtype}, which turns float32 scores {got.dtype} and makes the "
                        "attention matmul with float32 values fail (expected both float32). Return "
                        "torch.tensor(slopes, dtype=torch.float32).")
            continue
        if got.dtype in _LOW_PRECISION and torch.allclose(g, want, rtol=1e-2, atol=0):
            return (f"{call} returns {got.dtype}: the slopes are right up to rounding, but {_name(got.dtype)} keeps "
                    f"{significant_bits(got.dtype)} significant bits (up to {float(((g - want) / want).abs().max()):.1%} "
                    "off). Return float32.")
        shown = f"{call} = {_fmt(g, 4)}, expected {_fmt(want, 4)}"
        if _near(-g, want):
            return (f"{shown}. Slopes are positive; the minus sign belongs in the bias, -m_h * (i - j).")
        if _near(g.flip(0), want):
            return f"{shown}. Right slopes, reversed order: head 0 gets the steepest slope, 2^(-8/H)."
        if H & (H - 1) == 0:
            start = 2.0 ** (-8.0 / H)
            if _near(g, want / start):
                return (f"{shown}. Off by one in the exponent: the first slope is start^1 = 2^(-8/H), not "
                        "start^0 = 1 (h runs 1..H, or use start ** (h + 1) for h in range(H)).")
            if _near(g, torch.tensor([2.0 ** -(h + 1) for h in range(H)], dtype=torch.float64)):
                return (f"{shown}. Your slopes 1/2, 1/4, ... ignore H: they are right only for 8 heads. The ratio "
                        "and the first slope are start = 2^(-8/H), so the last slope is always 2^-8.")
            return f"{shown}: m_h = 2^(-8h/H) for h = 1..H."
        if _near(g, _geometric(H)):
            return (f"Power-of-two-only slopes: {shown}. The geometric rule 2^(-8h/H) holds for H a power of two; "
                    "for other H the paper takes the slopes of the largest power of two n below H, then every "
                    "other slope of the 2n-head sequence until there are H.")
        if _near(g.sort(descending=True).values, want.sort(descending=True).values):
            return (f"{shown}. Right set of slopes, wrong order: list the n power-of-two slopes first, then the "
                    "interleaved extras, in that order, because head h of a trained checkpoint expects slope h "
                    "(the paper and BLOOM use this order).")
        n = 1 << (H.bit_length() - 1)
        odd = torch.cat([_geometric(n), _geometric(2 * n)[1::2][: H - n]])
        if _near(g, odd):
            return (f"{shown}. The extra slopes come from every other slope of the 2n-head sequence starting at the "
                    "first (indices 0, 2, 4, ...); you started at the second, which repeats slopes you already have.")
        return (f"{shown}. For H not a power of two: the n slopes of the largest power of two n < H, then "
                "slopes 0, 2, 4, ... of the 2n-head sequence until there are H.")
    return None


def _diagnose_bias(alibi_bias: Callable) -> str | None:
    for H, T_q, T_k in ((4, 6, 6), (8, 3, 10), (12, 2, 5)):
        call = f"alibi_bias({H}, {T_q}, {T_k})"
        got, exc = _try(alibi_bias, H, T_q, T_k)
        if exc is not None:
            return f"{_raised(call, exc)}."
        got, problem = tensor_answer(got, call)
        if problem is not None:
            return problem
        want = P.alibi_bias(H, T_q, T_k).double()  # (1, H, T_q, T_k)
        if tuple(got.shape) == (H, T_q, T_k):
            return (f"{call} has shape {tuple(got.shape)}: add the leading batch axis, (1, H, T_q, T_k), so "
                    "the bias broadcasts over the batch when added to the scores.")
        if tuple(got.shape) != (1, H, T_q, T_k):
            return f"{call} has shape {tuple(got.shape)}; it must be (1, H, T_q, T_k) = (1, {H}, {T_q}, {T_k})."
        if not got.is_floating_point():
            return f"{call} returns {got.dtype}: the bias -m_h (i - j) is fractional; return float32."
        g = got.double()
        if not torch.isfinite(g).all():
            return (f"{call} contains NaN or inf: future keys get bias 0 here (the causal mask removes them), "
                    "not -inf, and every other entry is -m_h (i - j).")
        # float32 tolerance, relative to the size of the bias (up to m_h * (T_k - 1))
        if torch.allclose(g, want, rtol=rtol_for(torch.float32), atol=1e-6):
            if got.dtype in _LOW_PRECISION:
                return (f"Right values here, but {call} returns {got.dtype}; the drill asks for float32. "
                        f"{_name(got.dtype)} keeps {significant_bits(got.dtype)} significant bits: slopes that are not "
                        "powers of two and long distances m_h * (i - j) get rounded. Build the bias in float32.")
            if got.dtype != torch.float32:
                return (f"Right values, but {call} returns {got.dtype}; the drill asks for float32. Added to "
                        f"float32 scores, a {got.dtype} bias turns them {got.dtype}, and the attention matmul with "
                        "float32 values then fails (expected both float32). Build it in float32 (positions with "
                        "dtype=torch.float32, slopes float32).")
            continue
        if got.dtype in _LOW_PRECISION and torch.allclose(g, want, rtol=1e-2, atol=1e-2):
            return (f"{call} returns {got.dtype}: right up to rounding, but {_name(got.dtype)} keeps "
                    f"{significant_bits(got.dtype)} significant bits, so -m_h (i - j) is off by up to "
                    f"{float((g - want).abs().max()):.2g}. Build the bias in float32.")
        slopes = P.alibi_slopes(H).double()[None, :, None, None]  # (1, H, 1, 1)
        q_pos = torch.arange(T_k - T_q, T_k, dtype=torch.float64)[:, None]  # (T_q, 1)
        k_pos = torch.arange(T_k, dtype=torch.float64)[None, :]  # (1, T_k)
        dist = q_pos - k_pos  # (T_q, T_k) i - j, negative for future keys
        first_q = torch.arange(T_q, dtype=torch.float64)[:, None] - k_pos  # queries at 0 .. T_q - 1
        mistakes = (
            (slopes * dist.clamp(min=0), "Sign: your bias is +m_h * (i - j), a bonus that grows with distance. "
                                         "ALiBi subtracts it: bias = -m_h * (i - j)."),
            (-slopes * dist, "Missing clamp of future keys: for j > i your bias is -m_h * (i - j) = +m_h * (j - i), "
                             "a bonus for looking ahead. Clamp the distance at 0, (q_pos - k_pos).clamp(min=0), so "
                             "future keys get 0; the causal mask removes them."),
            (-slopes * dist.abs(), "Future keys get -m_h * |i - j|: the causal ALiBi bias clamps i - j at 0 so future "
                                   "keys get 0 (the mask removes them); |i - j| is the symmetric encoder variant."),
            (slopes * dist, "Sign and clamp: your bias is +m_h * (i - j) for every key. Use -m_h * (i - j) with "
                            "i - j clamped at 0."),
            (-slopes * (-dist).clamp(min=0), "Distance reversed: you penalise future keys and leave past keys at 0. "
                                             "The distance is i - j (query minus key), clamped at 0."),
            (-slopes * first_q.clamp(min=0), "Query positions: with T_q < T_k the queries are the LAST T_q of the "
                                             "T_k positions (cached decoding), q_pos = torch.arange(T_k - T_q, T_k)."),
            (-slopes * first_q, "Query positions and clamp: the queries are the last T_q of the T_k positions, "
                                "q_pos = torch.arange(T_k - T_q, T_k), and i - j is clamped at 0."),
        )
        for candidate, message in mistakes:
            if _near(g, candidate):
                return f"{call}: {message}"
        _, h, i, j = (int(v) for v in torch.unravel_index((g - want).abs().argmax(), g.shape))
        shown, expected = fmt_pair(float(g[0, h, i, j]), float(want[0, h, i, j]), 5)
        return (f"{call}: bias[0, {h}, {i}, {j}] = {shown}, expected "
                f"{expected} (slope m_{h} = {float(slopes[0, h, 0, 0]):.5g}, query at position "
                f"{T_k - T_q + i}, key at {j}).")
    return None


@guarded
def check_alibi_drill(alibi_slopes: Callable[[int], torch.Tensor], alibi_bias: Callable[[int, int, int], torch.Tensor]) -> bool:
    """Check alibi_slopes(n_heads) (the paper's rule for any H) and alibi_bias(n_heads, T_q, T_k)
    (-m_h (i - j) for j <= i, 0 for future keys, queries the last T_q of T_k; (1, H, T_q, T_k)),
    then the chapter's test_alibi_slopes_and_bias on both.
    """
    _, s_exc = _try(alibi_slopes, 8)
    _, b_exc = _try(alibi_bias, 8, 4, 4)
    stubs = [n for n, e in (("alibi_slopes", s_exc), ("alibi_bias", b_exc)) if _is_stub(e)]
    if "alibi_slopes" not in stubs:
        problem = _diagnose_slopes(alibi_slopes)
        if problem is not None:
            return verdict(False, problem)
    if "alibi_bias" not in stubs:
        problem = _diagnose_bias(alibi_bias)
        if problem is not None:
            return verdict(False, problem)
    if stubs:
        so_far = " alibi_slopes passes its checks." if stubs == ["alibi_bias"] else ""
        so_far = " alibi_bias passes its checks." if stubs == ["alibi_slopes"] else so_far
        return _not_implemented(f"{' and '.join(stubs)} still raise{'s' if len(stubs) == 1 else ''} "
                                f"NotImplementedError: write {'it' if len(stubs) == 1 else 'them'} in the cell above "
                                f"and run this cell again.{so_far}")
    reason = _run_named(chapter_tests.test_alibi_slopes_and_bias, alibi_slopes=alibi_slopes, alibi_bias=alibi_bias)
    if reason is not None:
        return verdict(False, f"Your functions pass their own checks but test_alibi_slopes_and_bias fails: {reason}.")
    return verdict(True, "Slopes 2^(-8h/H) with the paper's interleaving for any H, bias -m_h (i - j) clamped at 0 "
                         "for future keys with the queries last, shape (1, H, T_q, T_k); test_alibi_slopes_and_bias "
                         "passes.")


# ---------------------------------------------------------------------------
# Drill (d): relative_position_bucket(relative_position, bidirectional, num_buckets, max_distance)
# ---------------------------------------------------------------------------


def _bucket_variant(
    rel: torch.Tensor, bidirectional: bool, num_buckets: int, max_distance: int, *, sign: int = -1,
    halve: bool = True, direction_offset: bool = True, exact_before_halving: bool = False, exact_shift: int = 0,
    log_shift: int = 0, clamp: bool = True, causal_clamp: bool = True, rounding: bool = False,
) -> torch.Tensor:
    """T5 bucketing with one usual mistake planted (float32, as the reference implementations compute it).

    With the default flags this is exactly `relative_position_bucket` (the drill tests assert it);
    each flag reproduces one mistake: n = +relative_position (sign=+1), no halving, no offset for
    future keys, max_exact from the unhalved count, the exact range shifted, the log range shifted,
    no clamp at the last bucket, no clamp of future keys in causal mode, rounding instead of
    truncating the log position.
    """
    n = sign * rel.long()  # (...) query - key when sign = -1
    per_dir = num_buckets // 2 if (bidirectional and halve) else num_buckets
    offset = torch.zeros_like(n)
    if bidirectional:
        if direction_offset:
            offset = (n < 0).long() * per_dir  # (...) future keys use the upper half
        n = n.abs()
    elif causal_clamp:
        n = n.clamp(min=0)
    exact = (num_buckets // 2 if exact_before_halving else per_dir // 2) + exact_shift
    ratio = n.float() / exact  # (...)
    log_pos = torch.log(ratio) / math.log(max_distance / exact) * (per_dir - exact)  # (...) float
    log_bucket = exact + log_shift + (log_pos.round() if rounding else log_pos).long()
    if clamp:
        log_bucket = log_bucket.clamp(max=per_dir - 1)
    return offset + torch.where(n < exact, n, log_bucket)


_BUCKET_MISTAKES: tuple[tuple[dict, str], ...] = (
    ({"halve": False}, "Bidirectional split: with bidirectional=True the num_buckets are shared by the two directions, "
                       "so first halve them (num_buckets //= 2: 16 per direction, 8 of them exact, for 32). Yours gives "
                       "each direction all num_buckets, and future keys land on ids up to 2 * num_buckets - 1, past "
                       "the end of the (num_buckets, H) table."),
    ({"sign": 1}, "Direction: relative_position is key - query, so n = -relative_position is positive for past keys. "
                  "Yours uses n = +relative_position, which exchanges past and future (bidirectional: past keys take "
                  "the upper half; causal: past keys collapse into bucket 0 and future keys get the buckets)."),
    ({"direction_offset": False}, "Bidirectional split: future keys (relative_position > 0) must use the upper half, "
                                  "ids num_buckets // 2 and up: add (n < 0) * (num_buckets // 2) before taking |n|. "
                                  "Yours gives +k and -k the same bucket, so the bias cannot tell before from after."),
    ({"exact_before_halving": True}, "Bidirectional split, in the wrong order: max_exact = num_buckets // 2 must be "
                                     "computed AFTER num_buckets is halved for the two directions (8 exact buckets per "
                                     "direction for 32, not 16)."),
    ({"clamp": False}, "Missing clamp at the last bucket: distances at and beyond max_distance must all share the last "
                       "bucket of their direction, torch.clamp(val_if_large, max=num_buckets - 1) (num_buckets already "
                       "halved when bidirectional). Yours keeps counting up, past the direction's buckets."),
    ({"log_shift": 1}, "Off by one at the exact/log boundary: the log-spaced buckets start at max_exact itself "
                       "(max_exact + floor(...), and floor(...) = 0 at n = max_exact); yours start at max_exact + 1, so "
                       "bucket max_exact is never used and every log bucket is one too high."),
    ({"log_shift": -1}, "Off by one at the exact/log boundary: the log-spaced buckets start at max_exact "
                        "(max_exact + floor(...)); yours start at max_exact - 1, the id of the last exact bucket, so "
                        "distances max_exact - 1 and max_exact collide."),
    ({"exact_shift": -1}, "Off by one at the exact/log boundary: max_exact = num_buckets // 2 (after halving when "
                          "bidirectional), and distances n < max_exact get their own bucket. Yours uses "
                          "max_exact - 1, one exact bucket too few."),
    ({"exact_shift": 1}, "Off by one at the exact/log boundary: max_exact = num_buckets // 2 (after halving when "
                         "bidirectional), and distances n < max_exact get their own bucket. Yours uses max_exact + 1, "
                         "one exact bucket too many."),
    ({"rounding": True}, "Rounding: the log position is truncated (.long(), the floor for these non-negative values), "
                         "not rounded; rounding moves about half of the log-spaced distances one bucket up."),
    ({"causal_clamp": False}, "Causal mode: future keys (relative_position > 0) must map to bucket 0, n = max(n, 0) "
                              "(torch.clamp(n, min=0)); yours gives them negative ids, which index the table from "
                              "the end."),
)


def _bucket_region(n: int, exact: int, max_distance: int) -> str:
    if n < exact:
        return f"the exact range (|n| < {exact})"
    if n < max_distance:
        return f"the log-spaced range ({exact} <= |n| < max_distance = {max_distance})"
    return f"the far range (|n| >= max_distance = {max_distance}, all in the last bucket)"


@guarded
def check_bucket_drill(fn: Callable[[torch.Tensor, bool, int, int], torch.Tensor]) -> bool:
    """Check fn(relative_position, bidirectional, num_buckets, max_distance) against T5's bucketing
    (relative_position = key - query), name the usual mistakes, then run the chapter's
    test_relative_position_bucket_properties on it.
    """
    rel = torch.arange(-300, 301)
    configs = ((True, 32, 128), (False, 32, 128), (True, 16, 64), (False, 8, 20))
    _, exc = _try(fn, rel, True, 32, 128)
    if _is_stub(exc):
        return _not_implemented("relative_position_bucket still raises NotImplementedError: write it in the cell "
                                "above and run this cell again.")
    outputs = {}
    for bid, nb, md in configs:
        call = f"fn(rel, bidirectional={bid}, num_buckets={nb}, max_distance={md})"
        got, exc = _try(fn, rel, bid, nb, md)
        if exc is not None:
            return verdict(False, f"{_raised(call, exc)} (rel = torch.arange(-300, 301)).")
        got, problem = tensor_answer(got, call, f"bucket ids shaped like relative_position, {tuple(rel.shape)}")
        if problem is not None:
            return verdict(False, problem)
        if tuple(got.shape) != tuple(rel.shape):
            return verdict(False, f"{call} must return bucket ids shaped like relative_position, {tuple(rel.shape)}; "
                                  f"got {tuple(got.shape)}.")
        if got.is_floating_point() or got.is_complex() or got.dtype == torch.bool:
            return verdict(False, f"{call} returns {got.dtype}: bucket ids index an embedding table, so return "
                                  "integers (.long() after the log formula truncates toward zero, which is the floor here).")
        outputs[(bid, nb, md)] = got.long()
    mismatched = [c for c in configs if not torch.equal(outputs[c], P.relative_position_bucket(rel, *c))]
    if mismatched:
        for flags, message in _BUCKET_MISTAKES:
            if all(torch.equal(outputs[c], _bucket_variant(rel, *c, **flags)) for c in configs):
                return verdict(False, message)
        bid, nb, md = mismatched[0]
        want = P.relative_position_bucket(rel, bid, nb, md)
        got = outputs[(bid, nb, md)]
        per_dir = nb // 2 if bid else nb
        if bid and bool(((got < 0) & (rel != 0)).any()):
            return verdict(False, "Negative bucket ids in bidirectional mode: after choosing the half by the sign "
                                  "of n, continue with |n| (n = n.abs()); the log of a negative distance is NaN.")
        if bool((got >= nb).any()) or bool((got < 0).any()):
            r = int(rel[(got >= nb) | (got < 0)][0])
            return verdict(False, f"fn(..., bidirectional={bid}, num_buckets={nb}, max_distance={md}) gives bucket "
                                  f"{int(got[rel == r])} at relative_position {r}: ids must lie in 0 .. "
                                  f"{nb - 1}, one per row of the (num_buckets, H) table.")
        wrong = (got != want).nonzero().flatten()
        idx = int(wrong[rel[wrong].abs().argmin()])  # the smallest distance that is wrong
        r, n = int(rel[idx]), abs(int(rel[idx]))
        exact = per_dir // 2
        near = " (right at the exact/log boundary: off by one?)" if abs(n - exact) <= 1 else ""
        return verdict(False, f"fn(rel, bidirectional={bid}, num_buckets={nb}, max_distance={md}): at "
                              f"relative_position = {r} (key {'after' if r > 0 else 'before'} the query, |n| = {n}, "
                              f"in {_bucket_region(n, exact, md)}) you give bucket {int(got[idx])}, expected "
                              f"{int(want[idx])}{near}. The log range is max_exact + floor(log(n / max_exact) / "
                              f"log(max_distance / max_exact) * (num_buckets - max_exact)), clamped at "
                              f"num_buckets - 1, with num_buckets halved first when bidirectional.")
    grid = torch.arange(5)[None, :] - torch.arange(4)[:, None]  # (T_q, T_k) key - query
    got2, exc = _try(fn, grid, True, 32, 128)
    if isinstance(exc, InputModified):
        call = "fn(grid, True, 32, 128) with grid a (4, 5) tensor of key - query offsets"
        return verdict(False, _raised(call, exc) + ".")
    got2, problem = tensor_answer(got2, "fn(grid, True, 32, 128)") if exc is None else (None, None)
    if problem is not None:
        return verdict(False, problem)
    if exc is not None or got2.shape != grid.shape or not torch.equal(got2.long(), P.relative_position_bucket(grid)):
        return verdict(False, "Right on a 1-D tensor but not on a (T_q, T_k) grid of key - query offsets: use only "
                              "elementwise operations (torch.where, clamp, abs), no loops over a flat index."
                       + (f" (It raised {_err(exc)}.)" if exc is not None else ""))
    reason = _run_named(chapter_tests.test_relative_position_bucket_properties, relative_position_bucket=fn)
    if reason is not None:
        return verdict(False, f"The buckets match but test_relative_position_bucket_properties fails: {reason}.")
    return verdict(True, "Exact buckets below num_buckets // 2 (per direction), log-spaced to max_distance, clamped, "
                         "future keys in the upper half (bidirectional) or bucket 0 (causal); "
                         "test_relative_position_bucket_properties passes.")
