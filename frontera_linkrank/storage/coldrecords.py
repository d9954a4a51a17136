"""The cold fields of pages: read and written for the pages of a batch.

A crawl keeps in memory only the hot fields of every page
(:data:`~.vertices.HOT_FIELDS`); the cold ones (fingerprint, parent,
crawl history, AOPIC history...: :data:`~.vertices.COLD_RECORD`, 104 bytes)
live in the ``pages`` table, one value per page keyed by its index, and
change only when the page itself is fetched, handed out or fails.
:class:`ColdRecords` reads the records a batch needs (one sorted
``getmulti``), keeps them and the batch's new pages until the commit
writes the changed ones (one sorted ``putmulti``), then forgets them: its
memory is bounded by the batch.

Tools load every field into one table (:class:`TableColdRecords` gives
them, and the code shared with the crawl, the same interface over it).

Examples
--------
>>> import lmdb, tempfile, numpy as np
>>> env = lmdb.open(tempfile.mkdtemp(), max_dbs=1)
>>> cold = ColdRecords(env.open_db(b"pages"), lambda: env.begin(buffers=True))
>>> cold.create(0, 2, np.zeros(2, "V20"), np.array([7, 7]))
>>> cold.set("n_crawls", np.array([1]), [3])
>>> with env.begin(write=True) as txn:
...     cold.write(txn)
>>> cold.written()
>>> cold.get("n_crawls", np.array([0, 1])).tolist(), cold.get1("parent", 1)
([0, 3], 7)
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from .errors import CorruptDatabase
from .keys import key_page, page_key, page_keys
from .vertices import COLD_NAMES, COLD_RECORD, VertexTable, default_records

# Pages read at a time by a tool loading every field: a slice's copies (the
# rows as bytes, joined, decoded) cost about 400 bytes a page.
SLICE = 1 << 18


class ColdRecords:
    """Cold fields in the LMDB table ``db`` (see the module docstring).

    Parameters
    ----------
    db
        LMDB handle of the ``pages`` table.
    snapshot : callable() -> context manager of a read transaction
        Reads of committed records.
    """

    def __init__(self, db: Any, snapshot: Callable[[], Any]) -> None:
        self.db = db
        self._snapshot = snapshot
        self._rows = np.empty(256, COLD_RECORD)  # records of this batch
        self._slot: dict[int, int] = {}  # page -> its row
        self._page = np.empty(256, np.int64)  # row -> its page
        self._dirty = np.zeros(256, bool)
        self.n_rows = 0

    def __len__(self) -> int:
        return self.n_rows

    def _room(self, k: int) -> None:
        if self.n_rows + k > len(self._rows):
            size = max(self.n_rows + k, 2 * len(self._rows))
            rows = np.empty(size, COLD_RECORD)
            rows[: self.n_rows] = self._rows[: self.n_rows]
            dirty = np.zeros(size, bool)
            dirty[: self.n_rows] = self._dirty[: self.n_rows]
            page = np.empty(size, np.int64)
            page[: self.n_rows] = self._page[: self.n_rows]
            self._rows, self._dirty, self._page = rows, dirty, page

    def create(self, start: int, k: int, fps: np.ndarray, parents: Any = None) -> None:
        """Records of the new pages ``start .. start+k-1`` (defaults, their
        fingerprints and parents), written at the next commit."""
        self._room(k)
        lo = self.n_rows
        rows = self._rows[lo : lo + k]
        rows[:] = default_records(k, COLD_RECORD)
        rows["fp"] = fps
        if parents is not None:
            rows["parent"] = parents
        self._dirty[lo : lo + k] = True
        self._page[lo : lo + k] = np.arange(start, start + k)
        self._slot.update(zip(range(start, start + k), range(lo, lo + k)))
        self.n_rows += k

    def slots(self, pages: np.ndarray) -> np.ndarray:
        """The rows of ``pages`` in this batch's buffer, reading the missing ones."""
        slot = self._slot
        pages = np.asarray(pages, np.int64).ravel()
        missing = [p for p in dict.fromkeys(pages.tolist()) if p not in slot]
        if missing:
            self._load(sorted(missing))
        return np.fromiter((slot[p] for p in pages.tolist()), np.int64, len(pages))

    def _load(self, pages: list[int]) -> None:
        with self._snapshot() as txn:
            found = txn.cursor(db=self.db).getmulti(page_keys(pages))
            keys, values = [bytes(key) for key, _ in found], [bytes(value) for _, value in found]
        for key, value in zip(keys, values):
            if len(value) != COLD_RECORD.itemsize:
                raise CorruptDatabase(f"page record {key_page(key)} has {len(value)} bytes (corrupt database)")
        self._room(len(pages))
        lo, k = self.n_rows, len(values)
        # One conversion of all the rows and keys: a batch reads thousands.
        self._rows[lo : lo + k] = np.frombuffer(b"".join(values), COLD_RECORD)
        self._page[lo : lo + k] = np.frombuffer(b"".join(keys), ">u8")
        self._slot.update(zip(self._page[lo : lo + k].tolist(), range(lo, lo + k)))
        if k != len(pages):
            gone = next(p for p in pages if p not in self._slot)
            raise CorruptDatabase(f"page {gone} has no record (corrupt database)")
        self.n_rows += k

    def preload(self, pages: np.ndarray) -> None:
        """Read the records of ``pages`` now (one read for a batch's pages)."""
        self.slots(pages)

    def get(self, name: str, pages: np.ndarray) -> np.ndarray:
        """Field ``name`` of ``pages`` (a copy)."""
        slots = self.slots(pages)  # first: reading may reallocate the rows
        return self._rows[name][slots]

    def get1(self, name: str, page: int) -> Any:
        """Field ``name`` of one page (a Python scalar, or bytes for ``fp``)."""
        slot = self._slot.get(page)
        if slot is None:
            slot = int(self.slots(np.array([page]))[0])
        value = self._rows[name][slot]
        return bytes(value) if name == "fp" else value.item()

    def set(self, name: str, pages: np.ndarray, values: Any) -> None:
        """Set field ``name`` of ``pages`` (written at the next commit)."""
        slots = self.slots(pages)
        self._rows[name][slots] = values
        self._dirty[slots] = True

    def set1(self, name: str, page: int, value: Any) -> None:
        """Set field ``name`` of one page."""
        slot = self._slot.get(page)
        if slot is None:
            slot = int(self.slots(np.array([page]))[0])
        self._rows[name][slot] = value
        self._dirty[slot] = True

    def write(self, txn: Any) -> None:
        """Write the changed and new records in ``txn``."""
        slots = np.flatnonzero(self._dirty[: self.n_rows])
        if not len(slots):
            return
        pages = self._page[slots]
        order = np.argsort(pages)
        raw = self._rows[slots[order]].tobytes()
        size = COLD_RECORD.itemsize
        txn.cursor(db=self.db).putmulti([(key, raw[size * i : size * (i + 1)])
                                         for i, key in enumerate(page_keys(pages[order]))])

    def written(self) -> None:
        """The batch was committed (or dropped): forget its records."""
        self._slot.clear()
        self.n_rows = 0
        self._dirty[:] = False
        if len(self._rows) > 1 << 16:
            self._rows = np.empty(256, COLD_RECORD)
            self._dirty = np.zeros(256, bool)
            self._page = np.empty(256, np.int64)

    def read_all(self, txn: Any, n: int, path: str, start: int = 0) -> np.ndarray:
        """The records of pages ``start .. n-1`` as of ``txn`` (a crawl
        reopening, for the fingerprints it held)."""
        out = np.empty(n - start, COLD_RECORD)
        for lo, records in self.read_slices(txn, n, path, start):
            out[lo - start : lo - start + len(records)] = records
        return out

    def read_slices(self, txn: Any, n: int, path: str, start: int = 0) -> Iterator[tuple[int, np.ndarray]]:
        """The records of pages ``start .. n-1`` as of ``txn``, in slices of
        :data:`SLICE` pages: (first page, records). A tool holding every
        field needs no more than a slice besides its table."""
        size = SLICE
        # Key and value copied out together in one pass and decoded by numpy
        # as a whole: a numpy call per record would cost more than reading it.
        row = np.dtype([("key", ">u8"), ("record", COLD_RECORD)])
        cur = txn.cursor(db=self.db)
        cur.set_range(page_key(start))
        entries = cur.iternext()
        lo = start
        while lo < n:
            rows = list(map(b"".join, itertools.islice(entries, min(size, n - lo))))
            bad = np.flatnonzero(np.fromiter(map(len, rows), np.int64, len(rows)) != row.itemsize)
            if not len(bad):
                got = np.frombuffer(b"".join(rows), row)
                bad = np.flatnonzero(got["key"] != np.arange(lo, lo + len(rows), dtype=np.uint64))
            if len(bad):
                raise CorruptDatabase(f"{path}: page record {lo + int(bad[0])} missing or damaged (corrupt database)")
            if not rows:
                raise CorruptDatabase(f"{path}: {n - lo} of {n - start} page records missing (corrupt database)")
            yield lo, got["record"]
            lo += len(rows)


class TableColdRecords:
    """:class:`ColdRecords`' interface over a table holding every field
    (tools, and a crawl of a database opened with every field in memory):
    sets write the table and mark the pages changed."""

    def __init__(self, table: VertexTable, touch: Callable[[Any], None]) -> None:
        self.table = table
        self.touch = touch

    def create(self, start: int, k: int, fps: np.ndarray, parents: Any = None) -> None:
        t = self.table
        t.fp[start : start + k] = fps
        if parents is not None:
            t.parent[start : start + k] = parents

    def preload(self, pages: np.ndarray) -> None:
        pass

    def get(self, name: str, pages: np.ndarray) -> np.ndarray:
        return getattr(self.table, name)[np.asarray(pages, np.int64)]

    def get1(self, name: str, page: int) -> Any:
        value = getattr(self.table, name)[page]
        return bytes(value) if name == "fp" else value.item()

    def set(self, name: str, pages: np.ndarray, values: Any) -> None:
        pages = np.asarray(pages, np.int64)
        getattr(self.table, name)[pages] = values
        self.touch(pages)

    def set1(self, name: str, page: int, value: Any) -> None:
        getattr(self.table, name)[page] = value
        self.touch(page)


class ColdView:
    """Field ``name`` of every page, read (and written) through ``cold`` as
    if it were an array: what :class:`CompactTable` gives for a cold field.
    Each access is a read of the page database: for tools and tests, not
    for code that runs once per link."""

    def __init__(self, cold: ColdRecords, name: str, table: VertexTable) -> None:
        self.cold, self.name, self.table = cold, name, table

    def _pages(self, idx: Any) -> tuple[np.ndarray, bool]:
        if isinstance(idx, slice):
            return np.arange(self.table.n)[idx], False
        arr = np.asarray(idx)
        if arr.dtype == bool:
            return np.flatnonzero(arr), False
        return arr.astype(np.int64).ravel(), arr.ndim == 0

    def __getitem__(self, idx: Any) -> Any:
        pages, scalar = self._pages(idx)
        values = self.cold.get(self.name, pages)
        return values[0] if scalar else values

    def __setitem__(self, idx: Any, values: Any) -> None:
        pages, _ = self._pages(idx)
        self.cold.set(self.name, pages, values)

    def __len__(self) -> int:
        return self.table.n


class CompactTable(VertexTable):
    """The hot fields in memory, the cold ones read through ``cold`` on
    access (:class:`ColdView`)."""

    def __init__(self, capacity: int = 1024, fields: tuple = (), cold: Any = None) -> None:
        super().__init__(capacity, fields)
        self.cold = cold

    def __getattr__(self, name: str) -> Any:
        if name in COLD_NAMES and self.__dict__.get("cold") is not None:
            return ColdView(self.cold, name, self)
        raise AttributeError(name)


__all__ = ["ColdRecords", "ColdView", "CompactTable", "TableColdRecords"]
