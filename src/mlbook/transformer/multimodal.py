"""Multimodal RoPE (M-RoPE, Qwen2-VL) and 2-D RoPE for image patches.

A text token has one position; an image patch has a row and a column, a video patch also a frame.
M-RoPE (Wang et al., 2024, "Qwen2-VL", section 2.1) gives every token THREE position ids, (t, h, w),
and splits a head's frequency pairs into three sections: the first `section[0]` pairs turn with t,
the next `section[1]` with h, the last `section[2]` with w. Each pair keeps its frequency from the
usual ladder theta_i = base^(-2i/d_head); only the position that multiplies it changes:

    angle_i = pos[axis(i)] * theta_i,   axis(i) = 0 for i < s0, 1 for s0 <= i < s0 + s1, 2 after

Qwen2-VL-7B ships `"rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]}` with
d_head = 128 (64 pairs): time takes the 16 fastest pairs, height the next 24, width the 24 slowest.

Position ids (`mrope_position_ids`, Qwen2-VL's `get_rope_index`): text tokens have t = h = w = their
running index, so on text alone M-RoPE is exactly RoPE. An image of (t, h, w) patches (after the
vision encoder's 2 x 2 merge) placed at start index s gives its patch at frame a, row b, column c the
ids (s + a, s + b, s + c); the text after it resumes at one more than the largest id used. An image
therefore advances the text positions by max(t, h, w), not by its t * h * w tokens.

Within one image, the score between two patches depends only on (dt, dh, dw): each section is RoPE
on its own axis. That is the rotary counterpart of Swin's 2-D relative bias table (section 2.3),
which stores one learned number per (dh, dw) offset instead. With t fixed (one frame) M-RoPE reduces
to axial 2-D RoPE for vision transformers (Heo et al., 2024), which `rope_2d_position_ids` builds.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from mlbook.transformer.positional import apply_rotary, frequency_ladder
from mlbook.transformer.validate import check_even_d, check_int, check_positive_float

__all__ = [
    "QWEN2_VL_SECTION",
    "check_section",
    "section_axes",
    "mrope_position_ids",
    "rope_2d_position_ids",
    "mrope_angles",
    "apply_mrope",
]

QWEN2_VL_SECTION: tuple[int, int, int] = (16, 24, 24)  # Qwen2-VL-7B config.json: mrope_section, d_head 128
_AXES = ("time", "height", "width")


def check_section(section: Sequence[int], d_head: int) -> tuple[int, int, int]:
    """A section (time, height, width) of non-negative ints summing to d_head / 2 pairs; ValueError otherwise."""
    check_even_d("d_head", d_head)
    s = tuple(section)
    if len(s) != 3 or any(isinstance(v, bool) or not isinstance(v, int) or v < 0 for v in s):
        raise ValueError(f"section must be three non-negative ints (time, height, width pairs), got {section!r}")
    if sum(s) != d_head // 2:
        raise ValueError(f"section {list(s)} sums to {sum(s)} pairs but d_head={d_head} has {d_head // 2}; "
                         f"the three parts must cover every pair (Qwen2-VL-7B: [16, 24, 24] for d_head 128)")
    return s  # type: ignore[return-value]


def section_axes(section: Sequence[int], d_head: int) -> torch.Tensor:
    """(d_head/2,) the axis each pair turns with: 0 time, 1 height, 2 width, in order of frequency."""
    s = check_section(section, d_head)
    return torch.repeat_interleave(torch.arange(3), torch.tensor(s))  # (d_head/2,)



def mrope_position_ids(layout: Sequence[int | tuple[int, int, int]]) -> torch.Tensor:
    """(3, T) position ids (time, height, width) of a sequence of text runs and images, as Qwen2-VL numbers them.

    `layout` lists the pieces in order: an int n is n text tokens, a tuple (t, h, w) an image or video
    of t frames of h x w patches in the language model's grid (after the 2 x 2 merge; Qwen2-VL's
    `image_grid_thw` divided by `spatial_merge_size` in h and w), laid out frame by frame, row by row.
    """
    parts: list[torch.Tensor] = []
    start = 0  # the next free index: one more than the largest id used so far
    for k, item in enumerate(layout):
        if isinstance(item, tuple):
            if len(item) != 3:
                raise ValueError(f"layout[{k}]={item!r}: an image is a (t, h, w) tuple of patch counts")
            t, h, w = (check_int(f"layout[{k}][{j}]", v, 1) for j, v in enumerate(item))
            ids = torch.stack(torch.meshgrid(torch.arange(t), torch.arange(h), torch.arange(w), indexing="ij"))
            parts.append(ids.reshape(3, -1) + start)  # (3, t*h*w) frame, row, column offsets from start
        else:
            n = check_int(f"layout[{k}]", item, 0)
            parts.append(torch.arange(start, start + n).expand(3, n))  # (3, n) text: the same id on all three
        if parts[-1].numel():
            start = int(parts[-1].max()) + 1
    if not parts:
        return torch.zeros(3, 0, dtype=torch.long)
    return torch.cat(parts, dim=1)  # (3, T)


def rope_2d_position_ids(h: int, w: int) -> torch.Tensor:
    """(3, h*w) ids of an h x w patch grid, row-major: time 0, height = row, width = column (axial 2-D RoPE)."""
    return mrope_position_ids([(1, h, w)])  # (3, h*w)


def mrope_angles(position_ids: torch.Tensor, d_head: int, section: Sequence[int] = QWEN2_VL_SECTION,
                 base: float = 10000.0) -> torch.Tensor:
    """(T, d_head/2) angles: pair i turns by position_ids[axis(i)] * theta_i, theta_i = base^(-2i/d_head)."""
    check_positive_float("base", base, above=1.0)
    axes = section_axes(section, d_head)  # (d_head/2,)
    if not isinstance(position_ids, torch.Tensor) or position_ids.dim() != 2 or position_ids.shape[0] != 3:
        raise ValueError("position_ids must be a (3, T) tensor of (time, height, width) ids, e.g. from "
                         "mrope_position_ids")
    theta = frequency_ladder(d_head, base)  # (d_head/2,) the usual ladder, unchanged
    pos = position_ids.to(torch.float32)[axes]  # (d_head/2, T) each pair's own axis
    return pos.T * theta  # (T, d_head/2)


def apply_mrope(x: torch.Tensor, position_ids: torch.Tensor, section: Sequence[int] = QWEN2_VL_SECTION,
                base: float = 10000.0) -> torch.Tensor:
    """Rotate x (..., T, d_head) by M-RoPE, half layout (Qwen2-VL's `apply_multimodal_rotary_pos_emb`)."""
    angle = mrope_angles(position_ids, x.shape[-1], section, base)  # (T, d_head/2)
    angle = torch.cat([angle, angle], dim=-1)  # (T, d_head) pair i at columns i and i + d/2
    return apply_rotary(x, angle.cos(), angle.sin(), "half")  # (..., T, d_head)
