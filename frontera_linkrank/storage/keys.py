"""LMDB keys of page indices: 8-byte big-endian, so key order is index order."""

from collections.abc import Iterable

import numpy as np


def page_key(i: int) -> bytes:
    """The key of page index ``i``.

    >>> page_key(258).hex()
    '0000000000000102'
    """
    return int(i).to_bytes(8, "big")


def page_keys(idx: Iterable[int] | np.ndarray) -> list[bytes]:
    """Keys of the indices ``idx`` as a list (one numpy conversion instead of
    one ``int.to_bytes`` per index)."""
    raw = np.asarray(idx, ">u8").tobytes()
    return [raw[i : i + 8] for i in range(0, len(raw), 8)]


def key_page(key: bytes | memoryview) -> int:
    """The page index of a key (inverse of :func:`page_key`)."""
    return int.from_bytes(bytes(key), "big")


__all__ = ["key_page", "page_key", "page_keys"]
