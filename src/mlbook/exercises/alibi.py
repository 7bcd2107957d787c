"""Exercise checkers for section 2.5: ALiBi.

`check_alibi_key_bias`: write ALiBi as a bias that depends on the key position only,
+m_h * j, of shape (1, H, 1, T_k) (the form BLOOM uses), and confirm it gives the same
attention as the library's -m_h (i - j). The two differ by m_h * i, a constant along each query
row, which softmax ignores. The checker compares attention weights, so any per-row constant is
accepted, and names the usual mistakes: the wrong sign, the query position instead of the key
position, one slope for every head, slopes that only work for a power-of-two H, a bias that
still depends on the query, per-rank slopes (alibi_slopes(H / ranks) on every tensor-parallel rank).
"""

from __future__ import annotations

from typing import Callable

import torch

from mlbook.analysis.alibi import naive_slopes
from mlbook.exercises.common import call_answer, failure, guarded, rtol_for, significant_bits, tensor_answer, verdict
from mlbook.transformer.positional import alibi_bias, alibi_slopes

__all__ = ["check_alibi_key_bias"]


def _attention(scores: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """Causal softmax of scores + bias, queries the last T_q of T_k positions. (B, H, T_q, T_k)."""
    T_q, T_k = scores.shape[-2:]
    q_pos = torch.arange(T_k - T_q, T_k)[:, None]  # (T_q, 1)
    k_pos = torch.arange(T_k)[None, :]  # (1, T_k)
    s = (scores + bias).masked_fill(k_pos > q_pos, float("-inf"))  # (B, H, T_q, T_k)
    return s.softmax(dim=-1)


@guarded
def check_alibi_key_bias(fn: Callable[[int, int], object]) -> bool:
    """Check fn(n_heads, T_k) -> (1, H, 1, T_k) key-only bias giving ALiBi's causal attention.

    For H = 8 and H = 12 (not a power of two) and random scores, the attention weights with
    your bias must equal those with `alibi_bias(H, T_q, T_k)` for T_q = T_k and for a few
    queries at the end (cached decoding).
    """
    for H, T_k in ((8, 12), (12, 10)):
        value, err = call_answer(fn, H, T_k)
        where = f"for n_heads={H}, T_k={T_k}"
        if err is not None:
            hint = " For H = 12 follow the paper's recipe (alibi_slopes handles any H)." if H == 12 else ""
            return verdict(False, f"{failure(f'fn({H}, {T_k})', err)}.{hint}")
        value, problem = tensor_answer(value, f"fn({H}, {T_k})")
        if problem is not None:
            return verdict(False, problem)
        if not value.is_floating_point():
            return verdict(False, f"fn({H}, {T_k}) has dtype {value.dtype}: the bias is added to float32 scores, so "
                                  "return float32 (slopes times torch.arange(T_k, dtype=torch.float32)).")
        bias = value.double()
        if not torch.isfinite(bias).all():
            return verdict(False, f"Your bias contains NaN or inf {where}: each entry is m_h * j, a finite number.")
        if bias.dim() == 3:
            bias = bias[None]
        if bias.dim() != 4 or bias.shape[0] != 1 or bias.shape[1] != H or bias.shape[-1] != T_k:
            return verdict(False, f"Shape {tuple(value.shape)} {where}; it must broadcast against scores "
                                  f"(B, H, T_q, T_k): use (1, H, 1, T_k) = (1, {H}, 1, {T_k}).")
        if bias.shape[2] != 1:
            return verdict(False, f"Your bias has a query axis of length {bias.shape[2]} {where}. The point of this "
                                  "form is that it does not depend on the query: return (1, H, 1, T_k), one row "
                                  "shared by every query (and by every decoding step).")
        gen = torch.Generator().manual_seed(H)
        tol = rtol_for(torch.float32)  # attention weights from a float32 bias: float32 rounding, not float64's
        for T_q in (T_k, 3):
            scores = torch.randn(2, H, T_q, T_k, generator=gen, dtype=torch.float64)  # (B, H, T_q, T_k)
            want = _attention(scores, alibi_bias(H, T_q, T_k).double())
            got = _attention(scores, bias)
            if torch.allclose(got, want, atol=tol):
                if value.dtype in (torch.float16, torch.bfloat16):
                    return verdict(False, f"Right attention weights here, but your bias is {value.dtype} {where}: it "
                                          f"keeps only {significant_bits(value.dtype)} significant bits, so slopes that "
                                          "are not powers of two (2^-0.5 for H = 12) and long distances m_h * j get "
                                          "rounded. Return float32, as alibi_bias does.")
                if value.dtype != torch.float32:
                    return verdict(False, f"Right attention weights, but your bias is {value.dtype} {where}: added to "
                                          f"float32 scores it turns them {value.dtype}, and the attention matmul with "
                                          "float32 values then fails (expected both float32). Return float32, as "
                                          "alibi_bias does: torch.arange(T_k, dtype=torch.float32).")
                continue
            j = torch.arange(T_k, dtype=torch.float64)  # (T_k,)
            m = alibi_slopes(H).double()[:, None]  # (H, 1)

            def same(candidate: torch.Tensor) -> bool:
                return torch.allclose(got, _attention(scores, candidate[None, :, None, :]), atol=tol)

            if same(-m * j):
                return verdict(False, f"Wrong sign {where}: -m_h * j favours the earliest keys. ALiBi penalises "
                                      "distance, -m_h (i - j) = m_h j - m_h i; drop the per-row constant -m_h i and "
                                      "the key-only form is +m_h * j.")
            if torch.allclose(got, _attention(scores, torch.zeros(1, H, 1, T_k, dtype=torch.float64)), atol=tol):
                return verdict(False, f"Your bias changes nothing {where}: it is constant along each query row (did you "
                                      "use the query position i instead of the key position j?). Softmax ignores a "
                                      "per-row constant; the position of the key is what must enter.")
            if same(m[:1] * j.expand(H, T_k)) or same(torch.full((H, 1), float(m[0])) * j):
                return verdict(False, f"Every head uses the same slope {where}. ALiBi gives head h its own slope "
                                      "m_h (alibi_slopes(H)): a range of windows from local to global.")
            if H == 12 and same(naive_slopes(H)[:, None] * j):
                return verdict(False, "For H = 12 you used 2^(-8h/H). That is the power-of-two formula applied to a "
                                      "non-power of two; the paper takes the 8 slopes for 8 heads and adds every "
                                      "other slope of the 16-head sequence. alibi_slopes(12) does this.")
            for ranks in (2, 4, 8):  # each rank computed the slopes of its own H / ranks heads (the TP bug)
                per_rank = alibi_slopes(H // ranks).double().repeat(ranks)[:, None] if H % ranks == 0 else None
                if per_rank is not None and H > ranks and same(per_rank * j):
                    return verdict(False, f"Your slopes are {ranks} copies of the set for {H // ranks} heads {where}: "
                                          f"alibi_slopes({H // ranks}) per rank, the tensor-parallel bug of the "
                                          "section above. The model was trained with alibi_slopes(H) = "
                                          f"alibi_slopes({H}); rank r must take its slice of that, "
                                          f"alibi_slopes({H})[r * {H // ranks} : (r + 1) * {H // ranks}].")
            if same(m.flip(0) * j):
                return verdict(False, f"Your slopes are in reverse head order {where}: head 0 has the steepest slope, "
                                      "2^(-8/H) for a power-of-two H.")
            if value.dtype in (torch.float16, torch.bfloat16) and torch.allclose(got, want, atol=5e-2):
                return verdict(False, f"Right up to rounding, but your bias is {value.dtype} {where}: m_h * j keeps "
                                      f"only {significant_bits(value.dtype)} significant bits, which moves the "
                                      f"attention weights by up to {float((got - want).abs().max()):.2g}. Compute it "
                                      "in float32.")
            per_head = [h for h in range(H) if not torch.allclose(got[:, h], want[:, h], atol=tol)]
            return verdict(False, f"Attention differs from ALiBi's for heads {per_head} {where} (T_q = {T_q}). Head h "
                                  "needs bias m_h * j (plus any constant per row), m_h = alibi_slopes(H)[h].")
    return verdict(True, "m_h * j gives exactly ALiBi's attention: it differs from -m_h (i - j) by m_h * i, a "
                         "constant along each query row, which softmax cancels. One (1, H, 1, T_k) row serves "
                         "every query.")
