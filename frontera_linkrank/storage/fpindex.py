"""Fingerprint -> page index, in LMDB: the URL map a crawl does not hold in memory.

The ``fps`` table maps each page's 20-byte fingerprint to its index
(8-byte big-endian). :class:`FingerprintIndex` looks a batch's
fingerprints up in one sorted ``getmulti`` and remembers at most ``cache``
recent answers, so that the pages many links lead to are not looked up
again and again.

Writes are deferred. Fingerprints are uniform hashes, so a batch's new
ones land on as many B-tree leaves as there are of them, and writing one
entry per leaf would make the table the bulk of every commit. The new
fingerprints of a batch are therefore held in memory (``pending``) by key
range, the top bits of the fingerprint; when more than ``held_per_leaf``
pages per leaf of the table are held, the fullest ranges are written,
each then with several entries per leaf it spans. The ranges split as the
table grows, so that a range spans at most ``leaves_per_range`` leaves,
and a commit writes about as many entries as it adds, a few ranges' worth.
Each commit also writes the range holding the oldest held page, so that
none waits forever.

Nothing is lost by deferring: a page's fingerprint is in its record (the
``pages`` table) from the commit that created it; the metadata's
``fps_from`` (:meth:`FingerprintIndex.write` returns it) is the first page
that may be missing from the table, and the ``fpsmarks`` table holds each
key range's *mark*, the page count when the range was last written (its
pages below are in the table). Opening a database re-reads the
fingerprints of the pages from ``fps_from`` on and holds again those
created after their range's mark (:meth:`FingerprintIndex.restore`).

Examples
--------
>>> import lmdb, tempfile
>>> env = lmdb.open(tempfile.mkdtemp(), max_dbs=1)
>>> ix = FingerprintIndex(env.open_db(b"fps"), lambda: env.begin(buffers=True))
>>> ix.add([b"a" * 20, b"b" * 20], 0)
>>> with env.begin(write=True) as txn:
...     ix.write(txn, 2)
2
>>> ix.written()
>>> ix.find_many([b"b" * 20, b"c" * 20, b"a" * 20])
[1, None, 0]
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .errors import CorruptDatabase
from .keys import key_page, page_keys

_NONE = np.iinfo(np.int64).max  # "no pending page" in the per-range minimum


def key_ranges(fps: Sequence[bytes] | np.ndarray, bits: int) -> np.ndarray:
    """Key range (the top ``bits`` bits) of each 20-byte fingerprint (a
    sequence of bytes, or an array of ``V20``).

    >>> key_ranges([b"\\x80" + b"\\0" * 19, b"\\x7f" + b"\\0" * 19], 1).tolist()
    [1, 0]
    """
    if not bits or not len(fps):
        return np.zeros(len(fps), np.int64)
    raw = fps.tobytes() if isinstance(fps, np.ndarray) else b"".join(fps)
    head = np.frombuffer(raw, np.dtype([("head", ">u4"), ("rest", "V16")]))["head"]
    return (head >> np.uint32(32 - bits)).astype(np.int64)


def fullest(count: np.ndarray, over: int) -> np.ndarray:
    """The fewest ranges, fullest first, that hold at least ``over`` entries.

    >>> fullest(np.array([5, 1, 9, 3]), 10).tolist()
    [2, 0]
    >>> fullest(np.array([5, 1, 9, 3]), 0).tolist()
    []
    """
    if over <= 0:
        return np.zeros(0, np.int64)
    top = max(1, int(count.max()))
    m = min(len(count), 2 * (over // top + 1))  # enough unless the counts are very uneven
    while True:
        part = np.argpartition(-count, m - 1)[:m] if m < len(count) else np.arange(len(count))
        part = part[np.argsort(-count[part], kind="stable")]
        reach = np.cumsum(count[part])
        if reach[-1] >= over or m == len(count):
            return part[: int(np.searchsorted(reach, over)) + 1]
        m = min(len(count), 2 * m)


def read_marks(txn: Any, marks_db: Any) -> np.ndarray | None:
    """The range marks of the ``fpsmarks`` table (see the module
    docstring), one per key range, or None if there are none; the number
    of ranges is a power of two, ``len(marks) == 1 << bits``."""
    if marks_db is None:
        return None
    rows = b"".join(map(b"".join, txn.cursor(db=marks_db)))
    if not rows:
        return None
    got = np.frombuffer(rows, np.dtype([("range", ">u4"), ("mark", ">u8")])) if len(rows) % 12 == 0 else None
    r = len(got) if got is not None else 0
    if got is None or r & (r - 1) or not np.array_equal(got["range"], np.arange(r)):
        raise CorruptDatabase("the fingerprint table's range marks are damaged (corrupt database)")
    return got["mark"].astype(np.int64)


def marked_written(marks: np.ndarray | None, fps: np.ndarray, start: int) -> np.ndarray:
    """Which of the pages ``start, start+1, ...`` (fingerprints ``fps``,
    ``V20``) the marks say are in the table (none without marks)."""
    if marks is None:
        return np.zeros(len(fps), bool)
    return np.arange(start, start + len(fps)) < marks[key_ranges(fps, len(marks).bit_length() - 1)]


class FingerprintIndex:
    """The ``fps`` table (see the module docstring).

    Parameters
    ----------
    db
        LMDB handle of the ``fps`` table.
    snapshot : callable() -> context manager of a read transaction
    marks
        LMDB handle of the ``fpsmarks`` table (one mark per key range), or
        None: not kept (reopening then looks every page up).
    cache : int
        Answers remembered at most (0: none).
    held_per_leaf : int
        Pages held, on average, per leaf of the table: beyond, the fullest
        key ranges are written.
    leaves_per_range : int
        Leaves of the table a key range spans at most (the ranges split
        as the table grows).
    """

    new: dict[bytes, int]  # pages added in this batch
    # Committed pages not in the table yet: fingerprint -> page, and the
    # fingerprints by key range (the top ``_bits`` bits), their count and
    # smallest page.
    pending: dict[bytes, int]
    _bits: int
    _ranges: list[list[bytes]]
    _count: np.ndarray
    _oldest: np.ndarray
    # Per range: its pages below this index are all in the table (the
    # marks table holds them, one entry per range); ``_marks_stale``: that
    # table must be written whole.
    _mark: np.ndarray
    _marks_stale: bool
    _plan: tuple[np.ndarray, np.ndarray, int, int] | None

    def __init__(self, db: Any, snapshot: Callable[[], Any], marks: Any = None, cache: int = 1 << 18,
                 held_per_leaf: int = 2, leaves_per_range: int = 16) -> None:
        self.db = db
        self.marks_db = marks
        self._snapshot = snapshot
        self._cache: OrderedDict[bytes, int] = OrderedDict()
        self.cache_size = int(cache)
        self.lookups = 0  # fingerprints looked up in LMDB
        self.held_per_leaf = int(held_per_leaf)
        self.leaves_per_range = int(leaves_per_range)
        self.discard()

    # -- reads ------------------------------------------------------------------------------------
    def find(self, fp: bytes) -> int | None:
        """Index of the page with fingerprint ``fp``, or None."""
        return self.find_many([fp])[0]

    def find_many(self, fps: Sequence[bytes]) -> list[int | None]:
        """Indices of the pages with fingerprints ``fps`` (None: unknown)."""
        new, pending, cache = self.new, self.pending, self._cache
        out: list[int | None] = []
        missing: dict[bytes, list[int]] = {}
        for k, fp in enumerate(fps):
            i = new.get(fp)
            if i is None:
                i = pending.get(fp)
                if i is None:
                    i = cache.get(fp)
                    if i is None:
                        missing.setdefault(fp, []).append(k)
            out.append(i)
        if missing:
            self.lookups += len(missing)
            with self._snapshot() as txn:
                found = txn.cursor(db=self.db).getmulti(sorted(missing))
            for key, value in found:
                if len(value) != 8:
                    raise CorruptDatabase(f"fingerprint {bytes(key).hex()} maps to {len(value)} bytes "
                                          "(corrupt database)")
                key = bytes(key)
                i = key_page(value)
                for k in missing[key]:
                    out[k] = i
                if self.cache_size:
                    cache[key] = i
            while len(cache) > self.cache_size:
                cache.popitem(last=False)
        return out

    # -- writes -----------------------------------------------------------------------------------
    def add(self, fps: Sequence[bytes], start: int) -> None:
        """Pages ``start, start+1, ...`` have fingerprints ``fps``."""
        self.new.update(zip(fps, range(start, start + len(fps))))

    def write(self, txn: Any, n: int) -> int:
        """Write, in ``txn``, the key ranges due (see the module docstring),
        with this batch's new fingerprints among them; the others stay
        pending. Returns the first page that may be missing from the table
        after this commit (``n``, the page count, when none is). Changes
        nothing in memory until :meth:`written`: a failed transaction may
        be retried."""
        new_fps = list(self.new)
        new_pages = np.fromiter(self.new.values(), np.int64, len(new_fps))
        new_ranges = key_ranges(new_fps, self._bits)
        count = self._count + np.bincount(new_ranges, minlength=len(self._count))
        oldest = self._oldest.copy()
        if len(new_fps):
            np.minimum.at(oldest, new_ranges, new_pages)
        leaves = txn.stat(self.db)["leaf_pages"]
        due = np.zeros(len(count), bool)
        due[fullest(count, int(count.sum()) - self.held_per_leaf * max(leaves, 1))] = True
        if oldest.min() < _NONE:
            due[int(np.argmin(oldest))] = True
        items = [(fp, i) for fp, r, i in zip(new_fps, new_ranges.tolist(), new_pages.tolist()) if due[r]]
        pending, ranges = self.pending, self._ranges
        for r in np.flatnonzero(due & (self._count > 0)).tolist():
            items += [(fp, pending[fp]) for fp in ranges[r]]
        if items:
            items.sort()
            txn.cursor(db=self.db).putmulti(list(zip([fp for fp, _ in items], page_keys([i for _, i in items]))))
        if self.marks_db is not None:
            mark = np.where(due, n, self._mark)
            if self._marks_stale:
                txn.drop(self.marks_db, delete=False)
            rs = np.arange(len(mark)) if self._marks_stale else np.flatnonzero(due)
            raw = rs.astype(">u4").tobytes()
            txn.cursor(db=self.marks_db).putmulti(list(zip([raw[k : k + 4] for k in range(0, len(raw), 4)],
                                                           page_keys(mark[rs]))))
        self._plan = (due, new_ranges, leaves, n)
        left = oldest[~due]
        return int(min(n, left.min())) if len(left) else n

    def written(self) -> None:
        """The batch was committed: the ranges written leave ``pending``,
        this batch's other new pages join it."""
        assert self._plan is not None, "written() without write()"
        due, new_ranges, leaves, n = self._plan
        self._plan = None
        self._mark[due] = n
        self._marks_stale = False
        pending, ranges = self.pending, self._ranges
        for r in np.flatnonzero(due & (self._count > 0)).tolist():
            for fp in ranges[r]:
                del pending[fp]
            ranges[r] = []
        self._count[due] = 0
        self._oldest[due] = _NONE
        for (fp, i), r in zip(self.new.items(), new_ranges.tolist()):
            if not due[r]:
                self._hold(fp, i, r)
        if self.cache_size:
            cache = self._cache
            for fp, i in self.new.items():
                cache[fp] = i
            while len(cache) > self.cache_size:
                cache.popitem(last=False)
        self.new = {}
        self._split(leaves)

    def _hold(self, fp: bytes, i: int, r: int) -> None:
        self.pending[fp] = i
        self._ranges[r].append(fp)
        self._count[r] += 1
        if i < self._oldest[r]:
            self._oldest[r] = i

    def _split(self, leaves: int) -> None:
        """Split the key ranges until each spans at most ``leaves_per_range`` leaves."""
        bits = self._bits
        while bits < 32 and leaves > self.leaves_per_range << bits:
            bits += 1
        if bits == self._bits:
            return
        self._mark = np.repeat(self._mark, 1 << (bits - self._bits))  # a half inherits its range's mark
        self._marks_stale = True
        self._bits = bits
        self._regroup()

    def _regroup(self) -> None:
        """Group the held pages by the key ranges of the current bits."""
        held = list(self.pending.items())
        self._discard_pending(1 << self._bits)
        for (fp, i), r in zip(held, key_ranges([fp for fp, _ in held], self._bits).tolist()):
            self._hold(fp, i, r)

    def _discard_pending(self, n_ranges: int) -> None:
        """Hold nothing, in ``n_ranges`` empty ranges."""
        self.pending = {}
        self._ranges = [[] for _ in range(n_ranges)]
        self._count = np.zeros(n_ranges, np.int64)
        self._oldest = np.full(n_ranges, _NONE, np.int64)

    def restore(self, txn: Any, fps: np.ndarray, start: int) -> None:
        """At opening: the committed pages ``start, start+1, ...`` (``fps``,
        an array of ``V20``) may be missing from the table; those written
        behind their range's mark are held again."""
        raw = fps.tobytes()
        keys = [raw[k : k + 20] for k in range(0, len(raw), 20)]
        pages = np.arange(start, start + len(keys), dtype=np.int64)
        marks = read_marks(txn, self.marks_db)
        if marks is None:  # no marks: look each page up
            present = {bytes(k) for k, _ in txn.cursor(db=self.db).getmulti(sorted(keys))}
            held = np.fromiter((k not in present for k in keys), bool, len(keys))
        else:
            self._bits, self._mark = int(len(marks)).bit_length() - 1, marks
            held = ~marked_written(marks, fps, start)
        self._discard_pending(len(self._mark))
        self._marks_stale = marks is None
        idx = np.flatnonzero(held)
        for k, r in zip(idx.tolist(), key_ranges(fps[idx], self._bits).tolist()):
            self._hold(keys[k], int(pages[k]), r)
        self._split(txn.stat(self.db)["leaf_pages"])

    def remember(self, fps: Sequence[bytes], pages: Sequence[int]) -> None:
        """Cache known pages the crawl will look up soon (pages handed out:
        their responses come back by fingerprint)."""
        if self.cache_size:
            cache = self._cache
            cache.update(zip(fps, pages))
            while len(cache) > self.cache_size:
                cache.popitem(last=False)

    def discard(self) -> None:
        """Forget the batch, the pending pages and the cache (a reload, which
        restores the pending pages from the database)."""
        self.new = {}
        self._cache.clear()
        self._bits = 0
        self._discard_pending(1)
        self._mark = np.zeros(1, np.int64)
        self._marks_stale = True
        self._plan = None


__all__ = ["FingerprintIndex", "fullest", "key_ranges", "marked_written", "read_marks"]
