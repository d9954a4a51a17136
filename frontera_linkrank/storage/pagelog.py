"""Page records on disk: a checkpoint of the page table plus a log of changes.

Of the hot fields (:data:`~.vertices.HOT_RECORD`), the ones that change
for pages all over the table (a crawled page changes the cash of each page
it links to); the cold fields are in the ``pages`` table, one value per
page (:mod:`.coldrecords`). Schema 2 databases kept whole records here
(:data:`~.vertices.RECORD`); they are read with that layout.

``vertices`` holds the checkpoint: packed records,
:data:`CHUNK` pages per value, keyed by chunk number. ``vlog`` holds the
records changed since, in entries of at most :data:`PART` records keyed
by the commit's sequence number and the entry's number in the commit
(u8 and u4, big-endian; a database written before parts has one entry a
commit, keyed by the sequence number alone): ``b"LRvlog01", k (u8)``,
then ``k`` page indices (u4, padded to 8 bytes) and their ``k`` records.

Why a log: a crawled page changes the cash of each page it links to, so a
batch touches records all over the table. LMDB copies every B-tree page a
transaction modifies; with one key per page, scattered updates copy about
a B-tree page each (the measurement is in ``docs/storage.md``).
Appending the changed records at each commit costs a sequential
write of their bytes instead, and a checkpoint now and then rewrites the
table in large chunks (when the log outgrows both the table and the
``checkpoint_bytes`` given).

A commit's log entry is written as several values of at most
:data:`PART` records, keyed by sequence number and part: a value that
fits in a B-tree page is written in place, where a larger one needs a run
of contiguous free pages, and LMDB finds such a run by scanning its free
list, which grows with the database (the log itself, dropped at every
checkpoint, frees hundreds of thousands of pages at once).
"""

import struct
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..numeric import unique
from .errors import CorruptDatabase
from .keys import page_key
from .vertices import HOT_RECORD, VertexTable

CHUNK = 4096  # pages per checkpoint value
# Records per log value: with its 12-byte key, a value of 60 hot records
# (1,936 bytes) stays under the 2,038 bytes LMDB keeps in a 4 KiB page.
PART = 60
_VLOG = struct.Struct("<8sQ")
_VLOG_MAGIC = b"LRvlog01"


def parse_entry(buf: bytes | memoryview, record: np.dtype = HOT_RECORD) -> tuple[np.ndarray, np.ndarray]:
    """``(indices, records)`` of one log entry (views on ``buf``)."""
    magic, k = _VLOG.unpack_from(buf, 0)
    if magic != _VLOG_MAGIC:
        raise CorruptDatabase("page record log entry is corrupt (bad magic)")
    off = _VLOG.size
    idx = np.frombuffer(buf, "<u4", k, off).astype(np.int64)
    off += 4 * k + (-4 * k) % 8
    if len(buf) != off + k * record.itemsize:
        raise CorruptDatabase("page record log entry is corrupt (wrong length)")
    recs = np.frombuffer(buf, record, k, off)
    return idx, recs


def pack_entry(idx: np.ndarray, recs: np.ndarray) -> bytes:
    """The log entry of the records ``recs`` of pages ``idx``."""
    k = len(idx)
    pad = b"\0" * ((-4 * k) % 8)
    return b"".join((_VLOG.pack(_VLOG_MAGIC, k), idx.astype("<u4").tobytes(), pad, recs.tobytes()))


@dataclass
class Plan:
    """What a commit writes to the page records (made by :meth:`PageLog.plan`)."""

    entries: list[bytes]  # log entries of the changed records, PART records each (none: no change)
    checkpoint: bool  # rewrite the changed chunks and empty the log instead
    chunks: set[int]  # chunks changed since the last checkpoint, this commit's included
    log_bytes: int  # log size after this commit (if no checkpoint)
    seq: int  # the "vlog_seq" after this commit


class PageLog:
    """The ``vertices`` and ``vlog`` tables, and the changes of the batch.

    Parameters
    ----------
    vertices_db, vlog_db
        LMDB handles.
    checkpoint_bytes : int
        Fold the log into the checkpoint once it is larger than this and
        than the table (0: as soon as it is larger than the table).
    record : numpy dtype
        The records' layout (:data:`~.vertices.HOT_RECORD`; a schema 2
        database's whole :data:`~.vertices.RECORD`).
    """

    def __init__(self, vertices_db: Any, vlog_db: Any, checkpoint_bytes: int = 0,
                 record: np.dtype = HOT_RECORD) -> None:
        self.vertices_db = vertices_db
        self.vlog_db = vlog_db
        self.record = record
        self.checkpoint_bytes = int(checkpoint_bytes)
        self._touched: list[Any] = []  # index arrays / indices changed in this batch
        self._chunks: set[int] = set()  # chunks with records in the log
        self._log_bytes = 0

    def load(self, txn: Any, table: VertexTable, path: str) -> None:
        """Fill ``table`` (of the page count, appended already) with the
        records as of the snapshot ``txn``."""
        n = table.n
        covered = np.zeros(n, bool)
        for key, buf in txn.cursor(self.vertices_db):
            lo = int.from_bytes(bytes(key), "big") * CHUNK
            if len(buf) % self.record.itemsize:
                raise CorruptDatabase(f"{path}: page table chunk of {len(buf)} bytes (corrupt database)")
            recs = np.frombuffer(buf, self.record)
            if lo + len(recs) > n:
                raise CorruptDatabase(f"{path}: page table chunk beyond the page count (corrupt database)")
            table.load_records(recs, slice(lo, lo + len(recs)))
            covered[lo : lo + len(recs)] = True
        self._chunks, self._log_bytes, self._touched = set(), 0, []
        for _, buf in txn.cursor(self.vlog_db):
            idx, recs = parse_entry(buf, self.record)
            if len(idx) and idx.max() >= n:
                raise CorruptDatabase(f"{path}: page record log beyond the page count (corrupt database)")
            table.load_records(recs, idx)
            covered[idx] = True
            self._chunks.update(unique(idx // CHUNK).tolist())
            self._log_bytes += len(buf)
        if not covered.all():
            raise CorruptDatabase(f"{path}: {int((~covered).sum())} of {n} page records missing (corrupt database)")

    def touch(self, idx: Any) -> None:
        """Mark pages (an index or an array of indices) changed in this batch."""
        self._touched.append(idx)

    def plan(self, table: VertexTable, first_new: int, seq: int, fold: bool = False) -> Plan:
        """What to write for this batch: the pages touched and the pages
        from ``first_new`` on (added since the last commit); ``seq`` is the
        committed ``vlog_seq``. ``fold``: a checkpoint whatever the log's
        size (a closing crawl: the next open reads the table in chunks of
        contiguous pages instead of a log of small values all over the file)."""
        n = table.n
        parts = [np.arange(first_new, n, dtype=np.int64)]
        for d in self._touched:
            parts.append(np.atleast_1d(np.asarray(d, np.int64)))
        dirty = unique(np.concatenate(parts))
        chunks = self._chunks | set(unique(dirty // CHUNK).tolist())
        records = self._records(table, dirty)
        entries = [pack_entry(dirty[a : a + PART], records[a : a + PART]) for a in range(0, len(dirty), PART)]
        log_bytes = self._log_bytes + sum(map(len, entries))
        checkpoint = fold or log_bytes > max(self.checkpoint_bytes, n * self.record.itemsize)
        seq = 0 if checkpoint else seq + (1 if entries else 0)
        return Plan(entries, checkpoint, chunks, log_bytes, seq)

    def write(self, txn: Any, table: VertexTable, plan: Plan) -> None:
        """Write ``plan`` in the write transaction ``txn``."""
        if plan.checkpoint:
            n = table.n
            items = []
            for c in sorted(plan.chunks):
                lo, hi = c * CHUNK, min((c + 1) * CHUNK, n)
                items.append((page_key(c), self._records(table, slice(lo, hi)).tobytes()))
            txn.cursor(self.vertices_db).putmulti(items)
            txn.drop(self.vlog_db, delete=False)
        elif plan.entries:
            key = page_key(plan.seq - 1)
            txn.cursor(self.vlog_db).putmulti([(key + part.to_bytes(4, "big"), entry)
                                               for part, entry in enumerate(plan.entries)], append=True)

    def _records(self, table: VertexTable, idx: Any) -> np.ndarray:
        recs = table.records(idx)
        return recs if recs.dtype == self.record else _select(recs, self.record)

    def dirty(self) -> np.ndarray:
        """Pages touched in this batch (sorted, distinct)."""
        parts = [np.atleast_1d(np.asarray(d, np.int64)) for d in self._touched]
        return unique(np.concatenate(parts)) if parts else np.zeros(0, np.int64)

    def written(self, plan: Plan) -> None:
        """``plan`` is committed."""
        if plan.checkpoint:
            self._chunks, self._log_bytes = set(), 0
        else:
            self._chunks, self._log_bytes = plan.chunks, plan.log_bytes
        self._touched = []


def _select(recs: np.ndarray, record: np.dtype) -> np.ndarray:
    out = np.empty(len(recs), record)
    for name in record.names or ():
        out[name] = recs[name]
    return out


__all__ = ["CHUNK", "PART", "PageLog", "Plan", "pack_entry", "parse_entry"]
