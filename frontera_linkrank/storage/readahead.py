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

A table read from its first key to its last whose values lie in runs of
pages here and there in the file (the page table's checkpoint: values
of 112 KiB, rewritten over the life of the file) is read faster still
when the kernel is told where they are: :func:`prefetch` finds the pages
of its leaves and values from the B-tree itself (LMDB's file format,
read with ``pread``) and asks for them in file order
(``posix_fadvise(WILLNEED)``), so that the disk reads those pages and no
others, in large requests, before the faults that need them.

A hint only: where ``madvise``, ``posix_fadvise`` or ``/proc/self/maps``
is not available, or the file is not laid out as expected, the pages are
read as before.

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
import struct
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


# LMDB's file format (0.9, 64-bit): a table's record in the main table
# (MDB_db), a page's header (MDB_page) and a node's (MDB_node).
_TABLE = struct.Struct("<IHHQQQQQ")  # pad, flags, depth, branch, leaf and overflow pages, entries, root
_PAGE = struct.Struct("<QHHHH")  # page number, pad, flags, lower and upper bounds of the free space
_NODE = struct.Struct("<HHHH")  # data size (a branch: the child's page number), flags, key size
_HEADER = 16
_P_BRANCH, _P_LEAF, _P_LEAF2 = 0x01, 0x02, 0x20
_F_BIGDATA = 0x01  # the value is on overflow pages: their first page's number follows the key
_NO_ROOT = 2**64 - 1  # an empty table


def table_pages(fd: int, psize: int, root: int, depth: int, last: int) -> list[tuple[int, int]] | None:
    """``(first page, pages)`` of each leaf of the B-tree whose root is page
    ``root`` (``depth`` levels) in the LMDB file open as ``fd``, and of
    each value stored on overflow pages, in file order; None when a page
    is not what the format says it is (a damaged file: the caller reads
    the table as it would have anyway)."""
    try:
        return _table_pages(fd, psize, root, depth, last)
    except struct.error:  # a node past its page's end
        return None


def _table_pages(fd: int, psize: int, root: int, depth: int, last: int) -> list[tuple[int, int]] | None:
    runs: list[tuple[int, int]] = []
    level = [] if root == _NO_ROOT else [root]
    seen: set[int] = set()
    for _ in range(depth):
        below = []
        for pgno in sorted(level):
            if not 0 <= pgno <= last or pgno in seen:  # a page twice: a loop, not a tree
                return None
            seen.add(pgno)
            page = os.pread(fd, psize, pgno * psize)
            if len(page) != psize:
                return None
            number, _, flags, lower, upper = _PAGE.unpack_from(page)
            if number != pgno or not _HEADER <= lower <= upper <= psize:
                return None
            offsets = struct.unpack_from(f"<{(lower - _HEADER) >> 1}H", page, _HEADER)
            if flags & _P_BRANCH:
                for off in offsets:
                    lo, hi, flag, _ = _NODE.unpack_from(page, off)
                    below.append(lo | hi << 16 | flag << 32)
            elif flags & _P_LEAF:
                runs.append((pgno, 1))
                if flags & _P_LEAF2:
                    continue
                for off in offsets:
                    lo, hi, flag, ksize = _NODE.unpack_from(page, off)
                    if flag & _F_BIGDATA:
                        (first,) = struct.unpack_from("<Q", page, off + 8 + ksize)
                        n = (_HEADER - 1 + (lo | hi << 16)) // psize + 1
                        if first + n - 1 > last:
                            return None
                        runs.append((first, n))
            else:
                return None
        level = below
    if level:  # deeper than the table's record says
        return None
    return sorted(runs)


def prefetch(env: Any, txn: Any, path: str, name: bytes) -> int:
    """Ask the kernel to read the leaves and values of the table ``name``
    of the snapshot ``txn`` (of the environment ``env`` at ``path``; its
    default table the main one), in file order, before the caller reads
    all of it; returns the pages asked for (0: nothing was, the pages are
    read as they are faulted)."""
    if not hasattr(os, "posix_fadvise") or struct.calcsize("P") != 8:
        return 0
    record = txn.get(name)  # in the main table: the table's own record
    if record is None or len(record) != _TABLE.size:
        return 0
    _, _, depth, *_, root = _TABLE.unpack(record)
    psize, last = env.stat()["psize"], env.info()["last_pgno"]
    try:
        fd = os.open(os.path.join(path, "data.mdb"), os.O_RDONLY)
    except OSError:
        return 0
    try:
        runs = table_pages(fd, psize, root, depth, last)
        if not runs:
            return 0
        merged = [list(runs[0])]
        for first, n in runs[1:]:
            end = merged[-1][0] + merged[-1][1]
            if first <= end:
                merged[-1][1] = max(end, first + n) - merged[-1][0]
            else:
                merged.append([first, n])
        for first, n in merged:
            os.posix_fadvise(fd, first * psize, n * psize, os.POSIX_FADV_WILLNEED)
        return sum(n for _, n in merged)
    except OSError:
        return 0
    finally:
        os.close(fd)


__all__ = ["MADV_NORMAL", "MADV_RANDOM", "bulk", "map_ranges", "prefetch", "scattered", "table_pages"]
