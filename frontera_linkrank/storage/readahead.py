"""Reading large values of the map ahead of their use.

The environment is opened without readahead (:func:`.environment.open_env`):
a crawl looks up pages all over the file, and a kernel that read ahead of
each fault would fill the page cache with pages nobody asked for. Without
it, every page a reader touches for the first time is one synchronous read
of 4 KiB. Bulk reads (the page table's checkpoint and the stored vectors at
open, the link blocks a ranking loads) read large values instead, each a
run of contiguous pages of the map: :func:`read_ahead` tells the kernel
which runs come next (``madvise(MADV_WILLNEED)``), and it reads them in
large requests while the caller copies the ones before.

A hint only: where ``madvise`` is not available the values are read as
before, page by page.

>>> import lmdb, tempfile
>>> env = lmdb.open(tempfile.mkdtemp(), readahead=False)
>>> with env.begin(write=True) as txn:
...     _ = txn.put(b"k", bytes(1 << 20))
>>> with env.begin(buffers=True) as txn:
...     [len(v) for _, v in read_ahead(list(txn.cursor()))]
[1048576]
"""

import ctypes
import mmap
import sys
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

WINDOW = 64 * 1024**2
"""Bytes of values advised ahead of the one being read."""

_MADV_WILLNEED = 3  # Linux, the BSDs and macOS


def _madvise() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    try:
        fn = ctypes.CDLL(None, use_errno=True).madvise
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    fn.restype = ctypes.c_int
    return fn


_MADVISE = _madvise()


def advise(bufs: Sequence[Any]) -> None:
    """Ask the kernel to read the map pages under ``bufs`` (buffers of a
    ``buffers=True`` transaction) in the background; anything else (bytes
    already copied) is skipped."""
    if _MADVISE is None:
        return
    ranges = []
    for buf in bufs:
        if isinstance(buf, memoryview) and len(buf):
            lo = np.frombuffer(buf, np.uint8).ctypes.data  # read-only buffers have an address too
            ranges.append((lo - lo % mmap.PAGESIZE, lo + len(buf)))
    ranges.sort()
    merged: list[list[int]] = []
    for lo, hi in ranges:
        if merged and lo <= merged[-1][1] + mmap.PAGESIZE:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    for lo, hi in merged:
        _MADVISE(lo, hi - lo, _MADV_WILLNEED)  # a hint: its failure changes nothing


def read_ahead(items: Sequence[tuple[Any, Any]], window: int = WINDOW) -> Iterator[tuple[Any, Any]]:
    """Yield the ``(key, value)`` pairs ``items`` in order, advising the
    values up to ``window`` bytes ahead of the one yielded."""
    advised = 0  # items[:advised] have been advised
    ahead = 0  # bytes advised and not yet yielded
    for i, item in enumerate(items):
        start = advised
        while advised < len(items) and (advised <= i or ahead < window):
            ahead += len(items[advised][1])
            advised += 1
        if advised > start:
            advise([v for _, v in items[start:advised]])
        ahead -= len(item[1])
        yield item


__all__ = ["WINDOW", "advise", "read_ahead"]
