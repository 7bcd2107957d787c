"""Tests for mlbook.exercises.after_rope: the reference answers pass, each planted mistake is named."""

from __future__ import annotations

import torch

from mlbook.analysis.after_rope import windowed_kv_bytes
from mlbook.exercises.after_rope import check_mrope_ids, check_windowed_cache
from mlbook.transformer.multimodal import mrope_position_ids


def _mrope(layout, *, advance_by_tokens=False, swap_hw=False, advance_by_spatial=False):
    parts, start = [], 0
    for item in layout:
        if isinstance(item, tuple):
            t, h, w = item
            ids = torch.stack(torch.meshgrid(torch.arange(t), torch.arange(h), torch.arange(w), indexing="ij"))
            ids = ids.reshape(3, -1) + start
            if swap_hw:
                ids = ids[[0, 2, 1]]
            parts.append(ids)
            if advance_by_spatial:  # transformers 5.15's get_rope_index: start + max(h, w)
                start += max(h, w)
            else:
                start = start + t * h * w if advance_by_tokens else int(ids.max()) + 1
        else:
            parts.append(torch.arange(start, start + item).expand(3, item))
            start += item
    return torch.cat(parts, dim=1)


def test_mrope_reference_and_mistakes(capsys):
    assert check_mrope_ids(mrope_position_ids)
    assert check_mrope_ids(lambda layout: _mrope(layout).tolist())  # lists are fine
    assert not check_mrope_ids(lambda layout: _mrope(layout, advance_by_tokens=True))
    assert "largest extent" in capsys.readouterr().out
    assert not check_mrope_ids(lambda layout: _mrope(layout, swap_hw=True))
    assert "swapped" in capsys.readouterr().out
    # resuming at start + max(h, w) is right for images and wrong for a video with t > max(h, w)
    assert not check_mrope_ids(lambda layout: _mrope(layout, advance_by_spatial=True))
    out = capsys.readouterr().out
    assert "max(h, w)" in out and "[2, (4, 1, 2), 3]" in out
    assert not check_mrope_ids(lambda layout: 1 / 0)
    assert "ZeroDivisionError" in capsys.readouterr().out


def _cache(types, window, C, h, d, b, *, halve=False, no_cap=False, no_min=False, chunked_global=False,
           chunk_exact=False):
    per = (1 if halve else 2) * h * d * b
    total = 0
    for t in types:
        local = t == "sliding_attention" or (t == "chunked_attention" and not chunked_global)
        if t == "chunked_attention" and chunk_exact:  # only the current chunk: (C - 1) mod W + 1 tokens
            total += ((C - 1) % window + 1) * per
        elif local and not no_cap:
            total += (window if no_min else min(C, window)) * per
        else:
            total += C * per
    return int(total)


def test_windowed_cache_reference_and_mistakes(capsys):
    assert check_windowed_cache(windowed_kv_bytes)
    assert check_windowed_cache(_cache)
    # the tightest count for chunked layers (20,000 tokens, chunk 8,192: 3,616 held) is right too
    assert check_windowed_cache(lambda *a: _cache(*a, chunk_exact=True))
    assert (20000 - 1) % 8192 + 1 == 3616
    for kw, words in (({"halve": True}, "keys and values"), ({"no_cap": True}, "every token in every layer"),
                      ({"no_min": True}, "shorter than the window"), ({"chunked_global": True}, "Chunked layers")):
        assert not check_windowed_cache(lambda *a, kw=kw: _cache(*a, **kw))
        assert words in capsys.readouterr().out, kw


def _local_rule(types, window, C, h, d, b, *, sliding, chunked):
    held = {"full_attention": C, "sliding_attention": sliding(C, window), "chunked_attention": chunked(C, window)}
    return int(sum(held[t] for t in types) * 2 * h * d * b)


def test_windowed_cache_sliding_is_not_chunked(capsys):
    # the chunk rule applied to sliding layers too: right for chunked layers, wrong for a sliding one past its window
    chunk = lambda C, W: (C - 1) % W + 1  # noqa: E731
    assert not check_windowed_cache(lambda *a: _local_rule(*a, sliding=chunk, chunked=chunk))
    out = capsys.readouterr().out
    assert "never drops a whole chunk" in out and "window 4096, context 10,000" in out
    assert (10000 - 1) % 4096 + 1 == 1808


def test_windowed_cache_accepts_hf_between_steps(capsys):
    # transformers' DynamicSlidingWindowLayer keeps the last W - 1 tokens between steps (cache_utils.py)
    keep = lambda C, W: min(C, W - 1)  # noqa: E731
    assert check_windowed_cache(lambda *a: _local_rule(*a, sliding=keep, chunked=keep))
    assert "window - 1" in capsys.readouterr().out
    # the reference's message does not claim W - 1
    assert check_windowed_cache(windowed_kv_bytes)
    assert "window - 1" not in capsys.readouterr().out
    # W - 1 on sliding layers only, W on chunked ones, is no consistent rule: rejected
    assert not check_windowed_cache(lambda *a: _local_rule(*a, sliding=keep, chunked=lambda C, W: min(C, W)))
