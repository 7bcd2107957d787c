"""Exercise checkers for the systems view (11) and production (12): what attention and its cache cost.

`check_attention_flops` (section 11): the reader counts one attention layer's FLOPs, split into
RoPE, the four projections, and the score/mix products. `check_kv_cache_bytes` (section 12): the
reader sizes a KV cache. They compare with `mlbook.analysis.systems` and `mlbook.analysis.production`
on cases chosen so that each common mistake changes the answer by a different factor, and name the
factor's cause.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Callable

import torch

from mlbook.analysis.production import kv_cache_bytes
from mlbook.analysis.systems import attention_flops, position_cost
from mlbook.exercises.common import call_answer, describe, failure, fmt_pair, guarded, number_answer, rtol_for, verdict

__all__ = ["check_attention_flops", "check_kv_cache_bytes", "check_llama3_kv_cache"]

_NOT_IMPLEMENTED = "not implemented yet: fill in the function, then run this cell again."


def _ratio(got: float, want: float) -> Fraction | None:
    """got / want as a small fraction (denominator <= 64), or None when it is not close to one."""
    if want == 0:
        return None
    r = Fraction(got / want).limit_denominator(64)
    return r if abs(float(r) - got / want) <= 1e-9 * max(1.0, abs(got / want)) else None


# ---------------------------------------------------------------------------
# Section 5: KV-cache bytes
# ---------------------------------------------------------------------------

# One case where every usual mistake moves the answer by a different factor:
# layers 5, query heads 12 (3 per KV head), KV heads 4, d_head 16, 4-bit values, 7 tokens, batch 6.
_KV_CASE = {"n_layers": 5, "n_heads": 12, "n_kv_heads": 4, "d_head": 16, "bits": 4, "context_len": 7, "batch": 6}
_KV_FACTORS = {
    Fraction(1, 2): "You count only the keys (or only the values): the cache holds both, so multiply by 2.",
    Fraction(2): "You count keys and values twice: the 2 in the formula already covers both.",
    Fraction(3): "You used the number of query heads. Under grouped-query attention each KV head serves a "
                 "group of query heads, and only the KV heads are cached: use n_kv_heads.",
    Fraction(8): "Your answer is in bits, not bytes: a value of `bits` bits takes bits / 8 bytes.",
    Fraction(1, 8): "You divided by 8 twice, or used bits where the formula wants bytes per value the other way "
                    "round: a 4-bit value is half a byte.",
    Fraction(1, 6): "You left out the batch: every sequence in the batch has its own cache.",
    Fraction(1, 5): "You left out the layers: every layer caches its own keys and values.",
    Fraction(1, 7): "That is the cache per token; multiply by context_len for the whole sequence.",
    Fraction(1, 42): "That is the cache for one token of one sequence; multiply by context_len and by batch.",
    Fraction(1, 16): "You left out d_head: each cached key or value is a vector of d_head numbers per head.",
}


@guarded
def check_kv_cache_bytes(fn: Callable[..., object]) -> bool:
    """Check fn(n_layers, n_heads, n_kv_heads, d_head, bits, context_len, batch) -> cache size in bytes.

    The answer is 2 * n_layers * n_kv_heads * d_head * (bits / 8) * context_len * batch: keys and
    values, every layer, only the KV heads (grouped-query attention shares them), bits / 8 bytes
    per value. Tested on a case where each usual mistake changes the answer by its own factor,
    then on the 7B-class model at 131,072 tokens (64 GiB).
    """
    cases = [dict(_KV_CASE), {"n_layers": 32, "n_heads": 32, "n_kv_heads": 32, "d_head": 128, "bits": 16,
                              "context_len": 131_072, "batch": 1}]
    for case in cases:
        value, err = call_answer(fn, *case.values())
        if err is not None:
            if err.startswith("NotImplementedError"):
                print(_NOT_IMPLEMENTED)
                return False
            return verdict(False, failure(f"fn({', '.join(f'{k}={v}' for k, v in case.items())})", err) + ".")
        value, problem = number_answer(value, "Your function", "a number of bytes (an int or a float)")
        if problem is not None:
            return verdict(False, problem)
        want = kv_cache_bytes(case["n_layers"], case["n_kv_heads"], case["d_head"], case["bits"] / 8,
                              case["context_len"], case["batch"])
        tol = rtol_for(torch.float32) * want  # a count computed in float32 (or from a float32 tensor) is right
        if abs(float(value) - want) <= tol:
            continue
        where = ", ".join(f"{k}={v}" for k, v in case.items())
        for unit, size in (("GiB", 2**30), ("GB", 1e9), ("MiB", 2**20), ("MB", 1e6)):
            if abs(float(value) * size - want) <= tol:
                return verdict(False, f"You returned {value} for {where}: that is the size in {unit}, but the "
                                      "function must return bytes. Convert units only when you print.")
        r = _ratio(float(value), want)
        hint = _KV_FACTORS.get(r) if r is not None else None
        if hint is not None:
            times = f"{r} times" if r > 1 else f"{r} of"
            return verdict(False, f"For {where} you return {value:,.0f} bytes, {times} the right {want:,}. {hint}")
        shown, expected = fmt_pair(float(value), float(want), 6)
        return verdict(False, f"For {where} you return {shown} bytes; the cache holds {expected}. Per token it "
                              "is 2 x n_layers x n_kv_heads x d_head x bits / 8 bytes.")
    return verdict(True, "Keys and values, every layer, only the KV heads, bits / 8 bytes per value, for every "
                         "token of every sequence: 0.5 MiB per token and 64 GiB at 131,072 tokens for the "
                         "7B-class model.")


_LLAMA3 = {"n_layers": 32, "n_heads": 32, "n_kv_heads": 8, "d_head": 128, "context_len": 131_072}
_LLAMA3_FACTORS = {  # the reader's number / the right one, for Llama 3 8B's shape, and what it means
    Fraction(4): "That is 32 KV heads' worth: only the 8 KV heads are cached, each serving 4 query heads.",
    Fraction(1, 2): "That counts only the keys (or only the values): the cache holds both.",
    Fraction(2): "That is twice the cache: keys and values counted twice, 4 bytes a value where bf16 takes 2, "
                 "or 16 bits kept for a cache of 8.",
    Fraction(8): "That is in bits: a value of b bits takes b / 8 bytes.",
    Fraction(1, 32): "That is one layer's cache: each of the 32 layers caches its own.",
    Fraction(1, 128): "d_head is missing: each key and value is 128 numbers per KV head.",
    Fraction(1, 131_072): "That is one token's cache: multiply by the 131,072 tokens.",
}


@guarded
def check_llama3_kv_cache(bf16_bytes: object, int8_bytes: object) -> bool:
    """Check the reader's two numbers for Llama 3 8B (32 layers, 32 query heads sharing 8 KV heads, d_head
    128) at 131,072 tokens, one sequence: the cache in bytes in bf16 and with an 8-bit cache. None means not
    answered yet; a wrong number is named by its factor (the query heads, one of K and V, bits for bytes, a
    unit) without printing the right one."""
    answers = (("bf16", bf16_bytes, 2.0), ("8-bit", int8_bytes, 1.0))
    if any(a is None for _, a, _ in answers):
        missing = [label for label, a, _ in answers if a is None]
        print(f"Not answered yet: the {' and the '.join(missing)} answer {'is' if len(missing) == 1 else 'are'} None. "
              "Give the bytes your my_kv_cache_bytes returns for Llama 3 8B at 131,072 tokens, one sequence.")
        return False
    values = []
    for label, answer, _ in answers:
        value, problem = number_answer(answer, f"the {label} answer", "a number of bytes (an int or a float)")
        if problem is not None:
            return verdict(False, problem)
        values.append(float(value))
    right = [kv_cache_bytes(_LLAMA3["n_layers"], _LLAMA3["n_kv_heads"], _LLAMA3["d_head"], per_value,
                            _LLAMA3["context_len"]) for _, _, per_value in answers]
    if values == right[::-1]:
        return verdict(False, "The two answers are swapped: the bf16 cache is the larger, twice the 8-bit one.")
    for label, answer, per_value in answers:
        value, problem = number_answer(answer, f"the {label} answer", "a number of bytes (an int or a float)")
        if problem is not None:
            return verdict(False, problem)
        want = kv_cache_bytes(_LLAMA3["n_layers"], _LLAMA3["n_kv_heads"], _LLAMA3["d_head"], per_value,
                              _LLAMA3["context_len"])
        if abs(float(value) - want) <= rtol_for(torch.float32) * want:
            continue
        for unit, size in (("GiB", 2**30), ("GB", 1e9), ("MiB", 2**20), ("MB", 1e6)):
            if abs(float(value) * size - want) <= rtol_for(torch.float32) * want:
                return verdict(False, f"Your {label} answer is {value:g}: a size in {unit}. Give it in bytes.")
        r = Fraction(float(value) / want).limit_denominator(1 << 20)  # exact: 1/131,072 must be reachable
        hint = _LLAMA3_FACTORS.get(r) if abs(float(r) - float(value) / want) <= 1e-9 * float(value) / want else None
        return verdict(False, f"Your {label} answer, {float(value):,.0f} bytes, is not the cache's size. "
                              + (hint or "Per token it is 2 x n_layers x n_kv_heads x d_head x bytes per value."))
    return verdict(True, "128 KiB a token: 16 GiB at 131,072 tokens in bf16 and 8 GiB with an 8-bit cache, a "
                         "quarter of what 32 KV heads would hold.")


# ---------------------------------------------------------------------------
# Section 4: attention FLOPs
# ---------------------------------------------------------------------------

_FLOP_CASE = (3, 5, 7)  # B, T, d: distinct primes so each mistake shows as its own factor


@guarded
def check_attention_flops(fn: Callable[[int, int, int], object]) -> bool:
    """Check fn(B, T, d) -> (rope, projections, scores_and_mix): FLOPs of one layer, 2 per multiply-add.

    rope = 6 B T d (q and k: per element two multiplies and one add); projections = 8 B T d^2 (W_q,
    W_k, W_v, W_o, each d x d); scores_and_mix = 4 B T^2 d (Q K^T and the weights times V, without
    a causal kernel skipping the masked half). Compared with `mlbook.analysis.systems`.
    """
    B, T, d = _FLOP_CASE
    value, err = call_answer(fn, B, T, d)
    if err is not None:
        if err.startswith("NotImplementedError"):
            print(_NOT_IMPLEMENTED)
            return False
        return verdict(False, failure(f"fn({B}, {T}, {d})", err) + ".")
    if not isinstance(value, (tuple, list)) or len(value) != 3:
        return verdict(False, f"Return three numbers: (rope, projections, scores_and_mix); got {describe(value)}.")
    numbers = []
    for part, v in zip(("rope", "projections", "scores_and_mix"), value):
        number, problem = number_answer(v, f"{part} in fn({B}, {T}, {d})", "a number")
        if problem is not None:
            return verdict(False, f"Return three numbers: (rope, projections, scores_and_mix). {problem}")
        numbers.append(float(number))
    rope, proj, mix = numbers
    flops = attention_flops(B, T, d)
    want_rope = position_cost("rope", B, T, d, 1).flops
    want = {"rope": want_rope, "projections": flops.projections, "scores and mix": flops.scores + flops.mix}
    got = {"rope": rope, "projections": proj, "scores and mix": mix}
    hints = {
        "rope": {Fraction(1, 2): "RoPE rotates both q and k: count the two tensors.",
                 Fraction(2, 3): "Per element RoPE does x * cos + rotate_half(x) * sin: two multiplies and one "
                                 "add, 3 FLOPs, not 2.",
                 Fraction(1, 3): "Count 3 FLOPs per element (two multiplies, one add) for each of q and k.",
                 Fraction(4, 3): "Per element it is two multiplies and one add (3 FLOPs); rotate_half only moves "
                                 "numbers and costs none."},
        "projections": {Fraction(1, 2): "Count 2 FLOPs per multiply-add: a d x d matrix times a vector is 2 d^2.",
                        Fraction(1, 4): "There are four projections (W_q, W_k, W_v, W_o), each 2 B T d^2.",
                        Fraction(3, 4): "Do not forget the output projection W_o: four projections in all.",
                        Fraction(1, 8): "Each of the four projections costs 2 B T d^2 (2 FLOPs per multiply-add)."},
        "scores and mix": {Fraction(1, 2): "Two products depend on T^2: Q K^T (scores) and the weights times V "
                                           "(mix), 2 B T^2 d each.",
                           Fraction(1, 4): "Count both T^2 products (scores and mix) at 2 FLOPs per multiply-add.",
                           Fraction((T + 1), 2 * T): "That counts only the causal half (T (T + 1) / 2 pairs); "
                                                     "count all T^2 pairs, as a kernel that does not skip the "
                                                     "masked half does."},
    }
    for part in ("rope", "projections", "scores and mix"):
        if abs(got[part] - want[part]) <= rtol_for(torch.float32) * want[part]:  # float32 counts are right too
            continue
        r = _ratio(got[part], want[part])
        hint = hints[part].get(r) if r is not None else None
        if hint is None and r is not None and r != 0:
            if part == "scores and mix" and _ratio(got[part], 4.0 * B * T * d * d) == 1:
                hint = "That is T d^2: the score and mix products scale with T^2 d (every query meets every key)."
        shown, expected = fmt_pair(got[part], float(want[part]), 6)
        msg = f"{part}: you have {shown} FLOPs for B={B}, T={T}, d={d}; the count is {expected}."
        return verdict(False, f"{msg} {hint}" if hint else f"{msg} Count 2 FLOPs per multiply-add.")
    return verdict(True, "RoPE costs 6 B T d, the projections 8 B T d^2, scores and mix 4 B T^2 d per layer: RoPE "
                         "is a 4d/3-th of the projections' cost, and the T^2 term overtakes the projections once "
                         "T > 2d.")
