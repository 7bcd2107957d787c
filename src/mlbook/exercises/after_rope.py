"""Checkers for section 2.8's exercises: M-RoPE position ids and the KV cache of a local/global stack.

Each compares the reader's function with the library (`transformer.multimodal.mrope_position_ids`,
`analysis.after_rope.windowed_kv_bytes`) on small cases and, when they disagree, names the usual
mistake. One verdict line, True or False; never raises.
"""

from __future__ import annotations

from typing import Any, Callable

import torch

from mlbook.analysis.after_rope import windowed_kv_bytes
from mlbook.exercises.common import (
    call_answer,
    describe,
    error_text,
    failure,
    guarded,
    number_answer,
    tensor_answer,
    verdict,
)
from mlbook.transformer.multimodal import mrope_position_ids

__all__ = ["check_mrope_ids", "check_windowed_cache"]

_LAYOUTS: tuple[list[Any], ...] = (
    [3, (1, 2, 3), 2],
    [2, (1, 3, 2), 1, (2, 2, 2), 3],
    [4],
    [(1, 2, 2), 3],
    [2, (4, 1, 2), 3],  # a video longer (4 frames) than it is high or wide: max(t, h, w) = t, not max(h, w)
)


def _ids(value: object, call: str) -> tuple[torch.Tensor | None, str | None]:
    """The reader's (3, T) answer as an int64 tensor, as (ids, None); else (None, a sentence naming the mistake).

    Three lists of ints are accepted as well as a tensor (any integer or whole-valued float dtype, any device)."""
    if isinstance(value, list) and value and all(isinstance(row, list) for row in value):
        try:
            value = torch.tensor(value)
        except (TypeError, ValueError, RuntimeError) as exc:
            return None, (f"Return a (3, T) tensor of integer ids; {call} returned {describe(value)} that "
                          f"torch.tensor cannot read ({error_text(exc)}).")
    t, problem = tensor_answer(value, call, "a (3, T) torch.Tensor of integer ids")
    if problem is not None:
        return None, problem
    if t.dim() != 2 or t.shape[0] != 3:
        return None, (f"{call} has shape {tuple(t.shape)}; it must be (3, T): one row per axis (time, height, "
                      "width), one column per token.")
    if t.dtype == torch.bool:
        return None, f"{call} has dtype torch.bool; position ids are integers (torch.long)."
    if t.is_floating_point():
        if not bool(torch.isfinite(t).all()):
            return None, f"{call} contains NaN or infinity; position ids are whole numbers (torch.long)."
        if not torch.equal(t, t.round()):
            return None, f"{call} has fractional ids; position ids are whole numbers (torch.long)."
    return t.long(), None


def _image_advances_by_tokens(layout: list[Any]) -> list[list[int]]:
    """The slip: text after an image resumes after t*h*w ids (as if the image were text), not after max(t, h, w)."""
    parts, start = [], 0
    for item in layout:
        if isinstance(item, tuple):
            ids = mrope_position_ids([item]) + start
            parts.append(ids)
            start += item[0] * item[1] * item[2]
        else:
            parts.append(torch.arange(start, start + item).expand(3, item))
            start += item
    return torch.cat(parts, dim=1).tolist()


def _image_advances_by_spatial(layout: list[Any]) -> list[list[int]]:
    """The slip of transformers 5.15's `get_rope_index`: after a grid, resume at start + max(h, w), forgetting the
    frames, so for a video with t > max(h, w) the next text overlaps the last frames' time ids."""
    parts, start = [], 0
    for item in layout:
        if isinstance(item, tuple):
            parts.append(mrope_position_ids([item]) + start)
            start += max(item[1], item[2])
        else:
            parts.append(torch.arange(start, start + item).expand(3, item))
            start += item
    return torch.cat(parts, dim=1).tolist()


@guarded
def check_mrope_ids(fn: Callable[[list], object]) -> bool:
    """Check fn(layout) -> (3, T) ids (time, height, width), Qwen2-VL's numbering (`mrope_position_ids`).

    layout: ints (runs of text tokens) and (t, h, w) tuples (images, frame by frame, row by row).
    """
    for layout in _LAYOUTS:
        want = mrope_position_ids(layout).tolist()
        value, err = call_answer(fn, layout)
        where = f"for layout {layout}"
        if err is not None:
            return verdict(False, failure(f"fn({layout})", err) + ".")
        ids, problem = _ids(value, f"fn({layout})")
        if problem is not None:
            return verdict(False, problem)
        got = ids.tolist()
        if got == want:
            continue
        if len(got[0]) != len(want[0]):
            return verdict(False, f"The sequence has {len(want[0])} tokens {where} (an image of t x h x w patches "
                                  f"is t*h*w tokens); your ids cover {len(got[0])}.")
        if got == _image_advances_by_tokens(layout):
            return verdict(False, f"The text after an image resumes at start + max(t, h, w), one past the image's "
                                  f"largest id, not t*h*w ids later ({where}): an image advances the positions by "
                                  "its largest extent.")
        if got == _image_advances_by_spatial(layout):
            return verdict(False, f"The text after a video resumes at start + max(h, w) in your ids {where}, which "
                                  "forgets the frames: a video of t > max(h, w) frames has time ids up to "
                                  "start + t - 1, so the text would reuse them. Resume one past the largest id, "
                                  "start + max(t, h, w), as Qwen's code does (transformers 5.15's get_rope_index "
                                  "has this slip).")
        if got == [want[0], want[2], want[1]]:
            return verdict(False, f"Height and width are swapped {where}: row 1 holds the row index (h), row 2 "
                                  "the column (w).")
        first = next(j for j in range(len(want[0])) if [r[j] for r in got] != [r[j] for r in want])
        return verdict(False, f"Token {first} {where} should have ids (t, h, w) = "
                              f"{tuple(r[first] for r in want)}; yours are {tuple(r[first] for r in got)}. Text "
                              "tokens carry the same id on all three axes; patch (a, b, c) of an image starting "
                              "at s gets (s + a, s + b, s + c).")
    return verdict(True, "Text is plain RoPE on all three axes, an image's patches get (start + frame, start + row, "
                         "start + column), and the text after it resumes one past the largest id.")


_STACKS: tuple[tuple[tuple[str, ...], int, int, int, int, float], ...] = (
    (("sliding_attention",) * 5 + ("full_attention",), 1024, 131072, 8, 256, 2.0),
    (("sliding_attention", "full_attention") * 3, 128, 100, 8, 64, 2.0),
    (("chunked_attention",) * 3 + ("full_attention",), 8192, 20000, 8, 128, 1.0),
    (("full_attention",) * 2, 16, 1000, 4, 32, 2.0),
    # a sliding layer past its window with context mod window != 0: it holds 4,096 tokens, not 10,000 mod 4,096
    (("sliding_attention",) * 3 + ("full_attention",), 4096, 10000, 8, 128, 2.0),
)


def _chunk_exact_bytes(types: tuple[str, ...], window: int, C: int, h: int, d: int, b: float) -> float:
    """The tightest count: a chunked layer needs only the tokens of the current chunk, (C - 1) mod W + 1 of them
    (its queries never see an earlier chunk), where Hugging Face's cache keeps a W-token buffer, min(C, W)."""
    per = 2 * h * d * b
    held = {"full_attention": C, "sliding_attention": min(C, window), "chunked_attention": (C - 1) % window + 1}
    return sum(held[t] for t in types) * per


def _held_bytes(types: tuple[str, ...], window: int, C: int, h: int, d: int, b: float, *, sliding: int,
                chunked: int) -> float:
    """Bytes when global layers hold C tokens, sliding layers `sliding` and chunked layers `chunked`."""
    held = {"full_attention": C, "sliding_attention": sliding, "chunked_attention": chunked}
    return sum(held[t] for t in types) * 2 * h * d * b


@guarded
def check_windowed_cache(fn: Callable[..., object]) -> bool:
    """Check fn(types, window, context_len, n_kv_heads, d_head, bytes_per_value) -> bytes of one request's
    KV cache: global ("full_attention") layers hold every token, any other layer the last `window`
    (min(context, window): the keys a sliding layer's last query attends to). Two other counts are right too
    and accepted: for a chunked layer only the current chunk's (context - 1) mod window + 1 tokens, and for every
    local layer the min(context, window - 1) tokens Hugging Face's `DynamicSlidingWindowLayer` keeps between
    steps (it appends the new token to them for the step itself)."""
    hf_between_steps = True  # every stack so far matched min(context, window - 1) on its local layers
    for types, window, C, h, d, b in _STACKS:
        want = windowed_kv_bytes(types, window, C, h, d, b)
        value, err = call_answer(fn, types, window, C, h, d, b)
        where = f"for {len(types)} layers ({types.count('full_attention')} global), window {window}, context {C:,}"
        if err is not None:
            return verdict(False, failure("Your function", err) + f" {where}.")
        got, problem = number_answer(value, f"Your function ({where})", "a number of bytes (an int or a float)")
        if problem is not None:
            return verdict(False, problem)
        between = _held_bytes(types, window, C, h, d, b, sliding=min(C, window - 1), chunked=min(C, window - 1))
        if got == between and hf_between_steps:
            continue
        hf_between_steps = hf_between_steps and got == between
        if got == want or got == _chunk_exact_bytes(types, window, C, h, d, b):
            continue
        per = 2 * h * d * b  # bytes per layer and token, keys and values
        n_global = types.count("full_attention")
        n_local = len(types) - n_global
        if got * 2 == want:
            return verdict(False, f"Half the answer {where}: a cache holds keys and values, 2 * n_kv_heads * d_head "
                                  "values per layer and token.")
        chunked_as_global = (sum(t != "sliding_attention" for t in types) * C
                             + types.count("sliding_attention") * min(C, window))
        if "chunked_attention" in types and got == chunked_as_global * per:
            return verdict(False, f"Chunked layers are local too {where}: a query sees only its own chunk, so the "
                                  "layer needs at most one chunk of keys.")
        if "sliding_attention" in types and got == _held_bytes(types, window, C, h, d, b,
                                                              sliding=(C - 1) % window + 1,
                                                              chunked=(C - 1) % window + 1):
            return verdict(False, f"Your sliding layers hold (context - 1) mod window + 1 tokens {where}, the "
                                  "count of a chunked layer: a sliding window moves one token at a time and never "
                                  "drops a whole chunk, so past the window it always holds the last "
                                  "min(context, window) tokens.")
        if got == len(types) * C * per:
            return verdict(False, f"You kept every token in every layer {where}: a local layer never looks back more "
                                  "than its window, so it keeps min(context, window) tokens.")
        if got == (n_global * C + n_local * window) * per and C < window:
            return verdict(False, f"The context ({C:,}) is shorter than the window {where}: a local layer holds "
                                  "min(context, window) tokens, not the whole window.")
        return verdict(False, f"Expected {want:,} bytes {where}; got {got:,}. Global layers: context tokens; local "
                              "layers: min(context, window); each token 2 * n_kv_heads * d_head * bytes_per_value.")
    if hf_between_steps:
        return verdict(True, "You count what Hugging Face's cache keeps between steps, min(context, window - 1) per "
                             "local layer; the step itself appends the new token, so the last query attends to "
                             "min(context, window) keys. Global layers grow with the context, local ones stop at "
                             "the window.")
    return verdict(True, "Global layers grow with the context, local ones stop at the window: Gemma 3's five-in-six "
                         "local layers at 1024 tokens keep its cache near a sixth of the all-global size at 128k.")
