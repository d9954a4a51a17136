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
puts the map back to random access after it; :func:`scattered` goes back
to one page per fault inside it for a table of small values whose leaves
lie all over the file (the host names), where reading around each leaf
would read mostly other tables' pages.

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
import threading
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


_open_blocks: dict[str, int] = {}  # path -> bulk blocks running on it
_blocks_lock = threading.Lock()


def _advise(path: str, advice: int) -> None:
    for lo, hi in map_ranges(path):  # the map as it is now: a grown map is a new mapping
        _MADVISE(lo, hi - lo, advice)  # a hint: its failure changes nothing


@contextlib.contextmanager
def bulk(path: str) -> Iterator[None]:
    """While the block runs, faults on the map of the environment at
    ``path`` read around them (``MADV_NORMAL``); random access once the
    last block running on ``path`` ends.

    For one thread reading whole tables, before others use the map: the
    setting is the mapping's, so lookups in other threads read around
    their faults too while it lasts."""
    if _MADVISE is None:
        yield
        return
    with _blocks_lock:
        _open_blocks[path] = _open_blocks.get(path, 0) + 1
        if _open_blocks[path] == 1:
            _advise(path, MADV_NORMAL)
    try:
        yield
    finally:
        with _blocks_lock:
            _open_blocks[path] -= 1
            if not _open_blocks[path]:
                del _open_blocks[path]
                _advise(path, MADV_RANDOM)


@contextlib.contextmanager
def scattered(path: str) -> Iterator[None]:
    """Inside a :func:`bulk` block, one page per fault while this block
    runs: for a table of small values written over the life of the file
    (a B-tree whose leaves lie all over it), where reading around each
    leaf reads mostly pages of other tables."""
    with _blocks_lock:
        inside = _MADVISE is not None and bool(_open_blocks.get(path))
        if inside:
            _advise(path, MADV_RANDOM)
    if not inside:
        yield
        return
    try:
        yield
    finally:
        with _blocks_lock:
            if _open_blocks.get(path):  # else the bulk block ended meanwhile and left random access
                _advise(path, MADV_NORMAL)


__all__ = ["MADV_NORMAL", "MADV_RANDOM", "bulk", "map_ranges", "scattered"]
