"""The page database: one LMDB environment directory.

Named databases inside the environment:

``meta``       one JSON document: schema version, counters, AOPIC globals
``vertices``   the page table checkpoint: packed :data:`~.vertices.RECORD`
               rows, 4096 pages per value, keyed by chunk number
``vlog``       page records changed since the checkpoint, one value per
               commit (folded into ``vertices`` when it grows)
``urls``       page index (8-byte big-endian) -> URL (UTF-8)
``requests``   page index -> pickled method/headers/cookies/meta/body of
               requests that are not a plain GET (so they are handed out
               as they came in)
``hosts``      host name -> host id (4-byte little-endian)
``edges``      blocks of out-links, see :mod:`.edges`
``errors``     page index -> last fetch error (UTF-8)
``scores``     ranking results (PageRank, HITS), written by the rankers
``visits``     page index -> the page's last recrawl visits (interval since
               the previous visit, changed or not), for change-rate estimates
``validators`` page index -> ETag and Last-Modified of its last fetch (JSON),
               for conditional requests on recrawl

Why a log for page records: a crawled page changes the cash of each page it
links to, so a batch touches records all over the table. LMDB copies every
B-tree page a transaction modifies; with one key per page, 10,000 scattered
updates cost ~17 µs each with fsync (measured, ``benchmarks/ingest.py``
notes). Appending the changed records as one value per commit costs a
sequential write of their bytes instead, and a periodic checkpoint rewrites
the table in large chunks.

One process writes (an exclusive ``flock`` on ``writer.lock``); any number
of processes may open the database read-only meanwhile and see the last
committed batch.
"""

import contextlib
import errno
import fcntl
import json
import logging
import os
import pickle
import struct
import threading
import time

import lmdb
import numpy as np

from ..numeric import unique
from .edges import EdgeStore
from .vertices import RECORD, VertexTable

logger = logging.getLogger(__name__)

SCHEMA_NAME = "frontera_linkrank.pagedb"
SCHEMA_VERSION = 2  # 2: page field "rate", tables "visits" and "validators"
CHUNK = 4096  # pages per checkpoint value
_DBS = (
    b"meta", b"vertices", b"vlog", b"urls", b"requests", b"hosts", b"edges", b"errors", b"scores",
    b"visits", b"validators",
)  # fmt: skip
# One recrawl visit: seconds since the previous visit, and whether the
# content had changed.
VISIT = np.dtype([("interval", "<f8"), ("changed", "u1")])
_VLOG = struct.Struct("<8sQ")
_VLOG_MAGIC = b"LRvlog01"


class PageDBError(Exception):
    """The path is not a usable page database (wrong kind, version, locked)."""


class CorruptDatabase(PageDBError):
    """A page database whose stored structures contradict each other."""


def page_key(i):
    return int(i).to_bytes(8, "big")


def page_keys(idx):
    """Big-endian 8-byte keys of the indices ``idx`` as a list."""
    raw = np.asarray(idx, ">u8").tobytes()
    return [raw[i : i + 8] for i in range(0, len(raw), 8)]


class PageDB:
    """Open (or create) the page database at ``path``.

    Parameters
    ----------
    path : str
        Directory of the LMDB environment.
    readonly : bool
        Open for reading while another process may be writing. The page
        table is loaded as of the last commit; call :meth:`reload` to see
        newer commits.
    map_size : int
        Initial map size; it doubles whenever a commit needs more.
    sync : bool
        fsync on commit (durable against power loss).
    checkpoint_bytes : int
        Fold the record log into the checkpoint beyond this size.

    Examples
    --------
    >>> import tempfile
    >>> db = PageDB(tempfile.mkdtemp() + "/db")
    >>> db.n_pages
    0
    >>> db.close()
    """

    def __init__(
        self,
        path,
        readonly=False,
        map_size=256 * 1024**2,
        sync=True,
        checkpoint_bytes=64 * 1024**2,
    ):
        self.path = os.fspath(path)
        self.readonly = readonly
        self.checkpoint_bytes = int(checkpoint_bytes)
        self._lock_fd = None
        # Held by other threads' read transactions (reader()); the map is
        # only resized under it: LMDB forbids a resize while this process
        # has a transaction open, and a reader would fault on the old map.
        self._remap_lock = threading.Lock()
        self._close_hooks = []
        self._check_path()
        if not readonly:
            os.makedirs(self.path, exist_ok=True)
            self._take_writer_lock()
        try:
            self.env = lmdb.open(
                self.path,
                map_size=map_size,
                max_dbs=len(_DBS) + 4,
                readonly=readonly,
                create=not readonly,
                sync=sync,
                metasync=sync,
                readahead=False,
                max_readers=256,
            )
        except lmdb.Error as e:
            self._release_writer_lock()
            raise PageDBError(f"{self.path}: cannot open as an LMDB environment: {e}") from None
        try:
            self._open_dbs()
            self.vertices = VertexTable()
            self.edges = EdgeStore(self.dbs[b"edges"])
            self.reload()
        except BaseException:
            self.close()
            raise
        # Batch state (writer only).
        self._dirty = []  # index arrays / lists touched in this batch
        self._new_urls = []  # utf-8 URLs of pages added in this batch, in index order
        self._new_requests = []  # (index, pickled request parts)
        self._new_errors = []  # (index, utf-8 message)
        self._new_hosts = []  # (host id, name)
        self._new_visits = {}  # index -> [(interval, changed)] of this batch
        self._new_validators = {}  # index -> utf-8 JSON [etag, last_modified]
        self.max_visits = 32  # visits kept per page
        self._committed_n = self.n_pages

    # -- opening ----------------------------------------------------------------
    def _check_path(self):
        p = self.path
        if os.path.exists(p) and not os.path.isdir(p):
            raise PageDBError(f"{p}: is a file, not a page database directory")
        data = os.path.join(p, "data.mdb")
        if self.readonly and not os.path.exists(data):
            raise PageDBError(f"{p}: no page database here (no data.mdb)")
        if os.path.isdir(p) and not os.path.exists(data):
            others = [f for f in os.listdir(p) if f not in ("writer.lock", "lock.mdb")]
            if others:
                raise PageDBError(
                    f"{p}: directory is not empty and holds no page database "
                    f"(found {', '.join(sorted(others)[:5])}); refusing to write into it"
                )

    def _take_writer_lock(self):
        fd = os.open(os.path.join(self.path, "writer.lock"), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip()
            os.close(fd)
            if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise PageDBError(
                    f"{self.path}: another process is writing to this page database"
                    + (f" (pid {holder})" if holder else "")
                    + "; open it read-only or stop that process"
                ) from None
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        self._lock_fd = fd

    def _release_writer_lock(self):
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # closing releases the flock
            self._lock_fd = None

    def _open_dbs(self):
        self.dbs = {}
        if self.readonly:
            with self._read_txn() as txn:
                names = {bytes(k) for k, _ in txn.cursor().iternext()}
            missing = [n.decode() for n in _DBS if n not in names]
            if b"meta" not in names:
                raise PageDBError(
                    f"{self.path}: LMDB environment without frontera_linkrank metadata; "
                    "not a page database"
                )
            if missing:
                # An older schema lacks newer tables: say which version it is.
                meta_db = self.env.open_db(b"meta", create=False)
                with self._read_txn() as txn:
                    raw = txn.get(b"meta", db=meta_db)
                version = json.loads(bytes(raw)).get("version") if raw is not None else None
                if version != SCHEMA_VERSION:
                    raise PageDBError(
                        f"{self.path}: page database schema version {version}, "
                        f"this frontera_linkrank reads version {SCHEMA_VERSION}"
                    )
                raise PageDBError(f"{self.path}: page database lacks tables {missing}")
            for name in _DBS:
                self.dbs[name] = self.env.open_db(name, create=False)
        else:
            with self.env.begin(write=True) as txn:
                existing = {bytes(k) for k, _ in txn.cursor().iternext()}
                if existing and b"meta" not in existing:
                    raise PageDBError(
                        f"{self.path}: LMDB environment without frontera_linkrank "
                        "metadata; not a page database"
                    )
                for name in _DBS:
                    self.dbs[name] = self.env.open_db(name, txn=txn)
                meta_db = self.dbs[b"meta"]
                if txn.get(b"meta", db=meta_db) is None:
                    meta = {
                        "schema": SCHEMA_NAME,
                        "version": SCHEMA_VERSION,
                        "created": time.time(),
                        "n_pages": 0,
                    }
                    txn.put(b"meta", json.dumps(meta).encode(), db=meta_db)

    def _read_txn(self, **kw):
        """A read transaction, adopting a map grown by another process."""
        try:
            return self.env.begin(**kw)
        except lmdb.MapResizedError:
            self.env.set_mapsize(0)
            return self.env.begin(**kw)

    def reload(self):
        """(Re)load metadata, hosts, page table and edge directory from the
        last committed state, in one read transaction.

        A read-only database keeps that transaction open until the next
        ``reload`` or ``close``, and every later read (:meth:`snapshot`,
        :meth:`urls`, edges, scores) uses it, so a tool sees one consistent
        commit however long it runs while a crawl writes.
        """
        if self.readonly:
            if getattr(self, "_ro_txn", None) is not None:
                self._ro_txn.abort()
            self._ro_txn = self._read_txn(buffers=True)
            self._load(self._ro_txn)
        else:
            with self._read_txn(buffers=True) as txn:
                self._load(txn)
        self._fp_index = None

    def _load(self, txn):
        raw = txn.get(b"meta", db=self.dbs[b"meta"])
        meta = json.loads(bytes(raw)) if raw is not None else {}
        if meta.get("schema") != SCHEMA_NAME:
            raise PageDBError(f"{self.path}: not a frontera_linkrank page database")
        if meta.get("version") != SCHEMA_VERSION:
            raise PageDBError(
                f"{self.path}: page database schema version {meta.get('version')}, "
                f"this frontera_linkrank reads version {SCHEMA_VERSION}"
            )
        self.meta = meta
        self.host_names = []
        self.host_ids = {}
        pairs = [(struct.unpack("<I", bytes(v))[0], bytes(k).decode()) for k, v in txn.cursor(self.dbs[b"hosts"])]
        for hid, name in sorted(pairs):
            if hid != len(self.host_names):
                raise CorruptDatabase(f"{self.path}: host ids are not dense (corrupt database)")
            self.host_names.append(name)
            self.host_ids[name] = hid
        try:
            self._load_vertices(txn)
            self.edges.load(txn, meta.get("edge_seq", 0))
        except (ValueError, struct.error) as e:  # unparsable values
            raise CorruptDatabase(f"{self.path}: {e} (corrupt database)") from None

    def _load_vertices(self, txn):
        n = int(self.meta.get("n_pages", 0))
        table = VertexTable(max(n, 1024))
        table.append(n)
        covered = np.zeros(n, bool)
        for key, buf in txn.cursor(self.dbs[b"vertices"]):
            lo = int.from_bytes(bytes(key), "big") * CHUNK
            recs = np.frombuffer(buf, RECORD)
            if lo + len(recs) > n:
                raise CorruptDatabase(f"{self.path}: page table chunk beyond the page count (corrupt database)")
            table.load_records(recs, slice(lo, lo + len(recs)))
            covered[lo : lo + len(recs)] = True
        self._ckpt_dirty = set()
        self._vlog_bytes = 0
        for _, buf in txn.cursor(self.dbs[b"vlog"]):
            idx, recs = self._parse_vlog(buf)
            if len(idx) and idx.max() >= n:
                raise CorruptDatabase(f"{self.path}: page record log beyond the page count (corrupt database)")
            table.load_records(recs, idx)
            covered[idx] = True
            self._ckpt_dirty.update(unique(idx // CHUNK).tolist())
            self._vlog_bytes += len(buf)
        if not covered.all():
            raise CorruptDatabase(
                f"{self.path}: {int((~covered).sum())} of {n} page records missing (corrupt database)"
            )
        self.vertices = table

    @staticmethod
    def _parse_vlog(buf):
        magic, k = _VLOG.unpack_from(buf, 0)
        if magic != _VLOG_MAGIC:
            raise CorruptDatabase("page record log entry is corrupt (bad magic)")
        off = _VLOG.size
        idx = np.frombuffer(buf, "<u4", k, off).astype(np.int64)
        off += 4 * k + (-4 * k) % 8
        recs = np.frombuffer(buf, RECORD, k, off)
        return idx, recs

    def on_close(self, hook):
        """Call ``hook()`` first thing in :meth:`close` (a background
        reader's "stop now")."""
        self._close_hooks.append(hook)

    def close(self):
        for hook in getattr(self, "_close_hooks", ()):
            hook()
        txn = getattr(self, "_ro_txn", None)
        if txn is not None:
            txn.abort()
            self._ro_txn = None
        env = getattr(self, "env", None)
        if env is not None:
            # Another thread's reader() must end first: closing the
            # environment under an open transaction would fault.
            with self._remap_lock:
                env.close()
            self.env = None
        self._release_writer_lock()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- pages ------------------------------------------------------------------
    @property
    def n_pages(self):
        return self.vertices.n

    @property
    def fp_index(self):
        """dict: 20-byte fingerprint -> page index (built on first use)."""
        if self._fp_index is None:
            fps = self.vertices.fingerprints()
            self._fp_index = dict(zip(fps, range(len(fps))))
        return self._fp_index

    def find(self, fp):
        """Index of the page with fingerprint ``fp`` (20 bytes), or None."""
        return self.fp_index.get(fp)

    def host_id(self, name):
        """Id of host ``name``, adding it if new (writer)."""
        hid = self.host_ids.get(name)
        if hid is None:
            hid = len(self.host_names)
            self.host_names.append(name)
            self.host_ids[name] = hid
            self._new_hosts.append((hid, name))
        return hid

    def add_pages(self, fps, urls, hosts):
        """Append pages (lists of 20-byte fingerprints, URL strings and host
        ids); returns the first new index. Other fields get their defaults."""
        k = len(fps)
        start = self.vertices.append(k)
        v = self.vertices
        if k:
            v.fp[start : start + k] = np.frombuffer(b"".join(fps), "V20")
            v.host[start : start + k] = hosts
        self.fp_index.update(zip(fps, range(start, start + k)))
        # New pages are contiguous from _committed_n: URLs kept in that order.
        self._new_urls.extend([u.encode("utf-8") for u in urls])
        return start

    def set_request_extras(self, i, parts):
        """Keep a request's non-default parts (method, headers, cookies, meta,
        body) so it is handed out as it came in."""
        self._new_requests.append((i, pickle.dumps(parts, protocol=5)))

    def set_error(self, i, message):
        self._new_errors.append((i, str(message).encode("utf-8", "replace")[:4096]))

    def add_visit(self, i, interval, changed):
        """Record a recrawl visit of page ``i`` (kept: the last
        :attr:`max_visits`)."""
        self._new_visits.setdefault(int(i), []).append((float(interval), bool(changed)))

    def set_validators(self, i, etag, last_modified):
        """Keep the ``ETag`` / ``Last-Modified`` of page ``i``'s last fetch."""
        self._new_validators[int(i)] = json.dumps([etag, last_modified]).encode()

    def touch(self, idx):
        """Mark pages (an index or an array of indices) changed in this batch."""
        self._dirty.append(idx)

    # -- reads (any process) ----------------------------------------------------
    def snapshot(self):
        """A read transaction (context manager) on the last commit; arrays
        returned by :attr:`edges` methods under it are valid until it ends.
        Read-only databases return the transaction they were loaded from."""
        if self.readonly:
            return contextlib.nullcontext(self._ro_txn)
        return self._read_txn(buffers=True)

    @contextlib.contextmanager
    def reader(self):
        """A read transaction on the last commit for *another thread* (a
        background ranking). While it is open the map cannot grow: a commit
        that needs more room waits for it to end."""
        if self.readonly:
            yield self._ro_txn
            return
        with self._remap_lock:
            txn = self._read_txn(buffers=True)
            try:
                yield txn
            finally:
                txn.abort()

    def urls(self, idx, txn=None):
        """URLs of the pages ``idx`` (list of str; committed pages and pages
        added in the current batch)."""
        if txn is None:
            with self.snapshot() as own:
                return self.urls(idx, own)
        idx = np.asarray(idx, np.int64)
        order = np.argsort(idx, kind="stable")
        keys = page_keys(idx[order])
        got = txn.cursor(self.dbs[b"urls"]).getmulti(keys)
        out = [None] * len(idx)
        if len(got) == len(keys):
            for j, (_, raw) in zip(order.tolist(), got):
                out[j] = bytes(raw).decode("utf-8")
            return out
        found = {bytes(k): raw for k, raw in got}
        first_new = self._committed_n
        for j, i in zip(order.tolist(), idx[order].tolist()):
            raw = found.get(page_key(i))
            if raw is None and i >= first_new and not self.readonly and i - first_new < len(self._new_urls):
                raw = self._new_urls[i - first_new]
            out[j] = bytes(raw).decode("utf-8") if raw is not None else None
        return out

    def url(self, i, txn=None):
        return self.urls([i], txn)[0]

    def request_extras(self, idx, txn):
        """{index: (method, headers, cookies, meta, body)} for pages with
        stored request parts among ``idx``."""
        cur = txn.cursor(self.dbs[b"requests"])
        keys = sorted(page_key(i) for i in idx)
        return {int.from_bytes(bytes(k), "big"): pickle.loads(bytes(v)) for k, v in cur.getmulti(keys)}

    def visits(self, i, txn):
        """Recrawl visits of page ``i`` (a :data:`VISIT` array, oldest
        first), this batch's included."""
        raw = txn.get(page_key(i), db=self.dbs[b"visits"])
        old = np.frombuffer(raw, VISIT) if raw is not None else np.zeros(0, VISIT)
        new = self._new_visits.get(int(i)) if not self.readonly else None
        if new:
            old = np.concatenate([old, np.array(new, VISIT)])[-self.max_visits :]
        return old

    def validators(self, idx, txn):
        """{index: (etag, last_modified)} of the pages ``idx`` that have them."""
        out = {}
        cur = txn.cursor(self.dbs[b"validators"])
        for k, v in cur.getmulti(sorted(page_key(i) for i in idx)):
            out[int.from_bytes(bytes(k), "big")] = tuple(json.loads(bytes(v)))
        if not self.readonly:
            for i in idx:
                raw = self._new_validators.get(int(i))
                if raw is not None:
                    out[int(i)] = tuple(json.loads(raw))
        return out

    def error_message(self, i, txn):
        raw = txn.get(page_key(i), db=self.dbs[b"errors"])
        return bytes(raw).decode("utf-8", "replace") if raw is not None else None

    # -- ranking scores ----------------------------------------------------------
    # ``scores`` holds one float64 vector per name ("pagerank", "authority",
    # "hub", ...) in chunks of SCORE_CHUNK values, plus a JSON info record
    # (version, time, pages covered, iterations, why it stopped...). Only
    # rankers write them; a vector covers the pages of the snapshot it was
    # computed on (pages added later are beyond its length).

    def read_scores(self, name, txn=None):
        """``(values, info)`` of the last stored vector ``name``, or
        ``(None, None)`` if there is none."""
        if txn is None:
            with self.snapshot() as own:
                return self.read_scores(name, own)
        return read_scores(txn, self.dbs[b"scores"], name)

    def score_info(self, name, txn=None):
        """The info record of the stored vector ``name`` (without reading
        the vector), or None."""
        if txn is None:
            with self.snapshot() as own:
                return self.score_info(name, own)
        raw = txn.get(name.encode() + b":info", db=self.dbs[b"scores"])
        return json.loads(bytes(raw)) if raw is not None else None

    def write_scores(self, vectors, info):
        """Store several vectors (``{name: float array}``) in one transaction,
        each with ``info`` (a dict, JSON-serialisable) plus its length."""
        while True:
            try:
                with self.env.begin(write=True) as txn:
                    write_scores(txn, self.dbs[b"scores"], vectors, info)
                return
            except lmdb.MapFullError:
                self._grow()

    def score_names(self, txn=None):
        if txn is None:
            with self.snapshot() as own:
                return self.score_names(own)
        return sorted(
            bytes(k)[: -len(b":info")].decode()
            for k, _ in txn.cursor(self.dbs[b"scores"])
            if bytes(k).endswith(b":info")
        )

    # -- commit ------------------------------------------------------------------
    def commit(self, meta_updates=None):
        """Write the current batch in one transaction and make it durable.

        ``meta_updates`` (JSON-serialisable dict) is merged into the
        metadata. The LMDB map doubles and the write is retried whenever it
        is full, so callers never see ``MapFullError``.
        """
        assert not self.readonly, "read-only page database"
        meta = dict(self.meta)
        if meta_updates:
            meta.update(meta_updates)
        n = self.vertices.n
        parts = [np.arange(self._committed_n, n, dtype=np.int64)]
        for d in self._dirty:
            parts.append(np.atleast_1d(np.asarray(d, np.int64)))
        dirty = unique(np.concatenate(parts)) if parts else np.zeros(0, np.int64)
        new_chunks = set(unique(dirty // CHUNK).tolist())
        ckpt_dirty = self._ckpt_dirty | new_chunks
        entry = self._vlog_entry(dirty) if len(dirty) else b""
        vlog_bytes = self._vlog_bytes + len(entry)
        table_bytes = n * RECORD.itemsize
        checkpoint = vlog_bytes > max(self.checkpoint_bytes, table_bytes)
        meta["n_pages"] = n
        vlog_seq = 0 if checkpoint else int(meta.get("vlog_seq", 0)) + (1 if entry else 0)
        while True:
            try:
                with self.env.begin(write=True) as txn:
                    self._write_batch(txn, entry, checkpoint, ckpt_dirty, vlog_seq - 1)
                    installed, meta["edge_seq"] = self.edges.write(txn)
                    meta["vlog_seq"] = vlog_seq
                    txn.put(b"meta", json.dumps(meta).encode(), db=self.dbs[b"meta"])
                break
            except lmdb.MapFullError:
                self._grow()
        installed()
        self.meta = meta
        if checkpoint:
            self._ckpt_dirty, self._vlog_bytes = set(), 0
        else:
            self._ckpt_dirty, self._vlog_bytes = ckpt_dirty, vlog_bytes
        self._dirty, self._new_urls, self._new_requests = [], [], []
        self._new_errors, self._new_hosts = [], []
        self._new_visits, self._new_validators = {}, {}
        self._committed_n = n

    def _vlog_entry(self, dirty):
        recs = self.vertices.records(dirty)
        k = len(dirty)
        pad = b"\0" * ((-4 * k) % 8)
        return b"".join((_VLOG.pack(_VLOG_MAGIC, k), dirty.astype("<u4").tobytes(), pad, recs.tobytes()))

    def _write_batch(self, txn, entry, checkpoint, ckpt_dirty, vlog_key):
        dbs = self.dbs
        if self._new_urls:
            keys = page_keys(np.arange(self._committed_n, self._committed_n + len(self._new_urls)))
            txn.cursor(dbs[b"urls"]).putmulti(zip(keys, self._new_urls), append=True)
        if self._new_requests:
            cur = txn.cursor(dbs[b"requests"])
            cur.putmulti(sorted((page_key(i), v) for i, v in self._new_requests))
        if self._new_errors:
            cur = txn.cursor(dbs[b"errors"])
            cur.putmulti(sorted((page_key(i), v) for i, v in self._new_errors))
        if self._new_visits:
            cur = txn.cursor(dbs[b"visits"])
            keys = sorted(page_key(i) for i in self._new_visits)
            old = {bytes(k): bytes(v) for k, v in cur.getmulti(keys)}
            items = []
            for key in keys:
                i = int.from_bytes(key, "big")
                got = np.concatenate([np.frombuffer(old.get(key, b""), VISIT), np.array(self._new_visits[i], VISIT)])
                items.append((key, got[-self.max_visits :].tobytes()))
            cur.putmulti(items)
        if self._new_validators:
            cur = txn.cursor(dbs[b"validators"])
            cur.putmulti(sorted((page_key(i), v) for i, v in self._new_validators.items()))
        if self._new_hosts:
            cur = txn.cursor(dbs[b"hosts"])
            cur.putmulti(sorted((name.encode(), struct.pack("<I", hid)) for hid, name in self._new_hosts))
        if checkpoint:
            n = self.vertices.n
            cur = txn.cursor(dbs[b"vertices"])
            items = []
            for c in sorted(ckpt_dirty):
                lo, hi = c * CHUNK, min((c + 1) * CHUNK, n)
                items.append((page_key(c), self.vertices.records(slice(lo, hi)).tobytes()))
            cur.putmulti(items)
            txn.drop(dbs[b"vlog"], delete=False)
        elif entry:
            txn.put(page_key(vlog_key), entry, db=dbs[b"vlog"], append=True)

    def _grow(self):
        size = self.env.info()["map_size"] * 2
        logger.info("page database map full; growing it to %d MiB", size >> 20)
        with self._remap_lock:
            self.env.set_mapsize(size)

    def reserve(self, fraction=0.5):
        """Grow the map now if less than ``fraction`` of it is free, so that
        commits made while another thread holds a :meth:`reader` do not
        have to wait for it."""
        info, stat = self.env.info(), self.env.stat()
        used = (info["last_pgno"] + 1) * stat["psize"]
        size = info["map_size"]
        while size - used < fraction * size:
            size *= 2
        if size != info["map_size"]:
            with self._remap_lock:
                self.env.set_mapsize(size)


SCORE_CHUNK = 1 << 20  # values per LMDB value (8 MiB)


def _score_key(name, chunk):
    return name.encode() + b":" + chunk.to_bytes(8, "big")


def read_scores(txn, db, name):
    """See :meth:`PageDB.read_scores` (usable on a bare LMDB transaction)."""
    raw = txn.get(name.encode() + b":info", db=db)
    if raw is None:
        return None, None
    info = json.loads(bytes(raw))
    n = int(info["n_pages"])
    out = np.empty(n, np.float64)
    for c in range((n + SCORE_CHUNK - 1) // SCORE_CHUNK):
        buf = txn.get(_score_key(name, c), db=db)
        lo = c * SCORE_CHUNK
        out[lo : lo + len(buf) // 8] = np.frombuffer(buf, "<f8")
    return out, info


def write_scores(txn, db, vectors, info):
    """See :meth:`PageDB.write_scores` (usable on a bare LMDB transaction)."""
    for name, values in vectors.items():
        values = np.ascontiguousarray(values, "<f8")
        prefix = name.encode() + b":"
        cur = txn.cursor(db)
        if cur.set_range(prefix):  # drop the previous vector (delete moves to the next key)
            while bytes(cur.key()).startswith(prefix) and cur.delete():
                pass
        for c, lo in enumerate(range(0, len(values), SCORE_CHUNK)):
            txn.put(_score_key(name, c), values[lo : lo + SCORE_CHUNK].tobytes(), db=db)
        txn.put(prefix + b"info", json.dumps({**info, "n_pages": len(values)}).encode(), db=db)

