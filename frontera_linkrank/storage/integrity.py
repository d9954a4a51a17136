"""Checks of a page database's file before LMDB maps it.

LMDB maps ``data.mdb`` into memory and trusts it: a page it reads beyond
the end of a file cut short is a bus error (the process dies with signal
7, no message). So before opening, the two meta pages are read with plain
file reads and checked the way LMDB's ``mdb_env_read_header`` does
(``mdb.c``), and the file must hold every page the newer meta says is in
use. Any failure raises :class:`~.errors.CorruptDatabase` naming the
check.

The meta page layout (LMDB 0.9, 64-bit: ``pgno_t`` and ``size_t`` are 8
bytes). Each page starts with a 16-byte header: ``mp_pgno`` (u8),
``mp_pad`` (u2), ``mp_flags`` (u2, ``P_META`` = 0x08 on meta pages),
``mp_lower``/``mp_upper`` (u2 each). Meta pages 0 and 1 (at offsets 0 and
one page size) then hold ``MDB_meta``: ``mm_magic`` (u4, 0xBEEFC0DE),
``mm_version`` (u4, 1), ``mm_address`` (u8), ``mm_mapsize`` (u8), two
``MDB_db`` records of 48 bytes (the free-page and main databases: ``md_pad``
u4, which in the free-page record holds the page size, ``md_flags`` u2,
``md_depth`` u2, branch/leaf/overflow page counts, entries, ``md_root``,
u8 each), ``mm_last_pg`` (u8, the last page in use) and ``mm_txnid`` (u8).
LMDB uses the meta with the higher transaction id.
"""

from __future__ import annotations

import json
import os
import struct
from dataclasses import dataclass
from typing import Any

import lmdb
import numpy as np

from . import environment
from .environment import begin_read
from .errors import CorruptDatabase

MAGIC = 0xBEEFC0DE
DATA_VERSION = 1
P_META = 0x08
PAGE_HEADER = struct.Struct("<QHHHH")  # mp_pgno, mp_pad, mp_flags, mp_lower, mp_upper
META = struct.Struct("<IIQQ")  # mm_magic, mm_version, mm_address, mm_mapsize
DB = struct.Struct("<IHHQQQQQ")  # md_pad, md_flags, md_depth, branch, leaf, overflow pages, entries, md_root
TAIL = struct.Struct("<QQ")  # mm_last_pg, mm_txnid
META_BYTES = PAGE_HEADER.size + META.size + 2 * DB.size + TAIL.size
P_INVALID = 0xFFFFFFFFFFFFFFFF  # md_root of an empty database
MAX_DEPTH = 64  # B-tree depth: far beyond any real file (2^64 pages at fan-out 2)


@dataclass(frozen=True)
class Meta:
    """One parsed meta page."""

    page_size: int
    map_size: int
    last_page: int
    txnid: int
    roots: tuple[tuple[int, int], ...]  # (md_root, md_depth) of the free-page and main databases


def _parse_meta(raw: bytes, which: int) -> Meta:
    """Meta page ``which`` (0 or 1) from its first bytes; raises
    :class:`ValueError` naming what is wrong."""
    _, _, flags, _, _ = PAGE_HEADER.unpack_from(raw, 0)
    if not flags & P_META:
        raise ValueError(f"meta page {which} is not marked as a meta page (flags {flags:#x})")
    magic, version, _, map_size = META.unpack_from(raw, PAGE_HEADER.size)
    if magic != MAGIC:
        raise ValueError(f"meta page {which} has magic {magic:#x}, not LMDB's {MAGIC:#x}")
    if version != DATA_VERSION:
        raise ValueError(f"meta page {which} has LMDB data version {version}, not {DATA_VERSION}")
    off = PAGE_HEADER.size + META.size
    dbs = [DB.unpack_from(raw, off + k * DB.size) for k in range(2)]
    last_page, txnid = TAIL.unpack_from(raw, off + 2 * DB.size)
    page_size = dbs[0][0]
    if page_size < 512 or page_size > 65536 or page_size & (page_size - 1):
        raise ValueError(f"meta page {which} gives page size {page_size}, not a power of two in 512..65536")
    roots = tuple((db[7], db[2]) for db in dbs)
    return Meta(page_size, map_size, last_page, txnid, roots)


def check_file(path: str) -> Meta | None:
    """Check ``path/data.mdb`` (if it exists) before LMDB maps it; returns
    the meta in use, or None when there is no file yet.

    Raises
    ------
    CorruptDatabase
        The file is shorter than its meta pages say, or a meta page is
        not LMDB's; the message names the check that failed.
    """
    data = os.path.join(path, "data.mdb")
    try:
        f = open(data, "rb")
    except FileNotFoundError:
        return None
    except OSError as e:
        raise CorruptDatabase(f"{path}: cannot read data.mdb: {e.strerror}") from None
    with f:
        size = os.fstat(f.fileno()).st_size
        head = f.read(META_BYTES)
        if len(head) < META_BYTES:
            raise CorruptDatabase(f"{path}: data.mdb is {size} bytes, too short for LMDB's meta pages "
                                  "(check: file size; the file was cut short or never written)")
        try:
            first = _parse_meta(head, 0)
            f.seek(first.page_size)
            raw = f.read(META_BYTES)
            if len(raw) < META_BYTES:
                raise ValueError(f"data.mdb is {size} bytes, too short for the second meta page")
            second = _parse_meta(raw, 1)
        except ValueError as e:
            raise CorruptDatabase(f"{path}: {e} (check: meta pages; corrupt database)") from None
        # Sized after its meta pages are read: a crawl committing meanwhile
        # writes the pages a new meta names before the meta, and LMDB never
        # shortens the file, so this size covers the meta read.
        size = os.fstat(f.fileno()).st_size
    meta = max(first, second, key=lambda m: m.txnid)
    if second.page_size != first.page_size:
        raise CorruptDatabase(f"{path}: the two meta pages give page sizes {first.page_size} and "
                              f"{second.page_size} (check: meta pages; corrupt database)")
    needed = (meta.last_page + 1) * meta.page_size
    if meta.last_page < 1 or size < needed:
        raise CorruptDatabase(
            f"{path}: data.mdb is {size:,} bytes but its pages in use (up to page {meta.last_page:,} of "
            f"{meta.page_size} bytes) need {needed:,} (check: file size; the file was cut short)"
        )
    for name, (root, depth) in zip(("free-page", "main"), meta.roots):
        if root != P_INVALID and (root > meta.last_page or not 1 <= depth <= MAX_DEPTH):
            raise CorruptDatabase(f"{path}: the {name} B-tree root is page {root} (depth {depth}) but the last "
                                  f"page in use is {meta.last_page} (check: meta pages; corrupt database)")
    return meta


# -- the B-tree pages -----------------------------------------------------------------
# Page flags and node flags (mdb.c).
P_BRANCH, P_LEAF, P_OVERFLOW, P_LEAF2 = 0x01, 0x02, 0x04, 0x20
F_BIGDATA, F_SUBDATA, F_DUPDATA = 0x01, 0x02, 0x04
NODE = np.dtype([("lo", "<u2"), ("hi", "<u2"), ("flags", "<u2"), ("ksize", "<u2")])  # the 8-byte node header


def _meta_of_txn(path: str, txnid: int) -> Meta | None:
    """The meta page written by transaction ``txnid`` (None if a writer
    has since overwritten it)."""
    data = os.path.join(path, "data.mdb")
    with open(data, "rb") as f:
        head = f.read(META_BYTES)
        first = _parse_meta(head, 0)
        f.seek(first.page_size)
        second = _parse_meta(f.read(META_BYTES), 1)
    return next((m for m in (first, second) if m.txnid == txnid), None)


def check_tree(path: str, env: Any) -> int:
    """Walk every B-tree page of the environment's last commit (read with
    plain file reads, not through the map) and check what LMDB trusts
    without checking: each page's number and kind, its node offsets, key
    and value sizes within the page, child pages in use, and every large
    value within the overflow pages it points to (LMDB hands out a value
    of the stored size even when it runs past the end of the file: a bus
    error). Returns the number of pages checked.

    A read transaction is held during the walk, so a writer committing
    meanwhile does not reuse the pages walked.

    Raises
    ------
    CorruptDatabase
        The first damaged page, and what is wrong with it.
    """
    for _ in range(5):
        with begin_read(env) as txn:
            meta = _meta_of_txn(path, txn.id())
            if meta is not None:
                return _Walk(path, meta).run()
    raise CorruptDatabase(f"{path}: no meta page matches the last transaction (check: meta pages)")


PAGE = np.dtype([("pgno", "<u8"), ("pad", "<u2"), ("flags", "<u2"), ("lower", "<u2"), ("upper", "<u2")])
DB_RECORD = np.dtype([("pad", "<u4"), ("flags", "<u2"), ("depth", "<u2"), ("branch", "<u8"), ("leaf", "<u8"),
                      ("overflow", "<u8"), ("entries", "<u8"), ("root", "<u8")])  # fmt: skip
BATCH = 1024  # pages checked at once (vectorised across pages: ~4 MiB of reads)


def _gather(flat: np.ndarray, at: np.ndarray, n: int) -> np.ndarray:
    """``n`` bytes from each offset ``at`` of ``flat``, as rows."""
    return flat[at[:, None] + np.arange(n)]


class _Walk:
    """The walk of :func:`check_tree`: level by level, a batch of pages at a time."""

    def __init__(self, path: str, meta: Meta) -> None:
        self.path, self.meta, self.psize = path, meta, meta.page_size
        self.fd = os.open(os.path.join(path, "data.mdb"), os.O_RDONLY)
        self.seen: set[int] = set()

    def run(self) -> int:
        try:
            level: dict[str, list[int]] = {"free-page": [], "main": [], "table": []}
            for (root, _), tree in zip(self.meta.roots, ("free-page", "main")):
                if root != P_INVALID:
                    level[tree].append(root)
            while any(level.values()):
                below: dict[str, list[int]] = {"free-page": [], "main": [], "table": []}
                for tree, pages in level.items():
                    pages.sort()  # runs of consecutive pages: one read each
                    for k in range(0, len(pages), BATCH):
                        for child_tree, children in self.pages(np.asarray(pages[k : k + BATCH], np.int64), tree):
                            below[child_tree] += children
                level = below
            return len(self.seen)
        finally:
            os.close(self.fd)

    def read(self, pgnos: np.ndarray, tree: str) -> np.ndarray:
        """The pages ``pgnos`` (in that order), one read per run of consecutive pages."""
        ps = self.psize
        cut = np.flatnonzero(np.diff(pgnos) != 1) + 1
        parts = [os.pread(self.fd, len(run) * ps, int(run[0]) * ps) for run in np.split(pgnos, cut)]
        raw = np.frombuffer(b"".join(parts), np.uint8)
        if len(raw) != len(pgnos) * ps:
            raise self.fail(int(pgnos[0]), tree, "a page beyond the end of the file")
        return raw

    def fail(self, pgno: int, tree: str, what: str) -> CorruptDatabase:
        return CorruptDatabase(f"{self.path}: page {pgno} of the {tree} B-tree: {what} (check: B-tree pages; "
                               "corrupt database)")

    def check(self, bad: np.ndarray, pgnos: np.ndarray, tree: str, what: str) -> None:
        """Raise for the first page of ``pgnos`` (one per element of ``bad``) where ``bad`` holds."""
        if bad.any():
            raise self.fail(int(pgnos[np.flatnonzero(bad)[0]]), tree, what)

    def pages(self, pgnos: np.ndarray, tree: str) -> list[tuple[str, list[int]]]:  # long: the checks, in order
        """Check the pages ``pgnos`` of one tree; return the pages they point to."""
        ps, last = self.psize, self.meta.last_page
        for p in pgnos.tolist():
            if p in self.seen:
                raise self.fail(p, tree, "reached twice (a cycle or a shared page)")
            self.seen.add(p)
        raw = self.read(pgnos, tree)
        head = raw.reshape(len(pgnos), ps)[:, : PAGE.itemsize].copy().view(PAGE).ravel()
        flags, lower, upper = head["flags"].astype(np.int64), head["lower"].astype(np.int64), head["upper"]
        self.check(head["pgno"] != pgnos, pgnos, tree, "its header gives another page number")
        kind = flags & (P_BRANCH | P_LEAF)
        self.check(((kind != P_BRANCH) & (kind != P_LEAF)) | (flags & (P_OVERFLOW | P_LEAF2) != 0), pgnos, tree,
                   "neither a branch nor a leaf page")
        self.check((lower < PAGE.itemsize) | (lower > upper) | (upper > ps) | (lower % 2 != 0), pgnos, tree,
                   "free space bounds impossible")
        # The node pointers of every page, flat: row (page), offset in the page.
        n_nodes = (lower - PAGE.itemsize) // 2
        row = np.repeat(np.arange(len(pgnos)), n_nodes)
        starts = np.cumsum(n_nodes) - n_nodes
        words = raw.view("<u2")  # nodes start at even offsets: their header is four 16-bit words
        slot = row * (ps // 2) + PAGE.itemsize // 2 + np.arange(len(row)) - starts[row]
        ptr = words[slot].astype(np.int64)
        self.check(np.bincount(row[(ptr < upper[row]) | (ptr + NODE.itemsize > ps) | (ptr % 2 != 0)],
                               minlength=len(pgnos)) > 0, pgnos, tree, "a node lies outside the page")
        at = (row * ps + ptr) // 2
        lo, hi, nflags, ksize = (words[at + k].astype(np.int64) for k in range(4))
        data_at = ptr + NODE.itemsize + ksize
        by_node = lambda bad: np.bincount(row[bad], minlength=len(pgnos)) > 0  # noqa: E731
        self.check(by_node(data_at > ps), pgnos, tree, "a key runs past the end of the page")
        branch = kind[row] == P_BRANCH
        children = (lo | hi << 16 | nflags << 32)[branch]
        self.check(by_node(branch & ((lo | hi << 16 | nflags << 32) > last)), pgnos, tree,
                   f"a child page beyond the pages in use (last {last})")
        out = [(tree, children.tolist())]
        leaf = ~branch
        size = lo | hi << 16
        big = leaf & ((nflags & F_BIGDATA) != 0)
        inline = leaf & ~big
        self.check(by_node(inline & (data_at + size > ps)), pgnos, tree, "a value runs past the end of the page")
        self.check(by_node(big & (data_at + 8 > ps)), pgnos, tree, "a large value's page number runs past the page")
        if big.any():
            first = _gather(raw, row[big] * ps + data_at[big], 8).copy().view("<u8").ravel()
            self.overflow(first, size[big], pgnos[row[big]], tree)
        if tree == "main":  # its values are the records of the named tables
            sub = leaf & ((nflags & F_SUBDATA) != 0)
            self.check(by_node(sub & (size != DB_RECORD.itemsize)), pgnos, tree, "a table record of the wrong size")
            if sub.any():
                rec = _gather(raw, row[sub] * ps + data_at[sub], DB_RECORD.itemsize).view(DB_RECORD).ravel()
                used = rec["root"] != P_INVALID
                bad = used & ((rec["root"] > last) | (rec["depth"] < 1) | (rec["depth"] > MAX_DEPTH))
                self.check(bad, pgnos[row[sub]], tree, "a table's root page is beyond the pages in use")
                out.append(("table", rec["root"][used].astype(np.int64).tolist()))
        return out

    def overflow(self, first: np.ndarray, size: np.ndarray, owners: np.ndarray, tree: str) -> None:
        """Large values of ``size`` bytes stored from pages ``first`` on
        (``owners``: the leaf page of each)."""
        last = self.meta.last_page
        self.check((first < 2) | (first > last), owners, tree, "a large value at a page beyond the pages in use")
        raw = b"".join(os.pread(self.fd, PAGE.itemsize, p * self.psize) for p in first.tolist())
        head = np.frombuffer(raw, PAGE)
        n_pages = np.frombuffer(raw, "<u4").reshape(-1, 4)[:, 3].astype(np.int64)  # mp_pages: in place of lower/upper
        self.check((head["pgno"] != first) | (head["flags"] & P_OVERFLOW == 0), owners, tree,
                   "a large value at a page that is not an overflow page")
        too_big = (first.astype(np.int64) + n_pages - 1 > last) | (size > n_pages * self.psize - PAGE.itemsize)
        self.check(too_big, owners, tree, "a large value does not fit the overflow pages it points to")
        self.seen.update(first.tolist())


# -- a clean close ----------------------------------------------------------------------
CLEAN_CLOSE = "clean-close.json"
"""Written by a writer that closed the database, naming the file it left."""

_STAMPED = ("st_dev", "st_ino", "st_size", "st_mtime_ns", "st_ctime_ns")


def _stamp(path: str, meta: Meta) -> dict[str, int]:
    st = os.stat(os.path.join(path, "data.mdb"))
    return {**{k: int(getattr(st, k)) for k in _STAMPED}, "txnid": meta.txnid}


def synced(env: Any) -> bool:
    """Flush ``env`` to disk; False if that fails (no clean close then)."""
    try:
        env.sync(True)
    except lmdb.Error:
        return False
    return True


def mark_clean_close(path: str) -> None:
    """Record that the writer which opened ``path`` (its tree checked)
    closed it: only LMDB wrote the file since the check. Written after
    the environment is synced and closed; a failure to write it only
    means the next open walks the tree."""
    try:
        meta = check_file(path)
        if meta is None:
            return
        tmp = os.path.join(path, CLEAN_CLOSE + ".tmp")
        with open(tmp, "w") as f:
            json.dump(_stamp(path, meta), f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, os.path.join(path, CLEAN_CLOSE))
    except (OSError, CorruptDatabase):
        return


def closed_cleanly(path: str, meta: Meta | None) -> bool:
    """Whether ``path/data.mdb`` is the very file a writer left at its
    clean close (same device and inode, size, modification and change
    times, last transaction ``meta``): its tree needs no walk. A copy has
    another inode; any write, even one that restores the modification
    time, moves the change time."""
    if meta is None:
        return False
    try:
        with open(os.path.join(path, CLEAN_CLOSE), "rb") as f:
            saved = json.loads(f.read(4096))
        return isinstance(saved, dict) and saved == _stamp(path, meta)
    except (OSError, ValueError):
        return False


def forget_clean_close(path: str) -> None:
    """A writer opening ``path`` removes the record before it writes:
    should it die, the next open walks the tree."""
    try:
        os.unlink(os.path.join(path, CLEAN_CLOSE))
    except FileNotFoundError:
        pass


def open_checked(path: str, readonly: bool, map_size: int | None, sync: bool, full_check: bool = False) -> Any:
    """The LMDB environment at ``path`` (:func:`~.environment.open_env`),
    opened once its file is checked: the meta pages before LMDB maps it
    (:func:`check_file`), then every B-tree page before any table is read
    (:func:`check_tree`), unless the file is the one a writer left at its
    clean close (:func:`closed_cleanly`) and ``full_check`` is off. A
    writer then removes that record and frees dead readers' slots."""
    meta = check_file(path)
    env = environment.open_env(path, readonly, map_size, sync)
    try:
        if full_check or not closed_cleanly(path, meta):
            check_tree(path, env)
        if not readonly:
            forget_clean_close(path)
            environment.clear_stale_readers(env, path)
    except BaseException:
        env.close()
        raise
    return env


__all__ = ["CLEAN_CLOSE", "DATA_VERSION", "MAGIC", "Meta", "check_file", "check_tree", "closed_cleanly",
           "forget_clean_close", "mark_clean_close", "open_checked"]
