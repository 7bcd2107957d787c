"""Numbers for section 2.7, attention sinks and streaming: where softmax parks its mass, what each cache holds.

    softmax_parking     a hand-built attention row with a sink token: the weights and the head's
                        output with the sink kept and with it evicted
    cache_contents      which stream positions a full cache, a plain sliding window and a sink
                        cache hold after t tokens, and the position each one is given (text
                        position, or cache slot as in StreamingLLM), from the library's SinkCache
    cache_report        the four schemes side by side, with the largest query-key offset (and so
                        the largest rotation angle, offset * theta_i) each one needs
    rotary_positions_used
                        the largest position a GPT's rotary embedding is asked for while streaming
                        through a cache: the check that slot positions stay in the trained range

Nothing here draws; `mlbook.viz.sinks` plots what these return.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch

from mlbook.transformer.cache import SinkCache
from mlbook.transformer.validate import check_int

__all__ = [
    "PARKING_TOKENS",
    "ParkingExample",
    "softmax_parking",
    "SCHEMES",
    "SCHEME_LABELS",
    "CacheView",
    "cache_contents",
    "CacheReport",
    "cache_report",
    "rotary_positions_used",
]

# ---------------------------------------------------------------------------
# The tiny hand-built example: one query row, one sink, five content tokens
# ---------------------------------------------------------------------------

PARKING_TOKENS: tuple[str, ...] = ("<s>", "the", "cat", "sat", "on", "mat")
# Scores q . k / sqrt(d) of a query that finds nothing relevant: small, mixed-sign, hand-picked.
_CONTENT_SCORES = (0.3, -0.2, 0.1, -0.4, 0.2)
# Values (2-D so they can be read): the sink's value is ~0, a no-op; content values carry content.
_VALUES = ((0.05, 0.0), (1.0, 0.2), (-0.6, 0.9), (0.4, -1.0), (-0.8, -0.5), (0.9, 0.8))
_RELEVANT = 2  # "cat": the token whose score the `relevance` knob raises


@dataclass(frozen=True)
class ParkingExample:
    """One attention row over PARKING_TOKENS, softmax-normalised with and without the sink token (slot 0)."""

    relevance: float
    sink_score: float
    scores: np.ndarray  # (6,) logits, sink first
    weights: np.ndarray  # (6,) softmax(scores); sums to 1
    weights_evicted: np.ndarray  # (6,) softmax over the content tokens only; 0 for the sink
    values: np.ndarray  # (6, 2)

    @property
    def output(self) -> np.ndarray:
        """sum_j w_j v_j with the sink kept: (2,)."""
        return self.weights @ self.values

    @property
    def output_evicted(self) -> np.ndarray:
        """sum_j w_j v_j with the sink evicted: (2,)."""
        return self.weights_evicted @ self.values

    def __repr__(self) -> str:
        lines = [f"relevance of 'cat' = {self.relevance:g}, sink score = {self.sink_score:g}",
                 "token    score   weight (sink kept)   weight (sink evicted)"]
        for tok, s, w, we in zip(PARKING_TOKENS, self.scores, self.weights, self.weights_evicted):
            lines.append(f"{tok:5s}  {s:7.2f}   {w:18.3f}   {we:21.3f}")
        lines.append(f"row sums: {self.weights.sum():.3f} and {self.weights_evicted.sum():.3f}")
        lines.append(f"head output |sum w v|: {np.linalg.norm(self.output):.3f} with the sink, "
                     f"{np.linalg.norm(self.output_evicted):.3f} without")
        return "\n".join(lines)


def softmax_parking(relevance: float = 0.0, sink_score: float = 3.0) -> ParkingExample:
    """w = softmax(scores) over [<s>, the, cat, sat, on, mat]; scores = [sink_score, 0.3, -0.2 + relevance, 0.1, -0.4, 0.2].

    The sink's key has learned a large dot product with every query (sink_score) and its value
    is near zero, so weight parked there changes the output by almost nothing. Evicting it
    renormalises the same content scores over the five content tokens alone.
    """
    for name, v in (("relevance", relevance), ("sink_score", sink_score)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not np.isfinite(v):
            raise ValueError(f"{name} must be a finite number, got {v!r}")
    scores = torch.tensor((float(sink_score),) + _CONTENT_SCORES, dtype=torch.float64)  # (6,)
    scores[_RELEVANT] += float(relevance)
    weights = torch.softmax(scores, dim=0)  # (6,)
    evicted = torch.zeros_like(weights)
    evicted[1:] = torch.softmax(scores[1:], dim=0)  # (5,) renormalised over content
    return ParkingExample(float(relevance), float(sink_score), scores.numpy(), weights.numpy(), evicted.numpy(),
                          np.asarray(_VALUES, dtype=np.float64))


# ---------------------------------------------------------------------------
# Cache contents per scheme
# ---------------------------------------------------------------------------

SCHEMES: tuple[str, ...] = ("full", "window", "sink_text", "sink_slot")
SCHEME_LABELS: dict[str, str] = {
    "full": "full cache",
    "window": "sliding window",
    "sink_text": "sink cache, text positions",
    "sink_slot": "sink cache, slot positions",
}


@dataclass(frozen=True)
class CacheView:
    """What one cache holds after t tokens (stream positions 0 .. t-1) and the position each is given.

    `kept` are stream (text) positions in cache order; `given` the positions RoPE rotates them
    by. The newest token t-1 is the query. Its score with a kept key turns pair i by
    (given[-1] - given[j]) * theta_i, so the largest angle any pair needs is max_offset * theta_i.
    """

    scheme: str
    t: int
    n_sink: int
    window: int
    kept: tuple[int, ...]
    given: tuple[int, ...]

    @property
    def capacity(self) -> int | None:
        return None if self.scheme == "full" else self.n_sink + self.window

    @property
    def evicted(self) -> tuple[int, ...]:
        kept = set(self.kept)
        return tuple(p for p in range(self.t) if p not in kept)

    @property
    def max_position(self) -> int:
        return max(self.given) if self.given else 0

    @property
    def max_offset(self) -> int:
        """Largest query-key offset: given position of the query minus the smallest given position."""
        return (self.given[-1] - min(self.given)) if self.given else 0

    def largest_angle(self, theta: float = 1.0) -> float:
        """max_offset * theta: the largest angle pair theta must turn (pair 0 has theta = 1 rad per token)."""
        return self.max_offset * float(theta)


def _sink_kept(t: int, n_sink: int, window: int) -> tuple[int, ...]:
    """Stream positions a SinkCache(n_sink, window) holds after t single-token updates, read from the library."""
    cache = SinkCache(n_sink, window)
    kv = torch.zeros(1, 1, 1, 1)  # (B, H, T, d_head): contents do not matter, only bookkeeping
    for _ in range(t):
        cache.update(kv, kv)
    return tuple(cache.kept_positions())


def cache_contents(scheme: str, t: int, n_sink: int = 4, window: int = 12) -> CacheView:
    """The tokens a cache holds after t tokens and the positions they are given.

    full:      every token 0 .. t-1 at its text position.
    window:    a plain sliding window with the same memory, SinkCache(0, n_sink + window): the last
               n_sink + window tokens, at their text positions.
    sink_text: SinkCache(n_sink, window): tokens 0 .. n_sink-1 plus the last `window`, at their
               text positions (what StreamingLLM avoids).
    sink_slot: the same tokens at their cache slots 0 .. n_sink + window - 1, as the library's
               SinkCache and StreamingLLM assign them.
    """
    if scheme not in SCHEMES:
        raise ValueError(f"unknown scheme {scheme!r}; valid values are {', '.join(repr(s) for s in SCHEMES)}")
    check_int("t", t, 1)
    check_int("n_sink", n_sink, 0)
    check_int("window", window, 1)
    if scheme == "full":
        kept = tuple(range(t))
    elif scheme == "window":
        kept = _sink_kept(t, 0, n_sink + window)
    else:
        kept = _sink_kept(t, n_sink, window)
    given = tuple(range(len(kept))) if scheme == "sink_slot" else kept
    return CacheView(scheme, t, n_sink, window, kept, given)


@dataclass(frozen=True)
class CacheReport:
    """The four schemes after t tokens, with a trained length L to compare offsets against."""

    views: tuple[CacheView, ...]
    trained_len: int

    def in_range(self, view: CacheView) -> bool:
        """True if every query-key offset is one the model trained on (<= L - 1)."""
        return view.max_offset <= self.trained_len - 1

    def __repr__(self) -> str:
        v0 = self.views[0]
        head = ("scheme", "held", "positions", "max offset", "/ (L-1)", "in range")
        rows = []
        for v in self.views:
            pos = f"{min(v.given)}..{v.max_position}" if v.given else "-"
            rows.append((SCHEME_LABELS[v.scheme], str(len(v.kept)), pos, str(v.max_offset),
                         f"{v.max_offset / (self.trained_len - 1):.2f}", "yes" if self.in_range(v) else "NO"))
        widths = [max(len(h), *(len(r[j]) for r in rows)) for j, h in enumerate(head)]
        line = lambda row: "  ".join(  # noqa: E731
            (val.ljust(w) if j == 0 else val.rjust(w)) for j, (val, w) in enumerate(zip(row, widths)))
        title = (f"after t = {v0.t:,} tokens, n_sink = {v0.n_sink}, window = {v0.window};\n"
                 f"trained length L = {self.trained_len}, largest trained offset L - 1 = {self.trained_len - 1}")
        return "\n".join([title, line(head), "  ".join("-" * w for w in widths)] + [line(r) for r in rows])


def cache_report(t: int, n_sink: int = 4, window: int = 12, trained_len: int | None = None,
                 schemes: Sequence[str] = SCHEMES) -> CacheReport:
    """`cache_contents` for each scheme; trained_len defaults to the cache's memory n_sink + window."""
    L = n_sink + window if trained_len is None else trained_len
    check_int("trained_len", L, 2)
    return CacheReport(tuple(cache_contents(s, t, n_sink, window) for s in schemes), L)


def rotary_positions_used(model: torch.nn.Module, idx: torch.Tensor, caches: list) -> int:
    """Feed idx (1, T) one token at a time through `caches`; return the largest position the model's
    shared RotaryEmbedding was asked to rotate (max over calls of offset + T_rows - 1).

    A forward hook on `model.rotary` records each call's (T, offset), so this measures what the
    attention layers really did, not what the cache claims.
    """
    rotary = getattr(model, "rotary", None)
    if rotary is None:
        raise ValueError("model has no rotary embedding (model.rotary is None); build it with positional='rope'")
    if not isinstance(idx, torch.Tensor) or idx.dim() != 2 or idx.shape[0] != 1:
        raise ValueError("idx must be a (1, T) tensor of token ids")
    largest = [-1]

    def hook(module: torch.nn.Module, args: tuple, kwargs: dict) -> None:
        T = kwargs.get("T", args[0] if args else None)
        offset = kwargs.get("offset", args[1] if len(args) > 1 else 0)
        largest[0] = max(largest[0], int(offset) + int(T) - 1)

    handle = rotary.register_forward_pre_hook(hook, with_kwargs=True)
    try:
        with torch.no_grad():
            for j in range(idx.shape[1]):
                model(idx[:, j : j + 1], caches)
    finally:
        handle.remove()
    return largest[0]
