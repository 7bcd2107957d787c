"""Numbers for section 2.4 (RoPE): maths that is not drawing.

Everything here goes through `mlbook.transformer` (`RotaryEmbedding`, `apply_rotary`,
`convert_rotary_weights`, `MultiHeadAttention`, `GPT`, `KVCache`), so a figure or a printed
check shows what the library computes, not a second implementation of it:

    rotate_at, rope_score         R_m x and the score <R_m q, R_n k> for positions (m, n)
    rotation_matrix, rotation_checks   R_m as a (d_head, d_head) matrix; orthogonality, R_m^T R_n = R_{n-m}
    as_complex, complex_score     the pair-as-complex-number view, checked against torch.polar
    pair_rotation, pair_score_curve    one 2-D pair of q and k at (m, n): the rotation diagram
    frequency_bands, turns_within      m theta_i for every pair and position
    pairing_permutation, pairing_equivalence_error, porting_bug   the two layouts and the porting bug
    relative_check, decay_curve   score(3,1) = score(103,101) != score(3,2); mean score against distance
    angle_error                   angles in bfloat16 against float32
    hf_inv_freq_dtype             Hugging Face's inv_freq dtype after module.to(bfloat16), measured
    precision_relativity          which bfloat16 rounding keeps the score relative, and which breaks it
    shipped_bases                 the bases released models ship, read from mlbook.data.model_families
    cached_decode_error, fused_attention_error   the KV cache and fused attention with RoPE

Positions are integers >= 0 (the library's tables start at position 0). Public functions
validate their arguments and raise ValueError/TypeError naming the bad one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import torch

from mlbook.data.model_families import family
from mlbook.transformer.attention import MultiHeadAttention
from mlbook.transformer.models import GPT, GPTConfig
from mlbook.transformer.positional import ROPE_PAIRINGS, RotaryEmbedding, convert_rotary_weights, rotate_half
from mlbook.transformer.rope_scaling import RopeScaling
from mlbook.transformer.validate import check_choice, check_even_d, check_int, check_positive_float

__all__ = [
    "PRECISIONS",
    "ACTIVATIONS_BF16",
    "rotate_at",
    "rope_score",
    "rotation_matrix",
    "RotationReport",
    "rotation_checks",
    "as_complex",
    "complex_score",
    "PairRotation",
    "pair_rotation",
    "pair_score_curve",
    "FrequencyBands",
    "frequency_bands",
    "turns_within",
    "pairing_permutation",
    "pairing_equivalence_error",
    "PortingReport",
    "porting_layers",
    "load_port",
    "porting_bug",
    "RelativeCheck",
    "relative_check",
    "DecayCurve",
    "decay_curve",
    "angle_error",
    "PrecisionRelativity",
    "precision_relativity",
    "ShippedBase",
    "HFInvFreqDtype",
    "hf_inv_freq_dtype",
    "shipped_bases",
    "cached_decode_error",
    "fused_attention_error",
]

PRECISIONS: tuple[str, ...] = ("float32", "bfloat16_inv_freq", "bfloat16")


# ---------------------------------------------------------------------------
# Validation
# ---------------------------------------------------------------------------


def _check_vector(name: str, x: object, d_head: int | None = None) -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of shape (d_head,), got {type(x).__name__}")
    if not x.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got dtype {x.dtype}")
    if x.dim() != 1 or x.numel() < 2 or x.numel() % 2:
        raise ValueError(f"{name} must be one head vector of even length (d_head,), got shape {tuple(x.shape)}")
    if d_head is not None and x.numel() != d_head:
        raise ValueError(f"{name} has length {x.numel()}, but the other vector has d_head = {d_head}")
    return x


def _rope(d_head: int, base: float, pairing: str) -> RotaryEmbedding:
    return RotaryEmbedding(d_head, base, pairing=pairing)


# ---------------------------------------------------------------------------
# R_m and the score for positions (m, n)
# ---------------------------------------------------------------------------


def rotate_at(x: torch.Tensor, m: int, *, base: float = 10000.0, pairing: str = "half") -> torch.Tensor:
    """R_m x: every row x[..., :] (length d_head) rotated as if it sat at position m.

    Pair i (dims (i, i + d/2) for "half", (2i, 2i + 1) for "interleaved") is turned by the angle
    m * theta_i, theta_i = base^(-2i/d_head), through `RotaryEmbedding.rotate`:
    (a, b) -> (a cos t - b sin t, b cos t + a sin t), counter-clockwise in the (a, b) plane.
    """
    if not isinstance(x, torch.Tensor) or not x.is_floating_point():
        raise TypeError(f"x must be a floating-point torch.Tensor of shape (..., d_head), got {type(x).__name__}")
    if x.dim() < 1:
        raise ValueError("x must have at least one dimension (d_head,)")
    d_head = check_even_d("x.shape[-1] (d_head)", x.shape[-1])
    check_int("m", m, 0)
    rope = _rope(d_head, base, check_choice("pairing", pairing, ROPE_PAIRINGS))
    return rope.rotate(x.unsqueeze(-2), offset=m).squeeze(-2)  # (..., d_head)


def rope_score(
    q: torch.Tensor, k: torch.Tensor, m: int, n: int, *, base: float = 10000.0, pairing: str = "half"
) -> float:
    """The score <R_m q, R_n k> = sum_j (R_m q)_j (R_n k)_j for a query at position m and a key at n.

    It equals q^T R_{n-m} k, so it depends on m and n only through n - m.
    """
    q = _check_vector("q", q)
    k = _check_vector("k", k, q.numel())
    check_int("n", n, 0)
    return float((rotate_at(q, m, base=base, pairing=pairing) * rotate_at(k, n, base=base, pairing=pairing)).sum())


def rotation_matrix(
    m: int, d_head: int, base: float = 10000.0, pairing: str = "half", dtype: torch.dtype = torch.float64
) -> torch.Tensor:
    """The (d_head, d_head) matrix R_m with R_m x = `rotate_at(x, m)`: column j is R_m e_j.

    Block-diagonal up to the pair layout: one 2x2 rotation [[cos m theta_i, -sin m theta_i],
    [sin m theta_i, cos m theta_i]] on the dims of pair i, zeros elsewhere.
    """
    check_even_d("d_head", d_head)
    eye = torch.eye(d_head, dtype=dtype)  # (d_head, d_head) row j = e_j
    return rotate_at(eye, m, base=base, pairing=pairing).T  # (d_head, d_head) column j = R_m e_j


@dataclass(frozen=True)
class RotationReport:
    """Numerical checks of R_m built from the library (float32 angles, float64 matrices)."""

    d_head: int
    base: float
    pairing: str
    positions: tuple[tuple[int, int], ...]
    orthogonality_error: float  # max over m of |R_m^T R_m - I|
    composition_error: float  # max over (m, n) of |R_m^T R_n - R_{n-m}|
    outside_pairs: float  # max |R_m| outside the 2x2 blocks of the pairs
    score_error: float  # max |<R_m q, R_n k> - q^T R_{n-m} k| / |q||k| for random q, k

    def __repr__(self) -> str:
        pairs = ", ".join(f"({m}, {n})" for m, n in self.positions)
        return "\n".join([
            f"d_head = {self.d_head}, base = {self.base:,g}, pairing = {self.pairing!r}, (m, n) in {pairs}",
            f"max |R_m^T R_m - I|               = {self.orthogonality_error:.1e}",
            f"max |R_m^T R_n - R_(n-m)|         = {self.composition_error:.1e}",
            f"max |entry outside the 2x2 pairs| = {self.outside_pairs:.1e}",
            f"max |<R_m q, R_n k> - q^T R_(n-m) k| / (|q| |k|) = {self.score_error:.1e}",
        ])


def _pair_mask(d_head: int, pairing: str) -> torch.Tensor:
    """(d_head, d_head) bool: True where two dims belong to the same pair (from `pairing_permutation`)."""
    perm = pairing_permutation(d_head) if pairing == "half" else torch.arange(d_head)
    pair_of = torch.empty(d_head, dtype=torch.long)
    pair_of[perm] = torch.arange(d_head) // 2  # interleaved slot 2i, 2i+1 hold pair i
    return pair_of[:, None] == pair_of[None, :]


def rotation_checks(
    d_head: int = 64, base: float = 10000.0,
    positions: Sequence[tuple[int, int]] = ((0, 0), (3, 4), (5, 17), (40, 100)),
    *, pairing: str = "half", seed: int = 0,
) -> RotationReport:
    """R_m^T R_m = I, R_m^T R_n = R_{n-m} (n >= m) and the block structure, measured on the library's R_m."""
    if not positions:
        raise ValueError("positions must hold at least one (m, n) pair")
    for m, n in positions:
        check_int("m", m, 0)
        check_int("n", n, 0)
        if n < m:
            raise ValueError(
                f"each (m, n) needs n >= m so that R_(n-m) is a position the library can build; got ({m}, {n})"
            )
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(d_head, generator=gen, dtype=torch.float64)  # (d_head,)
    k = torch.randn(d_head, generator=gen, dtype=torch.float64)  # (d_head,)
    eye = torch.eye(d_head, dtype=torch.float64)
    outside = ~_pair_mask(d_head, pairing)
    ortho = comp = off = score = 0.0
    for m, n in positions:
        Rm, Rn = rotation_matrix(m, d_head, base, pairing), rotation_matrix(n, d_head, base, pairing)
        Rd = rotation_matrix(n - m, d_head, base, pairing)
        ortho = max(ortho, (Rm.T @ Rm - eye).abs().max().item())
        comp = max(comp, (Rm.T @ Rn - Rd).abs().max().item())
        off = max(off, Rm[outside].abs().max().item() if outside.any() else 0.0)
        direct = rope_score(q, k, m, n, base=base, pairing=pairing)
        score = max(score, abs(direct - float(q @ Rd @ k)) / float(q.norm() * k.norm()))
    return RotationReport(d_head, float(base), pairing, tuple(tuple(p) for p in positions), ortho, comp, off, score)


# ---------------------------------------------------------------------------
# The complex view
# ---------------------------------------------------------------------------


def as_complex(x: torch.Tensor, pairing: str = "half") -> torch.Tensor:
    """Read each pair as one complex number: z_i = x_i + i x_{i+d/2} ("half"), x_{2i} + i x_{2i+1} ("interleaved").

    x: (..., d_head) real. Returns (..., d_head/2) complex (complex128 for float64 x).
    """
    if not isinstance(x, torch.Tensor) or not x.is_floating_point():
        raise TypeError("x must be a real floating-point torch.Tensor of shape (..., d_head)")
    d = check_even_d("x.shape[-1] (d_head)", x.shape[-1])
    check_choice("pairing", pairing, ROPE_PAIRINGS)
    if pairing == "half":
        return torch.complex(x[..., : d // 2], x[..., d // 2 :])  # (..., d/2)
    return torch.complex(x[..., 0::2], x[..., 1::2])  # (..., d/2)


def complex_score(
    q: torch.Tensor, k: torch.Tensor, m: int, n: int, *, base: float = 10000.0, pairing: str = "half"
) -> float:
    """Re sum_i q_i conj(k_i) e^{i (m - n) theta_i}, with q_i, k_i the pairs read as complex numbers.

    The phase e^{i (m - n) theta_i} is built with `torch.polar` in float64 from the library's
    inv_freq; this is the score <R_m q, R_n k> computed without any rotation matrix.
    """
    q = _check_vector("q", q)
    k = _check_vector("k", k, q.numel())
    check_int("m", m, 0)
    check_int("n", n, 0)
    theta = _rope(q.numel(), base, pairing).inv_freq.double()  # (d/2,)
    phase = torch.polar(torch.ones_like(theta), (m - n) * theta)  # (d/2,) e^{i (m-n) theta_i}
    zq, zk = as_complex(q.double(), pairing), as_complex(k.double(), pairing)  # (d/2,) each
    return float((zq * zk.conj() * phase).real.sum())


# ---------------------------------------------------------------------------
# One pair in the plane: the rotation diagram
# ---------------------------------------------------------------------------


def _wrap(angle: float) -> float:
    """Angle in (-pi, pi]."""
    a = math.remainder(angle, 2 * math.pi)
    return math.pi if a == -math.pi else a


@dataclass(frozen=True)
class PairRotation:
    """Pair i of q at position m and of k at position n, as 2-D vectors (a, b) = (dim i, dim i + d/2)."""

    m: int
    n: int
    pair: int
    theta: float  # theta_i, radians per token
    q: tuple[float, float]  # before rotation
    k: tuple[float, float]
    q_m: tuple[float, float]  # R(m theta_i) q
    k_n: tuple[float, float]  # R(n theta_i) k
    score: float  # q_m . k_n, this pair's term of the score

    @property
    def angle_q(self) -> float:
        return math.atan2(self.q_m[1], self.q_m[0])

    @property
    def angle_k(self) -> float:
        return math.atan2(self.k_n[1], self.k_n[0])

    @property
    def angle_between(self) -> float:
        """Signed angle from q_m to k_n in (-pi, pi]: the content angle plus (n - m) theta_i."""
        return _wrap(self.angle_k - self.angle_q)


def _pair_vector(v: Sequence[float], pair: int, d_head: int, pairing: str) -> torch.Tensor:
    x = torch.zeros(d_head, dtype=torch.float64)
    a, b = (pair, pair + d_head // 2) if pairing == "half" else (2 * pair, 2 * pair + 1)
    x[a], x[b] = float(v[0]), float(v[1])
    return x


def _pair_dims(pair: int, d_head: int, pairing: str) -> tuple[int, int]:
    return (pair, pair + d_head // 2) if pairing == "half" else (2 * pair, 2 * pair + 1)


def _check_pair(pair: int, d_head: int) -> None:
    check_int("pair", pair, 0)
    if pair >= d_head // 2:
        raise ValueError(f"pair must be in 0..{d_head // 2 - 1} for d_head={d_head}, got {pair}")


def _check_2d(name: str, v: object) -> tuple[float, float]:
    if isinstance(v, torch.Tensor):
        v = v.tolist()
    if not isinstance(v, (tuple, list)) or len(v) != 2 or not all(isinstance(c, (int, float)) for c in v):
        raise TypeError(f"{name} must be a 2-vector (a, b) of numbers, got {v!r}")
    return float(v[0]), float(v[1])


def pair_rotation(
    q: Sequence[float], k: Sequence[float], m: int, n: int, *, pair: int = 0, d_head: int = 64,
    base: float = 10000.0, pairing: str = "half",
) -> PairRotation:
    """Put the 2-vectors q, k into pair `pair` of a head, rotate them with the library at m and n, read them back.

    q_m = R(m theta_i) q, k_n = R(n theta_i) k, score = q_m . k_n = |q||k| cos(angle from q_m to k_n).
    """
    qv, kv = _check_2d("q", q), _check_2d("k", k)
    check_even_d("d_head", d_head)
    _check_pair(pair, d_head)
    check_int("m", m, 0)
    check_int("n", n, 0)
    rope = _rope(d_head, base, check_choice("pairing", pairing, ROPE_PAIRINGS))
    a, b = _pair_dims(pair, d_head, pairing)
    qm = rope.rotate(_pair_vector(qv, pair, d_head, pairing)[None], offset=m)[0]  # (d_head,)
    kn = rope.rotate(_pair_vector(kv, pair, d_head, pairing)[None], offset=n)[0]  # (d_head,)
    theta = float(rope.inv_freq[pair])
    return PairRotation(
        m, n, pair, theta, qv, kv, (float(qm[a]), float(qm[b])), (float(kn[a]), float(kn[b])), float(qm @ kn)
    )


def pair_score_curve(
    q: Sequence[float], k: Sequence[float], offsets: Sequence[int], *, pair: int = 0, d_head: int = 64,
    base: float = 10000.0, pairing: str = "half",
) -> list[float]:
    """This pair's score q_m . k_n = <R(m theta_i) q, R(n theta_i) k> against the offset n - m, per offset.

    Measured at m = max(0, -min(offsets)) so that every n = m + offset is a valid position; by the
    relative property any other m gives the same curve.
    """
    offsets = [check_int("offset", o, -(2**62)) for o in offsets]
    if not offsets:
        raise ValueError("offsets must not be empty")
    qv, kv = _check_2d("q", q), _check_2d("k", k)
    check_even_d("d_head", d_head)
    _check_pair(pair, d_head)
    rope = _rope(d_head, base, check_choice("pairing", pairing, ROPE_PAIRINGS))
    m = max(0, -min(offsets))
    lo, hi = m + min(offsets), m + max(offsets)
    qm = rope.rotate(_pair_vector(qv, pair, d_head, pairing)[None], offset=m)[0]  # (d_head,)
    keys = _pair_vector(kv, pair, d_head, pairing).expand(hi - lo + 1, d_head)  # (N, d_head) k at lo..hi
    kn = rope.rotate(keys, offset=lo)  # (N, d_head)
    scores = kn @ qm  # (N,)
    return [float(scores[m + o - lo]) for o in offsets]


# ---------------------------------------------------------------------------
# Frequency bands
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class FrequencyBands:
    """Angles m theta_i for positions 0..T-1 and every pair, from `RotaryEmbedding.angles` (float32)."""

    d_head: int
    base: float
    theta: torch.Tensor  # (d/2,) radians per token
    angle: torch.Tensor  # (d/2, T) m theta_i

    @property
    def angle_mod(self) -> torch.Tensor:
        """(d/2, T) m theta_i mod 2 pi, in [0, 2 pi)."""
        return torch.remainder(self.angle, 2 * math.pi)

    @property
    def sin(self) -> torch.Tensor:
        """(d/2, T) sin(m theta_i): what the pair's second coordinate does to a unit first axis."""
        return self.angle.sin()

    @property
    def wavelength(self) -> torch.Tensor:
        """(d/2,) tokens per full turn, 2 pi / theta_i."""
        return 2 * math.pi / self.theta.double()


def frequency_bands(d_head: int = 64, T: int = 64, base: float = 10000.0) -> FrequencyBands:
    """m theta_i for m = 0..T-1 and i = 0..d/2-1, theta_i = base^(-2i/d_head)."""
    check_int("T", T, 1)
    rope = _rope(check_even_d("d_head", d_head), base, "half")
    angle = rope.angles(torch.arange(T)).T.contiguous()  # (d/2, T)
    return FrequencyBands(d_head, float(base), rope.inv_freq.clone(), angle)


def turns_within(d_head: int = 64, T: int = 64, base: float = 10000.0) -> torch.Tensor:
    """Full turns each pair makes from position 0 to T - 1: (T - 1) theta_i / (2 pi), (d/2,) float64."""
    bands = frequency_bands(d_head, T, base)
    return bands.angle[:, -1].double() / (2 * math.pi)  # (d/2,)


# ---------------------------------------------------------------------------
# The two pairings
# ---------------------------------------------------------------------------


def pairing_permutation(d_head: int) -> torch.Tensor:
    """perm with x_interleaved = x_half[perm]: half dims (i, i + d/2) go to interleaved dims (2i, 2i + 1).

    Read off `convert_rotary_weights` applied to the channel indices 0..d_head-1, so it is the
    exact permutation the library uses to port q/k projection weights.
    """
    check_even_d("d_head", d_head)
    index = torch.arange(d_head, dtype=torch.float64)  # (d_head,) channel ids as a one-head "bias"
    return convert_rotary_weights(index, 1, "interleaved").long()  # (d_head,)


def pairing_equivalence_error(
    d_head: int = 64, base: float = 10000.0, m: int = 37, *, seed: int = 0
) -> tuple[float, float]:
    """(permuted, unpermuted): max |(R_m^half x)[perm] - R_m^inter (x[perm])| and the same without perm.

    The first is rounding: the two layouts are one model up to a fixed channel permutation. The
    second is O(1): the same weights do not mean the same thing in the other layout.
    """
    check_even_d("d_head", d_head)
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(d_head, generator=gen, dtype=torch.float64)  # (d_head,) a half-layout vector
    perm = pairing_permutation(d_head)
    half = rotate_at(x, m, base=base, pairing="half")  # (d_head,)
    inter = rotate_at(x[perm], m, base=base, pairing="interleaved")  # (d_head,)
    naive = rotate_at(x, m, base=base, pairing="interleaved")  # (d_head,) no permutation
    return (half[perm] - inter).abs().max().item(), (half - naive).abs().max().item()


@dataclass(frozen=True)
class PortingReport:
    """Scores of an interleaved-layout attention layer, and of a half-layout one given its q/k weights.

    scores_*: (H, T, T) raw scores <R_m q_m, R_n k_n> per head, positions m (query) and n (key),
    for random inputs; curve_*: (H, T) the score of the last query against keys at distance
    0..T-1 when every position holds the same token (so the score depends on the distance only).
    """

    d_head: int
    n_heads: int
    base: float
    scores_reference: torch.Tensor
    scores_unconverted: torch.Tensor
    scores_converted: torch.Tensor
    curve_reference: torch.Tensor
    curve_unconverted: torch.Tensor
    curve_converted: torch.Tensor

    @property
    def error_unconverted(self) -> float:
        return (self.scores_unconverted - self.scores_reference).abs().max().item()

    @property
    def error_converted(self) -> float:
        return (self.scores_converted - self.scores_reference).abs().max().item()

    @property
    def reference_scale(self) -> float:
        """max |score| of the reference, to read the errors against."""
        return self.scores_reference.abs().max().item()

    @property
    def diagonal_error_unconverted(self) -> float:
        """max error at m = n: rounding only, because R_m^T R_m = I in either layout."""
        d = torch.diagonal(self.scores_unconverted - self.scores_reference, dim1=-2, dim2=-1)
        return d.abs().max().item()


def _head_scores(attn: MultiHeadAttention, x: torch.Tensor) -> torch.Tensor:
    """(H, T, T) <R_m q_m, R_n k_n> for x (1, T, d_model), with the layer's own projections and rotary."""
    T = x.shape[1]
    q = attn.q_proj(x).view(1, T, attn.n_heads, attn.d_head).transpose(1, 2)  # (1, H, T, d_head)
    k = attn.k_proj(x).view(1, T, attn.n_heads, attn.d_head).transpose(1, 2)  # (1, H, T, d_head)
    q, k = attn.rotary.rotate(q), attn.rotary.rotate(k)  # (1, H, T, d_head) positions 0..T-1
    return torch.einsum("bhmd,bhnd->bhmn", q, k)[0]  # (H, T, T) query m, key n


def porting_layers(
    d_model: int = 64, n_heads: int = 2, base: float = 10000.0, *, seed: int = 0, T: int | None = None
) -> tuple[MultiHeadAttention, MultiHeadAttention, torch.Tensor | None]:
    """The set-up of every porting check: (reference, port, x).

    reference: a `MultiHeadAttention` with RoPE in the interleaved layout (RoFormer, GPT-J, Meta's
    original LLaMA code); port: the same layer with the half layout (GPT-NeoX, Hugging Face LLaMA);
    both seeded with `seed`, float64, in eval mode. With T, x is a (1, T, d_model) float64 input
    drawn from the same seeded stream after the layers; None otherwise. `load_port` gives the port
    the reference's weights.
    """
    check_int("d_model", d_model, 2)
    check_int("n_heads", n_heads, 1)
    base = check_positive_float("base", base, above=1.0)
    if d_model % n_heads or (d_model // n_heads) % 2:
        raise ValueError(f"d_model ({d_model}) must be n_heads ({n_heads}) times an even d_head")
    d_head = d_model // n_heads
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        ref = MultiHeadAttention(d_model, n_heads, rotary=RotaryEmbedding(d_head, base, pairing="interleaved"))
        port = MultiHeadAttention(d_model, n_heads, rotary=RotaryEmbedding(d_head, base, pairing="half"))
        x = None if T is None else torch.randn(1, T, d_model, dtype=torch.float64)  # (1, T, d_model)
    return ref.double().eval(), port.double().eval(), x


def load_port(reference: MultiHeadAttention, port: MultiHeadAttention, *, convert: bool) -> None:
    """Copy the reference's weights into the port: v_proj and o_proj as they are, q_proj and k_proj as
    they are (convert=False, the porting bug) or through `convert_rotary_weights(..., to="half")`."""
    with torch.no_grad():
        for name in ("q_proj", "k_proj"):
            w = getattr(reference, name).weight
            getattr(port, name).weight.copy_(convert_rotary_weights(w, reference.n_heads, "half") if convert else w)
        port.v_proj.weight.copy_(reference.v_proj.weight)
        port.o_proj.weight.copy_(reference.o_proj.weight)


def porting_bug(
    d_model: int = 64, n_heads: int = 2, T: int = 48, base: float = 10000.0, *, seed: int = 0
) -> PortingReport:
    """Load an interleaved-layout layer's q/k weights into a half-layout layer, raw and converted.

    The reference and the half-layout layer come from `porting_layers` (seeded random weights,
    float64); `load_port` gives the half-layout layer the reference's weights as they are, then
    with q_proj and k_proj passed through `convert_rotary_weights(..., to="half")`.
    """
    check_int("T", T, 2)
    ref, half, _ = porting_layers(d_model, n_heads, base, seed=seed)
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(1, T, d_model, generator=gen, dtype=torch.float64)  # (1, T, d_model) random tokens
    same = x[:, :1].expand(1, T, d_model)  # (1, T, d_model) one token repeated at every position

    with torch.no_grad():
        s_ref, c_ref = _head_scores(ref, x), _head_scores(ref, same)[:, -1].flip(-1)  # (H, T, T), (H, T)
        load_port(ref, half, convert=False)
        s_raw, c_raw = _head_scores(half, x), _head_scores(half, same)[:, -1].flip(-1)
        load_port(ref, half, convert=True)
        s_conv, c_conv = _head_scores(half, x), _head_scores(half, same)[:, -1].flip(-1)
    return PortingReport(ref.d_head, n_heads, float(base), s_ref, s_raw, s_conv, c_ref, c_raw, c_conv)


# ---------------------------------------------------------------------------
# The relative-position check and the decay with distance
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class RelativeCheck:
    """score(m, n) = <R_m q, R_n k> for one random (q, k) at three position pairs."""

    d_head: int
    base: float
    scores: dict[tuple[int, int], float]

    def __repr__(self) -> str:
        lines = [f"d_head = {self.d_head}, base = {self.base:,g}, one random q and k"]
        lines += [f"score{mn} = {s:+.4f}   (n - m = {mn[1] - mn[0]:+d})" for mn, s in self.scores.items()]
        return "\n".join(lines)


def relative_check(
    d_head: int = 64, base: float = 10000.0, positions: Sequence[tuple[int, int]] = ((3, 1), (103, 101), (3, 2)),
    *, seed: int = 0,
) -> RelativeCheck:
    """Scores <R_m q, R_n k> at each (m, n), one seeded random q and k in float64."""
    check_even_d("d_head", d_head)
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(d_head, generator=gen, dtype=torch.float64)  # (d_head,)
    k = torch.randn(d_head, generator=gen, dtype=torch.float64)  # (d_head,)
    return RelativeCheck(d_head, float(base), {(m, n): rope_score(q, k, m, n, base=base) for m, n in positions})


@dataclass(frozen=True)
class DecayCurve:
    """Normalised score <R_m q, R_n q> / |q|^2 against the distance |m - n| for random q (q = k).

    mean, low, high: sample mean and the 10th / 90th percentiles over the samples; single: one
    sample; expected: the mean over pairs of cos(|m - n| theta_i), the expectation for isotropic q.
    """

    d_head: int
    base: float
    distances: torch.Tensor  # (D,) int64
    mean: torch.Tensor  # (D,)
    low: torch.Tensor  # (D,)
    high: torch.Tensor  # (D,)
    single: torch.Tensor  # (D,)
    expected: torch.Tensor  # (D,)
    n_samples: int


def decay_curve(
    d_head: int = 64, base: float = 10000.0, distances: Sequence[int] | torch.Tensor | None = None,
    n_samples: int = 256, *, seed: int = 0,
) -> DecayCurve:
    """Mean over n_samples Gaussian q of <R_0 q, R_D q> / |q|^2 at each distance D (default 0..1023).

    Computed in the complex view: with q_i the pairs of q read as complex numbers,
    <R_0 q, R_D q> = Re sum_i |q_i|^2 e^{-i D theta_i} = sum_i |q_i|^2 cos(D theta_i), the angles
    D theta_i from `RotaryEmbedding.angles` (float32). So the normalised score is a weighted mean
    of cos(D theta_i) with weights |q_i|^2 / |q|^2. For independent q and k the expected score
    is 0 at every distance: the decay is a statement about a query meeting a key that resembles it.
    """
    check_even_d("d_head", d_head)
    check_int("n_samples", n_samples, 1)
    D = torch.arange(1024) if distances is None else torch.as_tensor(distances)  # (D,)
    if D.dim() != 1 or D.numel() == 0 or D.is_floating_point() or int(D.min()) < 0:
        raise ValueError("distances must be a non-empty 1-D sequence of integers >= 0")
    rope = _rope(d_head, base, "half")
    cos = rope.angles(D.long()).double().cos()  # (D, d/2) cos(D theta_i)
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(n_samples, d_head, generator=gen, dtype=torch.float64)  # (S, d_head)
    weight = as_complex(q).abs() ** 2  # (S, d/2) |q_i|^2
    score = (weight @ cos.T) / weight.sum(-1, keepdim=True)  # (S, D) <R_0 q, R_D q> / |q|^2
    quant = torch.quantile(score, torch.tensor([0.1, 0.9], dtype=torch.float64), dim=0)  # (2, D)
    expected = cos.mean(-1)  # (D,) E|q_i|^2 is the same for every pair
    return DecayCurve(d_head, float(base), D.long(), score.mean(0), quant[0], quant[1], score[0], expected, n_samples)


# ---------------------------------------------------------------------------
# Precision of the angles
# ---------------------------------------------------------------------------


def angle_error(
    positions: torch.Tensor | Sequence[int], d_head: int = 64, base: float = 10000.0, precision: str = "bfloat16",
    *, pair: int | None = None,
) -> torch.Tensor:
    """|m theta_i computed at `precision` - m theta_i exact|, wrapped to [0, pi]: (T, d/2) float64 ((T,) for one pair).

    The reference is m times the library's float32 inv_freq, multiplied in float64: the angles a
    model trained with those frequencies expects. precision:
        float32             what RotaryEmbedding does: positions and inv_freq in float32
        bfloat16_inv_freq   inv_freq rounded to bfloat16 (a module cast without the float32 guard)
        bfloat16            positions, inv_freq and their product all in bfloat16
    An error of pi means the angle is as good as random.
    """
    check_choice("precision", precision, PRECISIONS)
    m = torch.as_tensor(positions)
    if m.dim() != 1 or m.is_floating_point() or m.numel() == 0 or int(m.min()) < 0:
        raise ValueError("positions must be a non-empty 1-D sequence of integers >= 0")
    rope = _rope(check_even_d("d_head", d_head), base, "half")
    inv_freq = rope.inv_freq  # (d/2,) float32, as the library keeps it
    cols = slice(None)
    if pair is not None:
        _check_pair(pair, d_head)
        cols = slice(pair, pair + 1)
        inv_freq = inv_freq[cols]  # (1,)
    exact = torch.outer(m.double(), inv_freq.double())  # (T, d/2)
    if precision == "float32":
        # the library's own float32 angles (RotaryEmbedding.angles: outer(m, inv_freq) in float32), only
        # for the columns asked for: one pair of 262,144 positions need not compute all d/2 pairs
        got = torch.outer(m.float(), rope.inv_freq_at(int(m.max()) + 1)[cols])  # (T, d/2)
    elif precision == "bfloat16_inv_freq":
        got = torch.outer(m.float(), inv_freq.bfloat16().float())  # (T, d/2)
    else:
        got = torch.outer(m.bfloat16(), inv_freq.bfloat16())  # (T, d/2) bfloat16 throughout
    diff = got.double() - exact  # (T, d/2)
    err = torch.remainder(diff + math.pi, 2 * math.pi).sub(math.pi).abs()  # (T, d/2) in [0, pi]
    return err if pair is None else err[:, 0]


@dataclass(frozen=True)
class HFInvFreqDtype:
    """The dtype of Hugging Face's `LlamaRotaryEmbedding.inv_freq` after `module.to(dtype)`, measured."""

    version: str  # transformers.__version__
    dtype: torch.dtype  # inv_freq's dtype after the cast (the buffer is built in float32)


def hf_inv_freq_dtype(dtype: torch.dtype = torch.bfloat16) -> HFInvFreqDtype | None:
    """Build a tiny Hugging Face `LlamaRotaryEmbedding` (a 64-wide head), cast it with `.to(dtype)`, and return
    the dtype its `inv_freq` buffer ends in; None where `transformers` is not installed (or has no Llama).

    The library's `RotaryEmbedding` keeps inv_freq in float32 under the same cast; transformers 5.15 does not
    guard the buffer (tests/test_analysis_rope.py checks both, and that `from_pretrained(..., dtype=...)` keeps
    it float32).
    """
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating-point torch.dtype, got {dtype!r}")
    try:
        import transformers
        from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding
    except ImportError:
        return None
    cfg = transformers.LlamaConfig(hidden_size=128, num_attention_heads=2, num_key_value_heads=2)
    module = LlamaRotaryEmbedding(cfg).to(dtype)
    return HFInvFreqDtype(str(transformers.__version__), module.inv_freq.dtype)


def _angles_at(m: torch.Tensor, inv_freq: torch.Tensor, precision: str) -> torch.Tensor:
    """The angles m theta_i as a model computing at `precision` gets them, in float64: (T, d/2)."""
    if precision == "float32":
        return torch.outer(m.float(), inv_freq.float()).double()
    if precision == "bfloat16_inv_freq":
        return torch.outer(m.float(), inv_freq.bfloat16().float()).double()
    return torch.outer(m.bfloat16(), inv_freq.bfloat16()).double()  # positions, inv_freq, product in bf16


ACTIVATIONS_BF16 = "bfloat16_activations"  # q, k in bf16; float32 angles; cos, sin cast to bf16; rotation in bf16


@dataclass(frozen=True)
class PrecisionRelativity:
    """Root-mean-square score errors over `samples` random (q, k) whose angles are computed at each precision.

    shifted[p]: RMS of score(D + c, c) - score(D, 0), the same distance D at two absolute positions,
    scores / (|q| |k|): 0 (to float32 rounding) iff the recipe keeps the score a function of n - m.
    mismatch[p][j]: RMS of score_p(D_j, 0) - score_float32(D_j, 0), a model trained with the float32 ladder
    and run with recipe p: the phase error of pair i is D |theta~_i - theta_i|.
    Besides PRECISIONS, ACTIVATIONS_BF16 is what a bf16 model runs with float32 angles (Hugging Face's
    `cos.to(x.dtype)`): q, k, cos and sin rounded to bf16 and the rotation done in bf16, a rounding set per
    entry that does not grow with distance. score_scale: the RMS of the normalised score itself (1/sqrt(d_head)
    for random q, k), the size of the signal the errors are set against.
    """

    d_head: int
    base: float
    shift: int
    distance: int
    distances: tuple[int, ...]
    samples: int
    shifted: dict[str, float]
    mismatch: dict[str, tuple[float, ...]]
    score_scale: float

    def __repr__(self) -> str:
        lines = [f"d_head = {self.d_head}, base = {self.base:,.0f}; RMS over {self.samples:,} random q and k of score "
                 f"differences / (|q| |k|); the score / (|q| |k|) itself has RMS {self.score_scale:.3f} "
                 f"(1/sqrt(d_head) = {self.d_head ** -0.5:.3f})",
                 f"same distance, two places: score({self.distance:,} + {self.shift:,}, {self.shift:,}) "
                 f"vs score({self.distance:,}, 0)"]
        lines += [f"  {p:21s}{self.shifted[p]:9.1e}" for p in (*PRECISIONS, ACTIVATIONS_BF16)]
        lines.append("against the float32 ladder a model was trained with, score(D, 0) at D ="
                     + "".join(f"{d:>9,}" for d in self.distances))
        lines += [f"  {p:21s}" + "".join(f"{e:9.1e}" for e in self.mismatch[p])
                  for p in (*PRECISIONS, ACTIVATIONS_BF16)]
        return "\n".join(lines)


def precision_relativity(
    d_head: int = 64, base: float = 10000.0, *, shift: int = 3000, distance: int = 1000,
    distances: Sequence[int] = (16, 1000, 10000), samples: int = 2000, seed: int = 0,
) -> PrecisionRelativity:
    """Which low-precision recipe keeps RoPE relative (see `PrecisionRelativity`), RMS over random (q, k).

    The score is computed in the complex view, Re sum_i q_i conj(k_i) e^{i (a_m - a_n)}, with the
    angles a_m = m theta_i rounded as the recipe rounds them (`angle_error`'s precisions), in float64. A
    ladder rounded to bfloat16 and used at every position is still a ladder: a_m - a_n = (m - n) theta~_i.
    Rounding the positions or the products makes a_m - a_n depend on m and n themselves. ACTIVATIONS_BF16
    rotates bf16 q and k with float32 angles whose cos and sin are cast to bf16, in bf16 arithmetic, and
    takes the dot product in float64 (a kernel accumulates in float32). One sample can hide an error by
    cancellation between pairs; the RMS over `samples` does not.
    """
    check_even_d("d_head", d_head)
    check_int("shift", shift, 0)
    check_int("distance", distance, 0)
    check_int("samples", samples, 1)
    for d in distances:
        check_int("distances", d, 0)
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(samples, d_head, generator=gen, dtype=torch.float64)  # (S, d_head)
    k = torch.randn(samples, d_head, generator=gen, dtype=torch.float64)  # (S, d_head)
    qk = as_complex(q) * as_complex(k).conj()  # (S, d/2) q_i conj(k_i)
    norm = q.norm(dim=-1) * k.norm(dim=-1)  # (S,)
    rope = _rope(d_head, base, "half")
    inv_freq = rope.inv_freq  # (d/2,) float32

    def rotate_bf16(x: torch.Tensor, m: int) -> torch.Tensor:
        angle = torch.outer(torch.tensor([float(m)]), inv_freq)  # (1, d/2) float32, the library's angles
        table = torch.cat([angle, angle], dim=-1)  # (1, d)
        xb = x.bfloat16()  # (S, d)
        return xb * table.cos().bfloat16() + rotate_half(xb) * table.sin().bfloat16()  # (S, d) bf16 throughout

    def score(m: int, n: int, precision: str) -> torch.Tensor:  # (S,)
        if precision == ACTIVATIONS_BF16:
            return (rotate_bf16(q, m).double() * rotate_bf16(k, n).double()).sum(-1) / norm
        a = _angles_at(torch.tensor([m, n]), inv_freq, precision)  # (2, d/2)
        return (qk * torch.polar(torch.ones_like(a[0]), a[0] - a[1])).real.sum(-1) / norm

    def rms(t: torch.Tensor) -> float:
        return float(t.pow(2).mean().sqrt())

    recipes = (*PRECISIONS, ACTIVATIONS_BF16)
    shifted = {p: rms(score(distance + shift, shift, p) - score(distance, 0, p)) for p in recipes}
    mismatch = {p: tuple(rms(score(d, 0, p) - score(d, 0, "float32")) for d in distances) for p in recipes}
    return PrecisionRelativity(d_head, float(base), shift, distance, tuple(int(d) for d in distances), samples,
                               shifted, mismatch, rms(score(0, 0, "float32")))


# ---------------------------------------------------------------------------
# The bases released models ship
# ---------------------------------------------------------------------------

# (row in mlbook.data.model_families, the name the table prints); rows are read, not copied.
_SHIPPED_ROWS: tuple[tuple[str, str], ...] = (
    ("LLaMA 1", "LLaMA"), ("Llama 2", "Llama 2"), ("Llama 3", "Llama 3"), ("Qwen2", "Qwen2"),
    ("Qwen2.5", "Qwen2.5"), ("Qwen3", "Qwen3"), ("Qwen3-Next", "Qwen3-Next"), ("Qwen3.5", "Qwen3.5"),
    ("Gemma 3", "Gemma 3"), ("gpt-oss", "gpt-oss"), ("DeepSeek-V3", "DeepSeek-V3"), ("Llama 4", "Llama 4"),
    ("Kimi K2", "Kimi K2"), ("GLM-5", "GLM-5"),
)
# the context scalings whose slowest pair is divided by the factor (yarn: below beta_slow turns in the original
# context; llama3: wavelengths above original / low_freq_factor; linear: every pair)
_STRETCHING = ("linear", "yarn", "llama3")
_SCALING_LABELS = {"linear": "linear", "yarn": "YaRN", "llama3": "Llama 3"}
_PARAM_NAMES = {"original_max_position_embeddings": "original_max_len"}  # config key -> RopeScaling argument


@dataclass(frozen=True)
class ShippedBase:
    """One released model's RoPE: base of the full layers (and of the local ones), channels rotated per
    head, the head width, pairing, and the slowest pair's wavelength 2 pi base^((r - 2)/r) in tokens."""

    name: str
    checkpoint: str
    base: float
    local_base: float | None
    rotated: int
    d_head: int
    pairing: str
    source: str  # a citation key in book/references.bib, or the row's config URL
    original_len: int | None = None  # the context it was pretrained at, tokens
    max_len: int | None = None  # the context the release supports, tokens
    scaling: str = "none"  # the context scaling in its config.json (the library's name), or the card's
    scaling_factor: float | None = None
    scaling_in_config: bool = True  # False: the model card has the user add it (Qwen's YaRN)
    scaled_wavelength: float | None = None  # the slowest pair's wavelength under the config's scaling
    chunk: int | None = None  # the rotary layers attend within chunks this long (Llama 4's attention_chunk_size)

    @property
    def slowest_wavelength(self) -> float:
        """2 pi / theta_last, theta_last = base^(-(r - 2)/r) the slowest of the r/2 rotated pairs (float64),
        before any context scaling."""
        return 2 * math.pi * self.base ** ((self.rotated - 2) / self.rotated)

    @property
    def scaling_label(self) -> str:
        """The scaling as the table prints it: "none", "YaRN x40", or "(card: YaRN x4)" where the user adds it."""
        if self.scaling == "none":
            return "none"
        label = f"{_SCALING_LABELS.get(self.scaling, self.scaling)} x{self.scaling_factor:g}"
        return label if self.scaling_in_config else f"(card: {label})"


def _scaled_slowest_wavelength(row, rotated: int) -> float | None:
    """The slowest rotated pair's wavelength under the scaling the row's config.json ships (None: none shipped),
    from the library's `RopeScaling.frequencies`."""
    if row.scaling not in _STRETCHING or not row.scaling_in_config:
        return None
    params = {_PARAM_NAMES.get(k, k): v for k, v in row.scaling_params.items()}
    inv_freq, _ = RopeScaling(row.scaling, factor=float(row.scaling_factor), **params).frequencies(
        rotated, float(row.rope_base))  # (r/2,)
    return 2 * math.pi / float(inv_freq.double().min())


def _rotary_chunk(row) -> int | None:
    """The chunk the row's rotary layers attend within, when every one of them is chunked (Llama 4: no rotary
    score is taken at a distance of `chunk` or more), else None."""
    kinds = row.layer_kinds
    rotary = row.rotary_layers
    if row.chunk is not None and rotary and all(kinds[i] == "chunked_attention" for i in rotary):
        return int(row.chunk)
    return None


def shipped_bases() -> tuple[ShippedBase, ...]:
    """The RoPE bases of released models, in release order, from `mlbook.data.model_families` rows.

    Code Llama has no row there: its base, raised from Llama 2's 10,000 to 1,000,000 for long-context
    fine-tuning, is the paper's (roziere2023codellama, section 2.4), on Llama 2's 128-wide heads.
    """
    rows = []
    for key, name in _SHIPPED_ROWS:
        row = family(key)
        rotated, width = row.global_rotation
        rows.append(ShippedBase(name, row.checkpoint, float(row.rope_base), row.rope_local_base, rotated, width,
                                row.rope_pairing, next((u for u in row.urls if u.endswith("config.json")), row.urls[-1]),
                                row.original_len, row.max_len, row.scaling, row.scaling_factor, row.scaling_in_config,
                                _scaled_slowest_wavelength(row, rotated), _rotary_chunk(row)))
        if key == "Llama 2":  # Code Llama: 16,384-token fine-tuning, 100k tokens in the paper's evaluation
            rows.append(ShippedBase("Code Llama", "CodeLlama-7b", 1000000.0, None, 128, 128, "half",
                                    "roziere2023codellama", 16384, 16384))
    return tuple(rows)


# ---------------------------------------------------------------------------
# What RoPE gives: fused attention and the KV cache
# ---------------------------------------------------------------------------


def cached_decode_error(T: int = 24, *, seed: int = 0, d_model: int = 64, n_heads: int = 4, n_layers: int = 2) -> float:
    """max |logits of a full forward - logits of one-token-at-a-time decoding with KVCache| for a RoPE GPT.

    Each key is rotated once, when it is written to the cache at its own position; later queries
    reuse it as it is.
    """
    check_int("T", T, 1)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        cfg = GPTConfig(vocab_size=64, d_model=d_model, n_heads=n_heads, n_layers=n_layers, max_len=max(T, 1),
                        positional="rope")
        model = GPT(cfg).double().eval()
    gen = torch.Generator().manual_seed(seed)
    idx = torch.randint(0, cfg.vocab_size, (1, T), generator=gen)  # (1, T)
    with torch.no_grad():
        full = model(idx)  # (1, T, vocab)
        caches = model.new_caches("kv", capacity=T)
        steps = [model(idx[:, t : t + 1], caches) for t in range(T)]  # T x (1, 1, vocab)
    return (torch.cat(steps, dim=1) - full).abs().max().item()


def fused_attention_error(T: int = 32, *, seed: int = 0, d_model: int = 64, n_heads: int = 4) -> float:
    """max |fused attention (scaled_dot_product_attention) - readable attention| for a RoPE layer.

    RoPE changes q and k only, so the fused kernel needs no bias tensor: `MultiHeadAttention`
    takes its fused path without return_weights and the explicit softmax(q k^T / sqrt(d)) path with it.
    """
    check_int("T", T, 1)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        attn = MultiHeadAttention(d_model, n_heads, rotary=RotaryEmbedding(d_model // n_heads)).double().eval()
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(2, T, d_model, generator=gen, dtype=torch.float64)  # (B, T, d_model)
    with torch.no_grad():
        fused = attn(x)  # (B, T, d_model)
        readable, _ = attn(x, return_weights=True)  # (B, T, d_model)
    return (fused - readable).abs().max().item()
