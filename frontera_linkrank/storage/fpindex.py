"""Fingerprint -> page index, in LMDB: the URL map a crawl does not hold in memory.

The ``fps`` table maps each page's 20-byte fingerprint to its index
(8-byte big-endian). :class:`FingerprintIndex` looks a batch's
fingerprints up in one sorted ``getmulti`` and keeps ``cache`` answers in
a direct-mapped table of numpy arrays (28 bytes a slot), so that the
pages many links lead to and the pages handed out to be fetched are not
looked up again and again.

Writes are deferred. Fingerprints are uniform hashes, so a batch's new
ones land on as many B-tree leaves as there are of them, and writing one
entry per leaf would make the table the bulk of every commit. The new
fingerprints of a batch are therefore held in memory, in arrays sorted by
fingerprint (28 bytes a page), and counted by key range, the top bits of
the fingerprint; when more than ``held_per_leaf``
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
A writer that closes stores the pages it holds (:mod:`.fptables`), and
the next opening takes them from there (:meth:`FingerprintIndex.restore_held`).

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

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import numpy as np

from ..numeric import spans
from .errors import CorruptDatabase
from .fptables import read_marks
from .keyfilter import KeyFilter
from .keys import KEY, as_keys, key_list, key_page, page_keys, search, search_one

_NONE = np.iinfo(np.int64).max  # "no pending page" in the per-range minimum
FEW = 4  # fingerprints asked at once that are looked for one by one first (a response's own)
MERGE_AT = 1 << 14  # recent held entries merged into the main ones past this many (or 1/8 of those)


def key_ranges(fps: Sequence[bytes] | np.ndarray, bits: int) -> np.ndarray:
    """Key range (the top ``bits`` bits) of each 20-byte fingerprint (a
    sequence of bytes, or an array of ``V20`` or ``S20``).

    >>> key_ranges([b"\\x80" + b"\\0" * 19, b"\\x7f" + b"\\0" * 19], 1).tolist()
    [1, 0]
    """
    if not bits or not len(fps):
        return np.zeros(len(fps), np.int64)
    head = np.ascontiguousarray(as_keys(fps).view(np.uint8).reshape(-1, 20)[:, :4]).view(">u4").ravel()
    return (head >> np.uint32(32 - bits)).astype(np.int64)


def range_start(rs: np.ndarray, bits: int) -> np.ndarray:
    """The smallest fingerprint (``S20``) of each key range ``rs``.

    >>> range_start(np.array([1, 3]), 2).tolist()
    [b'@', b'\\xc0']
    """
    head = (np.asarray(rs, np.uint64) << np.uint64(32 - bits)).astype(">u4")
    out = np.zeros((len(head), 20), np.uint8)
    out[:, :4] = head.view(np.uint8).reshape(-1, 4)
    return out.view(KEY).ravel()


def no_entries() -> tuple[np.ndarray, np.ndarray]:
    """A table of no fingerprints (fingerprints, pages)."""
    return np.zeros(0, KEY), np.zeros(0, np.int64)


def stored_page(fp: bytes, value: bytes | memoryview) -> int:
    """The page a value of the table names (8 bytes), for fingerprint ``fp``."""
    if len(value) != 8:
        raise CorruptDatabase(f"fingerprint {fp.hex()} maps to {len(value)} bytes (corrupt database)")
    return key_page(value)


def merge(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Two tables sorted by fingerprint (fingerprints, pages) as one."""
    if not len(b[0]):
        return a
    if not len(a[0]):
        return b
    pos = np.searchsorted(a[0], b[0])
    return np.insert(a[0], pos, b[0]), np.insert(a[1], pos, b[1])


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
        Slots of the answer cache (rounded up to a power of two; 0: no
        cache).
    held_per_leaf : int
        Pages held, on average, per leaf of the table: beyond, the fullest
        key ranges are written.
    leaves_per_range : int
        Leaves of the table a key range spans at most (the ranges split
        as the table grows).
    """

    new: dict[bytes, int]  # pages added in this batch
    # Committed pages not in the table yet, as two arrays sorted by key
    # (fingerprint and page each): ``_main`` and the smaller ``_recent``
    # that new pages join, merged into ``_main`` when it grows. An entry is
    # held while its page is at or past its range's mark; entries whose
    # range was written since stay, still right, until the next merge.
    _main: tuple[np.ndarray, np.ndarray]
    _recent: tuple[np.ndarray, np.ndarray]
    # Per key range (the top ``_bits`` bits): pages held, their smallest,
    # and the mark: its pages below are all in the table (the marks table
    # holds them, one entry per range); ``_marks_stale``: that table must
    # be written whole.
    _bits: int
    _count: np.ndarray
    _oldest: np.ndarray
    _mark: np.ndarray
    _marks_stale: bool
    _plan: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int, int] | None
    filter: KeyFilter | None  # a writer's: the table's keys in a Bloom filter (:mod:`.keyfilter`)

    def __init__(self, db: Any, snapshot: Callable[[], Any], marks: Any = None, cache: int = 1 << 18,
                 held_per_leaf: int = 2, leaves_per_range: int = 16, filtered: bool = False) -> None:
        self.db, self._filtered = db, filtered
        self.marks_db, self._snapshot = marks, snapshot
        size = 1 << max(0, int(cache) - 1).bit_length() if cache else 0
        # The cache is direct-mapped: a fingerprint's slot is given by its
        # bytes 12-19 (the key ranges use the first ones).
        self._cache_fp = np.zeros(size, KEY)
        self._cache_page = np.full(size, -1, np.int64)
        self._cache_raw = self._cache_fp.view(np.uint8).data
        self.cache_size = size
        self.lookups = 0  # fingerprints looked up in LMDB
        self.held_per_leaf = int(held_per_leaf)
        self.leaves_per_range = int(leaves_per_range)
        self.discard()

    # -- reads ------------------------------------------------------------------------------------
    def find(self, fp: bytes) -> int | None:
        """Index of the page with fingerprint ``fp``, or None: what
        :meth:`find_many` answers, without arrays of one key (a crawler asks
        for each link as its spider yields it)."""
        if type(fp) is not bytes:
            return self.find_many([fp])[0]
        i = self.recall(fp)
        if i < 0 and len(fp) == 20:
            i = search_one(self._main, fp)
            if i < 0:
                i = search_one(self._recent, fp)
            if i < 0 and self.filter is not None and self.filter.ready and self.filter.absent_one(fp):
                return None
            if i < 0:
                self.lookups += 1
                with self._snapshot() as txn:
                    value = txn.get(fp, db=self.db)  # read inside: a buffer of the snapshot's map
                    if value is None:
                        return None
                    i = stored_page(fp, value)
                if self.cache_size:
                    slot = self._slot(fp)
                    self._cache_fp[slot], self._cache_page[slot] = fp, i
        return None if i < 0 else i

    def find_many(self, fps: Sequence[bytes]) -> list[int | None]:
        """Indices of the pages with fingerprints ``fps`` (None: unknown)."""
        if len(fps) <= FEW and not isinstance(fps, np.ndarray):
            few: list[int | None] = [self.recall(fp) for fp in fps]
            if -1 not in few:
                return few
        if not isinstance(fps, np.ndarray) and any(len(fp) != 20 for fp in fps):
            ok = [k for k, fp in enumerate(fps) if len(fp) == 20]  # others name no page (input from outside)
            answers: list[int | None] = [None] * len(fps)
            for k, i in zip(ok, self.find_many([fps[k] for k in ok])):
                answers[k] = i
            return answers
        keys = as_keys(fps)
        if self.new:
            get = self.new.get
            out = np.fromiter((get(fp, -1) for fp in (key_list(keys) if isinstance(fps, np.ndarray) else fps)),
                              np.int64, len(keys))
        else:
            out = np.full(len(keys), -1, np.int64)
        for look in (partial(search, self._main), partial(search, self._recent), self._cached):
            holes = np.flatnonzero(out < 0)
            if not len(holes):
                break
            out[holes] = look(keys[holes])
        holes = np.flatnonzero(out < 0)
        if len(holes) and self.filter is not None:
            holes = holes[self.filter.maybe(keys[holes], self._snapshot, self.db)]
        if len(holes):
            ask = np.unique(keys[holes])
            self.lookups += len(ask)
            with self._snapshot() as txn:
                found = txn.cursor(db=self.db).getmulti(key_list(ask))
            got_fp, got_page = [], []
            for key, value in found:
                got_fp.append(bytes(key))
                got_page.append(stored_page(got_fp[-1], value))
            if got_fp:
                got = (as_keys(got_fp), np.array(got_page, np.int64))
                out[holes] = search(got, keys[holes])
                self._cache(*got)
        return [None if i < 0 else i for i in out.tolist()]

    def held(self) -> dict[bytes, int]:
        """The pages held, not in the table yet: fingerprint -> page."""
        out: dict[bytes, int] = {}
        for fp, page in (self._main, self._recent):
            live = self._live(fp, page)
            out.update(zip(key_list(fp[live]), page[live].tolist()))
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
        new_keys = as_keys(list(self.new))
        new_pages = np.fromiter(self.new.values(), np.int64, len(new_keys))
        new_ranges = key_ranges(new_keys, self._bits)
        count = self._count + np.bincount(new_ranges, minlength=len(self._count))
        oldest = self._oldest.copy()
        if len(new_keys):
            np.minimum.at(oldest, new_ranges, new_pages)
        leaves = txn.stat(self.db)["leaf_pages"]
        due = np.zeros(len(count), bool)
        due[fullest(count, int(count.sum()) - self.held_per_leaf * max(leaves, 1))] = True
        if oldest.min() < _NONE:
            due[int(np.argmin(oldest))] = True
        write_fp, write_page = [new_keys[due[new_ranges]]], [new_pages[due[new_ranges]]]
        rs = np.flatnonzero(due & (self._count > 0))
        for fp, page in (self._main, self._recent):
            k = self._in_ranges(fp, page, rs)
            write_fp.append(fp[k])
            write_page.append(page[k])
        keys, pages = np.concatenate(write_fp), np.concatenate(write_page)
        if len(keys):
            order = np.argsort(keys, kind="stable")
            if self.filter is not None:
                self.filter.add(keys)
            txn.cursor(db=self.db).putmulti(list(zip(key_list(keys[order]), page_keys(pages[order]))))
        if self.marks_db is not None:
            mark = np.where(due, n, self._mark)
            if self._marks_stale:
                txn.drop(self.marks_db, delete=False)
            rs = np.arange(len(mark)) if self._marks_stale else np.flatnonzero(due)
            raw = rs.astype(">u4").tobytes()
            txn.cursor(db=self.marks_db).putmulti(list(zip([raw[k : k + 4] for k in range(0, len(raw), 4)],
                                                           page_keys(mark[rs]))))
        self._plan = (due, new_keys, new_pages, new_ranges, leaves, n)
        left = oldest[~due]
        return int(min(n, left.min())) if len(left) else n

    def written(self) -> None:
        """The batch was committed: the ranges written leave the held
        pages, this batch's other new pages join them."""
        assert self._plan is not None, "written() without write()"
        due, new_keys, new_pages, new_ranges, leaves, n = self._plan
        self._plan = None
        self._mark[due] = n
        self._marks_stale = False
        self._count[due] = 0
        self._oldest[due] = _NONE
        keep = ~due[new_ranges]
        self._hold(new_keys[keep], new_pages[keep], new_ranges[keep])
        self._cache(new_keys, new_pages)
        self.new = {}
        self._split(leaves)

    def _live(self, fp: np.ndarray, page: np.ndarray) -> np.ndarray:
        """Which entries are held (at or past their range's mark)."""
        return page >= self._mark[key_ranges(fp, self._bits)]

    def _in_ranges(self, fp: np.ndarray, page: np.ndarray, rs: np.ndarray) -> np.ndarray:
        """Positions of the held entries of key ranges ``rs`` in a sorted
        array of entries."""
        if not len(rs) or not len(fp):
            return np.zeros(0, np.int64)
        lo = np.searchsorted(fp, range_start(rs, self._bits))
        hi = np.where(rs + 1 < len(self._mark), np.searchsorted(fp, range_start(rs + 1, self._bits)), len(fp))
        k = spans(lo, hi)
        return k[page[k] >= np.repeat(self._mark[rs], hi - lo)]

    def _hold(self, fp: np.ndarray, page: np.ndarray, ranges: np.ndarray) -> None:
        """Hold pages (fingerprints ``fp``, in key ranges ``ranges``)."""
        if not len(fp):
            return
        self._count += np.bincount(ranges, minlength=len(self._count))
        np.minimum.at(self._oldest, ranges, page)
        order = np.argsort(fp, kind="stable")
        self._recent = merge(self._recent, (fp[order], page[order]))
        if len(self._recent[0]) > max(MERGE_AT, len(self._main[0]) >> 3):
            self._compact()

    def _compact(self) -> None:
        """Merge the recent entries into the main ones, leaving out those
        written since they were held."""
        parts = []
        for fp, page in (self._main, self._recent):
            live = self._live(fp, page)
            parts.append((fp[live], page[live]))
        self._main = merge(*parts)
        self._recent = no_entries()

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
        self._recount()

    def _recount(self) -> None:
        """Count the held pages of each key range of the current bits, and
        find their smallest."""
        self._compact()
        fp, page = self._main
        ranges = key_ranges(fp, self._bits)
        self._count = np.bincount(ranges, minlength=len(self._mark)).astype(np.int64)
        self._oldest = np.full(len(self._mark), _NONE, np.int64)
        np.minimum.at(self._oldest, ranges, page)

    def _discard_pending(self) -> None:
        """Hold nothing."""
        self._main = self._recent = no_entries()
        self._count = np.zeros(len(self._mark), np.int64)
        self._oldest = np.full(len(self._mark), _NONE, np.int64)

    def restore(self, txn: Any, fps: np.ndarray, start: int) -> None:
        """At opening: the committed pages ``start, start+1, ...`` (``fps``,
        an array of ``V20``) may be missing from the table; those written
        behind their range's mark are held again."""
        keys = as_keys(fps)
        pages = np.arange(start, start + len(keys), dtype=np.int64)
        marks = read_marks(txn, self.marks_db)
        if marks is None:  # no marks: look each page up
            present = {bytes(k) for k, _ in txn.cursor(db=self.db).getmulti(key_list(np.sort(keys)))}
            held = np.fromiter((k not in present for k in key_list(keys)), bool, len(keys))
        else:
            held = ~marked_written(marks, keys, start)
        idx = np.flatnonzero(held)
        order = idx[np.argsort(keys[idx], kind="stable")]
        self._hold_again(txn, marks, keys[order], pages[order])

    def held_entries(self) -> tuple[np.ndarray, np.ndarray]:
        """The pages held after the last commit, ``(fingerprints, pages)`` sorted as :meth:`restore` holds them."""
        self._compact()
        return self._main

    def restore_held(self, txn: Any, keys: np.ndarray, pages: np.ndarray, start: int, n: int) -> None:
        """At opening, instead of :meth:`restore`: hold the pages :meth:`held_entries` gave at
        the last close; ValueError if they cannot be those of ``fps_from`` ``start`` and ``n`` pages."""
        marks = read_marks(txn, self.marks_db)
        if marks is None or (len(pages) and not (pages.min() >= start and pages.max() < n)):
            raise ValueError("no range marks, or held pages outside those that may be missing from the table")
        if len(keys) > 1 and not (keys[1:] > keys[:-1]).all():
            raise ValueError("held fingerprints out of order")
        self._hold_again(txn, marks, keys, pages)

    def _hold_again(self, txn: Any, marks: np.ndarray | None, keys: np.ndarray, pages: np.ndarray) -> None:
        """Hold ``keys``, ``pages`` (sorted by fingerprint) at opening, with the ranges' ``marks`` (None: none)."""
        if marks is not None:
            self._bits, self._mark = int(len(marks)).bit_length() - 1, marks
        self._marks_stale = marks is None
        self._discard_pending()
        self._main = (keys, pages)
        self._recount()
        self._split(txn.stat(self.db)["leaf_pages"])

    def remember(self, fps: Sequence[bytes] | np.ndarray, pages: Sequence[int] | np.ndarray) -> None:
        """Cache known pages the crawl will look up soon (pages handed out:
        their responses come back by fingerprint)."""
        self._cache(as_keys(fps), np.asarray(pages, np.int64))

    def _slots(self, keys: np.ndarray) -> np.ndarray:
        tail = np.ascontiguousarray(keys.view(np.uint8).reshape(-1, 20)[:, 12:]).view("<u8").ravel()
        return (tail & np.uint64(self.cache_size - 1)).astype(np.intp)

    def _slot(self, fp: bytes) -> int:
        """The cache slot of one fingerprint (as :meth:`_slots`)."""
        return int.from_bytes(fp[12:], "little") & (self.cache_size - 1)

    def recall(self, fp: bytes) -> int:
        """The page of one fingerprint from this batch or the cache, or -1
        (a fingerprint asked alone, as a response's: no array operations)."""
        i = self.new.get(fp)
        if i is not None:
            return i
        if self.cache_size and len(fp) == 20:
            slot = self._slot(fp)
            if self._cache_raw[20 * slot : 20 * slot + 20] == fp:
                return int(self._cache_page[slot])
        return -1

    def _cached(self, keys: np.ndarray) -> np.ndarray:
        """The cached page of each fingerprint, or -1."""
        if not self.cache_size:
            return np.full(len(keys), -1, np.int64)
        slots = self._slots(keys)
        return np.where(self._cache_fp[slots] == keys, self._cache_page[slots], -1)

    def _cache(self, keys: np.ndarray, pages: np.ndarray) -> None:
        """Remember answers; of several for one slot, the last."""
        if not self.cache_size or not len(keys):
            return
        slots = self._slots(keys)
        _, last = np.unique(slots[::-1], return_index=True)
        last = len(slots) - 1 - last
        self._cache_fp[slots[last]] = keys[last]
        self._cache_page[slots[last]] = pages[last]

    def discard(self) -> None:
        """Forget the batch, the pending pages and the cache (a reload, which
        restores the pending pages from the database)."""
        self.new = {}
        self.filter = KeyFilter() if self._filtered else None  # filled again from the table
        self._cache_page.fill(-1)
        self._bits = 0
        self._mark = np.zeros(1, np.int64)
        self._discard_pending()
        self._marks_stale = True
        self._plan = None


__all__ = ["FingerprintIndex", "as_keys", "fullest", "key_list", "key_ranges", "marked_written"]
