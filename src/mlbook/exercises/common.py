"""The exercise checkers' shared call guard: one verdict line, and calls that never raise.

    verdict(ok, message)       prints "Correct. ..." or "Not yet. ..." (plus any note, e.g. where the answer
                               came back) and returns ok
    call_answer(fn, *args)     the reader's fn(*args) as (value, None), or (None, "Error: message"); fn gets
                               copies of the arguments, is stopped after TIME_LIMIT_S seconds (AnswerTimedOut),
                               and changing an argument in place is reported (InputModified)
    call_checked(fn, ...)      the same as (value, None) or (None, the exception), for checkers that look at it
    failure(call, err)         "call raised Error: message", or "call: you modified the input: ..."
    run_limited(fn, ...)       fn(...) stopped with AnswerTimedOut after TIME_LIMIT_S seconds
    tensor_answer(value, ...)  the reader's tensor detached on the CPU, or a sentence saying why it is not one
                               (None, a list, a numpy array, a complex tensor, a tensor on the meta device)
    number_answer(value, ...)  a Python, numpy or one-element-tensor number, or a sentence saying why not
    as_float(value)            a Python/numpy number or one-element tensor as a float, else None
    describe(value)            what came back, in words ('None (is the return statement missing?)', ...)
    error_text(exc)            'ExceptionType: first line of its message'
    note(text)                 a remark for the next verdict line (where a result came back)
    rtol_for(dtype)            the relative tolerance a correct computation in that dtype meets
    significant_bits(dtype)    11 for float16, 8 for bfloat16: what a low-precision answer keeps
    fmt_pair(got, want)        two different numbers printed with enough digits to look different
    pair_kinds(x, got, ...)    per RoPE pair (x_i, x_(i+d/2)): turned right, left still, mirrored, members swapped
    pair_kinds_message(...)    the sentence naming partial rotation or swapped members, from pair_kinds
    guarded(checker)           a checker that reports an answer it could not compare instead of raising
    staged_hint(key, symptom, fix)  opt-in two-stage hint: the symptom the first time mistake `key` is seen,
                               the symptom and the fix from the second time on (reset_hints forgets them)

Every checker module imports these from here; a checker never raises into a notebook cell.
"""

from __future__ import annotations

import contextvars
import copy
import functools
import math
import numbers
import signal
import threading
import time
from typing import Any, Callable, TypeVar

import numpy as np
import torch

__all__ = ["verdict", "call_answer", "call_checked", "failure", "run_limited", "tensor_answer", "number_answer",
           "as_float", "rtol_for", "significant_bits", "fmt_pair", "pair_kinds", "pair_kinds_message", "guarded",
           "note", "describe", "error_text", "TIME_LIMIT_S", "AnswerTimedOut", "InputModified", "staged_hint",
           "reset_hints"]

# Every reference answer returns in well under a second on a 2-core CPU; an answer still running after
# this long is stuck (an endless loop, a huge tensor) and is stopped instead of hanging the notebook.
TIME_LIMIT_S = 10.0


class AnswerTimedOut(Exception):
    """The reader's function did not return within the time limit."""


class InputModified(Exception):
    """The reader's function changed one of its arguments in place."""

_F = TypeVar("_F", bound=Callable[..., bool])

# Remarks gathered while a checker runs (e.g. "it came back on cuda:0"), appended to its verdict line.
_NOTES: contextvars.ContextVar[tuple[str, ...]] = contextvars.ContextVar("exercise_notes", default=())


def note(text: str) -> None:
    """Add a remark to the verdict the running checker prints next (once, however often it is added)."""
    if text not in _NOTES.get():
        _NOTES.set(_NOTES.get() + (text,))


def verdict(ok: bool, message: str) -> bool:
    """Print one verdict line ("Correct. " or "Not yet. " then `message` and any notes) and return `ok`."""
    notes = _NOTES.get()
    _NOTES.set(())
    print(("Correct. " if ok else "Not yet. ") + " ".join((message,) + notes))
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


def _copy(arg: object) -> object:
    return copy.deepcopy(arg) if isinstance(arg, (torch.Tensor, list, tuple, dict)) else arg


def call_checked(fn: Callable, *args: object, **kwargs: object) -> tuple[object, Exception | None]:
    """fn(*args, **kwargs) as (value, None), or (None, the exception) if the reader's code raised.

    fn gets copies of the tensors, lists and dicts among the arguments, so the checker's own inputs (and any
    reference computed from them, before or after) stay as they were; fn is stopped after TIME_LIMIT_S
    seconds (AnswerTimedOut); an argument that fn changed in place gives an InputModified exception."""
    given = [_copy(a) for a in args]
    given_kw = {k: _copy(v) for k, v in kwargs.items()}
    try:
        value = run_limited(fn, *given, **given_kw)
    except Exception as exc:  # the reader's code: report it, do not crash the cell
        return None, exc
    named = [(f"argument {i + 1}", before, after) for i, (before, after) in enumerate(zip(args, given))]
    named += [(f"argument {k}", kwargs[k], given_kw[k]) for k in kwargs]
    for name, before, after in named:
        if not _same(after, before):
            what = f"a tensor of shape {tuple(before.shape)}" if isinstance(before, torch.Tensor) else type(before).__name__
            return None, InputModified(f"you modified the input: {name} ({what}) was changed in place; leave the "
                                       f"arguments as they are (work on a copy, x = x.clone(), or use out-of-place "
                                       f"operations such as x * 2 instead of x.mul_(2))")
    return value, None


def error_text(exc: BaseException) -> str:
    """'ExceptionType: first line of its message'."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return type(exc).__name__ + (f": {text}" if text else "")


def call_answer(fn: Callable, *args: object) -> tuple[object, str | None]:
    """fn(*args) as (value, None), or (None, "ExceptionType: message") if the reader's code raised.

    As call_checked: fn gets copies of its arguments and a time limit; an argument that fn changed in place
    is reported as "InputModified: you modified the input: ..."."""
    value, exc = call_checked(fn, *args)
    return (value, None) if exc is None else (None, error_text(exc))


def failure(call: str, err: str) -> str:
    """The sentence for a call that failed: 'call raised Error: ...', or 'call: you modified the input: ...'."""
    prefix = InputModified.__name__ + ": "
    return f"{call}: {err[len(prefix):]}" if err.startswith(prefix) else f"{call} raised {err}"


def describe(value: object) -> str:
    """What the reader returned, in words, for a message: 'None (is the return statement missing?)', 'a list
    of length 3', 'a numpy array of shape (3,)', 'the string 'abc''."""
    if value is None:
        return "None (is the return statement missing?)"
    if isinstance(value, np.ndarray):
        return f"a numpy array of shape {value.shape}"
    if isinstance(value, str):
        return f"the string {value[:40]!r}"
    if isinstance(value, (list, tuple, dict)):
        return f"a {type(value).__name__} of length {len(value)}"
    if isinstance(value, torch.Tensor):
        return f"a {value.dtype} tensor of shape {tuple(value.shape)} on {value.device}"
    return f"a {type(value).__name__}"


_FOREIGN_DEVICE_NOTE = ("(It came back on {device}, not on the CPU where the checker's inputs are; it was compared "
                        "on the CPU. Create new tensors on the device of the inputs, device=x.device, so that the "
                        "code runs wherever the model does.)")


def tensor_answer(value: object, call: str, expected: str = "a torch.Tensor") -> tuple[torch.Tensor | None, str | None]:
    """The reader's tensor detached, dense and on the CPU, as (tensor, None); else (None, why not).

    A tensor on another device (a GPU) is copied to the CPU and compared there, and the verdict then notes
    where it came back; a tensor on the meta device has no values to compare. A complex tensor, None, a list,
    a numpy array or anything else is refused with a sentence that names what came back."""
    if not isinstance(value, torch.Tensor):
        hint = ""
        if isinstance(value, np.ndarray):
            hint = " Convert it with torch.from_numpy, or compute with torch throughout."
        elif isinstance(value, (list, tuple)):
            hint = " Build it with torch operations (torch.stack or torch.tensor turn a list into a tensor)."
        return None, f"Return {expected}; {call} returned {describe(value)}.{hint}"
    device = value.device
    if device.type == "meta":
        return None, (f"{call} came back on the meta device, which records shapes but holds no values, so there is "
                      "nothing to compare: create the result from the inputs, on their device (device=x.device), "
                      "not with device='meta'.")
    try:
        t = value.detach()
        if t.layout != torch.strided:
            t = t.to_dense()
        t = t.to("cpu")
        if type(t) is not torch.Tensor:  # a subclass (nn.Parameter, ...): compare its values
            t = t.as_subclass(torch.Tensor)
    except Exception as exc:  # noqa: BLE001 - a device or layout the CPU cannot read
        return None, f"{call} came back on {device} and could not be copied to the CPU to compare ({error_text(exc)})."
    if device.type != "cpu":
        note(_FOREIGN_DEVICE_NOTE.format(device=device))
    if t.is_complex():
        return None, (f"{call} returned a complex tensor ({t.dtype}): return {expected} of real numbers (take "
                      ".real, or build the result from real tensors).")
    return t, None


def number_answer(value: object, call: str, what: str = "one number") -> tuple[int | float | None, str | None]:
    """A number as (int or float, None): Python and numpy numbers, a 0-d numpy array, a one-element tensor
    (on any device). Else (None, why not): a bool, a string, a list, NaN or infinity, a tensor of many values."""
    if isinstance(value, (bool, np.bool_)):
        return None, f"Return {what}, not a bool; {call} returned {value!r}."
    if isinstance(value, np.ndarray) and value.size == 1:
        value = value.reshape(()).item()
    if isinstance(value, torch.Tensor):
        if value.numel() != 1:
            return None, f"Return {what}; {call} returned a tensor of shape {tuple(value.shape)}."
        t, problem = tensor_answer(value, call)
        if problem is not None:
            return None, problem
        if t.dtype == torch.bool:
            return None, f"Return {what}, not a bool; {call} returned a bool tensor."
        if t.dtype in (torch.float16, torch.bfloat16):
            limit = " and stops at 65,504" if t.dtype == torch.float16 else ""
            return None, (f"{call} returned a {t.dtype} number, {t.reshape(()).item():g}: it keeps only "
                          f"{significant_bits(t.dtype)} significant bits{limit}. Return a Python number, or compute "
                          "in float32, float64 or int64.")
        value = t.reshape(()).item()
    if isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_)):
        return int(value), None
    if isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_)):
        v = float(value)
        if not math.isfinite(v):
            return None, f"{call} returned {v}: return a finite number."
        return v, None
    return None, f"Return {what}; {call} returned {describe(value)}."


def as_float(value: object) -> float | None:
    """A Python or numpy number, or a one-element tensor, as a float; anything else gives None."""
    v, _ = number_answer(value, "")
    return None if v is None else float(v)


def rtol_for(dtype: torch.dtype = torch.float32) -> float:
    """The relative tolerance a correct computation carried out in `dtype` meets: 64 units in the last place
    (float32: 7.6e-6; float64: 1.4e-14), room for a few dozen roundings in a different order."""
    return 64 * torch.finfo(dtype).eps


def significant_bits(dtype: torch.dtype) -> int:
    """Significant bits of a floating dtype's numbers: bfloat16 8, float16 11, float32 24, float64 53."""
    return int(round(1 - math.log2(torch.finfo(dtype).eps)))


def fmt_pair(got: float, want: float, digits: int = 4) -> tuple[str, str]:
    """got and want with at least `digits` significant digits, and as many more as it takes for two
    different numbers not to print the same."""
    for n in range(digits, 18):
        a, b = f"{got:.{n}g}", f"{want:.{n}g}"
        if a != b or got == want:
            return a, b
    return repr(got), repr(want)


def pair_kinds(x: torch.Tensor, got: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, tol: float) -> list[str]:
    """What got did to each RoPE pair i = (a, b) = (x_i, x_(i+d/2)) of x (..., d), with cos, sin of the pair's
    right angle t broadcastable to (..., d/2): 'right' (a cos t - b sin t, b cos t + a sin t), 'still' (a, b),
    'mirror' (turned by -t), 'swapped' (turned, then its members written back exchanged), 'swapped_mirror'
    (exchanged, then turned), or 'other'."""
    h = x.shape[-1] // 2
    a, b = x[..., :h].double(), x[..., h:].double()  # (..., d/2) first and second members
    ga, gb = got[..., :h].double(), got[..., h:].double()
    c, s = cos.double(), sin.double()
    forms = {
        "right": (a * c - b * s, b * c + a * s),
        "still": (a, b),
        "mirror": (a * c + b * s, b * c - a * s),
        "swapped": (b * c + a * s, a * c - b * s),
        "swapped_mirror": (b * c - a * s, a * c + b * s),
    }
    kinds = []
    for i in range(h):
        kinds.append(next((name for name, (fa, fb) in forms.items()
                           if torch.allclose(ga[..., i], fa.expand_as(ga)[..., i], atol=tol, rtol=0)
                           and torch.allclose(gb[..., i], fb.expand_as(gb)[..., i], atol=tol, rtol=0)), "other"))
    return kinds


def pair_kinds_message(kinds: list[str], where: str) -> str | None:
    """'Partial rotation ...' when some pairs turn right and the others stay still, 'Swapped members of a pair ...'
    when pairs come back with their members exchanged; None otherwise (every pair right, or something else)."""
    if "other" in kinds or all(k == "right" for k in kinds):
        return None
    turned = [i for i, k in enumerate(kinds) if k == "right"]
    idle = [i for i, k in enumerate(kinds) if k == "still"]
    swapped = [i for i, k in enumerate(kinds) if k.startswith("swapped")]
    if idle and turned and set(kinds) <= {"right", "still"}:
        return (f"Partial rotation {where}: pairs {turned} turn, but pairs {idle} come back unchanged. Every one of "
                "the d_head / 2 pairs (x_i, x_(i+d/2)) turns, each by its own m * theta_i: build all d_head / 2 "
                "angles (torch.arange(0, d_head, 2)) and rotate the whole last dimension, not a slice of it.")
    if swapped:
        how = ("turned and then written back in the other order, (b', a') instead of (a', b')"
               if all(kinds[i] == "swapped" for i in swapped) else "exchanged before the turn: (b, a) is turned "
               "instead of (a, b)")
        return (f"Swapped members of a pair {where}: in pairs {swapped} the two members (a, b) = (x_i, x_(i+d/2)) "
                f"are {how}. The first member is x_i, the second x_(i+d/2): (a, b) -> (a cos t - b sin t, "
                "b cos t + a sin t), in that order.")
    return None


def guarded(checker: _F) -> _F:
    """Whatever the reader's answer does to the comparison code, report it instead of raising."""
    @functools.wraps(checker)
    def wrapper(*args: Any, **kwargs: Any) -> bool:
        token = _NOTES.set(())
        try:
            return checker(*args, **kwargs)
        except Exception as exc:  # an answer of a kind the checks did not foresee
            return verdict(False, f"Your answer could not be compared ({error_text(exc)}); return a plain "
                                  "real-valued torch.Tensor of the shape asked for.")
        finally:
            _NOTES.reset(token)
    return wrapper  # type: ignore[return-value]


# How often each staged mistake has been seen in this Python session (a notebook kernel): see staged_hint.
_HINTS_SEEN: dict[str, int] = {}


def staged_hint(key: str, symptom: str, fix: str) -> str:
    """A two-stage hint, for checkers that opt in: the first time the mistake named `key` is seen, only
    `symptom` (what is wrong) and a note that the same mistake again brings the fix; from the second time
    on, `symptom` followed by `fix`. Counted per Python session, so re-running a notebook cell counts;
    `reset_hints` forgets. Checkers that do not call it print what they always printed."""
    for name, value in (("key", key), ("symptom", symptom), ("fix", fix)):
        if not isinstance(value, str) or not value:
            raise TypeError(f"{name} must be a non-empty string, got {value!r}")
    seen = _HINTS_SEEN.get(key, 0)
    _HINTS_SEEN[key] = seen + 1
    if seen == 0:
        return f"{symptom} Try a fix; if the checker sees this same mistake again, it shows the fix."
    return f"{symptom} {fix}"


def reset_hints(key: str | None = None) -> None:
    """Forget that the staged mistake `key` (every staged mistake, without a key) was seen."""
    if key is None:
        _HINTS_SEEN.clear()
    else:
        _HINTS_SEEN.pop(key, None)
