"""LMDB keys: page indices (8-byte big-endian, so key order is index order)
and 20-byte fingerprints, one at a time or as numpy arrays."""

from collections.abc import Iterable, Sequence

import numpy as np

KEY = np.dtype("S20")  # a fingerprint in an array: compared and sorted as LMDB orders keys (bytewise)


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


def as_keys(fps: Sequence[bytes] | np.ndarray) -> np.ndarray:
    """Fingerprints (a sequence of 20-byte strings, or an array of ``V20``
    or ``S20``) as an array of ``S20``.

    >>> as_keys([b"a" * 20]).dtype
    dtype('S20')
    """
    if isinstance(fps, np.ndarray):
        if fps.dtype.itemsize != 20 or fps.dtype.kind not in "VS":
            raise ValueError(f"fingerprints are 20-byte strings, not {fps.dtype}")
        return np.ascontiguousarray(fps).reshape(-1).view(KEY)
    raw = b"".join(fps)
    if len(raw) != 20 * len(fps) or any(len(fp) != 20 for fp in fps):
        raise ValueError("fingerprints are 20-byte strings")
    return np.frombuffer(raw, KEY)


def key_list(keys: np.ndarray) -> list[bytes]:
    """An array of ``S20`` or ``V20`` as a list of 20-byte strings
    (trailing zero bytes kept, which ``tolist`` would drop)."""
    raw = keys.tobytes()
    return [raw[k : k + 20] for k in range(0, len(raw), 20)]


def search(table: tuple[np.ndarray, np.ndarray], keys: np.ndarray) -> np.ndarray:
    """The page of each fingerprint in ``table`` (fingerprints sorted, and
    their pages), or -1."""
    fp, page = table
    if not len(fp):
        return np.full(len(keys), -1, np.int64)
    pos = np.minimum(np.searchsorted(fp, keys), len(fp) - 1)
    return np.where(fp[pos] == keys, page[pos], -1)


def search_one(table: tuple[np.ndarray, np.ndarray], fp: bytes) -> int:
    """The page of one fingerprint in ``table`` (as :func:`search`), or -1,
    without building arrays of the key.

    >>> table = (as_keys([b"a" * 20, b"b" * 19 + b"\\0"]), np.array([4, 9]))
    >>> search_one(table, b"b" * 19 + b"\\0"), search_one(table, b"b" * 19 + b"\\1")
    (9, -1)
    """
    keys, page = table
    pos = int(keys.searchsorted(fp))
    # Compared as bytes: an S20 element read back drops its trailing zero bytes.
    if pos < len(keys) and keys[pos : pos + 1].tobytes() == fp:
        return int(page[pos])
    return -1


__all__ = ["KEY", "as_keys", "key_list", "key_page", "page_key", "page_keys", "search", "search_one"]
