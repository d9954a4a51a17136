"""Small numpy helpers used on hot paths (the base layer: no package imports)."""

from __future__ import annotations

import ctypes
import math
import mmap
import tempfile
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
from numpy.typing import ArrayLike


def unique(a: ArrayLike) -> np.ndarray:
    """Sorted distinct values of ``a`` (like ``np.unique(a)``).

    By sorting: numpy 2.4's ``np.unique`` of integers is several times
    slower than a sort, and page indices go through it on every commit.
    Storage, the tools and the simulator all call this one.

    >>> unique(np.array([3, 1, 3, 2])).tolist()
    [1, 2, 3]
    """
    s = np.sort(np.asarray(a))
    if len(s) < 2:
        return s
    return s[np.r_[True, s[1:] != s[:-1]]]


def exact_sum(a: ArrayLike) -> float:
    """The correctly rounded sum of ``a`` (``math.fsum``), read through a
    memoryview: Python floats come straight from the buffer instead of a
    numpy scalar per value (about twice as fast on large vectors).

    >>> exact_sum(np.array([1e16, 1.0, -1e16]))
    1.0
    """
    return math.fsum(np.ascontiguousarray(a, np.float64).data.cast("B").cast("d"))


def best_first(keys: np.ndarray, ids: np.ndarray, m: int) -> np.ndarray:
    """Indices of the ``m`` first entries by key, highest first, ties by
    smaller id: ``np.lexsort((ids, -keys))[:m]``, sorting only the
    entries whose key reaches the ``m``-th highest (a partition finds it)
    when ``m`` is small against the entries.

    >>> best_first(np.array([1.0, 3.0, 2.0, 3.0]), np.array([9, 8, 7, 6]), 3).tolist()
    [3, 1, 2]
    """
    n = len(keys)
    if 8 * m < n and not np.isnan(keys).any():  # NaN keys sort last: the full order then
        cut = np.partition(keys, n - m)[n - m]
        cand = np.flatnonzero(keys >= cut)
        return cand[np.lexsort((ids[cand], -keys[cand]))[:m]]
    return np.lexsort((ids, -keys))[:m]


def l1_change(new: np.ndarray, old: np.ndarray, scratch: np.ndarray) -> float:
    """``|new - old|_1``, computed in ``scratch`` piece by piece (it may be
    shorter than the vectors).

    For the rankers' iterations: a fresh temporary of a large vector each
    iteration is memory the kernel maps and zeroes every time, and a
    scratch as long as the vectors is one more vector of every page.

    >>> l1_change(np.array([1.0, 2.0, 5.0]), np.array([2.0, 0.0, 5.5]), np.empty(2))
    3.5
    """
    k = len(scratch)
    total = 0.0
    for s in range(0, len(new), k):
        d = scratch[: min(k, len(new) - s)]
        np.subtract(new[s : s + k], old[s : s + k], out=d)
        total += float(np.abs(d, out=d).sum())
    return total


def row_slices(indptr: np.ndarray, size: int) -> Iterator[tuple[int, int]]:
    """``(lo, hi)``: consecutive rows of a CSR matrix with row pointers
    ``indptr`` holding at most ``size`` entries each, but at least one row
    (a longer row is a slice of its own). For products over large link
    sets a slice at a time: their temporaries stay bounded.

    >>> list(row_slices(np.array([0, 3, 4, 9, 10]), 4))
    [(0, 2), (2, 3), (3, 4)]
    """
    n = len(indptr) - 1
    lo = 0
    while lo < n:
        hi = max(lo + 1, int(np.searchsorted(indptr, indptr[lo] + size, side="right")) - 1)
        yield lo, hi
        lo = hi


def spans(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """The positions ``lo[0] .. hi[0]-1, lo[1] .. hi[1]-1, ...`` in one
    array (the entries of several rows of a CSR array, the first entries
    of several groups of a sorted one).

    >>> spans(np.array([2, 7]), np.array([4, 8])).tolist()
    [2, 3, 7]
    """
    size = np.asarray(hi, np.int64) - lo
    return np.repeat(lo - np.cumsum(size) + size, size) + np.arange(int(size.sum()))


def at_least(a: np.ndarray, size: int, fill: Any = 0) -> np.ndarray:
    """``a`` if it has ``size`` slots, else ``a`` at the start of an array
    at least twice as long (``fill`` beyond): per-host arrays grow as
    hosts appear, each growth paid for by as many hosts as before.

    >>> at_least(np.array([1, 2], np.int8), 3, -1).tolist()
    [1, 2, -1, -1]
    """
    if size <= len(a):
        return a
    size = max(size, 2 * len(a))
    out = np.zeros(size, a.dtype) if fill == 0 else np.full(size, fill, a.dtype)
    out[: len(a)] = a
    return out


def value_at(a: np.ndarray, idx: ArrayLike, default: Any) -> np.ndarray:
    """``a[idx]``, with ``default`` for the indices beyond ``a`` (an array
    grown as ids appear, with nothing stored yet for the newest).

    >>> value_at(np.array([5, 6]), [1, 2, 0], -1).tolist()
    [6, -1, 5]
    """
    idx = np.asarray(idx, np.int64)
    out = np.full(len(idx), default, a.dtype)
    inside = idx < len(a)
    out[inside] = a[idx[inside]]
    return out


SCRATCH = 1 << 16
"""Length of the rankers' scratch for :func:`l1_change` (512 KiB)."""


TOP_SLICE = 1 << 20
"""Values :func:`top_k` partitions at a time."""


def top_k(x: np.ndarray, k: int, chunk: int = TOP_SLICE) -> np.ndarray:
    """Indices of the ``k`` largest values of ``x``, largest first, ties by
    lower index: ``np.argsort(-x, kind="stable")[:k]`` without sorting all
    of ``x`` (a partition, then a sort of ``k``: the tools' top lists of a
    large crawl). NaN ranks as ``-inf`` (a page without a score). Slices
    of ``chunk`` values are partitioned one at a time: the temporaries are
    those of a slice, not copies of ``x``.

    >>> top_k(np.array([1.0, 3.0, np.nan, 3.0, 0.0]), 3).tolist()
    [1, 3, 0]
    """
    x = np.asarray(x)
    if 0 < k < chunk < len(x):
        # A slice's k best (ties by lower index) hold every one of its
        # values among the k best of all; equal values stay in index order.
        found = np.concatenate([lo + top_k(x[lo : lo + chunk], k, chunk) for lo in range(0, len(x), chunk)])
        return found[top_k(x[found], k, len(found))]
    if x.dtype.kind == "f":
        nan = np.isnan(x)
        if nan.any():
            x = np.where(nan, -np.inf, x)
    n = len(x)
    if k >= n:
        return np.argsort(-x, kind="stable")
    if k <= 0:
        return np.empty(0, np.int64)
    kth = np.partition(x, n - k)[n - k]  # the k-th largest value
    above = np.flatnonzero(x > kth)
    idx = np.concatenate([above, np.flatnonzero(x == kth)[: k - len(above)]])
    return idx[np.argsort(-x[idx], kind="stable")]


def _malloc_trim() -> Callable[[int], int] | None:
    try:
        return ctypes.CDLL(None).malloc_trim  # glibc
    except (OSError, AttributeError):
        return None


_TRIM = _malloc_trim()


def release_free_memory() -> None:
    """Hand the C heap's free memory back to the system (glibc's
    ``malloc_trim``; nothing elsewhere).

    A ranking or a queue rebuild allocates arrays of every page and frees
    them; glibc keeps freed blocks under its adaptive mmap threshold (up
    to 32 MB) in the heap, so a crawl's resident memory would keep the
    peak of its largest transient arrays. Called after those, not per
    batch: a trim walks the heap.

    >>> release_free_memory()
    """
    if _TRIM is not None:
        _TRIM(0)


def file_copies(arrays: list[np.ndarray], directory: str) -> list[np.ndarray]:
    """Copies of the int32 ``arrays`` in one temporary file in ``directory``,
    mapped read-only: file-backed memory the kernel can drop and read
    again. The file has no name (it goes with the arrays, or with the
    process if it is killed).

    >>> a, b = file_copies([np.arange(3), np.array([7])], tempfile.gettempdir())
    >>> a.tolist(), b.tolist(), a.flags.writeable
    ([0, 1, 2], [7], False)
    """
    total = sum(len(a) for a in arrays)
    if not total:
        return [np.zeros(0, np.int32) for _ in arrays]
    with tempfile.TemporaryFile(dir=directory) as f:
        for a in arrays:
            f.write(np.ascontiguousarray(a, np.int32).data)
        f.flush()
        whole = np.frombuffer(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ), np.int32)
    ends = np.cumsum([len(a) for a in arrays]).tolist()
    return [whole[lo:hi] for lo, hi in zip([0, *ends[:-1]], ends)]
