"""Timing and peak-memory measurement shared by the benchmarks.

Timing: `time_interleaved` calls every variant once per round, rotating the order each round,
so a burst of load from another process hits all variants alike; a variant's time is the median
over rounds, and ratios divide medians from the same run.

Peak memory: `peak_memory` measures what one call adds at its peak.
  cuda  torch.cuda.max_memory_allocated() minus the allocation before the call (torch's allocator);
  cpu   Linux only: the resident set's high-water mark (VmHWM) minus the resident size (VmRSS)
        just before the call, after resetting the mark through /proc/self/clear_refs and giving
        freed heap back to the system (malloc_trim). This sees every byte the process touches,
        torch's allocations included (tracemalloc would not), and counts pages, so a tensor that
        was allocated but never written counts only where it was touched.
Where neither works the measurement is None and `method` says so.
"""

from __future__ import annotations

import ctypes
import gc
import statistics
import time
from pathlib import Path
from typing import Any, Callable

import torch

__all__ = ["sync", "time_call", "time_interleaved", "summarize", "peak_memory", "memory_method"]


def sync(device: torch.device) -> None:
    """Wait for queued kernels (CUDA, MPS) so wall time covers the work."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


def time_call(fn: Callable[[], Any], device: torch.device) -> float:
    """Seconds for one call of fn, synchronised on `device`."""
    sync(device)
    start = time.perf_counter()
    fn()
    sync(device)
    return time.perf_counter() - start


def time_interleaved(
    fns: dict[str, Callable[[], Any]], rounds: int, device: torch.device
) -> dict[str, list[float]]:
    """Per variant, the seconds of each of `rounds` calls; round r starts at variant r mod n."""
    if rounds < 1:
        raise ValueError(f"rounds must be >= 1, got {rounds}")
    names = list(fns)
    times: dict[str, list[float]] = {n: [] for n in names}
    for r in range(rounds):
        shift = r % len(names)
        for n in names[shift:] + names[:shift]:
            times[n].append(time_call(fns[n], device))
    return times


def summarize(seconds: list[float]) -> dict[str, float]:
    """Median, min and the quartiles of a list of seconds, in milliseconds (4 significant digits)."""
    s = sorted(seconds)
    q = statistics.quantiles(s, n=4, method="inclusive") if len(s) > 1 else [s[0]] * 3
    return {k: float(f"{v * 1e3:.4g}") for k, v in
            (("median_ms", statistics.median(s)), ("min_ms", s[0]), ("p25_ms", q[0]), ("p75_ms", q[2]))}


_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")


def _status_kib(field: str) -> int:
    for line in _STATUS.read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def _malloc_trim() -> None:
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def _reset_hwm() -> bool:
    try:
        _CLEAR_REFS.write_text("5")  # 5: reset the peak RSS (Linux >= 4.0)
        return True
    except OSError:
        return False


def memory_method(device: torch.device) -> str:
    """How `peak_memory` measures on `device` here: 'cuda-allocator', 'rss-hwm' or 'unavailable'."""
    if device.type == "cuda":
        return "cuda-allocator"
    if device.type == "cpu" and _STATUS.is_file() and _reset_hwm():
        return "rss-hwm"
    return "unavailable"


def peak_memory(fn: Callable[[], Any], device: torch.device) -> int | None:
    """Bytes one call of fn adds at its peak (see the module docstring); None if not measurable.

    The call's return value is dropped after the peak is read, so the output counts.
    """
    method = memory_method(device)
    if method == "cuda-allocator":
        torch.cuda.synchronize(device)
        gc.collect()
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device)
        out = fn()
        torch.cuda.synchronize(device)
        peak = torch.cuda.max_memory_allocated(device) - before
        del out
        return int(peak)
    if method == "rss-hwm":
        gc.collect()
        _malloc_trim()
        _reset_hwm()
        before = _status_kib("VmRSS")
        out = fn()
        peak = _status_kib("VmHWM") - before
        del out
        gc.collect()
        _malloc_trim()
        return max(int(peak), 0) * 1024
    return None
