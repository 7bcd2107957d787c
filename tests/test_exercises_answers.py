"""Every checker survives every kind of answer a reader returns, and names the mistake.

Written as a reader would get things wrong, beyond the planted mistakes of each section's tests:
results on another device (the meta device here, a GPU on a real machine), any return value at all
(None, a list, a numpy array, a string, a tuple, the wrong shape or dtype, NaN), tables and biases
whose dtype would break attention, correct answers in float32 or as numpy / 0-d numbers, inputs
modified in place, angles in float16 or bfloat16, partial rotation, swapped members of a pair, and
RoPE tables cached for 2048 positions used at a large offset. Each checker must print one verdict
line, never raise, and say what went wrong.
"""

from __future__ import annotations

import math
import re
from typing import Callable

import numpy as np
import pytest
import torch
from torch import nn

import mlbook.exercises as E
from mlbook.analysis.absolute import offset_matrix
from mlbook.analysis.after_rope import windowed_kv_bytes
from mlbook.analysis.learned import expected_row_updates
from mlbook.analysis.relative import swin_index
from mlbook.analysis.rope import pairing_permutation
from mlbook.analysis.sinks import cache_contents
from mlbook.exercises import common
from mlbook.transformer import positional as P
from mlbook.transformer.multimodal import mrope_position_ids
from mlbook.transformer.rope_scaling import yarn_bands


def _verdict(capsys, run: Callable[[], object]) -> tuple[bool, str]:
    ok = run()
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if line.strip()]
    assert len(lines) == 1, f"a checker prints exactly one verdict line, got:\n{out}"
    assert isinstance(ok, bool)
    assert lines[0].startswith("Correct. " if ok else "Not yet. "), lines[0]
    return ok, lines[0]


# ---------------------------------------------------------------------------
# A correct reader's answer for every checker; `run(tr)` checks the answer with its result passed through tr
# ---------------------------------------------------------------------------


def _key_bias(H: int, T: int) -> torch.Tensor:
    return (P.alibi_slopes(H)[:, None] * torch.arange(T, dtype=torch.float32))[None, :, None, :]  # (1, H, 1, T)


def _swin_bias(table: torch.Tensor, w: int) -> torch.Tensor:
    n = w * w
    return table[swin_index(w).reshape(-1)].reshape(n, n, table.shape[1]).permute(2, 0, 1)  # (H, w^2, w^2)


def _rotation(x: torch.Tensor, m: int, base: float = 10000.0) -> torch.Tensor:
    return P.RotaryEmbedding(x.shape[-1], base).rotate(x.unsqueeze(-2), offset=m).squeeze(-2)


def _sink_slots(t: int, n: int, w: int) -> tuple[list, list]:
    view = cache_contents("sink_slot", t, n, w)
    return list(view.kept), list(view.given)


def _lib_rope(d_head: int, base: float = 10000.0) -> P.RotaryEmbedding:
    return P.RotaryEmbedding(d_head, base)


def _rope_returning(tr: Callable) -> type:
    class Rope(nn.Module):
        def __init__(self, d_head: int, base: float = 10000.0) -> None:
            super().__init__()
            self.rope = P.RotaryEmbedding(d_head, base)

        def forward(self, T: int, offset: int = 0):  # noqa: ANN202
            return tr(self.rope(T, offset))

    return Rope


def _apply(x, cos, sin):  # noqa: ANN001, ANN202
    return P.apply_rotary(x, cos, sin)


ANSWERS: dict[str, Callable[[Callable], object]] = {
    "equivariance": lambda tr: E.check_equivariance_error(
        lambda f, x, perm: tr((f(x[:, perm]) - f(x)[:, perm]).abs().max().item())),
    "offset_matrix": lambda tr: E.check_offset_matrix(lambda k, d, base: tr(offset_matrix(k, d, base).float())),
    "row_updates": lambda tr: E.check_expected_row_updates(lambda p, s, B: tr(expected_row_updates(p, s, B))),
    "swin_index": lambda tr: E.check_swin_index(lambda w: tr(swin_index(w))),
    "swin_bias": lambda tr: E.check_swin_bias(lambda t, w: tr(_swin_bias(t, w))),
    "rope_rotation": lambda tr: E.check_rope_rotation(lambda x, m, base: tr(_rotation(x, m, base))),
    "pairing_permutation": lambda tr: E.check_pairing_permutation(lambda d: tr(pairing_permutation(d))),
    "alibi_key_bias": lambda tr: E.check_alibi_key_bias(lambda H, T: tr(_key_bias(H, T))),
    "ntk_base": lambda tr: E.check_ntk_base(lambda b, s, d: tr(b * s ** (d / (d - 2)))),
    "pi_positions": lambda tr: E.check_pi_positions(lambda L, Ln: tr(torch.arange(Ln, dtype=torch.float64) * L / Ln)),
    "yarn_band": lambda tr: E.check_yarn_band(lambda i, d, b, L, bf, bs: tr(yarn_bands(d, b, L, bf, bs).band_of(i))),
    "sink_slots": lambda tr: E.check_sink_slots(lambda t, n, w: tr(_sink_slots(t, n, w))),
    "largest_offset": lambda tr: E.check_largest_offset(lambda s, t, n, w: tr(cache_contents(s, t, n, w).max_offset)),
    "kv_cache_bytes": lambda tr: E.check_kv_cache_bytes(lambda L, H, Hkv, dh, b, T, B: tr(2 * L * Hkv * dh * b / 8 * T * B)),
    "attention_flops": lambda tr: E.check_attention_flops(
        lambda B, T, d: tr((6 * B * T * d, 8 * B * T * d * d, 4 * B * T * T * d))),
    "sinusoidal_drill": lambda tr: E.check_sinusoidal_drill(lambda T, d, b=10000.0: tr(P.sinusoidal_positional_encoding(T, d, b))),
    "bucket_drill": lambda tr: E.check_bucket_drill(lambda r, bi, nb, md: tr(P.relative_position_bucket(r, bi, nb, md))),
    "rope_drill: rotate_half": lambda tr: E.check_rope_drill(lambda x: tr(P.rotate_half(x)), _apply, _lib_rope),
    "rope_drill: apply_rotary": lambda tr: E.check_rope_drill(P.rotate_half, lambda x, c, s: tr(_apply(x, c, s)), _lib_rope),
    "rope_drill: RotaryEmbedding": lambda tr: E.check_rope_drill(P.rotate_half, _apply, _rope_returning(tr)),
    "alibi_drill: slopes": lambda tr: E.check_alibi_drill(lambda H: tr(P.alibi_slopes(H)), P.alibi_bias),
    "alibi_drill: bias": lambda tr: E.check_alibi_drill(P.alibi_slopes, lambda H, q, k: tr(P.alibi_bias(H, q, k))),
    "mrope_ids": lambda tr: E.check_mrope_ids(lambda layout: tr(mrope_position_ids(layout))),
    "windowed_cache": lambda tr: E.check_windowed_cache(lambda *a: tr(windowed_kv_bytes(*a))),
}
TENSOR_ANSWERS = [name for name in ANSWERS if name not in (
    "equivariance", "ntk_base", "yarn_band", "sink_slots", "largest_offset", "kv_cache_bytes", "attention_flops",
    "windowed_cache")]


def _each_tensor(f: Callable[[torch.Tensor], object]) -> Callable[[object], object]:
    """Apply f to the answer if it is a tensor, or to each tensor of a (cos, sin) pair."""
    def tr(v: object) -> object:
        if isinstance(v, torch.Tensor):
            return f(v)
        if isinstance(v, tuple) and v and all(isinstance(t, torch.Tensor) for t in v):
            return tuple(f(t) for t in v)
        return v
    return tr


class _Awkward:
    """An object every operation on which raises: comparing, converting, iterating, measuring."""

    def __eq__(self, other: object) -> bool:
        raise RuntimeError("no comparing")

    __hash__ = None  # type: ignore[assignment]

    def __float__(self) -> float:
        raise RuntimeError("no float")

    def __iter__(self):  # noqa: ANN204
        raise RuntimeError("no iterating")

    def __len__(self) -> int:
        raise RuntimeError("no len")


ODD: dict[str, Callable[[object], object]] = {
    "None": lambda v: None,
    "a string": lambda v: "answer",
    "an int": lambda v: 3,
    "a bool": lambda v: True,
    "a float nan": lambda v: float("nan"),
    "an empty list": lambda v: [],
    "a tuple of two": lambda v: (v, v),
    "a dict": lambda v: {"answer": v},
    "an awkward object": lambda v: _Awkward(),
    "a generator": lambda v: (i for i in range(3)),
    "a module": lambda v: nn.Linear(2, 2),
    "a numpy array": _each_tensor(lambda t: t.numpy()),
    "the meta device": _each_tensor(lambda t: t.to("meta")),
    "complex": _each_tensor(lambda t: t.to(torch.complex64)),
    "bool": _each_tensor(lambda t: t.bool()),
    "float16": _each_tensor(lambda t: t.half()),
    "bfloat16": _each_tensor(lambda t: t.bfloat16()),
    "float64": _each_tensor(lambda t: t.double()),
    "int64": _each_tensor(lambda t: t.long()),
    "NaN": _each_tensor(lambda t: torch.full_like(t.double(), float("nan"))),
    "inf": _each_tensor(lambda t: t.double() + float("inf")),
    "empty": _each_tensor(lambda t: t.flatten()[:0]),
    "flattened": _each_tensor(lambda t: t.flatten()),
    "an extra axis": _each_tensor(lambda t: t[None]),
    "0-d": _each_tensor(lambda t: t.flatten()[0]),
    "requires grad": _each_tensor(lambda t: t.double().requires_grad_()),
    "a sparse tensor": _each_tensor(lambda t: t.to_sparse()),
}
WRONG_FOR_EVERY_CHECKER = ("None", "a string", "a float nan", "a dict", "an awkward object", "a generator", "a module")


@pytest.mark.parametrize("odd", sorted(ODD))
@pytest.mark.parametrize("checker", sorted(ANSWERS))
def test_any_return_value_gets_one_verdict_and_no_traceback(capsys, checker, odd):
    ok, line = _verdict(capsys, lambda: ANSWERS[checker](ODD[odd]))
    if odd in WRONG_FOR_EVERY_CHECKER:
        assert not ok, line
    assert "could not be compared" not in line, f"no checker should need the last-resort guard: {line}"


@pytest.mark.parametrize("checker", sorted(ANSWERS))
def test_the_correct_answers_pass(capsys, checker):
    ok, line = _verdict(capsys, lambda: ANSWERS[checker](lambda v: v))
    assert ok, line


@pytest.mark.parametrize("checker", sorted(ANSWERS))
def test_none_says_the_return_is_missing(capsys, checker):
    ok, line = _verdict(capsys, lambda: ANSWERS[checker](lambda v: None))
    assert not ok and "None (is the return statement missing?)" in line, line


# ---------------------------------------------------------------------------
# Another device: meta (no values) is named; a GPU result is compared on the CPU, after saying so
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("checker", TENSOR_ANSWERS)
def test_meta_device_is_named(capsys, checker):
    ok, line = _verdict(capsys, lambda: ANSWERS[checker](ODD["the meta device"]))
    assert not ok and "came back on the meta device" in line and "no values" in line, line


class _OnAGpu(torch.Tensor):
    """A CPU tensor that reports device cuda:0, as a reader's GPU result would (no GPU needed)."""

    @property
    def device(self) -> torch.device:  # type: ignore[override]
        return torch.device("cuda", 0)


@pytest.mark.parametrize("checker", TENSOR_ANSWERS)
def test_a_gpu_result_is_compared_on_the_cpu_after_saying_so(capsys, checker):
    ok, line = _verdict(capsys, lambda: ANSWERS[checker](_each_tensor(lambda t: t.as_subclass(_OnAGpu))))
    assert ok, line
    assert "It came back on cuda:0" in line and "compared on the CPU" in line, line


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
@pytest.mark.parametrize("checker", TENSOR_ANSWERS)
def test_a_real_gpu_result_is_compared_on_the_cpu(capsys, checker):
    """On a GPU the note is there whatever the verdict. A drill piece that answers on cuda for CPU inputs
    really breaks the pieces it is combined with in the chapter's tests (tensors on two devices), so there
    the verdict may be 'Not yet.', with that error and the note."""
    ok, line = _verdict(capsys, lambda: ANSWERS[checker](_each_tensor(lambda t: t.to("cuda"))))
    assert "It came back on cuda:0" in line, line
    assert ok or checker.startswith(("rope_drill", "alibi_drill")) and "device" in line, line


def test_notes_do_not_leak_into_the_next_verdict(capsys):
    _verdict(capsys, lambda: ANSWERS["offset_matrix"](_each_tensor(lambda t: t.as_subclass(_OnAGpu))))
    ok, line = _verdict(capsys, lambda: ANSWERS["offset_matrix"](lambda v: v))
    assert ok and "came back" not in line, line


# ---------------------------------------------------------------------------
# dtypes that would break attention: float64 tables, biases, rotated q/k (float32 asked for)
# ---------------------------------------------------------------------------

BREAKS_ATTENTION = ["rope_drill: RotaryEmbedding", "rope_drill: apply_rotary", "alibi_drill: bias", "alibi_drill: slopes",
                    "alibi_key_bias", "swin_bias", "rope_rotation", "sinusoidal_drill"]


@pytest.mark.parametrize("checker", BREAKS_ATTENTION)
def test_float64_that_would_break_attention_is_rejected_with_the_reason(capsys, checker):
    ok, line = _verdict(capsys, lambda: ANSWERS[checker](ODD["float64"]))
    assert not ok, line
    assert re.search(r"Right values|Values right|Right slopes|Right attention weights", line), line
    assert "float64" in line and re.search(r"fail|refuse", line), line


def test_the_float64_failure_the_messages_describe_is_real():
    """What the messages claim: a float64 bias or float64 q/k with float32 values stops attention."""
    scores, v = torch.randn(1, 2, 3, 3), torch.randn(1, 2, 3, 4)
    with pytest.raises(RuntimeError, match="Double|double"):
        (scores + torch.zeros(1, 2, 3, 3, dtype=torch.float64)).softmax(-1) @ v
    with pytest.raises(RuntimeError, match="dtype"):
        torch.nn.functional.scaled_dot_product_attention(v.double(), v, v)


# ---------------------------------------------------------------------------
# Tolerances follow the dtype the drill asks for; a message never prints two equal numbers
# ---------------------------------------------------------------------------


def _updates_float32(p: torch.Tensor, steps: int, B: int) -> torch.Tensor:
    p = p.float()  # a reader computing in float32
    reach = torch.stack([p[i + 1:].sum() for i in range(p.numel() - 1)])  # (T_max,) P(L > p)
    return steps * (1 - (1 - reach) ** B)


def _key_bias_float32_pow(H: int, T: int) -> torch.Tensor:
    n = 2 ** math.floor(math.log2(H))
    slopes = [2.0 ** (-8.0 * (h + 1) / n) for h in range(n)]
    slopes += [2.0 ** (-8.0 * (h + 1) / (2 * n)) for h in range(0, 2 * (H - n), 2)]
    m = torch.tensor(slopes, dtype=torch.float32)  # rounded once, from float64 python floats
    j = torch.arange(T, dtype=torch.float32) + 1000.0  # a per-row constant: large keys, float32 rounding
    return (m[:, None] * j)[None, :, None, :]


@pytest.mark.parametrize("checker, fn", [
    (E.check_expected_row_updates, _updates_float32),
    (E.check_alibi_key_bias, _key_bias_float32_pow),
    (E.check_ntk_base, lambda b, s, d: torch.tensor(b, dtype=torch.float32) * torch.tensor(s, dtype=torch.float32) ** (d / (d - 2))),
    (E.check_pi_positions, lambda L, Ln: torch.arange(Ln, dtype=torch.float32) * (L / Ln)),
    (E.check_kv_cache_bytes, lambda L, H, Hkv, dh, b, T, B: torch.tensor(2.0 * L * Hkv * dh * b / 8 * T * B, dtype=torch.float32)),
    (E.check_sinusoidal_drill, lambda T, d, b=10000.0: torch.stack(
        [f(torch.arange(T, dtype=torch.float32)[:, None] * torch.exp(torch.arange(0, d, 2) * (-math.log(b) / d)))
         for f in (torch.sin, torch.cos)], -1).reshape(T, d)),
], ids=["row updates", "key-only bias", "NTK base", "PI positions", "KV bytes", "sinusoidal via exp/log"])
def test_a_correct_float32_computation_passes(capsys, checker, fn):
    ok, line = _verdict(capsys, lambda: checker(fn))
    assert ok, line


def test_fmt_pair_never_prints_two_different_numbers_alike():
    for got, want in ((9.938000001, 9.938), (6.7412, 6.7409), (1.0 + 2**-40, 1.0), (-2.1211, -2.1213)):
        a, b = common.fmt_pair(got, want)
        assert a != b and float(a) == pytest.approx(got) and float(b) == pytest.approx(want)


@pytest.mark.parametrize("checker, fn, pattern", [
    (E.check_expected_row_updates, lambda p, s, B: expected_row_updates(p, s, B) * (1 - 3e-5),
     r"gets (\S+), expected (\S+) "),
    (E.check_ntk_base, lambda b, s, d: b * s ** (d / (d - 2)) * (1 + 3e-5), r"fn gives (\S+) .* base is (\S+)\."),
    (E.check_sinusoidal_drill, lambda T, d, b=10000.0: P.sinusoidal_positional_encoding(T, d, b) + 2e-4,
     r"= (\S+), expected .*? = (\S+),"),
    (lambda fn: E.check_alibi_drill(P.alibi_slopes, fn), lambda H, q, k: P.alibi_bias(H, q, k) * (1 + 1e-4),
     r"= (\S+), expected (\S+) \("),
], ids=["row updates", "NTK base", "sinusoidal", "ALiBi bias"])
def test_a_near_miss_prints_two_different_numbers(capsys, checker, fn, pattern):
    ok, line = _verdict(capsys, lambda: checker(fn))
    assert not ok
    m = re.search(pattern, line)
    assert m is not None, line
    assert m.group(1) != m.group(2), f"the message prints equal numbers as different: {line}"


# ---------------------------------------------------------------------------
# Numbers: numpy numbers and 0-d tensors are numbers; bools, strings, half-precision counts are not
# ---------------------------------------------------------------------------

NUMBER_CHECKERS = ["equivariance", "ntk_base", "largest_offset", "kv_cache_bytes", "windowed_cache"]
NUMBER_FORMS = {
    "numpy float64": lambda v: np.float64(v),
    "numpy int64 (whole numbers)": lambda v: np.int64(v) if float(v) == int(v) else np.float64(v),
    "numpy 0-d array": lambda v: np.array(v),
    "0-d tensor": lambda v: torch.tensor(v, dtype=torch.float64),
    "1-element tensor": lambda v: torch.tensor([v], dtype=torch.float64),
}


@pytest.mark.parametrize("form", sorted(NUMBER_FORMS))
@pytest.mark.parametrize("checker", NUMBER_CHECKERS)
def test_numpy_and_0d_numbers_are_accepted(capsys, checker, form):
    ok, line = _verdict(capsys, lambda: ANSWERS[checker](NUMBER_FORMS[form]))
    assert ok, line


@pytest.mark.parametrize("form", ["numpy int64", "0-d int tensor", "float32 0-d tensor"])
def test_flop_counts_in_numpy_or_tensor_form_pass(capsys, form):
    conv = {"numpy int64": np.int64, "0-d int tensor": torch.tensor,
            "float32 0-d tensor": lambda v: torch.tensor(v, dtype=torch.float32)}[form]
    ok, line = _verdict(capsys, lambda: ANSWERS["attention_flops"](lambda t: tuple(conv(v) for v in t)))
    assert ok, line


@pytest.mark.parametrize("checker", NUMBER_CHECKERS)
def test_a_half_precision_number_is_named(capsys, checker):
    ok, line = _verdict(capsys, lambda: ANSWERS[checker](lambda v: torch.tensor(v + 0.3, dtype=torch.float16)))
    assert not ok and "torch.float16 number" in line and "11 significant bits" in line, line


@pytest.mark.parametrize("checker", NUMBER_CHECKERS)
def test_a_bool_is_not_a_number(capsys, checker):
    ok, line = _verdict(capsys, lambda: ANSWERS[checker](lambda v: np.bool_(True)))
    assert not ok and "not a bool" in line, line


# ---------------------------------------------------------------------------
# In place: "you modified the input", from every checker that hands the reader a tensor
# ---------------------------------------------------------------------------

IN_PLACE = {
    "equivariance": lambda: E.check_equivariance_error(lambda f, x, perm: (f(x.mul_(1.5)[:, perm]) - f(x)[:, perm]).abs().max()),
    "row_updates": lambda: E.check_expected_row_updates(  # P(L > p) = 1 - CDF(p), the CDF taken in place
        lambda p, s, B: s * (1 - p.cumsum_(0)[:-1] ** B)),
    "swin_bias": lambda: E.check_swin_bias(lambda t, w: _swin_bias(t.mul_(1.0).add_(0.0).abs_(), w)),
    "rope_rotation": lambda: E.check_rope_rotation(lambda x, m, base: _rotation(x, m, base).add_(x.zero_())),
    "rope_drill: rotate_half": lambda: E.check_rope_drill(lambda x: torch.cat([x[..., x.shape[-1] // 2:].neg_(),
                                                                                x[..., : x.shape[-1] // 2]], -1),
                                                          _apply, _lib_rope),
    "rope_drill: apply_rotary": lambda: E.check_rope_drill(
        P.rotate_half, lambda x, c, s: x.mul_(c).add_(P.rotate_half(x / c) * s), _lib_rope),
    "rope_drill: cos modified": lambda: E.check_rope_drill(
        P.rotate_half, lambda x, c, s: x * c.unsqueeze_(0) + P.rotate_half(x) * s, _lib_rope),
    "bucket_drill": lambda: E.check_bucket_drill(
        lambda r, bi, nb, md: P.relative_position_bucket(r.clamp_(-md, md), bi, nb, md)),
}


@pytest.mark.parametrize("name", sorted(IN_PLACE))
def test_modifying_the_input_in_place_is_named(capsys, name):
    ok, line = _verdict(capsys, IN_PLACE[name])
    assert not ok and "you modified the input" in line and "raised" not in line, line


# ---------------------------------------------------------------------------
# Low-precision angles: float16 as well as bfloat16, by name
# ---------------------------------------------------------------------------


class RopeOk(nn.Module):
    """A reader's correct RotaryEmbedding: float32 inv_freq that stays float32 under .to(...)."""

    def __init__(self, d_head: int, base: float = 10000.0) -> None:
        super().__init__()
        two_i = torch.arange(0, d_head, 2, dtype=torch.float32)
        self.register_buffer("inv_freq", 1.0 / base ** (two_i / d_head), persistent=False)

    def _apply(self, fn, recurse=True):  # noqa: ANN001, ANN202
        freq = self.inv_freq
        super()._apply(fn, recurse)
        self.inv_freq = freq.to(device=self.inv_freq.device, dtype=torch.float32)
        return self

    def angles(self, T: int, offset: int) -> torch.Tensor:
        return torch.outer(torch.arange(offset, offset + T, dtype=torch.float32), self.inv_freq)  # (T, d/2)

    def forward(self, T: int, offset: int = 0):  # noqa: ANN201
        ang = self.angles(T, offset)
        ang = torch.cat([ang, ang], dim=-1)  # (T, d)
        return ang.cos(), ang.sin()


def _rope(angles: Callable | None = None, keep_float32: bool = True) -> type:
    class Rope(RopeOk):
        def _apply(self, fn, recurse=True):  # noqa: ANN001, ANN202
            return RopeOk._apply(self, fn, recurse) if keep_float32 else nn.Module._apply(self, fn, recurse)

        def angles(self, T: int, offset: int) -> torch.Tensor:
            return angles(self, T, offset) if angles else RopeOk.angles(self, T, offset)

    return Rope


def _drill(rope: type, apply: Callable = _apply) -> Callable[[], bool]:
    return lambda: E.check_rope_drill(P.rotate_half, apply, rope)


LOW_PRECISION = {
    "drill: positions and product in float16": (_drill(_rope(lambda self, T, o: torch.outer(
        torch.arange(o, o + T).half(), self.inv_freq.half()).float())), r"Angles in float16"),
    "drill: positions in float16": (_drill(_rope(lambda self, T, o: torch.outer(
        torch.arange(o, o + T).half().float(), self.inv_freq))), r"Angles in float16 \(positions in float16\)"),
    "drill: positions in bfloat16": (_drill(_rope(lambda self, T, o: torch.outer(
        torch.arange(o, o + T).bfloat16().float(), self.inv_freq))), r"Angles in bfloat16 \(positions in bfloat16\)"),
    "drill: inv_freq in float16": (_drill(_rope(lambda self, T, o: torch.outer(
        torch.arange(o, o + T, dtype=torch.float32), self.inv_freq.half().float()))), r"Angles in float16"),
    "05 rotation: angles in float16": (lambda: E.check_rope_rotation(_rotate_with_angles(torch.float16)),
                                       r"Angles computed in float16"),
    "05 rotation: angles in bfloat16": (lambda: E.check_rope_rotation(_rotate_with_angles(torch.bfloat16)),
                                        r"Angles computed in bfloat16"),
}


def _rotate_with_angles(dtype: torch.dtype) -> Callable:
    def fn(x: torch.Tensor, m: int, base: float = 10000.0) -> torch.Tensor:
        d = x.shape[-1]
        theta = base ** (-torch.arange(0, d, 2, dtype=torch.float32) / d)  # (d/2,)
        angle = (torch.tensor(float(m), dtype=dtype) * theta.to(dtype)).float()  # (d/2,) product in low precision
        angle = torch.cat([angle, angle])  # (d,)
        x1, x2 = x[..., : d // 2], x[..., d // 2:]
        return x * angle.cos() + torch.cat([-x2, x1], dim=-1) * angle.sin()
    return fn


@pytest.mark.parametrize("name", sorted(LOW_PRECISION))
def test_low_precision_angles_are_named_by_dtype(capsys, name):
    run, pattern = LOW_PRECISION[name]
    ok, line = _verdict(capsys, run)
    assert not ok and re.search(pattern, line), line
    other = "bfloat16" if "float16" in name and "bfloat16" not in name else None
    if other:
        assert other not in line, f"a float16 mistake must not be called {other}: {line}"


# ---------------------------------------------------------------------------
# Partial rotation and swapped members of a pair
# ---------------------------------------------------------------------------


def _rotate_pairs(kind: str) -> Callable:
    """A reader's my_rope_rotate(x, m, base) written pair by pair, with one slip."""
    def fn(x: torch.Tensor, m: int, base: float = 10000.0) -> torch.Tensor:
        d = x.shape[-1]
        angle = m * base ** (-torch.arange(0, d, 2, dtype=torch.float32) / d)  # (d/2,)
        if kind == "partial":
            angle[d // 4:] = 0.0  # only the first half of the pairs
        a, b = x[..., : d // 2], x[..., d // 2:]
        if kind == "swapped before":
            a, b = b, a
        c, s = angle.cos(), angle.sin()
        first, second = a * c - b * s, b * c + a * s
        if kind == "swapped after":
            first, second = second, first
        return torch.cat([first, second], dim=-1)
    return fn


def _apply_first_half_only(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    r = x.shape[-1] // 2  # GPT-NeoX's rotary_pct = 0.5, with the drill's full tables
    xr = x[..., :r]
    rot = torch.cat([-xr[..., r // 2:], xr[..., : r // 2]], dim=-1)
    return torch.cat([xr * cos[..., :r] + rot * sin[..., :r], x[..., r:]], dim=-1)


def _apply_swapped(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    out = x * cos + P.rotate_half(x) * sin
    h = x.shape[-1] // 2
    return torch.cat([out[..., h:], out[..., :h]], dim=-1)  # each pair written back as (b', a')


def _offset_matrix_first_pairs(k: int, d: int, base: float) -> torch.Tensor:
    M = offset_matrix(k, d, base).float()
    M[d // 2:, d // 2:] = torch.eye(d - d // 2)  # blocks of the last pairs left as the identity
    return M


def _rope_some_pairs(self: RopeOk, T: int, offset: int) -> torch.Tensor:
    freq = self.inv_freq.clone()
    freq[freq.numel() // 2:] = 0.0  # only the fast half of the pairs turns
    return torch.outer(torch.arange(offset, offset + T, dtype=torch.float32), freq)


PAIRS = {
    "05 rotation: partial": (lambda: E.check_rope_rotation(_rotate_pairs("partial")),
                             r"Partial rotation .*pairs \[0, 1\] turn, but pairs \[2, 3\] come back unchanged"),
    "05 rotation: members swapped after the turn": (lambda: E.check_rope_rotation(_rotate_pairs("swapped after")),
                                                    r"Swapped members of a pair.*written back in the other order"),
    "05 rotation: members swapped before the turn": (lambda: E.check_rope_rotation(_rotate_pairs("swapped before")),
                                                     r"Swapped members of a pair.*exchanged before the turn"),
    "05 permutation: members swapped": (lambda: E.check_pairing_permutation(
        lambda d: pairing_permutation(d).reshape(-1, 2).flip(-1).flatten()), r"Swapped members of each pair"),
    "02 offset matrix: partial": (lambda: E.check_offset_matrix(_offset_matrix_first_pairs),
                                  r"Partial rotation .*blocks of pairs \[2, 3\] are the identity"),
    "02 offset matrix: (cos, sin) members": (lambda: E.check_offset_matrix(lambda k, d, b: offset_matrix(k, d, b).T),
                                            r"Swapping the members of a pair"),
    "drill: apply_rotary rotates half the dims": (_drill(RopeOk, _apply_first_half_only),
                                                  r"Partial rotation in apply_rotary.*first 8 of the 16 dims"),
    "drill: apply_rotary swaps the members": (_drill(RopeOk, _apply_swapped),
                                              r"Swapped members of a pair in apply_rotary"),
    "drill: tables with angle 0 for half the pairs": (_drill(_rope(_rope_some_pairs)),
                                                      r"partial rotation: pairs \[4, 5, 6, 7\] get angle 0"),
}


@pytest.mark.parametrize("name", sorted(PAIRS))
def test_partial_rotation_and_swapped_members_are_named(capsys, name):
    run, pattern = PAIRS[name]
    ok, line = _verdict(capsys, run)
    assert not ok and re.search(pattern, line), line


# ---------------------------------------------------------------------------
# RoPE tables cached for 2048 positions, used at a large offset
# ---------------------------------------------------------------------------


class RopeCached(RopeOk):
    """cos/sin precomputed for max_positions in __init__ and sliced in forward, as many tutorials do."""

    def __init__(self, d_head: int, base: float = 10000.0, max_positions: int = 2048) -> None:
        super().__init__(d_head, base)
        cos, sin = RopeOk.forward(self, max_positions)
        self.register_buffer("cos_cached", cos, persistent=False)
        self.register_buffer("sin_cached", sin, persistent=False)

    def forward(self, T: int, offset: int = 0):  # noqa: ANN201
        return self.cos_cached[offset: offset + T], self.sin_cached[offset: offset + T]


def test_tables_cached_for_2048_positions_get_a_message_at_a_large_offset(capsys):
    ok, line = _verdict(capsys, _drill(RopeCached))
    assert not ok and "cached for positions 0 .. 2047 (2048 positions)" in line and "offset=16000" in line, line


def test_a_cache_that_grows_passes(capsys):
    class RopeGrowing(RopeCached):
        def forward(self, T: int, offset: int = 0):  # noqa: ANN201
            if offset + T > self.cos_cached.shape[0]:
                self.cos_cached, self.sin_cached = RopeOk.forward(self, 2 * (offset + T))
            return super().forward(T, offset)

    ok, line = _verdict(capsys, _drill(RopeGrowing))
    assert ok, line
