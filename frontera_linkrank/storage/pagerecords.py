"""The page records of a page database: hot fields in memory, cold ones in
LMDB (opened ``compact``), or every field in memory (tools); the
fingerprint index, the hosts' page lists, and the upgrade of schema 2.

:class:`PageRecords` is a part of :class:`~.pagedb.PageDB` (a mixin, as
:class:`~.features.FeatureTables` is): it reads the database's tables
and metadata through it.

Opened ``compact`` (a crawl), only the pages' hot fields are in memory
(:attr:`PageDB.vertices`, 24 to 28 bytes a page); the cold ones are read and
written through :attr:`PageDB.cold` for the pages of the batch at hand,
and fingerprints are looked up in the ``fps`` table. Otherwise (tools)
every field of every page is loaded into :attr:`PageDB.vertices`, and
:attr:`PageDB.cold` reads and writes it there.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from ..numeric import unique
from . import readahead
from .coldrecords import ColdRecords, CompactTable
from .environment import begin_read
from .errors import LMDB_DAMAGE, CorruptDatabase, PageDBError, WriteError
from .fptables import read_chunks, read_held, write_chunks, write_held
from .keyfilter import KIND, KeyFilter
from .keys import key_list, page_key, page_keys
from .meta import SCHEMA_VERSION
from .meta import decode as decode_meta
from .meta import encode as encode_meta
from .pagelog import PageLog
from .vectors import STATE_PREFIX
from .vertices import COLD_NAMES, COLD_RECORD, F_CRAWLED, HOT_FIELDS, MAX_DEPTH, RECORD_V2, VertexTable

logger = logging.getLogger(__name__)

HEADS = STATE_PREFIX + "queue.heads"
"""The pages of the frontier's heads at the last close (:meth:`PageRecords.store_heads`)."""
HELD_SECTION = "fps_held"
"""Metadata key of the pages a close stored in the ``fpsheld`` table."""
FILTER_SECTION = "fps_filter"
"""Metadata key of the fingerprint filter a close stored in the ``fpsfilter`` table."""
FILTER_CHUNK = 1 << 23
"""Bytes of the filter per LMDB value."""


class PageRecords:
    """Page records, fingerprints and host lists of a :class:`~.pagedb.PageDB`."""

    snapshot: Any  # PageDB's
    _write: Any  # PageDB's
    _load: Any  # PageDB's
    _damage: Any  # PageDB's

    if TYPE_CHECKING:
        @property
        def n_pages(self) -> int: ...  # PageDB's

        @property
        def meta(self) -> Mapping[str, Any]: ...  # PageDB's

    # Set by PageDB.
    compact: bool
    vertices: Any
    cold: Any
    env: Any
    dbs: dict
    path: str
    _fps: Any
    _fps_held: Any  # the fpsheld table, or None (a read-only database without it)
    _fps_filter: Any  # the fpsfilter table, or None (the same)
    _checked: bool
    write_scores: Any  # PageDB's
    read_scores: Any  # PageDB's
    _meta: Any
    _fp_index: dict[bytes, int] | None
    _rekeyed: list[tuple[bytes, bytes, int]]  # (old key, new key, page) to write at the next commit
    _rewrite_fps: bool  # write the whole fps table at the next commit
    _host_pages: Any
    _pages: Any
    _urls: Any
    _log: Any
    _hosts: Any
    _committed_n: int

    def _table(self, capacity: int) -> VertexTable:
        if self.compact:
            return CompactTable(capacity, HOT_FIELDS, self.cold if hasattr(self, "cold") else None)
        return VertexTable(capacity)

    def _load_records(self, txn: Any, doc: dict, n: int) -> VertexTable:
        """The page table of the snapshot ``txn`` (``n`` pages): the hot
        fields, and the cold ones unless compact."""
        table = self._table(max(n, 1024))
        table.append(n)
        if doc.get("version") == 2:
            PageLog(self.dbs[b"vertices"], self.dbs[b"vlog"], record=RECORD_V2).load(txn, table, self.path)
            table.flags[:n] |= np.where(table.n_crawls[:n] > 0, F_CRAWLED, 0).astype(np.uint8)
            return table
        for name in (b"vertices", b"vlog"):  # read whole, from values here and there in the file
            readahead.prefetch(self.env, txn, self.path, name)
        self._log.load(txn, table, self.path)
        if not self.compact:
            if self._pages is None:
                raise CorruptDatabase(f"{self.path}: the table of page records is missing (corrupt database)")
            for lo, records in ColdRecords(self._pages, self.snapshot).read_slices(txn, n, self.path):
                table.load_records(records, slice(lo, lo + len(records)))
        return table

    def _upgrade(self, txn: Any, n: int) -> None:
        """A schema 2 database opened for writing: rewrite its page records
        as hot records and cold ones, and index its fingerprints (one
        transaction; then it is read as any schema 3 database)."""
        txn.abort()
        old = VertexTable(max(n, 1024))
        old.append(n)
        with begin_read(self.env, buffers=True) as rtxn:
            PageLog(self.dbs[b"vertices"], self.dbs[b"vlog"], record=RECORD_V2).load(rtxn, old, self.path)
        old.flags[:n] |= np.where(old.n_crawls[:n] > 0, F_CRAWLED, 0).astype(np.uint8)
        old.depth[:n] = np.minimum(old.depth[:n], MAX_DEPTH)
        logger.info("%s: upgrading the page database to schema %d (%d pages)", self.path, SCHEMA_VERSION, n)

        def write(wtxn: Any) -> None:
            wtxn.drop(self.dbs[b"vertices"], delete=False)
            wtxn.drop(self.dbs[b"vlog"], delete=False)
            hot = PageLog(self.dbs[b"vertices"], self.dbs[b"vlog"])
            hot.write(wtxn, old, hot.plan(old, 0, 0))
            cold = _cold_records(old, np.arange(n))
            raw, size = cold.tobytes(), cold.dtype.itemsize
            items = [(k, raw[i * size : (i + 1) * size]) for i, k in enumerate(page_keys(range(n)))]
            wtxn.cursor(db=self._pages).putmulti(items)
            wtxn.cursor(db=self._fps.db).putmulti(sorted(zip(old.fingerprints(), page_keys(range(n)))))
            doc = decode_meta(wtxn.get(b"meta", db=self.dbs[b"meta"]))
            doc.update(version=SCHEMA_VERSION, vlog_seq=0)
            wtxn.put(b"meta", encode_meta(doc), db=self.dbs[b"meta"])

        self._write(write)
        with begin_read(self.env, buffers=True) as rtxn:
            self._load(rtxn)

    def _restore_fingerprints(self) -> None:
        """A compact writer opening: the pages from the metadata's
        ``fps_from`` on may be missing from the ``fps`` table (it is written
        behind, see :mod:`.fpindex`); their fingerprints are read from
        their records and those the table lacks are held pending."""
        n = self.n_pages
        start = self.meta.get("fps_from", n)
        if not isinstance(start, int) or not 0 <= start <= n:
            raise CorruptDatabase(f"{self.path}: fps_from {start!r} is not a page index (corrupt database)")
        if not (start == n or self._restore_held(start, n)):
            with begin_read(self.env, buffers=True) as txn, self._damage("page records"):
                records = ColdRecords(self._pages, self.snapshot).read_all(txn, n, self.path, start)
                self._fps.restore(txn, records["fp"], start)
        self._restore_filter(n)

    def _restore_filter(self, n: int) -> None:
        """Take back the fingerprint filter the last close stored
        (:meth:`_save_held`), if its record is in the last commit's
        metadata, the table has as many keys as then and the bits are
        whole; else the filter is filled from the table as lookups come."""
        saved = self.meta.get(FILTER_SECTION)
        if (self._fps.filter is None or self._fps_filter is None or not isinstance(saved, dict)
                or saved.get("n_pages") != n or saved.get("kind") != KIND):
            return
        try:
            with begin_read(self.env, buffers=True) as txn:
                if txn.stat(self._fps.db)["entries"] != saved.get("entries"):
                    raise ValueError("the fingerprint table has changed since")
                readahead.prefetch(self.env, txn, self.path, b"fpsfilter")
                raw = read_chunks(txn, self._fps_filter, KeyFilter.size_of(saved.get("segments")), "fingerprint filter")
            if hashlib.blake2b(raw, digest_size=16).hexdigest() != saved.get("digest"):
                raise ValueError("its checksum does not match")
            self._fps.filter = KeyFilter.restore(saved["segments"], raw)
        except (ValueError, TypeError, *LMDB_DAMAGE) as e:
            logger.warning("%s: the fingerprint filter stored at the last close is unusable (%s): filling it "
                           "from the table again", self.path, e)

    def _restore_held(self, start: int, n: int) -> bool:
        """Hold the pages the last close stored (:meth:`_save_held`), if
        its record is in the last commit's metadata and they are whole."""
        saved = self.meta.get(HELD_SECTION)
        if (self._fps_held is None or not isinstance(saved, dict) or not isinstance(saved.get("count"), int)
                or saved != {"n_pages": n, "fps_from": start, "count": saved["count"]}):
            return False
        try:
            with begin_read(self.env, buffers=True) as txn:
                for name in (b"fpsheld", b"fpsmarks"):  # a few values in runs of pages: read around, megabytes more
                    readahead.prefetch(self.env, txn, self.path, name)
                keys, pages = read_held(txn, self._fps_held, int(saved["count"]))
                self._fps.restore_held(txn, keys, pages, start, n)
        except (ValueError, TypeError, CorruptDatabase) as e:
            logger.warning("%s: the fingerprints stored at the last close are unusable (%s): reading them "
                           "back from the page records", self.path, e)
            self._fps.discard()
            return False
        return True

    def _save_held(self) -> None:
        """A writer closing: store the pages the fingerprint index holds
        (see :mod:`.fpindex`), and their record in the metadata, so that
        the next open need not read every page record from ``fps_from``
        on. Any later commit removes the record (:meth:`_forget_held`)."""
        if self.env is None or not self._checked or not self.compact:  # not a writer past its open's checks
            return
        doc = dict(self.meta)
        n, start = doc.get("n_pages", 0), doc.get("fps_from", 0)
        keyfilter = self._fps.filter if self._fps.filter is not None and self._fps.filter.ready else None
        if start >= n and keyfilter is None:
            return
        if start < n:
            keys, pages = self._fps.held_entries()
            doc[HELD_SECTION] = {"n_pages": n, "fps_from": start, "count": len(keys)}
        if keyfilter is not None:
            parts = keyfilter.parts()
            digest = hashlib.blake2b(digest_size=16)
            for part in parts:
                digest.update(part)
            doc[FILTER_SECTION] = {"n_pages": n, "kind": KIND, "segments": keyfilter.layout(),
                                   "digest": digest.hexdigest()}

        def write(txn: Any) -> None:
            if start < n:
                write_held(txn, self._fps_held, keys, pages)
            if keyfilter is not None:
                doc[FILTER_SECTION]["entries"] = txn.stat(self._fps.db)["entries"]
                write_chunks(txn, self._fps_filter, parts, FILTER_CHUNK)
            txn.put(b"meta", encode_meta(doc), db=self.dbs[b"meta"])

        try:
            self._write(write)
        except (WriteError, *LMDB_DAMAGE) as e:  # the next open reads them back from the page records
            logger.warning("%s: the held fingerprints could not be stored at close: %s", self.path, e)
            return
        self._meta.install(doc)

    def _forget_held(self, txn: Any, doc: dict) -> None:
        """A commit (writing ``doc``) after a close stored the held pages
        (:meth:`_save_held`): they are stale from this commit on."""
        if self.meta.get(HELD_SECTION) is not None:
            doc.pop(HELD_SECTION, None)
            if self._fps_held is not None:
                txn.drop(self._fps_held, delete=False)
        if self.meta.get(FILTER_SECTION) is not None:
            doc.pop(FILTER_SECTION, None)
            if self._fps_filter is not None:
                txn.drop(self._fps_filter, delete=False)

    def _list_hosts(self) -> None:
        """A database written before pages were listed by host: list them
        (once; written with the next commit)."""
        v, n = self.vertices, self.n_pages
        order = np.argsort(v.host[:n], kind="stable")
        self._host_pages.add(v.host[:n][order], order)

    @property
    def fp_index(self) -> dict[bytes, int]:
        """dict: 20-byte fingerprint -> page index (built on first use; not
        for a compact database, which looks them up: :meth:`find_many`)."""
        if self.compact:
            raise PageDBError("a compact page database has no fingerprint dict: use find_many")
        if self._fp_index is None:
            fps = self.vertices.fingerprints()
            self._fp_index = dict(zip(fps, range(len(fps))))
        return self._fp_index

    def find(self, fp: bytes) -> int | None:
        """Index of the page with fingerprint ``fp`` (20 bytes), or None."""
        if self.compact:
            # This batch's new pages and the pages handed out (cached) answer
            # from memory: a response's lookup reads nothing stored.
            i = self._fps.recall(fp) if type(fp) is bytes else -1
            if i >= 0:
                return i
            with self._damage("fingerprint index"):
                return self._fps.find(fp)
        return self.fp_index.get(fp)

    def find_many(self, fps: list[bytes]) -> list[int | None]:
        """Indices of the pages with fingerprints ``fps`` (None: unknown)."""
        if self.compact:
            with self._damage("fingerprint index"):
                return self._fps.find_many(fps)
        get = self.fp_index.get
        return [get(fp) for fp in fps]

    @property
    def fingerprint_lookups(self) -> int:
        """Fingerprints this process has looked up in the LMDB table: those
        that neither memory (new and held pages, the cache) nor the filter
        could answer."""
        return self._fps.lookups

    def rekey(self, i: int, key: bytes) -> None:
        """Give page ``i`` the 20-byte fingerprint ``key`` (a repair, by a
        tool): its record and the ``fps`` table change at the next commit.

        Raises
        ------
        ValueError
            ``key`` is another page's.
        """
        if self.compact:
            raise PageDBError("a compact page database does not re-key pages")
        index = self.fp_index
        if index.get(key, i) != i:
            raise ValueError(f"fingerprint {key.hex()} is page {index[key]}'s")
        old = bytes(self.vertices.fp[i])
        self.vertices.fp[i] = np.frombuffer(key, "V20")[0]
        if index.get(old) == i:
            del index[old]
        index[key] = i
        self._rekeyed.append((old, key, i))
        self.touch(i)

    def rewrite_fingerprint_table(self) -> None:
        """Write the ``fps`` table anew from the pages' fingerprints at the
        next commit (a repair, by a tool)."""
        if self.compact:
            raise PageDBError("a compact page database does not rewrite its fingerprint table")
        self._rewrite_fps = True

    def _write_fingerprints(self, txn: Any, doc: dict) -> None:
        """A writer holding every field: this batch's new pages, the pages a
        crawl had not written yet (from ``fps_from``), re-keyed pages, or
        the whole table; the table is then complete."""
        n = self.n_pages
        start = 0 if self._rewrite_fps else min(doc.get("fps_from", self._committed_n), self._committed_n)
        if self._rewrite_fps:
            txn.drop(self._fps.db, delete=False)
        cur = txn.cursor(db=self._fps.db)
        for lo in range(start, n, 1 << 20):  # in slices: a list of 20-byte keys costs 60 bytes each
            hi = min(lo + (1 << 20), n)
            cur.putmulti(sorted(zip(key_list(self.vertices.fp[lo:hi]), page_keys(range(lo, hi)))))
        for old, key, i in self._rekeyed:
            if cur.set_key(old) and bytes(cur.value()) == page_key(i):
                cur.delete()
            cur.put(key, page_key(i))
        doc["fps_from"] = n

    def fingerprints_of(self, pages: Any) -> np.ndarray:
        """Fingerprints (``V20``) of ``pages``."""
        return self.cold.get("fp", pages)

    def handed_out(self, pages: list[int], fps: np.ndarray) -> None:
        """``pages`` (fingerprints ``fps``) go out to be fetched: their
        responses are looked up by fingerprint without reading the index."""
        if self.compact:
            self._fps.remember(fps, pages)

    def add_pages(self, fps: list[bytes], urls: list[str], hosts: Iterable[int], parents: Any = None) -> int:
        """Append pages (lists of 20-byte fingerprints, URL strings and host
        ids; ``parents``, an array or a scalar, default none); returns the
        first new index. Other fields get their defaults."""
        k = len(fps)
        v = self.vertices
        start = v.append(k)
        if k:
            v.host[start : start + k] = hosts
            self._host_pages.add(v.host[start : start + k], np.arange(start, start + k))
            self.cold.create(start, k, np.frombuffer(b"".join(fps), "V20"), parents)
        if self.compact:
            self._fps.add(fps, start)
        elif self._fp_index is not None:
            self._fp_index.update(zip(fps, range(start, start + k)))
        self._urls.put_many(range(start, start + k), urls)
        return start

    def pages_of(self, host: int) -> np.ndarray:
        """Every page listed under ``host`` (committed, and this batch's)."""
        with self.snapshot() as txn, self._damage("host page lists"):
            return self._host_pages.pages(txn, host)

    def replace_pages(self, host: int, pages: np.ndarray) -> None:
        """Make ``pages`` the whole list of ``host`` (written at the next commit)."""
        self._host_pages.replace(host, pages)

    def store_heads(self, pages: np.ndarray) -> None:
        """Store the pages of the frontier's heads (a crawl closing), for
        the next open to put back in their heads."""
        self.write_scores({HEADS: np.asarray(pages, np.float64)}, {})

    def stored_heads(self) -> np.ndarray | None:
        """The pages :meth:`store_heads` stored last, or None. They are a
        hint (any waiting pages make valid heads): a damaged vector is
        left unread, with a warning."""
        try:
            values, _ = self.read_scores(HEADS)
        except CorruptDatabase as e:
            logger.warning("%s: the queue's heads stored at close are unreadable (%s): not used", self.path, e)
            return None
        if values is None:
            return None
        ok = np.isfinite(values) & (values >= 0) & (values < self.n_pages) & (values == np.floor(values))
        return values[ok].astype(np.int64)

    def touch(self, idx: int | np.ndarray | list[int]) -> None:
        """Mark pages (an index or an array of indices) changed in this batch."""
        self._log.touch(idx)

    def urls(self, idx: Iterable[int] | np.ndarray, txn: Any = None) -> list[str | None]:
        """URLs of the pages ``idx`` (list of str; committed pages and pages
        added in the current batch; None beyond)."""
        if txn is None:
            with self.snapshot() as own:
                out = self._urls.get_list(idx, own)
        else:
            out = self._urls.get_list(idx, txn)
        if None in out:
            # Every page has had its URL since it was added: a missing one is damage.
            pages = np.asarray(idx, np.int64).tolist()
            missing = [i for i, u in zip(pages, out) if u is None and 0 <= i < self.n_pages]
            if missing:
                raise CorruptDatabase(f"{self.path}: page {missing[0]} has no URL (corrupt database)")
        return out

    def url(self, i: int, txn: Any = None) -> str | None:
        """URL of page ``i`` (see :meth:`urls`)."""
        return self.urls([i], txn)[0]

    def _cold_items(self, n: int) -> list:
        """Every field in memory: the cold records of the pages changed in
        this batch and the new ones."""
        pages = unique(np.concatenate((self._log.dirty(), np.arange(self._committed_n, n, dtype=np.int64))))
        recs = _cold_records(self.vertices, pages)
        raw, size = recs.tobytes(), recs.dtype.itemsize
        return [(k, raw[i * size : (i + 1) * size]) for i, k in enumerate(page_keys(pages))]


def _cold_records(table: VertexTable, pages: np.ndarray) -> np.ndarray:
    """The cold records (:data:`~.vertices.COLD_RECORD`) of ``pages`` of a table with every field."""
    out = np.empty(len(pages), COLD_RECORD)
    for name in COLD_NAMES:
        out[name] = getattr(table, name)[pages]
    return out
