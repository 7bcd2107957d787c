"""Key/value caches for incremental decoding: a plain append-only cache and a StreamingLLM sink cache.

One cache object serves one attention layer. Both expose the same small interface used by
`MultiHeadAttention`:

    cache.length            tokens currently held
    cache.seen              tokens ever written (== length for the plain cache)
    cache.rotates_on_read   False: keys are stored already rotated at their absolute positions
                            True:  keys are stored unrotated and rotated by slot when read
    cache.update(k, v)      append (B, H, T, d) keys and values; returns everything held
"""

from __future__ import annotations

import torch

from mlbook.transformer.validate import check_int

__all__ = ["KVCache", "SinkCache"]


def _appended(held: torch.Tensor | None, new: torch.Tensor) -> torch.Tensor:
    """`held` (B, H, length, d_head) with `new` (B, H, T, d_head) appended along time; `new` if nothing is held."""
    return new if held is None else torch.cat([held, new], dim=2)  # (B, H, length + T, d_head)


def _check_kv(k: torch.Tensor, v: torch.Tensor) -> None:
    if not isinstance(k, torch.Tensor) or not isinstance(v, torch.Tensor):
        raise TypeError("k and v must be torch.Tensors of shape (B, H, T, d_head)")
    if k.dim() != 4 or v.dim() != 4 or k.shape[:3] != v.shape[:3]:
        raise ValueError(f"k and v must be (B, H, T, d_head) with matching B, H, T; got {tuple(k.shape)} and {tuple(v.shape)}")
    if k.dtype != v.dtype or k.device != v.device:
        raise TypeError(f"k and v must share dtype and device, got {k.dtype} on {k.device} and {v.dtype} on {v.device}")
    if not k.is_floating_point():
        raise TypeError(f"k and v must be floating-point tensors, got dtype {k.dtype}")


def _check_matches(cache: "KVCache | SinkCache", k: torch.Tensor, v: torch.Tensor) -> None:
    """New k, v must continue what the cache holds: same B, H, d_head (v's too), dtype and device."""
    held_k, held_v = cache.k, cache.v
    if held_k is None or held_v is None:
        return
    name = type(cache).__name__
    if k.shape[0] != held_k.shape[0]:
        raise ValueError(f"{name} holds a batch of {held_k.shape[0]} sequences but got k, v with batch size "
                         f"{k.shape[0]}; a cache serves one batch from start to end: call reset() (or make new "
                         f"caches) to start another")
    if (k.shape[1], k.shape[3], v.shape[3]) != (held_k.shape[1], held_k.shape[3], held_v.shape[3]):
        raise ValueError(f"{name} holds k {tuple(held_k.shape)} and v {tuple(held_v.shape)} (B, H, T, d_head), got "
                         f"k {tuple(k.shape)} and v {tuple(v.shape)}: the heads and head widths must match")
    if k.dtype != held_k.dtype or k.device != held_k.device:
        raise TypeError(f"{name} holds {held_k.dtype} tensors on {held_k.device}, got {k.dtype} on {k.device}; "
                        f"convert them, or call reset() to start over")


class KVCache:
    """Append-only cache with a fixed capacity (the longest sequence it may hold).

    Keys go in already rotated at their absolute positions, so they stay valid for every
    later query: the new token's position is simply `length` before the update.
    """

    rotates_on_read = False

    def __init__(self, capacity: int) -> None:
        self.capacity = check_int("capacity", capacity, 1)
        self.k: torch.Tensor | None = None  # (B, H, length, d_head)
        self.v: torch.Tensor | None = None  # (B, H, length, d_head)

    @property
    def length(self) -> int:
        return 0 if self.k is None else self.k.shape[2]

    @property
    def seen(self) -> int:
        return self.length

    def update(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Append k, v (B, H, T, d_head); returns all keys and values held, (B, H, length, d_head)."""
        _check_kv(k, v)
        _check_matches(self, k, v)
        if self.length + k.shape[2] > self.capacity:
            raise ValueError(
                f"KVCache is full: it holds {self.length} of capacity={self.capacity} tokens and cannot take "
                f"{k.shape[2]} more; create it with a larger capacity, or use SinkCache for unbounded streams"
            )
        self.k, self.v = _appended(self.k, k), _appended(self.v, v)  # (B, H, length + T, d_head) each
        return self.k, self.v

    def reset(self) -> None:
        self.k = self.v = None


class SinkCache:
    """StreamingLLM cache (Xiao et al., 2023): the first `n_sink` tokens plus the last `window`.

    When full, the oldest non-sink token is evicted. Positions are assigned by slot: the token
    in slot s is treated as position s, so no rotation or bias ever goes beyond
    n_sink + window - 1, however long the stream. Keys are therefore stored unrotated and
    rotated by slot each time they are read. n_sink=0 gives a plain sliding window.
    """

    rotates_on_read = True

    def __init__(self, n_sink: int, window: int) -> None:
        self.n_sink = check_int("n_sink", n_sink, 0)
        self.window = check_int("window", window, 1)
        self.capacity = n_sink + window
        self.k: torch.Tensor | None = None  # (B, H, length, d_head), unrotated
        self.v: torch.Tensor | None = None
        self.seen = 0

    @property
    def length(self) -> int:
        return 0 if self.k is None else self.k.shape[2]

    def kept_positions(self) -> list[int]:
        """Absolute stream positions of the tokens held, in slot order."""
        n = self.length
        sinks = list(range(min(self.n_sink, n)))
        rest = n - len(sinks)
        return sinks + list(range(self.seen - rest, self.seen))

    def update(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Append k, v (B, H, T, d_head), evict past capacity; returns what is held (unrotated keys)."""
        _check_kv(k, v)
        _check_matches(self, k, v)
        T = k.shape[2]
        if T > 1 and self.length + T > self.capacity:
            raise ValueError(
                f"SinkCache can take a chunk of {T} tokens only while it fits (held {self.length}, "
                f"capacity n_sink + window = {self.capacity}); feed tokens one at a time once the cache is full"
            )
        self.k, self.v = _appended(self.k, k), _appended(self.v, v)  # (B, H, length + T, d_head) each
        self.seen += T
        if self.length > self.capacity:  # evict the oldest token after the sinks
            keep = torch.cat([torch.arange(self.n_sink), torch.arange(self.length - self.window, self.length)])
            keep = keep.to(self.k.device)
            self.k = self.k.index_select(2, keep)  # (B, H, capacity, d_head)
            self.v = self.v.index_select(2, keep)
        return self.k, self.v

    def reset(self) -> None:
        self.k = self.v = None
        self.seen = 0
