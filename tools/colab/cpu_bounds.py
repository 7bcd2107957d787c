"""Outputs that depend on the CPU's arithmetic, and how they are compared.

torch picks its CPU kernels by the processor's vector instructions (ATEN_CPU_CAPABILITY:
default, avx2, avx512), and MKL, oneDNN and the compiler's reductions sum in another order
with each. A float32 result then differs in its last bits, and a tiny model trained for a
few hundred steps on it ends somewhere else: the quick-budget experiments (a model trained in
the notebook) print other losses and accuracies on another machine, with the same seeds.

Such a cell is listed in BOUNDS below, by notebook and cell id, with what in it depends on the
CPU and the bound its numbers are compared within. Everything else about the cell is still
compared exactly: the same outputs of the same kinds, the same text between the numbers
(runs of spaces collapsed: a column shifts when a number gains a digit), the same count of
numbers, integers exactly (counts, lengths, seeds, step numbers, percentages printed as
integers); only the decimal numbers may move, each within
`atol + rtol * max(|a|, |b|) + line_rtol * m`, m the largest magnitude on its line (a figure's
trace attribute is one line: a curve whose values pass near 0 moves by a share of its own scale).
A cell not listed here is compared exactly (after the sanitisers of notebook_outputs.py).

Each bound was set from the spread measured with `python tools/notebook_outputs.py spread`
between the committed outputs (made on the machine that last refreshed them), this machine's
native run (AVX-512) and runs under ATEN_CPU_CAPABILITY=default and =avx2 (`make
outputs-portability` makes those): the largest difference seen is in `measured`, and the
bound leaves room above it for CPUs not tried (another vendor's MKL path, aarch64).

Both checks read this table: tools/notebook_outputs.py (the committed-outputs check) and
tools/colab/nbval_colab.py (nbval's `# NBVAL_CHECK_OUTPUT` cells in the Colab check).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass


@dataclass(frozen=True)
class CpuBound:
    """One cell whose decimal numbers depend on the CPU's arithmetic, and their bound."""

    notebook: str  # file stem, e.g. "25_exp_passkey"
    cell: str  # the cell's id
    what: str  # what in it depends on the CPU, in words
    atol: float
    rtol: float  # relative to the larger of the two numbers
    line_rtol: float  # relative to the largest magnitude on the number's line (a figure trace, a table row)
    measured: str  # the largest differences seen across CPU capabilities, in words


BOUNDS: tuple[CpuBound, ...] = ()


def bound_for(notebook: str, cell_id: str | None) -> CpuBound | None:
    """The bound of notebook `notebook` (file name or stem), cell `cell_id`, or None."""
    stem = notebook.rsplit("/", 1)[-1].removesuffix(".ipynb")
    return next((b for b in BOUNDS if b.notebook == stem and b.cell == cell_id), None)


# A number as Python, numpy and JSON print it; a sign belongs to it.
NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|inf)\b")
_SPACES = re.compile(r"[ \t]+")


def _is_decimal(token: str) -> bool:
    return any(ch in token for ch in ".eEni")


def split_numbers(text: str) -> tuple[str, list[list[str]]]:
    """`text` with every number replaced by '#' and runs of spaces collapsed, and each line's numbers."""
    skeleton, numbers = [], []
    for line in text.splitlines():
        numbers.append(NUMBER.findall(line))
        skeleton.append(_SPACES.sub(" ", NUMBER.sub("#", line)).strip())
    return "\n".join(skeleton), numbers


class ShapeDiffers(ValueError):
    """Two texts differ in more than their decimal numbers."""


def _pairs(a: str, b: str) -> list[tuple[float, float, float]]:
    """The decimal numbers of two texts of the same shape, paired, each with the largest
    magnitude on its line in either text; ShapeDiffers where the shapes differ (other text
    between the numbers, another count of numbers, another integer, a decimal for an integer,
    a nan or inf that is not in both)."""
    sa, na = split_numbers(a)
    sb, nb = split_numbers(b)
    if sa != sb:
        raise ShapeDiffers("other text between the numbers")
    out = []
    for xs, ys in zip(na, nb):
        if len(xs) != len(ys):
            raise ShapeDiffers("another count of numbers")
        pairs = []
        for x, y in zip(xs, ys):
            if _is_decimal(x) != _is_decimal(y) or (not _is_decimal(x) and x != y):
                raise ShapeDiffers(f"{x} against {y}")
            if not _is_decimal(x):
                continue
            fx, fy = float(x), float(y)
            if not (math.isfinite(fx) and math.isfinite(fy)):
                if not (fx == fy or (math.isnan(fx) and math.isnan(fy))):
                    raise ShapeDiffers(f"{x} against {y}")
                continue
            pairs.append((fx, fy))
        scale = max((max(abs(fx), abs(fy)) for fx, fy in pairs), default=0.0)
        out.extend((fx, fy, scale) for fx, fy in pairs)
    return out


def largest_difference(a: str, b: str) -> tuple[float, float, float] | None:
    """The largest absolute difference between the decimal numbers of two texts of the same
    shape, the largest relative to the larger of the two numbers, and the largest relative to
    the largest magnitude on its line; None where their shapes differ."""
    try:
        pairs = _pairs(a, b)
    except ShapeDiffers:
        return None
    worst = [0.0, 0.0, 0.0]
    for fx, fy, scale in pairs:
        d = abs(fx - fy)
        worst[0] = max(worst[0], d)
        if d:
            worst[1] = max(worst[1], d / max(abs(fx), abs(fy)))
            worst[2] = max(worst[2], d / scale)
    return worst[0], worst[1], worst[2]


def within(a: str, b: str, bound: CpuBound) -> bool:
    """Whether two texts agree as `bound` allows: the same shape and integers, each decimal
    number within atol + rtol * max(|a|, |b|) + line_rtol * (the largest magnitude on its line)."""
    try:
        pairs = _pairs(a, b)
    except ShapeDiffers:
        return False
    return all(abs(fx - fy) <= bound.atol + bound.rtol * max(abs(fx), abs(fy)) + bound.line_rtol * scale
               for fx, fy, scale in pairs)
