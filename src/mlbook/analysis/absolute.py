"""Numbers for section 1 (why position) and section 2.1 (sinusoidal encoding).

The frequency ladder omega_i = base^(-2i/d) and what follows from it: wavelengths, the offset
matrix M_k with PE[t + k] = M_k PE[t], which pair first outlasts a context, the wavelength table,
and the permutation-equivariance report of section 1. Every frequency comes from
`mlbook.transformer.positional.frequency_ladder`; `format_sig` writes the numbers the tables print.

Nothing here draws; `mlbook.viz.absolute` plots what these return.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import torch

from mlbook.transformer.positional import frequency_ladder, sinusoidal_positional_encoding

__all__ = [
    "pair_frequencies",
    "pair_wavelengths",
    "offset_matrix",
    "offset_property_error",
    "first_pair_exceeding",
    "first_pair_within_angle",
    "format_sig",
    "WavelengthTable",
    "wavelength_table",
    "permutation_errors",
    "EquivarianceCase",
    "EquivarianceReport",
    "equivariance_report",
]


# ---------------------------------------------------------------------------
# The frequency ladder, wavelengths and the offset matrix (section 2.1)
# ---------------------------------------------------------------------------


def pair_frequencies(d: int, base: float = 10000.0) -> np.ndarray:
    """omega_i = base^(-2i/d) for i = 0 .. d/2 - 1, as float64 numpy (from `frequency_ladder`).

    The sinusoidal table and RoPE share this frequency ladder: `sinusoidal_positional_encoding`
    turns pair i by omega_i per position, RoPE by theta_i = omega_i (unscaled).
    """
    inv_freq = frequency_ladder(d, base)  # (d/2,) float32
    return inv_freq.double().numpy()


def pair_wavelengths(d: int, base: float = 10000.0) -> np.ndarray:
    """Wavelength in tokens of each pair, 2 pi / omega_i: (d/2,) float64, pair 0 is 2 pi."""
    return 2 * math.pi / pair_frequencies(d, base)


def offset_matrix(k: int, d_model: int, base: float = 10000.0, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """The (d_model, d_model) matrix M_k with PE[t + k] = M_k @ PE[t] for every t.

    Block-diagonal, one 2x2 block per pair in the library's layout (sin at column 2i, cos at 2i+1):

        R(phi) = [[cos phi,  sin phi],      phi = omega_i * k
                  [-sin phi, cos phi]]

    which is the angle-addition identity for (sin, cos). It depends on k, never on t.
    """
    if isinstance(k, bool) or not isinstance(k, int):
        raise TypeError(f"k must be an int offset, got {type(k).__name__} ({k!r})")
    phi = torch.from_numpy(pair_frequencies(d_model, base)) * k  # (d/2,) omega_i k
    c, s = phi.cos(), phi.sin()  # (d/2,) each
    blocks = torch.stack([torch.stack([c, s], -1), torch.stack([-s, c], -1)], -2)  # (d/2, 2, 2)
    return torch.block_diag(*blocks).to(dtype)  # (d, d)


def offset_property_error(
    d_model: int = 64, base: float = 10000.0, ts: Sequence[int] = (0, 7, 31, 50), ks: Sequence[int] = (1, 5, 17, 40),
    *, transpose: bool = False,
) -> float:
    """max over t in ts, k in ks of |PE[t + k] - M_k PE[t]| with PE from the library (float32).

    transpose=True uses M_k^T = M_{-k} instead, the wrong-sign rotation, to show the error is O(1).
    """
    T = max(ts) + max(ks) + 1
    pe = sinusoidal_positional_encoding(T, d_model, base).double()  # (T, d)
    worst = 0.0
    for k in ks:
        M = offset_matrix(k, d_model, base)  # (d, d)
        if transpose:
            M = M.T
        for t in ts:
            worst = max(worst, (pe[t + k] - M @ pe[t]).abs().max().item())
    return worst


def first_pair_exceeding(d_head: int, base: float = 10000.0, length: int = 8192) -> int | None:
    """Smallest pair index i whose wavelength 2 pi / theta_i exceeds `length` tokens (None if none does).

    Pairs from this index on never complete a full turn within a context of `length` tokens.
    """
    over = np.nonzero(pair_wavelengths(d_head, base) > length)[0]
    return int(over[0]) if over.size else None


def first_pair_within_angle(d: int, base: float = 10000.0, T: int = 100, max_angle: float = 0.2) -> int | None:
    """Smallest pair index i from which every pair turns by at most `max_angle` radians over
    positions 0 .. T - 1, that is omega_i (T - 1) <= max_angle (None if no pair does).

    Those pairs stay within sin(max_angle) of sine 0 and 1 - cos(max_angle) of cosine 1 in every
    row of a T-row table: the columns of the heatmap that look constant. Turning less than a
    sixth of a circle is weaker: pair 16 of d = 64 does so over 100 rows, yet its sine reaches 0.84.
    """
    if isinstance(T, bool) or not isinstance(T, int) or T < 1:
        raise ValueError(f"T must be a positive int number of positions, got {T!r}")
    if not (isinstance(max_angle, (int, float)) and not isinstance(max_angle, bool) and max_angle > 0):
        raise ValueError(f"max_angle must be a positive number of radians, got {max_angle!r}")
    within = np.nonzero(pair_frequencies(d, base) * (T - 1) <= max_angle)[0]
    return int(within[0]) if within.size else None


def format_sig(x: float, digits: int = 4) -> str:
    """x to `digits` significant figures, written without an exponent (54410, 628.3, 6.283)."""
    if x == 0 or not math.isfinite(x):
        return str(x)
    decimals = max(digits - 1 - math.floor(math.log10(abs(x))), 0)
    rounded = round(x, digits - 1 - math.floor(math.log10(abs(x))))
    return f"{rounded:,.{decimals}f}"


@dataclass(frozen=True)
class WavelengthTable:
    """Rows (pair i, theta_i, wavelength 2 pi / theta_i) for a head size and base."""

    d_head: int
    base: float
    rows: tuple[tuple[int, float, float], ...]
    length: int | None = None  # a context length to compare with (marks the rows past it)

    def _cells(self) -> list[tuple[str, str, str, str]]:
        out = []
        for i, theta, lam in self.rows:
            turns = "" if self.length is None else format_sig(self.length / lam, 3)
            out.append((str(i), f"{theta:.4e}", format_sig(lam, 4), turns))
        return out

    def __repr__(self) -> str:
        head = ("pair i", "theta_i", "wavelength (tokens)") + (() if self.length is None else (f"turns in {self.length:,}",))
        cells = [c[: len(head)] for c in self._cells()]
        widths = [max(len(h), *(len(c[j]) for c in cells)) for j, h in enumerate(head)]
        line = lambda row: "  ".join(v.rjust(w) for v, w in zip(row, widths))  # noqa: E731
        title = f"d = {self.d_head}, base = {self.base:,g}"
        return "\n".join([title, line(head), "  ".join("-" * w for w in widths)] + [line(c) for c in cells])

    def _repr_html_(self) -> str:
        head = ["pair <i>i</i>", "&theta;<sub><i>i</i></sub>", "wavelength 2&pi;/&theta;<sub><i>i</i></sub> (tokens)"]
        if self.length is not None:
            head.append(f"full turns in {self.length:,} tokens")
        th = "".join(f"<th>{h}</th>" for h in head)
        body = "".join(
            "<tr>" + "".join(f"<td style='text-align:right'>{v}</td>" for v in c[: len(head)]) + "</tr>"
            for c in self._cells()
        )
        cap = f"d = {self.d_head}, base = {self.base:,g}"
        return f"<table><caption>{cap}</caption><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"


def wavelength_table(
    d_head: int = 128, base: float = 10000.0, pairs: Sequence[int] = (0, 16, 32, 48, 63), *, length: int | None = None
) -> WavelengthTable:
    """theta_i = base^(-2i/d_head) and wavelength 2 pi / theta_i for the chosen pairs."""
    theta = pair_frequencies(d_head, base)
    bad = [i for i in pairs if not 0 <= i < d_head // 2]
    if bad:
        raise ValueError(f"pairs {bad} are out of range: d_head={d_head} has pairs 0..{d_head // 2 - 1}")
    wavelength = pair_wavelengths(d_head, base)
    rows = tuple((int(i), float(theta[i]), float(wavelength[i])) for i in pairs)
    return WavelengthTable(d_head, float(base), rows, length)


# ---------------------------------------------------------------------------
# Permutation equivariance (section 1)
# ---------------------------------------------------------------------------


def permutation_errors(f: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, perm: torch.Tensor) -> torch.Tensor:
    """Per position j, max |f(P x) - P f(x)| over batch and features; (P x)[:, j] = x[:, perm[j]].

    x: (B, T, d). Returns (T,) float64. All zeros (to rounding) means f is equivariant for this P.
    """
    with torch.no_grad():
        diff = f(x[:, perm]) - f(x)[:, perm]  # (B, T, d)
    return diff.abs().amax(dim=(0, 2)).double()  # (T,)


@dataclass(frozen=True)
class EquivarianceCase:
    name: str
    permutation: str
    errors: tuple[float, ...]  # per output position

    @property
    def max_error(self) -> float:
        return max(self.errors)


@dataclass(frozen=True)
class EquivarianceReport:
    """max |f(Px) - P f(x)| per case; `tol` separates float64 rounding from a real difference."""

    cases: tuple[EquivarianceCase, ...]
    tol: float = 1e-12

    def _cells(self) -> list[tuple[str, str, str, str, str]]:
        out = []
        for c in self.cases:
            err = f"< {self.tol:.0e}" if c.max_error < self.tol else format_sig(c.max_error, 2)
            differ = [j for j, e in enumerate(c.errors) if e >= self.tol]
            where = "none" if not differ else ("all" if len(differ) == len(c.errors) else ", ".join(map(str, differ)))
            out.append((c.name, c.permutation, err, where, "yes" if c.max_error < self.tol else "no"))
        return out

    def __repr__(self) -> str:
        head = ("model", "permutation", "max |f(Px) - P f(x)|", "positions that differ", "equivariant")
        cells = self._cells()
        widths = [max(len(h), *(len(c[j]) for c in cells)) for j, h in enumerate(head)]
        line = lambda row: "  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip()  # noqa: E731
        return "\n".join([line(head), "  ".join("-" * w for w in widths)] + [line(c) for c in cells])

    def _repr_html_(self) -> str:
        head = ["model", "permutation", "max |f(Px) &minus; P f(x)|", "positions that differ", "equivariant"]
        th = "".join(f"<th>{h}</th>" for h in head)
        body = "".join("<tr>" + "".join(f"<td>{v}</td>" for v in c) + "</tr>" for c in self._cells())
        return f"<table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"


def _reversal(T: int) -> torch.Tensor:
    return torch.arange(T - 1, -1, -1)


def _swap_first_two(T: int) -> torch.Tensor:
    perm = torch.arange(T)
    perm[[0, 1]] = perm[[1, 0]]
    return perm


def equivariance_report(T: int = 8, d_model: int = 32, n_heads: int = 4, d_ff: int = 64, seed: int = 0) -> EquivarianceReport:
    """Encoder block without and with sinusoidal positions, and causal attention, in float64.

    Cases: the encoder block (no mask, no position) is exactly equivariant; adding the
    sinusoidal table before it breaks that; a causal attention layer is equivariant only for
    permutations that keep every prefix's set of tokens (swapping the first two tokens leaves
    positions 2.. unchanged) and not in general (reversal).
    """
    from mlbook.transformer.attention import MultiHeadAttention
    from mlbook.transformer.models import TransformerEncoderBlock

    with torch.random.fork_rng(devices=[]):  # seeded weights, without touching the caller's RNG state
        torch.manual_seed(seed)
        block = TransformerEncoderBlock(d_model, n_heads, d_ff, dropout=0.0).double().eval()
        causal = MultiHeadAttention(d_model, n_heads, causal=True).double().eval()
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(2, T, d_model, generator=gen, dtype=torch.float64)  # (B, T, d_model)
    pe = sinusoidal_positional_encoding(T, d_model).double()[None]  # (1, T, d_model)

    def with_pe(z: torch.Tensor) -> torch.Tensor:
        return block(z + pe)

    rev, swap = _reversal(T), _swap_first_two(T)
    cases = [
        ("encoder block, no position", "reverse", block, rev),
        ("encoder block + sinusoidal PE", "reverse", with_pe, rev),
        ("causal attention, no position", "reverse", causal, rev),
        ("causal attention, no position", "swap 0 and 1", causal, swap),
    ]
    return EquivarianceReport(tuple(
        EquivarianceCase(name, pname, tuple(permutation_errors(f, x, p).tolist())) for name, pname, f, p in cases
    ))
