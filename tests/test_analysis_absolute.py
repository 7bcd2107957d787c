"""Tests for mlbook.analysis.absolute: the wavelength table, the first pair past a length or
within an angle, the offset matrix's property and the permutation-equivariance report, each
against an independent oracle (a float64 re-derivation or a brute-force search)."""

from __future__ import annotations

import math

import pytest
import torch

import mlbook.analysis.absolute as AM
from mlbook.transformer.positional import sinusoidal_positional_encoding



def test_wavelength_table_matches_float64_formula():
    pairs = (0, 16, 32, 48, 63)
    table = AM.wavelength_table(128, 10000, pairs)
    assert [row[0] for row in table.rows] == list(pairs)
    for i, theta, lam in table.rows:
        theta64 = 10000.0 ** (-2.0 * i / 128)
        assert theta == pytest.approx(theta64, rel=1e-4)
        assert lam == pytest.approx(2 * math.pi / theta64, rel=1e-4)
    assert "63" in repr(table) and "<table>" in table._repr_html_()


def test_wavelength_table_rejects_pairs_out_of_range():
    with pytest.raises(ValueError, match=r"pairs \[64\].*0\.\.63"):
        AM.wavelength_table(128, 10000, (0, 64))


def _first_pair_oracle(d: int, base: float, length: int) -> int | None:
    for i in range(d // 2):
        if 2 * math.pi * base ** (2 * i / d) > length:
            return i
    return None


@pytest.mark.parametrize(
    "d, base, length",
    [(128, 10000.0, 8192), (64, 500000.0, 4096), (128, 500000.0, 131072), (256, 1e6, 32768), (128, 10000.0, 10**9)],
)
def test_first_pair_exceeding_matches_independent_search(d, base, length):
    assert AM.first_pair_exceeding(d, base, length) == _first_pair_oracle(d, base, length)


def test_first_pair_exceeding_chapter_value():
    assert AM.first_pair_exceeding(128, 10000, 8192) == _first_pair_oracle(128, 10000.0, 8192) == 50


@pytest.mark.parametrize("d, T, max_angle", [(64, 100, 0.2), (64, 100, 1.0), (128, 500, 0.1), (16, 50, 0.05)])
def test_first_pair_within_angle_matches_the_table_itself(d, T, max_angle):
    """Oracle: the library's table; from the returned pair on, every sine stays within
    sin(max_angle) of 0 and every cosine within 1 - cos(max_angle) of 1, and the pair before fails."""
    pe = sinusoidal_positional_encoding(T, d).double()  # (T, d)
    eps = 1e-6  # float32 table

    def near_rest(i: int) -> bool:
        return bool((pe[:, 2 * i :: 2].abs() <= math.sin(max_angle) + eps).all()
                    and (pe[:, 2 * i + 1 :: 2] >= math.cos(max_angle) - eps).all())

    first = AM.first_pair_within_angle(d, 10000.0, T, max_angle)
    if first is None:
        assert not near_rest(d // 2 - 1)
    else:
        assert near_rest(first) and (first == 0 or not near_rest(first - 1))


def test_first_pair_within_angle_section_value():
    """Sinusoidal section: d = 64, 100 rows; pair 16 turns under a sixth of a circle, but only from 22 on
    does every entry stay near (sine 0, cosine 1)."""
    assert AM.first_pair_within_angle(64, 10000.0, 100, 0.2) == 22
    assert AM.first_pair_within_angle(64, 10000.0, 100, 2 * math.pi / 6) == 16
    assert AM.first_pair_within_angle(64, 10000.0, 10**9, 0.2) is None
    with pytest.raises(ValueError, match="max_angle"):
        AM.first_pair_within_angle(64, 10000.0, 100, 0)
    with pytest.raises(ValueError, match="T must"):
        AM.first_pair_within_angle(64, 10000.0, 0)


def test_offset_property_holds_and_transpose_breaks_it():
    assert AM.offset_property_error() < 1e-5
    assert AM.offset_property_error(d_model=32, base=500.0) < 1e-5
    assert AM.offset_property_error(transpose=True) > 0.5


def _case(report, name, permutation):
    (c,) = [c for c in report.cases if c.name == name and c.permutation == permutation]
    return c


def test_equivariance_report_encoder_exact_causal_not():
    report = AM.equivariance_report()
    assert _case(report, "encoder block, no position", "reverse").max_error < 1e-12
    assert _case(report, "encoder block + sinusoidal PE", "reverse").max_error > 1e-3
    assert _case(report, "causal attention, no position", "reverse").max_error > 1e-3
    swap = _case(report, "causal attention, no position", "swap 0 and 1")
    assert min(swap.errors[:2]) > 1e-3 and max(swap.errors[2:]) < 1e-12
    verdicts = [line.split()[-1] for line in repr(report).splitlines()[2:]]  # the "equivariant" column
    assert verdicts == ["yes", "no", "no", "no"]


def test_permutation_errors_zero_for_pointwise_map_nonzero_for_prefix_sum():
    x = torch.randn(2, 6, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    perm = torch.tensor([2, 0, 1, 5, 3, 4])
    assert AM.permutation_errors(torch.tanh, x, perm).max() == 0
    assert AM.permutation_errors(lambda z: z.cumsum(1), x, perm).max() > 1e-3
