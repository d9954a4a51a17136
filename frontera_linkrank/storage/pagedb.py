"""The page database: one LMDB environment directory.

Named databases inside the environment:

``meta``       one JSON document: schema version, page count, and one
               section per feature (counters, AOPIC globals...), see :mod:`.meta`
``vertices``   the checkpoint of the pages' hot fields, see :mod:`.pagelog`
``vlog``       hot records changed since the checkpoint, see :mod:`.pagelog`
``pages``      the pages' cold fields, one value per page, see :mod:`.coldrecords`
``fps``        fingerprint -> page index; ``fpsmarks``, ``fpsheld``, ``fpsfilter``: see :mod:`.fptables`
``urls``       page index (8-byte big-endian) -> URL (UTF-8)
``hosts``      host name -> host id, see :mod:`.hosts`
``edges``      blocks of out-links, see :mod:`.edges`
``scores``     named float vectors (PageRank, HITS), see :mod:`.vectors`
``hostpages``  the pages of each host, where the frontier finds a host's waiting pages again, see :mod:`.hostpages`

and the side tables of the features (:mod:`.sidetable`), keyed by page index:

``requests``   method/headers/cookies/meta/body of requests that are not a
               plain GET (so they are handed out as they came in), as
               MessagePack (:mod:`.packed`; format in the section ``requests``)
``errors``     last fetch error (UTF-8)
``visits``     the page's last recrawl visits (:data:`VISIT` records:
               interval since the previous visit, changed or not)
``validators`` ETag and Last-Modified of its last fetch (JSON)

One process writes (an exclusive ``flock`` on ``writer.lock``, see
:mod:`.lock`); any number of processes may open the database read-only
meanwhile and see the last committed batch. A crawl opens it ``compact`` (:mod:`.pagerecords`).
"""

import contextlib
import logging
import os
import struct
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import lmdb
import numpy as np

from . import environment, integrity, readahead, vectors
from .coldrecords import ColdRecords, TableColdRecords
from .edges import EdgeStore
from .environment import TABLES, begin_read
from .errors import LMDB_DAMAGE, CorruptDatabase, DiskFullError, PageDBError, WriteError, WriterLockedError
from .features import VISIT, FeatureTables
from .fpindex import FingerprintIndex
from .hostpages import HostPages
from .hosts import HostNames, HostTable
from .keys import page_key, page_keys
from .lock import WriterLock
from .meta import SCHEMA_NAME, SCHEMA_VERSION, MetaDocument, check_schema
from .meta import decode as decode_meta
from .meta import encode as encode_meta
from .pagelog import CHUNK, PageLog
from .pagerecords import PageRecords
from .sidetable import Codec, SideTable, Text
from .vectors import SCORE_CHUNK, read_scores, write_scores
from .vertices import FIELDS, HOT_FIELDS, HOT_RECORD, check_records

logger = logging.getLogger(__name__)

# Tables of storage itself: not side tables.
_OWN_TABLES = frozenset(("meta", "vertices", "vlog", "urls", "hosts", "edges", "scores", "hostpages", "pages",
                         "fps", "fpsmarks", "fpsheld", "fpsfilter"))


class PageDB(FeatureTables, PageRecords):
    """Open (or create) the page database at ``path``.

    Parameters
    ----------
    path : str
        Directory of the LMDB environment.
    readonly : bool
        Open for reading while another process may be writing. The page
        table is loaded as of the last commit; call :meth:`reload` to see
        newer commits. The other parameters do not apply.
    map_size : int, optional
        Initial map size in bytes; it doubles whenever a commit needs more.
        By default the size the environment had (LMDB's minimum, 1 MiB, for
        a new database): fine for tools, a crawl passes its setting.
    sync : bool
        fsync on commit (durable against power loss). On unless turned off.
    checkpoint_bytes : int, optional
        Fold the record log into the checkpoint once it is larger than this
        (and than the page table). By default as soon as it is larger than
        the page table.
    compact : bool
        A writer holding only the hot fields in memory (a crawl); see the
        module docstring.
    full_check : bool
        Walk every B-tree page at open, even of a file a writer closed
        cleanly (:func:`~.integrity.open_checked`).

    Raises
    ------
    PageDBError
        Not a page database, or of another schema version.
    WriterLockedError
        Opening for writing while another process writes.

    Examples
    --------
    >>> import tempfile
    >>> db = PageDB(tempfile.mkdtemp() + "/db")
    >>> db.n_pages
    0
    >>> db.close()
    """

    def __init__(self, path: str | os.PathLike[str], readonly: bool = False, *, map_size: int | None = None,
                 sync: bool = True, checkpoint_bytes: int | None = None, compact: bool = False,
                 full_check: bool = False) -> None:
        self.path = os.fspath(path)
        self._checked = False  # a writer past its open's checks: its close leaves a clean file
        self.readonly = readonly
        self.compact = bool(compact) and not readonly
        self._lock: WriterLock | None = None
        self._ro_txn: Any = None
        # Held by other threads' read transactions (reader()); the map is only resized under it: LMDB
        # forbids a resize while this process has a transaction open, and a reader would fault on the old map.
        self._remap_lock = threading.Lock()
        self._close_hooks: list[Callable[[], None]] = []
        self._tables: dict[str, SideTable] = {}
        self.env: Any = None
        environment.check_path(self.path, readonly)
        if not readonly:
            environment.make_dir(self.path)
            self._lock = WriterLock(self.path)
        try:
            self.env = integrity.open_checked(self.path, readonly, map_size, sync, full_check)
            self.dbs = environment.open_tables(self.env, self.path, readonly)
            self._open_parts(int(checkpoint_bytes or 0))
            with self.bulk_reads():  # whole tables read
                self.reload()
            with self.snapshot() as txn:
                self._check_request_format(txn)
            self._checked = not readonly
        except LMDB_DAMAGE as e:
            self.close()
            raise CorruptDatabase(f"{self.path}: LMDB reports damage: {e} (corrupt database)") from None
        except BaseException:
            self.close()
            raise

    def _open_parts(self, checkpoint_bytes: int) -> None:
        dbs = self.dbs
        self._fields = HOT_FIELDS if self.compact else FIELDS
        self.vertices = self._table(1024)
        self.edges = EdgeStore(dbs[b"edges"])
        self._log = PageLog(dbs[b"vertices"], dbs[b"vlog"], checkpoint_bytes)
        self._hosts = HostTable(dbs[b"hosts"])
        handle = environment.table_handle
        self._host_pages = HostPages(handle(self.env, dbs, b"hostpages", self.readonly))
        self._pages, fps, marks, self._fps_held, self._fps_filter = (
            handle(self.env, dbs, t, self.readonly) for t in (b"pages", b"fps", b"fpsmarks", b"fpsheld", b"fpsfilter"))
        self._fps = FingerprintIndex(fps, self.snapshot, marks, filtered=self.compact)
        self.cold: ColdRecords | TableColdRecords = (
            ColdRecords(self._pages, self.snapshot) if self.compact else TableColdRecords(self.vertices, self.touch)
        )
        if self.compact:
            self.vertices.cold = self.cold
        self._meta = MetaDocument({})
        self._urls = self._declare("urls", Text(), append=True)
        self._declare_feature_tables()

    def reload(self) -> None:
        """(Re)load metadata, hosts, page table and edge directory from the
        last committed state, in one read transaction (a writer's
        uncommitted batch is dropped).

        A read-only database keeps that transaction open until the next
        ``reload`` or ``close``, and every later read (:meth:`snapshot`,
        :meth:`urls`, edges, scores) uses it, so a tool sees one consistent
        commit however long it runs while a crawl writes.
        """
        if self.readonly:
            if self._ro_txn is not None:
                self._ro_txn.abort()
            self._ro_txn = begin_read(self.env, buffers=True)
            self._load(self._ro_txn)
        else:
            with begin_read(self.env, buffers=True) as txn:
                self._load(txn)
        self._fp_index: dict[bytes, int] | None = None
        self._rekeyed, self._rewrite_fps = [], False
        for table in self._tables.values():
            table.discard()
        self._host_pages.discard()
        self._fps.discard()
        if isinstance(self.cold, ColdRecords):
            self.cold.written()
            self._restore_fingerprints()
        else:
            self.cold = TableColdRecords(self.vertices, self.touch)
        self._committed_n = self.n_pages
        if not self.readonly and self.n_pages and not self._meta.get("host_lists"):
            self._list_hosts()

    def _load(self, txn: Any) -> None:
        try:
            raw = txn.get(b"meta", db=self.dbs[b"meta"])
            if raw is None:  # written with the tables, in the same transaction
                raise ValueError("the metadata document is missing")
            doc = decode_meta(raw)
            if not isinstance(doc, dict):
                raise ValueError("the metadata document is not a JSON object")
        except ValueError as e:
            raise CorruptDatabase(f"{self.path}: metadata unreadable: {e} (corrupt database)") from None
        check_schema(doc, self.path)
        self._meta.install(doc)
        try:
            with readahead.scattered(self.path):  # a million small entries: leaves all over the file
                readahead.prefetch(self.env, txn, self.path, b"hosts")  # asked for at once, in file order
                self._hosts.load(txn, self.path)
            n = int(doc.get("n_pages", 0))
            # Every page record is stored at least once: a page count the
            # file cannot hold is damage, not a table to allocate.
            info, psize = self.env.info(), self.env.stat()["psize"]
            most = (info["last_pgno"] + 1) * psize // HOT_RECORD.itemsize
            if not 0 <= n <= most:
                raise CorruptDatabase(f"{self.path}: the metadata counts {n:,} pages, the file holds at most "
                                      f"{most:,} page records (corrupt database)")
            if doc.get("version") == 2 and not self.readonly:
                self._upgrade(txn, n)
                return
            self.vertices = self._load_records(txn, doc, n)
            check_records(self.vertices, len(self._hosts.names), self.path)
            self.edges.load(txn, doc.get("edge_seq", 0))
        except (ValueError, TypeError, struct.error) as e:  # unparsable values
            raise CorruptDatabase(f"{self.path}: {e} (corrupt database)") from None

    def on_close(self, hook: Callable[[], None]) -> None:
        """Call ``hook()`` first thing in :meth:`close` (a background
        reader's "stop now")."""
        self._close_hooks.append(hook)

    def close(self) -> None:
        """Close the database (an uncommitted batch is lost); idempotent."""
        for hook in self._close_hooks:
            hook()
        if self._ro_txn is not None:
            self._ro_txn.abort()
            self._ro_txn = None
        self._save_held()
        if self.env is not None:
            # Another thread's reader() must end first: closing the
            # environment under an open transaction would fault.
            with self._remap_lock:
                clean = self._checked and integrity.synced(self.env)
                self.env.close()
            self.env = None
            if clean:
                integrity.mark_clean_close(self.path)
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    @property
    def closed(self) -> bool:
        """True once :meth:`close` has run."""
        return self.env is None

    def __enter__(self) -> "PageDB":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- side tables and metadata sections ----------------------------------------------
    def side_table(self, name: str, codec: Codec | None = None, *, append: bool = False) -> SideTable:
        """The side table ``name`` (see :mod:`.sidetable`), declared with
        ``codec`` on first use; a writer creates it in the database if new.

        Declaring a table again with another codec (another number of
        records kept, say) uses that codec from then on; not while values
        put with the old one are uncommitted.

        Raises
        ------
        KeyError
            ``name`` was never declared and no ``codec`` is given.
        ValueError
            ``name`` is one of storage's own tables, or the codec changes
            with values pending.
        """
        if name in _OWN_TABLES:
            raise ValueError(f"{name!r} is a table of the page database itself, not a side table")
        return self._declare(name, codec, append)

    def _declare(self, name: str, codec: Codec | None, append: bool = False) -> SideTable:
        table = self._tables.get(name)
        if table is None:
            if codec is None:
                raise KeyError(f"no side table {name!r} declared")
            table = self._tables[name] = SideTable(name, codec, append=append, writable=not self.readonly)
            table.db = environment.table_handle(self.env, self.dbs, name.encode(), self.readonly)
        elif codec is not None and (codec != table.codec or append != table.append):
            if table.n_pending:
                raise ValueError(f"side table {name!r}: encoding changed with {table.n_pending} values pending")
            table.codec, table.append = codec, append
        return table

    def meta_section(self, name: str, default: Any = None) -> Any:
        """The committed value of the metadata section ``name`` (a JSON
        value owned by one feature), or ``default``."""
        return self._meta.section(name, default)

    def own_meta_section(self, name: str, state: Callable[[], Any]) -> None:
        """Make ``state()`` the value of metadata section ``name`` at every
        :meth:`commit` (one owner per section)."""
        self._meta.own(name, state)

    @property
    def meta(self) -> Mapping[str, Any]:
        """The committed metadata document (read-only). Prefer :meth:`meta_section`."""
        return self._meta.view

    def committed_pages(self, txn: Any) -> int:
        """Number of pages committed in the snapshot ``txn`` (which may be
        older than this object's view: a background reader's)."""
        return int(decode_meta(txn.get(b"meta", db=self.dbs[b"meta"])).get("n_pages", 0))

    # -- pages --------------------------------------------------------------------------
    @property
    def n_pages(self) -> int:
        """Pages known, this batch's new ones included."""
        return self.vertices.n

    @property
    def host_names(self) -> HostNames:
        """Host names by id (``host_names[i]``; grows as hosts are added: hold the database, not it, across reloads)."""
        return self._hosts.names

    @property
    def host_ids(self) -> HostNames:
        """Host ids by name (``host_ids.get(name)``)."""
        return self._hosts.ids

    def host_id(self, name: str) -> int:
        """Id of host ``name``, adding it if new (writer)."""
        return self._hosts.host_id(name)

    # -- reads (any process) ------------------------------------------------------------
    def bulk_reads(self) -> contextlib.AbstractContextManager[None]:
        """For reads of whole tables in one thread, such as an open's (:func:`.readahead.bulk`)."""
        return readahead.bulk(self.path)

    def snapshot(self) -> Any:
        """A read transaction (context manager) on the last commit; arrays
        returned by :attr:`edges` methods under it are valid until it ends.
        Read-only databases return the transaction they were loaded from."""
        if self.readonly:
            return contextlib.nullcontext(self._ro_txn)
        return begin_read(self.env, buffers=True)

    @contextlib.contextmanager
    def reader(self) -> Iterator[Any]:
        """A read transaction on the last commit for *another thread* (a
        background ranking). While it is open the map cannot grow: a commit
        that needs more room waits for it to end."""
        if self.readonly:
            yield self._ro_txn
            return
        with self._remap_lock:
            txn = begin_read(self.env, buffers=True)
            try:
                yield txn
            finally:
                txn.abort()

    # -- named vectors (ranking scores, see .vectors) -----------------------------------
    def read_scores(self, name: str, txn: Any = None) -> tuple[np.ndarray, dict] | tuple[None, None]:
        """``(values, info)`` of the last stored vector ``name``, or
        ``(None, None)`` if there is none."""
        with self._txn(txn) as t, self._damage("ranking vectors"):
            return read_scores(t, self.dbs[b"scores"], name)

    def score_info(self, name: str, txn: Any = None) -> dict[str, Any] | None:
        """The info record of the stored vector ``name`` (without reading
        the vector), or None."""
        with self._txn(txn) as t, self._damage("ranking vectors"):
            return vectors.read_info(t, self.dbs[b"scores"], name)

    def score_names(self, txn: Any = None) -> list[str]:
        """Names of the stored vectors."""
        with self._txn(txn) as t, self._damage("ranking vectors"):
            return vectors.names(t, self.dbs[b"scores"])

    def write_scores(self, values: Mapping[str, np.ndarray], info: Mapping[str, Any],
                     tops: Mapping[str, list[Any]] | None = None) -> None:
        """Store vectors ``{name: float array}`` in one transaction, each with
        ``info`` (a JSON-able dict) plus its length, and its ``tops[name]``."""
        self._write(lambda txn: write_scores(txn, self.dbs[b"scores"], values, info, tops))

    @contextlib.contextmanager
    def _damage(self, what: str) -> Iterator[None]:
        """Stored bytes that do not parse are damage: :class:`CorruptDatabase`."""
        try:
            yield
        except (ValueError, TypeError, struct.error) as e:
            raise CorruptDatabase(f"{self.path}: {what} unreadable: {e} (corrupt database)") from None

    def _txn(self, txn: Any) -> Any:
        return contextlib.nullcontext(txn) if txn is not None else self.snapshot()

    # -- commit -------------------------------------------------------------------------
    def commit(self, sections: Mapping[str, Any] | None = None, checkpoint: bool = False) -> None:
        """Write the current batch in one transaction and make it durable.

        ``sections`` (``{name: JSON value}``) set metadata sections, after those of their registered owners
        (:meth:`own_meta_section`); ``checkpoint`` folds the page record log into the checkpoint (:mod:`.pagelog`).
        The LMDB map doubles and the write is retried whenever it is full, so callers never see ``MapFullError``.

        Raises
        ------
        WriteError
            The transaction could not be written (:class:`DiskFullError`:
            the file system is full). The database keeps its last commit
            and this batch, so the commit may be retried.
        """
        if self.readonly:
            raise PageDBError(f"{self.path}: read-only page database")
        doc = self._meta.next(sections)
        n = self.vertices.n
        plan = self._log.plan(self.vertices, self._committed_n, int(doc.get("vlog_seq", 0)), checkpoint)
        doc["n_pages"] = n
        doc["host_lists"] = 1
        cold = None if self.compact else self._cold_items(n)

        def write(txn: Any) -> Callable[[], None]:
            for table in self._tables.values():
                table.write(txn)
            self._hosts.write(txn)
            self._host_pages.write(txn)
            self._log.write(txn, self.vertices, plan)
            self._forget_held(txn, doc)
            if cold is None:
                assert isinstance(self.cold, ColdRecords)
                self.cold.write(txn)
                doc["fps_from"] = self._fps.write(txn, n)
            else:
                txn.cursor(db=self._pages).putmulti(cold)
                self._write_fingerprints(txn, doc)
            installed, doc["edge_seq"] = self.edges.write(txn)
            doc["vlog_seq"] = plan.seq
            txn.put(b"meta", encode_meta(doc), db=self.dbs[b"meta"])
            return installed

        self._write(write)()
        self._log.written(plan)
        self._hosts.written()
        self._host_pages.written()
        if isinstance(self.cold, ColdRecords):
            self.cold.written()
            self._fps.written()
        for table in self._tables.values():
            table.discard()
        self._meta.install(doc)
        self._committed_n = n
        self._rekeyed, self._rewrite_fps = [], False

    def _write(self, write: Callable[[Any], Any]) -> Any:
        """``write(txn)`` in a write transaction, growing the map and
        retrying while it is full; returns what ``write`` returns.

        Reader slots of dead processes are freed first, so that their
        snapshots do not keep pages from being reused."""
        environment.clear_stale_readers(self.env, self.path)
        while True:
            try:
                with self.env.begin(write=True) as txn:
                    return write(txn)
            except lmdb.MapFullError:
                self._grow()
            except LMDB_DAMAGE:
                raise
            except lmdb.Error as e:  # disk full, I/O error: the transaction is aborted, nothing half-written
                raise environment.write_error(self.path, e) from None

    def _grow(self) -> None:
        size = self.env.info()["map_size"] * 2
        logger.info("page database map full; growing it to %d MiB", size >> 20)
        with self._remap_lock:
            self.env.set_mapsize(size)

    def reserve(self, fraction: float = 0.5) -> None:
        """Grow the map now if less than ``fraction`` of it is free, so that
        commits made while another thread holds a :meth:`reader` do not
        have to wait for it."""
        environment.reserve(self.env, self._remap_lock, fraction)


__all__ = [
    "CHUNK", "SCHEMA_NAME", "SCHEMA_VERSION", "SCORE_CHUNK", "TABLES", "VISIT", "CorruptDatabase", "DiskFullError",
    "PageDB", "PageDBError", "WriteError", "WriterLockedError", "page_key", "page_keys", "read_scores", "write_scores",
]  # fmt: skip
