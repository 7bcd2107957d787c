"""Systems arithmetic for sections 4 and 5: KV-cache sizes and other serving costs."""

from __future__ import annotations

from mlbook.transformer.positional import _check_int, _check_positive_float

__all__ = ["kv_cache_bytes"]


def kv_cache_bytes(
    n_layers: int, n_kv_heads: int, d_head: int, bytes_per_value: float = 2.0, context_len: int = 1, batch: int = 1
) -> int:
    """Bytes held by a KV cache: 2 (keys and values) * n_layers * n_kv_heads * d_head * bytes_per_value
    per token, times context_len tokens and batch sequences.

    A 7B-class model (32 layers, 32 KV heads, d_head 128, fp16) holds 2 * 32 * 32 * 128 * 2 =
    524,288 bytes = 0.5 MiB per token. Grouped-query attention divides it by n_heads / n_kv_heads;
    an 8-bit cache (bytes_per_value = 1) halves it.
    """
    _check_int("n_layers", n_layers, 1)
    _check_int("n_kv_heads", n_kv_heads, 1)
    _check_int("d_head", d_head, 1)
    bytes_per_value = _check_positive_float("bytes_per_value", bytes_per_value)
    _check_int("context_len", context_len, 0)
    _check_int("batch", batch, 0)
    per_token = 2 * n_layers * n_kv_heads * d_head * bytes_per_value
    return int(round(per_token * context_len * batch))
