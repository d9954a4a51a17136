"""The kernel's readahead on the map, for reads of whole tables.

The environment is opened without readahead (:func:`.environment.open_env`,
``MADV_RANDOM`` on the map): a crawl looks up pages all over the file, and
a kernel that read around each fault (up to the disk's readahead size)
would fill the page cache with pages nobody asked for. Without it every
page touched for the first time is one synchronous read of 4 KiB, and
py-lmdb touches every page of a value before it returns it. An open reads
whole tables of large values (the page table's checkpoint, the stored
vectors, the link blocks), each a run of contiguous pages, which one read
per page makes slow on a file that is not in the page cache. :func:`bulk`
lets the kernel read around faults while a block of such reads runs, and
puts the map back to random access after it.

A hint only: where ``madvise`` or ``/proc/self/maps`` is not available the
pages are read as before, one at a time.

>>> import lmdb, tempfile
>>> path = tempfile.mkdtemp()
>>> env = lmdb.open(path, readahead=False)
>>> with env.begin(write=True) as txn:
...     _ = txn.put(b"k", bytes(1 << 20))
>>> with bulk(path), env.begin() as txn:
...     len(txn.get(b"k"))
1048576
"""

import contextlib
import ctypes
import os
import sys
from collections.abc import Iterator
from typing import Any

MADV_NORMAL = 0
MADV_RANDOM = 1


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


def map_ranges(path: str) -> list[tuple[int, int]]:
    """The address ranges of this process's mappings of the environment
    at ``path`` (its ``data.mdb``); empty where ``/proc`` is not there."""
    data = os.path.realpath(os.path.join(path, "data.mdb"))
    out = []
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                fields = line.split(maxsplit=5)
                if len(fields) == 6 and fields[5].rstrip("\n") == data:
                    lo, hi = (int(x, 16) for x in fields[0].split("-"))
                    out.append((lo, hi))
    except OSError:
        return []
    return out


@contextlib.contextmanager
def bulk(path: str) -> Iterator[None]:
    """While the block runs, faults on the map of the environment at
    ``path`` read around them (``MADV_NORMAL``); random access after.

    For one thread reading whole tables, before others use the map: the
    setting is the mapping's, so lookups in other threads read around
    their faults too while it lasts."""
    if _MADVISE is None:
        yield
        return
    for lo, hi in map_ranges(path):
        _MADVISE(lo, hi - lo, MADV_NORMAL)  # a hint: its failure changes nothing
    try:
        yield
    finally:
        for lo, hi in map_ranges(path):  # the map as it is now: a grown map is a new mapping
            _MADVISE(lo, hi - lo, MADV_RANDOM)


__all__ = ["MADV_NORMAL", "MADV_RANDOM", "bulk", "map_ranges"]
