"""Small helpers shared by experiments 4-6."""

from __future__ import annotations

import contextlib
import os
from typing import Iterator

import torch

__all__ = ["cpu_threads"]


@contextlib.contextmanager
def cpu_threads(device: torch.device) -> Iterator[None]:
    """On the CPU, run with MLBOOK_CPU_THREADS intra-op threads (default 1), then restore.

    The tiny models here issue thousands of small ops (token-by-token streaming, short
    sequences); on a shared 2-core machine two OpenMP threads per process oversubscribe the
    cores and were measured 5-20x slower than one thread. On a GPU this changes nothing.
    """
    if device.type != "cpu":
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(int(os.environ.get("MLBOOK_CPU_THREADS", "1")))
    try:
        yield
    finally:
        torch.set_num_threads(before)
