"""Section 2.3, relative position bias: T5's buckets and Swin's 2-D table, as numbers.

    bucket_layout           which distances share each T5 bucket (exact range, log buckets, last bucket)
    untrained_offsets       offsets at evaluation whose bucket no training offset ever used
    relative_bias_params    num_buckets * H * n_stacks: T5's whole position budget
    per_distance_params     (2T - 1) * H: one parameter per signed offset instead
    t5_param_count          a whole T5 model's parameters, to put the bias in proportion
    bias_bytes              H * T_q * T_k * bytes: the materialised (H, T_q, T_k) bias
    diagonal_spread         max - min along each diagonal of a bias map (0: a function of j - i)
    swin_table_entries      (2w - 1)^2: rows of Swin's table for a w x w window
    patch_grid              image_size / patch_size: the side of the token grid (Swin stage 1: 224 / 4 = 56)
    window_pairs            (w^2)^2: (query, key) pairs of a w x w window, what an unshared table would need
    swin_index              the (w^2, w^2) index into that table, from RelativePositionBias2D
    swin_pair               flat query/key indices of two window cells (y, x), row-major
    log_spaced_offset       sign(d) log2(1 + 8|d|/(w_pre - 1)) / 3: Swin V2's log-spaced coordinate
    offset_range_growth     how far past its trained input range a bias function must reach at a larger window
    t5_length_summary       Experiment 4's record in the few lines this section's argument needs

All bucket ids come from `mlbook.transformer.positional.relative_position_bucket`; nothing here
re-implements the bucketing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from mlbook.transformer.positional import RelativePositionBias2D, relative_position_bucket
from mlbook.transformer.validate import check_int, check_positive_float

__all__ = [
    "BucketLayout",
    "bucket_layout",
    "untrained_offsets",
    "relative_bias_params",
    "per_distance_params",
    "t5_param_count",
    "bias_bytes",
    "diagonal_spread",
    "swin_table_entries",
    "patch_grid",
    "window_pairs",
    "swin_index",
    "swin_pair",
    "log_spaced_offset",
    "offset_range_growth",
    "t5_length_summary",
]


# ---------------------------------------------------------------------------
# T5 buckets
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class BucketLayout:
    """Distance ranges of every T5 bucket, read off `relative_position_bucket` by probing.

    `past[b]` / `future[b]` is the (first, last) distance |j - i| of the keys before / after
    the query that land in bucket b, last = None for the open-ended final bucket. In the causal
    case there is no future half (future keys all go to bucket 0 and are masked).
    """

    num_buckets: int
    max_distance: int
    bidirectional: bool
    buckets_per_direction: int
    past: dict[int, tuple[int, int | None]]
    future: dict[int, tuple[int, int | None]]
    probe: int

    @property
    def exact_past(self) -> list[int]:
        """Distances before the query (0 = the query's own position) that have a bucket to themselves."""
        return [lo for lo, hi in self.past.values() if hi == lo]

    @property
    def exact_future(self) -> list[int]:
        """Distances after the query that have a bucket to themselves (bidirectional only)."""
        return [lo for lo, hi in self.future.values() if hi == lo]

    @property
    def last_bucket_from(self) -> int:
        """The smallest past distance that lands in the final, open-ended bucket."""
        return max(lo for lo, _ in self.past.values())

    @property
    def unused_buckets(self) -> list[int]:
        """Bucket ids that no offset ever reaches."""
        used = set(self.past) | set(self.future)
        return [b for b in range(self.num_buckets) if b not in used]

    def rows(self) -> list[tuple[str, int, str, int | None]]:
        """(direction, bucket, distances, width) per used bucket, in bucket order."""
        out = []
        for direction, table in (("past", self.past), ("future", self.future)):
            for b in sorted(table):
                lo, hi = table[b]
                span = f"{lo}" if hi == lo else (f"{lo}..{hi}" if hi is not None else f">= {lo}")
                out.append((direction, b, span, None if hi is None else hi - lo + 1))
        return out

    def __repr__(self) -> str:
        kind = "bidirectional" if self.bidirectional else "causal"
        head = f"num_buckets={self.num_buckets}, max_distance={self.max_distance}, {kind}"
        lines = [head, f"{'direction':9s}  {'bucket':>6s}  {'distances |j - i|':>17s}  {'width':>5s}"]
        for direction, b, span, width in self.rows():
            lines.append(f"{direction:9s}  {b:6d}  {span:>17s}  {'open' if width is None else width:>5}")
        return "\n".join(lines)


def _ranges(distances: torch.Tensor, buckets: torch.Tensor, probe: int) -> dict[int, tuple[int, int | None]]:
    out: dict[int, tuple[int, int | None]] = {}
    for d, b in zip(distances.tolist(), buckets.tolist()):
        lo, _ = out.get(b, (d, d))
        out[b] = (lo, d)
    # the bucket still growing at the probe's edge is open-ended
    top = buckets[-1].item()
    out[top] = (out[top][0], None) if out[top][1] == probe else out[top]
    return out


def bucket_layout(num_buckets: int = 32, max_distance: int = 128, bidirectional: bool = True) -> BucketLayout:
    """Probe `relative_position_bucket` at every distance up to 4 * max_distance in each direction.

    With the defaults (32 buckets, bidirectional, max_distance 128) each direction gets 16
    buckets: distances 0..7 before the query and 1..7 after it have their own bucket; beyond
    that buckets widen logarithmically; the last one starts at 91 (not at 128) and is open-ended.
    """
    relative_position_bucket(torch.zeros(1, dtype=torch.long), bidirectional, num_buckets, max_distance)  # validates
    probe = 4 * max_distance
    n = torch.arange(probe + 1)  # (probe + 1,) distances
    past = relative_position_bucket(-n, bidirectional, num_buckets, max_distance)  # key before the query: j - i = -n
    layout_past = _ranges(n, past, probe)
    layout_future: dict[int, tuple[int, int | None]] = {}
    if bidirectional:
        future = relative_position_bucket(n[1:], bidirectional, num_buckets, max_distance)  # j - i = +n, n >= 1
        layout_future = _ranges(n[1:], future, probe)
    per_direction = num_buckets // 2 if bidirectional else num_buckets
    return BucketLayout(num_buckets, max_distance, bidirectional, per_direction, layout_past, layout_future, probe)


def untrained_offsets(
    train_len: int, eval_len: int, num_buckets: int = 32, max_distance: int = 128, bidirectional: bool = True
) -> list[int]:
    """Offsets j - i that occur at eval_len but whose bucket no offset at train_len ever used.

    A sequence of length T has offsets -(T-1) .. T-1 (only <= 0 in the causal case). An offset
    past the trained range is harmless iff it shares a bucket with a trained offset, which holds
    for all of them once train_len - 1 reaches the final bucket's first distance.
    """
    check_int("train_len", train_len, 1)
    check_int("eval_len", eval_len, 1)

    def offsets(T: int) -> torch.Tensor:
        return torch.arange(-(T - 1), T if bidirectional else 1)  # (n,) j - i

    trained = set(relative_position_bucket(offsets(train_len), bidirectional, num_buckets, max_distance).tolist())
    ev = offsets(eval_len)
    buckets = relative_position_bucket(ev, bidirectional, num_buckets, max_distance)
    return [int(o) for o, b in zip(ev.tolist(), buckets.tolist()) if b not in trained]


def relative_bias_params(num_buckets: int = 32, n_heads: int = 8, n_stacks: int = 1) -> int:
    """Parameters of T5's relative bias: one (num_buckets, H) table per stack, shared by its layers.

    num_buckets * H * n_stacks. An encoder-decoder has two stacks (T5-small: 32 * 8 * 2 = 512).
    """
    check_int("num_buckets", num_buckets, 1)
    check_int("n_heads", n_heads, 1)
    check_int("n_stacks", n_stacks, 1)
    return num_buckets * n_heads * n_stacks


def per_distance_params(T: int, n_heads: int = 8) -> int:
    """Parameters of an unbucketed relative bias over length T: one per signed offset and head, (2T - 1) * H."""
    check_int("T", T, 1)
    check_int("n_heads", n_heads, 1)
    return (2 * T - 1) * n_heads


def t5_param_count(
    vocab_size: int = 32128, d_model: int = 512, d_kv: int = 64, n_heads: int = 8, d_ff: int = 2048,
    n_layers: int = 6, num_buckets: int = 32,
) -> int:
    """Parameters of an original T5 (Raffel et al., 2020): shared token table V d, n_layers encoder
    blocks (attention 4 d H d_kv, ReLU MLP 2 d d_ff, two RMS-norm scales 2d), as many decoder blocks
    (plus cross-attention 4 d H d_kv and a third scale d), two final scales 2d, one relative bias
    per stack 2 * num_buckets * H, output head tied to the token table. Defaults: T5-small, 60,506,624.
    """
    for name, value in (("vocab_size", vocab_size), ("d_model", d_model), ("d_kv", d_kv), ("n_heads", n_heads),
                        ("d_ff", d_ff), ("n_layers", n_layers), ("num_buckets", num_buckets)):
        check_int(name, value, 1)
    d, attn = d_model, 4 * d_model * n_heads * d_kv
    encoder = n_layers * (attn + 2 * d * d_ff + 2 * d)
    decoder = n_layers * (2 * attn + 2 * d * d_ff + 3 * d)
    return vocab_size * d + encoder + decoder + 2 * d + relative_bias_params(num_buckets, n_heads, n_stacks=2)


def bias_bytes(n_heads: int, T_q: int, T_k: int, bytes_per_value: float = 4.0, batch: int = 1) -> int:
    """Bytes of a materialised additive bias (batch, H, T_q, T_k): batch * H * T_q * T_k * bytes_per_value.

    T5's bias is shared over the batch (batch = 1); the attention scores it is added to are
    batch * H * T_q * T_k values per layer on the unfused path. H = 8, T = 4096, fp32: 512 MiB.
    """
    check_int("n_heads", n_heads, 1)
    check_int("T_q", T_q, 1)
    check_int("T_k", T_k, 1)
    bytes_per_value = check_positive_float("bytes_per_value", bytes_per_value)
    check_int("batch", batch, 1)
    return int(round(batch * n_heads * T_q * T_k * bytes_per_value))


def diagonal_spread(bias: torch.Tensor) -> float:
    """max over diagonals j - i = const of (max - min) of a (..., T_q, T_k) bias map.

    0 means every entry depends on j - i alone (translation invariance); any other value is
    the largest disagreement along one diagonal, over all leading (head) dimensions.
    """
    if not isinstance(bias, torch.Tensor) or bias.dim() < 2:
        raise TypeError("bias must be a tensor of shape (..., T_q, T_k)")
    T_q, T_k = bias.shape[-2:]
    worst = 0.0
    for k in range(-(T_q - 1), T_k):
        diag = torch.diagonal(bias, offset=k, dim1=-2, dim2=-1)  # (..., n) entries with j - i = k
        worst = max(worst, float((diag.amax(-1) - diag.amin(-1)).max()))
    return worst


# ---------------------------------------------------------------------------
# Swin: the 2-D table
# ---------------------------------------------------------------------------


def swin_table_entries(window: int) -> int:
    """Rows of Swin's relative bias table for a window x window window: (2w - 1)^2 offsets (dy, dx),
    each coordinate in [-(w - 1), w - 1]. w = 7: 169. One table over Swin's whole stage-1 grid of a
    224 x 224 image (56 x 56 patches, see `patch_grid`): 12,321; over its 224 x 224 pixels: 199,809."""
    check_int("window", window, 1)
    return (2 * window - 1) ** 2


def patch_grid(image_size: int = 224, patch_size: int = 4) -> int:
    """Side of the token grid of an image_size x image_size image cut into patch_size x patch_size
    patches: image_size / patch_size. Swin's tokens at stage 1 are 4 x 4 patches (Liu et al., 2021),
    so a 224 x 224 image is a 56 x 56 grid of 3,136 tokens, cut into 8 x 8 windows of 7 x 7."""
    check_int("image_size", image_size, 1)
    check_int("patch_size", patch_size, 1)
    if image_size % patch_size:
        raise ValueError(f"image_size={image_size} is not a multiple of patch_size={patch_size}; "
                         "pad or resize the image to a multiple of the patch size")
    return image_size // patch_size


def window_pairs(window: int) -> int:
    """(query cell, key cell) pairs in a window x window window: (w^2)^2. A bias with a parameter per
    pair (no sharing by offset) would need this many per head: 2,401 for w = 7."""
    check_int("window", window, 1)
    return (window * window) ** 2


def swin_index(window: int) -> torch.Tensor:
    """The (w^2, w^2) long tensor of table rows used by `RelativePositionBias2D(window, H)`:
    index[q, k] = (dy + w - 1)(2w - 1) + (dx + w - 1), (dy, dx) = cell q minus cell k, cells row-major."""
    check_int("window", window, 1)
    if window > 32:
        raise ValueError(f"window={window} would build a {window ** 2} x {window ** 2} index; use window <= 32")
    with torch.random.fork_rng(devices=[]):  # the module initialises a table we do not need
        return RelativePositionBias2D(window, 1).index.clone()  # (w^2, w^2)


def swin_pair(window: int, query: tuple[int, int], key: tuple[int, int]) -> tuple[int, int]:
    """Flat (row-major) indices of the query cell (y, x) and key cell (y, x) in a w x w window."""
    check_int("window", window, 1)
    for name, cell in (("query", query), ("key", key)):
        if len(cell) != 2 or not all(isinstance(c, int) and 0 <= c < window for c in cell):
            raise ValueError(f"{name} must be a cell (y, x) with 0 <= y, x < window={window}, got {cell!r}")
    return query[0] * window + query[1], key[0] * window + key[1]


# ---------------------------------------------------------------------------
# Swin V2: a continuous bias over log-spaced offsets
# ---------------------------------------------------------------------------


def log_spaced_offset(delta: torch.Tensor | float | int, pretrained_window: int) -> torch.Tensor:
    """Swin V2's log-spaced coordinate, elementwise, float64 (Liu et al., 2022, as released):

        sign(d) * log2(1 + 8 |d| / (w_pre - 1)) / log2(8)

    The offset d is first rescaled so that the largest offset of the pre-training window w_pre,
    w_pre - 1, maps to 8, then taken on a base-2 logarithm divided by log2(8) = 3, so that offset maps
    to log2(9) / 3 = 1.057. Hugging Face's `Swinv2SelfAttention.create_coords_table_and_index` builds
    the same table (with w_pre its `pretrained_window_size`, or its own window when that is 0). Swin V2
    feeds each offset (dy, dx), so transformed, to a small MLP that outputs one bias per head.
    """
    check_int("pretrained_window", pretrained_window, 2)
    d = torch.as_tensor(delta, dtype=torch.float64)
    return torch.sign(d) * torch.log2(1 + 8 * d.abs() / (pretrained_window - 1)) / math.log2(8)


def offset_range_growth(old_window: int, new_window: int, log_spaced: bool = True) -> float:
    """How far past the largest input it was trained on a bias function must extrapolate when the
    window grows from old_window (pre-training) to new_window: (f(new - 1) - f(old - 1)) / f(old - 1),
    with f the identity (raw offsets) or Swin V2's `log_spaced_offset` with w_pre = old_window;
    offsets in a w x w window reach w - 1.

    Window 8 -> 16: 8 / 7 = 1.14 on raw offsets; log2(1 + 8 * 15 / 7) / log2(9) - 1 = 0.32 log-spaced.
    """
    check_int("old_window", old_window, 2)
    check_int("new_window", new_window, 2)
    if log_spaced:
        old = float(log_spaced_offset(old_window - 1, old_window))
        new = float(log_spaced_offset(new_window - 1, old_window))
    else:
        old, new = float(old_window - 1), float(new_window - 1)
    return (new - old) / old


# ---------------------------------------------------------------------------
# Experiment 4, as this section cites it
# ---------------------------------------------------------------------------


def t5_length_summary(budget: str = "full") -> str:
    """Experiment 4 (T5 bias trained at length 8, tested at 16) in the lines section 2.3 argues from:
    each model's mean ± sd at 16, then the paired differences (95% intervals, the experiment's
    verdicts) that say whether sharing trained buckets is enough. From the saved record of
    `mlbook.experiments.exp_t5_length`; without one, how to make it."""
    from mlbook.experiments.common import mean_sd, pm
    from mlbook.experiments.exp_t5_length import comparisons, metric
    from mlbook.experiments.registry import command_for, load_result

    if budget not in ("quick", "full"):
        raise ValueError(f"budget must be 'quick' or 'full', got {budget!r}")
    record = load_result("t5_length", budget)
    if record is None:
        return f"No saved {budget}-budget record for 't5_length'; make one with:\n  {command_for('t5_length', budget)}"
    r = record["results"]
    T, n, k = r["train_len"], r["eval_lens"][-1], len(r["seeds"])
    names = {"t5": "T5 defaults (32 buckets, max 128)", "t5_tail": "t5_tail (8 buckets, max 8)",
             "learned16": "learned table, 16 rows", "learned": "learned table, 8 rows"}
    lines = [f"Experiment 4: reversal trained at length {T}, tested at {n}, {k} seeds (mean ± sd)"]
    for v in ("t5", "t5_tail", "learned16", "learned"):
        if v not in r["variants"]:
            continue
        em = mean_sd(metric(record, v, n))
        if em["n"] == 0:
            lines.append(f"  {names[v]:36s} cannot run at {n} (the library refuses)")
            continue
        tok = mean_sd(metric(record, v, n, "token_accuracy"))
        lines.append(f"  {names[v]:36s} exact match {pm(em, 2)}, token accuracy {pm(tok, 2)}")
    c = comparisons(record)
    lines.append("paired differences, 95% intervals:")
    for title, keys in ((f"T5 defaults, at {n} - at {T}", ("t5_long_vs_train_em", "t5_long_vs_train_tok")),
                        (f"t5_tail - T5 defaults, at {n}", ("tail_vs_t5_em", "tail_vs_t5_tok")),
                        (f"t5_tail, at {n} - at {T}", ("tail_long_vs_train_em", "tail_long_vs_train_tok"))):
        parts = [f"{c[key]['measure']} {pm(c[key], 2)} ({c[key]['verdict']})" for key in keys if key in c]
        if parts:
            lines.append(f"  {title + ':':30s} " + "; ".join(parts))
    return "\n".join(lines)

