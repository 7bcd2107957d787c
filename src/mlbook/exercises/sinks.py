"""Exercise checkers for section 2.7: attention sinks and streaming caches.

The reference is the library's `SinkCache`, read through `mlbook.analysis.sinks.cache_contents`.
Each checker names the usual mistake (the sinks evicted, a cache that claims tokens not yet seen,
text positions where slots belong, a window one token too long or short, a position reported where
an offset is asked for). One
verdict line, True or False, never raises.
"""

from __future__ import annotations

from typing import Callable

from mlbook.analysis.sinks import SCHEMES, cache_contents
from mlbook.exercises.common import call_answer, describe, failure, guarded, number_answer, verdict

__all__ = ["check_sink_slots", "check_largest_offset"]


def _as_int_list(value: object) -> list[int] | None:
    """A list, tuple, 1-D tensor or numpy array of whole numbers as a list of ints; else None."""
    if isinstance(value, (str, bytes, dict)) or not hasattr(value, "__iter__"):
        return None
    out = []
    try:
        for v in value:  # type: ignore[union-attr]
            n, problem = number_answer(v, "")
            if problem is not None or n != int(n):
                return None
            out.append(int(n))
    except Exception:  # noqa: BLE001 - whatever iterating the reader's object raises: not a list of ints
        return None
    return out


@guarded
def check_sink_slots(fn: Callable[[int, int, int], object]) -> bool:
    """Check fn(t, n_sink, window) -> (kept, slots) after t streamed tokens (positions 0 .. t-1).

    kept: the text positions a StreamingLLM cache holds, in cache order (the first n_sink
    tokens, then the last `window`); slots: the position each is given, 0 .. len(kept) - 1.
    """
    cases = ((40, 4, 12), (10, 4, 12), (3, 4, 8), (17, 4, 12), (100, 0, 10), (1000, 2, 5))
    for t, n_sink, window in cases:
        value, err = call_answer(fn, t, n_sink, window)
        where = f"for t={t}, n_sink={n_sink}, window={window}"
        if err is not None:
            return verdict(False, failure(f"fn({t}, {n_sink}, {window})", err) + ".")
        if not isinstance(value, (tuple, list)) or len(value) != 2:
            return verdict(False, f"Return a pair (kept, slots) of two lists; got {describe(value)} {where}.")
        kept, slots = _as_int_list(value[0]), _as_int_list(value[1])
        if kept is None or slots is None:
            bad = value[0] if kept is None else value[1]
            return verdict(False, f"kept and slots must be sequences of integers {where}; "
                                  f"{'kept' if kept is None else 'slots'} is {describe(bad)}.")
        ref = cache_contents("sink_slot", t, n_sink, window)
        want_kept, want_slots = list(ref.kept), list(ref.given)
        if kept == want_kept and slots == want_slots:
            continue
        if kept != want_kept:
            capacity = n_sink + window
            unseen = sorted({p for p in kept if p >= t})
            if unseen:  # tested first: a list with future positions can also match the window-length slips below
                return verdict(False, f"Your cache claims tokens not yet seen {where}: after {t} tokens only "
                                      f"positions 0..{t - 1} exist, but kept holds {unseen[:4]}"
                                      f"{'...' if len(unseen) > 4 else ''}. While fewer than n_sink tokens have "
                                      "arrived the sinks are the first min(n_sink, t) of them.")
            sinks = set(range(min(n_sink, t)))
            if n_sink and kept == list(range(max(0, t - capacity), t)):
                return verdict(False, f"Your cache is a plain sliding window {where}: it evicts tokens "
                                      f"0..{n_sink - 1}. The sinks stay pinned; only the {window} tokens after "
                                      "them slide.")
            if kept == sorted(sinks | set(range(max(0, t - window - 1), t))):
                return verdict(False, f"Your window holds one token too many {where}: keep the last {window}.")
            if kept == sorted(sinks | set(range(max(0, t - window + 1), t))):
                return verdict(False, f"Your window holds one token too few {where}: keep the last {window}.")
            if t < n_sink + window and len(kept) != t:
                return verdict(False, f"Only {t} tokens have arrived {where}; the cache holds all of them, each "
                                      "once (no position twice, none that has not been seen yet).")
            return verdict(False, f"kept should be {want_kept[:8]}{'...' if len(want_kept) > 8 else ''} {where} "
                                  f"(the first {n_sink} tokens, then the last {window}); yours is "
                                  f"{kept[:8]}{'...' if len(kept) > 8 else ''}.")
        if slots == kept:
            return verdict(False, f"Your slots are the text positions {where}. StreamingLLM gives each token its "
                                  f"slot in the cache, 0..{len(kept) - 1}; with text positions the query sits "
                                  f"{t - 1} tokens from the sinks, far past any trained offset.")
        if slots == [s + 1 for s in want_slots]:
            return verdict(False, f"Off by one {where}: slots start at 0.")
        return verdict(False, f"slots should be 0..{len(kept) - 1} in cache order {where}; yours are "
                              f"{slots[:8]}{'...' if len(slots) > 8 else ''}.")
    return verdict(True, "The sinks stay in slots 0..n_sink-1, the window fills the slots after them, and no "
                         "slot exceeds n_sink + window - 1 however long the stream.")


@guarded
def check_largest_offset(fn: Callable[[str, int, int, int], object]) -> bool:
    """Check fn(scheme, t, n_sink, window) -> the largest query-key offset RoPE sees after t tokens.

    scheme is 'full', 'window' (plain sliding window of n_sink + window tokens), 'sink_text'
    or 'sink_slot'; the query is the newest token. Reference: `cache_contents(...).max_offset`.
    """
    cases = ((40, 4, 12), (10, 4, 12), (1000, 4, 1020), (500, 1, 63))
    for t, n_sink, window in cases:
        for scheme in SCHEMES:
            value, err = call_answer(fn, scheme, t, n_sink, window)
            where = f"for scheme={scheme!r}, t={t}, n_sink={n_sink}, window={window}"
            if err is not None:
                return verdict(False, failure(f"fn({scheme!r}, {t}, {n_sink}, {window})", err) + ".")
            number, problem = number_answer(value, f"fn({scheme!r}, {t}, {n_sink}, {window})",
                                            "a whole number of tokens")
            if problem is not None:
                return verdict(False, problem)
            if number != int(number):
                return verdict(False, f"Return a whole number of tokens; got {number!r} {where}.")
            value = int(number)
            view = cache_contents(scheme, t, n_sink, window)
            want = view.max_offset
            if value == want:
                continue
            if value == view.max_position and view.max_position != want:
                return verdict(False, f"You returned the largest position ({value}) {where}, not the largest offset. "
                                      "RoPE's score turns pair i by (query position - key position) theta_i, so only "
                                      f"the difference matters: {want} here.")
            if value == want + 1:
                return verdict(False, f"Off by one {where}: {len(view.kept)} tokens span offsets 0..{want}, "
                                      f"so the largest is {want}, not {value}.")
            if scheme == "sink_text" and value == len(view.kept) - 1:
                return verdict(False, f"With text positions the sinks keep their positions 0..{n_sink - 1} while the "
                                      f"query is at {t - 1} {where}: the largest offset is {want}, the whole stream. "
                                      "That is why StreamingLLM assigns slot positions.")
            if scheme == "full" and value == len(cache_contents("sink_slot", t, n_sink, window).kept) - 1:
                return verdict(False, f"The full cache never evicts {where}: it holds all {t} tokens at their text "
                                      f"positions, so the query is {want} tokens from token 0.")
            if scheme == "sink_slot" and value == t - 1:
                return verdict(False, f"With slot positions the query is in the last slot and the first sink in slot 0 "
                                      f"{where}: the largest offset is {want}, however long the stream.")
            return verdict(False, f"The largest offset {where} is {want}, not {value}: the query (the newest token) "
                                  "minus the smallest position any kept token is given.")
    return verdict(True, "Full cache and sink cache with text positions grow with the stream; the sliding window "
                         "and the slot-positioned sink cache stay below n_sink + window.")
