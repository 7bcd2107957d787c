"""Tests for the sections 2.6 and 2.7 exercise checkers (mlbook.exercises.extension and .sinks).

For each checker: the reference solution passes, every planted mistake is diagnosed with its
specific message, broken answers (exceptions, wrong types) get a verdict instead of a crash, and
exactly one verdict line is printed.
"""

from __future__ import annotations

import math

import pytest
import torch

from mlbook import exercises
from mlbook.exercises import extension as XE
from mlbook.exercises import sinks as XS


def run(capsys, check, fn):
    ok = check(fn)
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1, f"one verdict line expected, got {out}"
    assert out[0].startswith("Correct. " if ok else "Not yet. ")
    return ok, out[0]


def test_checkers_are_exported():
    for name in ("check_ntk_base", "check_pi_positions", "check_yarn_band", "check_sink_slots", "check_largest_offset"):
        assert name in exercises.__all__ and callable(getattr(exercises, name))
    assert set(XE.__all__) == {"check_ntk_base", "check_pi_positions", "check_yarn_band"}
    assert set(XS.__all__) == {"check_sink_slots", "check_largest_offset"}


# ---------------------------------------------------------------------------
# NTK base
# ---------------------------------------------------------------------------


def test_ntk_base_reference_passes(capsys):
    ok, line = run(capsys, XE.check_ntk_base, lambda b, s, d: b * s ** (d / (d - 2)))
    assert ok and "exactly s" in line


@pytest.mark.parametrize("fn,needle", [
    (lambda b, s, d: b * s ** ((d - 2) / d), "upside down"),
    (lambda b, s, d: b * s, "multiplied the base by s alone"),
    (lambda b, s, d: b / s ** (d / (d - 2)), "you divided the base"),
    (lambda b, s, d: b * s ** ((d // 2) / (d // 2 - 2)), "number of pairs"),
    (lambda b, s, d: b * s ** (2 / d), "s^(2/d)"),
    (lambda b, s, d: s ** (d / (d - 2)), "without multiplying by the base"),
    (lambda b, s, d: 2 * b, "Use base * s ** (d_head / (d_head - 2))"),
    (lambda b, s, d: None, "Return one number"),
    (lambda b, s, d: 1 / 0, "raised ZeroDivisionError"),
])
def test_ntk_base_mistakes_are_named(capsys, fn, needle):
    ok, line = run(capsys, XE.check_ntk_base, fn)
    assert not ok and needle in line


def test_ntk_base_accepts_a_tensor_answer(capsys):
    ok, _ = run(capsys, XE.check_ntk_base, lambda b, s, d: torch.tensor(b * s ** (d / (d - 2)), dtype=torch.float64))
    assert ok


# ---------------------------------------------------------------------------
# PI positions
# ---------------------------------------------------------------------------


def test_pi_positions_reference_passes(capsys):
    ok, _ = run(capsys, XE.check_pi_positions, lambda L, Ln: torch.arange(Ln, dtype=torch.float64) * L / Ln)
    assert ok
    ok, _ = run(capsys, XE.check_pi_positions, lambda L, Ln: [m * L / Ln for m in range(Ln)])  # a list is fine
    assert ok


@pytest.mark.parametrize("fn,needle", [
    (lambda L, Ln: torch.arange(Ln) * (Ln / L), "multiplied by s"),
    (lambda L, Ln: torch.floor(torch.arange(Ln) * L / Ln), "whole numbers"),
    (lambda L, Ln: torch.round(torch.arange(Ln) * L / Ln), "whole numbers"),
    (lambda L, Ln: torch.arange(Ln) * (L - 1) / (Ln - 1), "(L-1)/(L_new-1)"),
    (lambda L, Ln: (torch.arange(Ln) + 1) * L / Ln, "Off by one"),
    (lambda L, Ln: torch.arange(L) * 1.0, "That is the trained length"),
    (lambda L, Ln: torch.arange(Ln) * L / Ln + 0.3, "differ from m / s"),
    (lambda L, Ln: "positions", "Return a tensor"),
])
def test_pi_positions_mistakes_are_named(capsys, fn, needle):
    ok, line = run(capsys, XE.check_pi_positions, fn)
    assert not ok and needle in line


# ---------------------------------------------------------------------------
# YaRN band
# ---------------------------------------------------------------------------


def _band(turns: float, bf: float, bs: float) -> str:
    return "keep" if turns >= bf else ("interpolate" if turns <= bs else "blend")


def yarn_by_turns(i, d, base, L, bf=32.0, bs=1.0):
    return _band(L * base ** (-2 * i / d) / (2 * math.pi), bf, bs)


def yarn_reference(i, d, base, L, bf=32.0, bs=1.0):
    """The page's solution: the turns rule, except that pair 0 is always kept (the ramp's start is clamped)."""
    return "keep" if i == 0 else yarn_by_turns(i, d, base, L, bf, bs)


def test_yarn_band_reference_passes(capsys):
    ok, _ = run(capsys, XE.check_yarn_band, yarn_reference)
    assert ok


FLIP = {"keep": "interpolate", "interpolate": "keep", "blend": "blend"}


@pytest.mark.parametrize("fn,needle", [
    (lambda i, d, b, L, bf, bs: FLIP[yarn_reference(i, d, b, L, bf, bs)], "wrong way round"),
    (lambda i, d, b, L, bf, bs: yarn_reference(i, d, b, L, bs, bf), "swapped beta_fast and beta_slow"),
    (lambda i, d, b, L, bf, bs: _band((2 * math.pi / b ** (-2 * i / d)) / L, bf, bs), "wavelength / L"),
    (lambda i, d, b, L, bf, bs: _band(L * b ** (-i / d) / (2 * math.pi), bf, bs), "base^(-i/d)"),
    (lambda i, d, b, L, bf, bs: "blend" if i == 30 else yarn_reference(i, d, b, L, bf, bs), "Pair 30"),
    (lambda i, d, b, L, bf, bs: "fast", "Return one of"),
    (lambda i, d, b, L, bf, bs: [][i], "raised IndexError"),
])
def test_yarn_band_mistakes_are_named(capsys, fn, needle):
    ok, line = run(capsys, XE.check_yarn_band, fn)
    assert not ok and needle in line


def test_yarn_band_checks_the_clamped_pair_0(capsys):
    """At Experiment 3's head (d_head 12, L 128) pair 0 turns 20.4 times, fewer than beta_fast = 32: the turns rule
    blends it, Hugging Face and the library keep it. The checker must reach that case and name it."""
    from mlbook.transformer.rope_scaling import yarn_bands
    bands = yarn_bands(12, 10000.0, 128, 32.0, 1.0)
    assert bands.turns[0] < 32.0 and bands.band_of(0) == "keep"
    ok, line = run(capsys, XE.check_yarn_band, yarn_by_turns)
    assert not ok and "Pair 0" in line and "always kept" in line, line


# ---------------------------------------------------------------------------
# Sink slots
# ---------------------------------------------------------------------------


def sink_reference(t, n, w):
    sink = list(range(min(n, t)))
    kept = sink + list(range(max(len(sink), t - w), t))
    return kept, list(range(len(kept)))


def test_sink_slots_reference_passes(capsys):
    ok, line = run(capsys, XS.check_sink_slots, sink_reference)
    assert ok and "slots" in line


@pytest.mark.parametrize("fn,needle", [
    (lambda t, n, w: (list(range(max(0, t - n - w), t)), list(range(min(t, n + w)))), "plain sliding window"),
    (lambda t, n, w: (sink_reference(t, n, w)[0], sink_reference(t, n, w)[0]), "slots are the text positions"),
    (lambda t, n, w: (sink_reference(t, n, w)[0], [s + 1 for s in sink_reference(t, n, w)[1]]), "Off by one"),
    (lambda t, n, w: sink_reference(t, n, w + 1) if t > n + w + 1 else sink_reference(t, n, w), "one token too many"),
    (lambda t, n, w: sink_reference(t, n, w - 1) if t > n + w else sink_reference(t, n, w), "one token too few"),
    (lambda t, n, w: (list(range(n)) + list(range(t - w, t)), list(range(n + w))), "Only 10 tokens have arrived"),
    (lambda t, n, w: ([0, 1], [0, 1]), "kept should be"),
    # range(n_sink) pinned without min(n_sink, t): at t = 3 < n_sink = 4 it claims position 3; also a set that
    # matches the "one token too many" near miss, so the order of the tests matters
    (lambda t, n, w: (list(range(n)) + list(range(max(n, t - w), t)), list(range(n + len(range(max(n, t - w), t))))),
     "claims tokens not yet seen"),
    (lambda t, n, w: ([p + 1 for p in sink_reference(t, n, w)[0]], sink_reference(t, n, w)[1]),
     "claims tokens not yet seen"),
    (lambda t, n, w: [1, 2, 3], "Return a pair"),
])
def test_sink_slots_mistakes_are_named(capsys, fn, needle):
    ok, line = run(capsys, XS.check_sink_slots, fn)
    assert not ok and needle in line, line


# ---------------------------------------------------------------------------
# Largest offset
# ---------------------------------------------------------------------------


def offset_reference(scheme, t, n, w):
    return t - 1 if scheme in ("full", "sink_text") else min(t, n + w) - 1


def test_largest_offset_reference_passes(capsys):
    ok, _ = run(capsys, XS.check_largest_offset, offset_reference)
    assert ok


@pytest.mark.parametrize("fn,needle", [
    (lambda sc, t, n, w: t - 1, "largest position"),
    (lambda sc, t, n, w: offset_reference(sc, t, n, w) + 1, "Off by one"),
    (lambda sc, t, n, w: min(t, n + w) - 1, "never evicts"),
    (lambda sc, t, n, w: (t - 1) if sc == "full" else min(t, n + w) - 1, "With text positions the sinks"),
    (lambda sc, t, n, w: (t - 1) if sc == "sink_slot" else offset_reference(sc, t, n, w), "however long the stream"),
    (lambda sc, t, n, w: 0.5, "whole number"),
    (lambda sc, t, n, w: True, "not a bool"),
    (lambda sc, t, n, w: 7, "The largest offset"),
])
def test_largest_offset_mistakes_are_named(capsys, fn, needle):
    ok, line = run(capsys, XS.check_largest_offset, fn)
    assert not ok and needle in line, line
