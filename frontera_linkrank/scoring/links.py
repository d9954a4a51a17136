"""The link graph as seen by the rankers: two products and the out-degrees.

PageRank and HITS need only ``push(x)`` (``y[j] = sum of x[i] over links
i -> j``, i.e. ``A.T @ x``), ``pull(y)`` (``x[i] = sum of y[j] over links
i -> j``, i.e. ``A @ y``) and the out-degree of every page, so they run
unchanged on any of:

- :class:`MatrixLinks`: a scipy sparse adjacency matrix (row = source);
- :func:`database_links`: the current links of a page database snapshot,
  either *loaded* once into index arrays (:class:`MatrixLinks`, 4 bytes
  per link kept) or *streamed* from the LMDB blocks on every
  product (:class:`StreamedLinks`, a few bytes per *page*: the blocks are
  read in place from the memory map, or from a copy of their links in a
  temporary file when the snapshot is to end before the iterations).

:func:`database_adjacency` gives the same current links as a plain
``n x n`` CSR adjacency matrix, for the tools that need the matrix itself
(seed extraction, the simulator's page-database graphs). Both read the
links through one loader, so the database's links become a matrix in one
place.

Links are counted once (duplicates merged) and self-links are dropped,
matching what the crawl stores. Optionally only links between pages of
different hosts are kept (``inter_host``): same-host links are mostly
navigation (docs/algorithms.md §2).

Examples
--------
>>> import numpy as np, scipy.sparse as sp
>>> g = MatrixLinks(sp.csr_matrix(np.array([[0, 1, 1], [0, 0, 1], [1, 0, 0]])))
>>> g.out_degree.tolist(), g.push(np.ones(3)).tolist(), g.pull(np.ones(3)).tolist()
([2, 1, 1], [1.0, 1.0, 2.0], [2.0, 1.0, 1.0])
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Protocol

import numpy as np
from numpy.typing import ArrayLike

from ..numeric import file_copies, row_slices
from .pattern import SLICE_LINKS, Pattern, add_transposed_product, csr_matrix, slice_view, transpose_indices

if TYPE_CHECKING:
    import lmdb
    import scipy.sparse as sp

    from ..storage.edges import EdgeStore
    from ..storage.pagedb import PageDB

# Peak bytes per link while loading links into memory (the link list read
# from the blocks, its 1-byte weights and the transposed index arrays): what
# mode="auto" compares with the memory limit. Measured with tracemalloc on
# benchmarks/rank.py's databases.
LINK_BYTES_LOADED = 13


class LinkOperator(Protocol):
    """What the rankers need of a link graph over ``n`` pages: the two
    products and the out-degrees (:class:`MatrixLinks`,
    :class:`StreamedLinks`, :class:`~.seeds.SubgraphLinks`).

    The products also come over the *sources*, the pages that may have
    out-links: a vector that is zero on every other page (HITS's hubs,
    PageRank's scores over the out-degrees) is then held for the sources
    only, which a crawl's database has a fraction of.
    """

    @property
    def n(self) -> int: ...

    @property
    def out_degree(self) -> np.ndarray: ...

    def push(self, x: np.ndarray) -> np.ndarray:
        """``y[j] = sum(x[i] for links i -> j)``, a new array (the rankers
        reuse ``x``'s memory once it returns)."""
        ...

    def pull(self, y: np.ndarray) -> np.ndarray:
        """``x[i] = sum(y[j] for links i -> j)``, a new array."""
        ...

    @property
    def sources(self) -> np.ndarray | None:
        """The pages that may have out-links, in the order of the vectors
        over them (None: every page, in page order)."""
        ...

    @property
    def source_degree(self) -> np.ndarray:
        """Out-degree of each source."""
        ...

    def push_sources(self, s: np.ndarray) -> np.ndarray:
        """:meth:`push` of the vector that is ``s`` on the sources and 0
        elsewhere (a new array of every page)."""
        ...

    def pull_sources(self, y: np.ndarray) -> np.ndarray:
        """:meth:`pull` of ``y`` on the sources only (a new array)."""
        ...


class EverySource:
    """The products over sources of an operator whose sources are all its
    pages (:class:`~.seeds.SubgraphLinks`)."""

    sources = None

    @property
    def source_degree(self) -> np.ndarray:
        return self.out_degree  # type: ignore[attr-defined,no-any-return]

    def push_sources(self, s: np.ndarray) -> np.ndarray:
        return self.push(s)  # type: ignore[attr-defined,no-any-return]

    def pull_sources(self, y: np.ndarray) -> np.ndarray:
        return self.pull(y)  # type: ignore[attr-defined,no-any-return]


class MatrixLinks:
    """Links held in memory as index arrays over the pages with out-links.

    ``B`` has one row per source page (``rows``); it is kept transposed
    (row = target, a :class:`Pattern`: 4 bytes per link and 4 per page),
    so ``push`` (the PageRank product) is a row-wise CSR product, scipy's
    fastest, and ``pull`` (HITS) a column-wise product over the same
    arrays. The out-degrees are kept per source page (4 bytes each) and
    spread over all pages only when asked for (PageRank holds them while
    it runs; HITS never does).

    Parameters
    ----------
    adjacency : sparse matrix, shape (n, n)
        ``adjacency[i, j] != 0`` for a link from ``i`` to ``j``.
    hosts : ndarray of int, optional
        Host of each page; with ``inter_host`` only links between pages of
        different hosts are kept.
    inter_host : bool
    """

    streamed = False

    def __init__(
        self, adjacency: sp.spmatrix | ArrayLike, hosts: ArrayLike | None = None, inter_host: bool = False
    ) -> None:
        a = csr_matrix(adjacency)
        a.sum_duplicates()
        coo = a.tocoo()  # sorted by row: a is canonical
        keep = coo.row != coo.col
        if inter_host:
            if hosts is None:
                raise ValueError("inter_host needs the host of every page")
            hosts = np.asarray(hosts)
            keep &= hosts[coo.row] != hosts[coo.col]
        src, dst = coo.row[keep], coo.col[keep]
        rows, starts = np.unique(src, return_index=True)
        self._init(rows, np.r_[starts, len(src)], dst, a.shape[0])

    @classmethod
    def from_rows(cls, rows: ArrayLike, ptr: ArrayLike, dst: np.ndarray, n: int) -> MatrixLinks:
        """Links of page ``rows[r]`` to ``dst[ptr[r]:ptr[r+1]]``, rows in
        any order, each page at most once, links distinct and without
        self-links (as the page database stores them)."""
        self = cls.__new__(cls)
        self._init(rows, ptr, dst, n)
        return self

    def _init(self, rows: ArrayLike, ptr: ArrayLike, dst: np.ndarray, n: int) -> None:
        self.n = int(n)
        self.rows = np.asarray(rows, np.int64)
        ptr = np.asarray(ptr)
        self.n_links = len(dst)
        index = np.int32 if max(self.n_links, self.n) < 2**31 else np.int64
        degree = np.diff(ptr)
        shape = (len(self.rows), self.n)
        dst = np.asarray(dst).astype(index, copy=False)
        self._bt = Pattern(*transpose_indices(ptr.astype(index), dst, shape), shape[0])
        self._degree = degree.astype(index)

    @property
    def out_degree(self) -> np.ndarray:
        """Out-degree of every page (a new array)."""
        out = np.zeros(self.n, self._degree.dtype)
        out[self.rows] = self._degree
        return out

    def push(self, x: np.ndarray) -> np.ndarray:
        """``y[j] = sum(x[i] for links i -> j)``."""
        return self._bt.dot(x[self.rows])

    def pull(self, y: np.ndarray) -> np.ndarray:
        """``x[i] = sum(y[j] for links i -> j)``."""
        out = np.zeros(self.n)
        out[self.rows] = self._bt.tdot(y)
        return out

    @property
    def sources(self) -> np.ndarray:
        """The pages with out-links (``rows``)."""
        return self.rows

    @property
    def source_degree(self) -> np.ndarray:
        return self._degree

    def push_sources(self, s: np.ndarray) -> np.ndarray:
        return self._bt.dot(s)

    def pull_sources(self, y: np.ndarray) -> np.ndarray:
        return self._bt.tdot(y)

    @property
    def nbytes(self) -> int:
        """Bytes held by the index arrays, the row list and the out-degrees."""
        return self._bt.nbytes + self.rows.nbytes + self._degree.nbytes


class StreamedLinks:
    """The current links of a page database snapshot, read block by block
    from LMDB on every product.

    Each block is multiplied a slice of rows at a time, a CSR view over
    the map whose weights are a view of one array of ones: nothing per
    link is held. Superseded rows (a page recrawled later has a newer
    row) stay in the blocks and are left out of the products: each slice
    keeps which of its rows are current rows of a *source* (a page with
    out-links) and where that source is among :attr:`sources`, over which
    the vectors that are zero elsewhere are held. The transaction ``txn``
    must stay open (the arrays are views on the map), unless ``spill``
    names a directory: the blocks' links are then read from a copy in a
    nameless file there, and ``txn`` may end once this is built.

    Parameters
    ----------
    edges : EdgeStore
    txn : lmdb.Transaction
        Read transaction (``buffers=True``) of the snapshot.
    n : int
        Pages in the snapshot.
    hosts : ndarray of int, optional
    inter_host : bool
        Keep only links between different hosts (a per-link mask is then
        computed on every product: slower, still no copy of the links).
    spill : str, optional
        Directory for the copy of the links (4 bytes per stored link, on
        the database's file system: ``PageDB.path``).
    """

    streamed = True

    def __init__(
        self,
        edges: EdgeStore,
        txn: lmdb.Transaction,
        n: int,
        hosts: ArrayLike | None = None,
        inter_host: bool = False,
        spill: str | None = None,
    ) -> None:
        self.n = int(n)
        self.inter_host = bool(inter_host)
        if inter_host and hosts is None:
            raise ValueError("inter_host needs the host of every page")
        self.hosts = None if hosts is None else np.asarray(hosts)[: self.n]
        found: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []  # (src, current, ptr, dst) per block
        deg = np.zeros(self.n, np.int32)  # a page has far fewer than 2**31 links
        self.n_links = 0
        for blk, fresh in edges.iter_fresh(txn, self.n):
            src = blk.src.astype(np.int64)
            ptr, dst = blk.ptr.view(np.int32), blk.dst.view(np.int32)
            if inter_host:
                counts = self._row_counts(src, ptr, dst)
            else:
                counts = np.diff(ptr.astype(np.int64))
            counts = counts * fresh
            deg[src] += counts
            self.n_links += int(counts.sum())
            found.append((src, fresh, ptr, dst))
        if spill is not None:
            copies = file_copies([dst for *_, dst in found], spill)
            found = [(src, fresh, ptr, dst) for (src, fresh, ptr, _), dst in zip(found, copies)]
        self.sources = np.flatnonzero(deg)
        self._degree = deg[self.sources]
        # Each block cut into slices of rows of at most SLICE_LINKS links, a
        # CSR view over the map whose weights are a view of one array of
        # ones: (the slice's rows that are current rows of a source, or
        # None: all are; their places among the sources; src with
        # inter_host; the view).
        cuts = [(b, r0, r1) for b, (_, _, ptr, _) in enumerate(found) for r0, r1 in row_slices(ptr, SLICE_LINKS)]
        ones = np.ones(max((int(found[b][2][r1] - found[b][2][r0]) for b, r0, r1 in cuts), default=0))
        self._slices: list[tuple[np.ndarray | None, np.ndarray, np.ndarray | None, sp.csr_matrix]] = []
        for b, r0, r1 in cuts:
            src, fresh, ptr, dst = found[b]
            rows = np.flatnonzero(fresh[r0:r1] & (deg[src[r0:r1]] > 0))
            if not len(rows):
                continue
            m = slice_view(ptr, dst, r0, r1, self.n, ones)
            pos = np.searchsorted(self.sources, src[r0:r1][rows])
            self._slices.append((None if len(rows) == r1 - r0 else rows, pos, src[r0:r1] if inter_host else None, m))
        self._ones = ones
        self.nbytes = ones.nbytes + self.sources.nbytes + self._degree.nbytes + sum(
            p.nbytes + m.indptr.nbytes + (0 if r is None else r.nbytes) for r, p, _, m in self._slices
        )

    @property
    def out_degree(self) -> np.ndarray:
        """Out-degree of every page (a new array)."""
        out = np.zeros(self.n, self._degree.dtype)
        out[self.sources] = self._degree
        return out

    @property
    def source_degree(self) -> np.ndarray:
        return self._degree

    def _mask(self, src: np.ndarray, ptr: np.ndarray, dst: np.ndarray) -> np.ndarray:
        """Per-link weights of rows ``src``: 1 for links between different hosts."""
        h = self.hosts
        assert h is not None  # only with inter_host, which needs the hosts
        return (np.repeat(h[src], np.diff(ptr)) != h[dst]).astype(np.float64)

    def _row_counts(self, src: np.ndarray, ptr: np.ndarray, dst: np.ndarray) -> np.ndarray:
        rows = np.repeat(np.arange(len(src)), np.diff(ptr))
        return np.bincount(rows, weights=self._mask(src, ptr, dst), minlength=len(src)).astype(np.int64)

    def _matrix(self, src: np.ndarray | None, m: sp.csr_matrix) -> sp.csr_matrix:
        if src is None:
            return m
        return csr_matrix((self._mask(src, m.indptr, m.indices), m.indices, m.indptr), shape=m.shape, copy=False)

    def push_sources(self, s: np.ndarray) -> np.ndarray:
        y = np.zeros(self.n)
        for rows, pos, src, m in self._slices:
            if rows is None:
                xs = s[pos]
            else:
                xs = np.zeros(m.shape[0])
                xs[rows] = s[pos]
            add_transposed_product(self._matrix(src, m), xs, y)
        return y

    def pull_sources(self, y: np.ndarray) -> np.ndarray:
        out = np.zeros(len(self.sources))
        for rows, pos, src, m in self._slices:
            got = self._matrix(src, m) @ y
            out[pos] += got if rows is None else got[rows]
        return out

    def push(self, x: np.ndarray) -> np.ndarray:
        """``y[j] = sum(x[i] for links i -> j)``."""
        return self.push_sources(x[self.sources])

    def pull(self, y: np.ndarray) -> np.ndarray:
        """``x[i] = sum(y[j] for links i -> j)``."""
        out = np.zeros(self.n)
        out[self.sources] = self.pull_sources(y)
        return out


def database_links(
    db: PageDB,
    txn: lmdb.Transaction,
    n: int | None = None,
    mode: str = "auto",
    inter_host: bool = False,
    memory_limit: int = 2 * 1024**3,
    spill: str | None = None,
) -> MatrixLinks | StreamedLinks:
    """The current links of page database ``db`` in snapshot ``txn``.

    Parameters
    ----------
    db : PageDB
    txn : lmdb.Transaction
        Read transaction (``buffers=True``) that stays open while the
        result is used.
    n : int, optional
        Pages in the snapshot (default: the ``n_pages`` of its metadata).
    mode : {"auto", "memory", "stream"}
        ``memory`` loads the links once into a CSR matrix, ``stream``
        reads them from the LMDB blocks on every product; ``auto`` loads
        them when they take less than ``memory_limit`` bytes.
    inter_host : bool
        Keep only links between pages of different hosts.
    spill : str, optional
        Streamed links are copied to a file there: ``txn`` may then end.
    """
    if n is None:
        n = snapshot_pages(db, txn)
    hosts = db.vertices.host[:n].astype(np.int64) if inter_host else None
    if mode == "auto":
        mode = "memory" if db.edges.n_stored_edges * LINK_BYTES_LOADED <= memory_limit else "stream"
    if mode == "stream":
        return StreamedLinks(db.edges, txn, n, hosts, inter_host, spill)
    if mode != "memory":
        raise ValueError(f"mode must be auto, memory or stream, not {mode!r}")
    rows, ptr, dst = _current_rows(db, txn, n, hosts)
    return MatrixLinks.from_rows(rows, ptr, dst, n)


def database_adjacency(db: PageDB, txn: lmdb.Transaction, n: int | None = None) -> sp.csr_matrix:
    """The current links of page database ``db`` in snapshot ``txn`` as an
    ``n x n`` CSR adjacency matrix (row = source, sorted columns, data 1).

    The links are distinct and without self-links, as the database stores
    them. The matrix holds copies: it stays valid after ``txn`` ends.

    Parameters
    ----------
    db : PageDB
    txn : lmdb.Transaction
        Read transaction (``buffers=True``) of the snapshot.
    n : int, optional
        Pages in the snapshot (default: the ``n_pages`` of its metadata).
    """
    if n is None:
        n = snapshot_pages(db, txn)
    pages, lens, dst = database_rows(db, txn, n)
    degree = np.zeros(n, np.int64)
    degree[pages] = lens
    indptr = np.zeros(n + 1, np.int64)
    np.cumsum(degree, out=indptr[1:])
    a = csr_matrix((np.ones(len(dst)), dst, indptr), shape=(n, n))
    a.sort_indices()
    return a


def database_rows(db: PageDB, txn: lmdb.Transaction,
                  n: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The current links of ``db`` in snapshot ``txn``: ``(pages, lens,
    dst)``, page ``pages[k]`` (the pages with a stored row, each once,
    ascending) links to the next ``lens[k]`` pages of ``dst`` (int32 while
    the links and pages are fewer than 2**31).

    Copies, valid after ``txn`` ends; about 10 bytes per link while it
    runs (the rows are put in order by scipy, with 1-byte weights).
    """
    if n is None:
        n = snapshot_pages(db, txn)
    rows, ptr, dst = _current_rows(db, txn, n)
    lens = np.diff(ptr)
    if len(rows) > 1 and (rows[1:] < rows[:-1]).any():
        order = np.argsort(rows)
        index = np.int32 if max(len(dst), n) < 2**31 else np.int64
        m = csr_matrix((np.ones(len(dst), np.int8), dst.astype(index, copy=False), ptr.astype(index)),
                       shape=(len(rows), n))[order]  # fmt: skip
        rows, lens, dst = rows[order], lens[order], m.indices
    return rows, lens, dst


def _current_rows(
    db: PageDB, txn: lmdb.Transaction, n: int, hosts: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(rows, ptr, dst)``: page ``rows[r]`` links to ``dst[ptr[r]:ptr[r+1]]``
    (rows in block order, ``dst`` int32, copies: valid after ``txn``
    ends); with ``hosts`` only the links between pages of different hosts."""
    rows, lens, dsts = [], [], []
    for src, ptr, dst in db.edges.iter_current(txn, n):
        src = np.asarray(src, np.int64)
        ptr = np.asarray(ptr, np.int64)
        if hosts is not None:
            srcs = np.repeat(src, np.diff(ptr))
            keep = hosts[srcs] != hosts[dst]
            dst = dst[keep]
            row_of = np.repeat(np.arange(len(src)), np.diff(ptr))[keep]
            lens.append(np.bincount(row_of, minlength=len(src)))
        else:
            lens.append(np.diff(ptr))
        rows.append(src)
        dsts.append(dst)
    if not rows:
        return np.zeros(0, np.int64), np.zeros(1, np.int64), np.zeros(0, np.int32)
    ptr = np.zeros(sum(len(r) for r in rows) + 1, np.int64)
    np.cumsum(np.concatenate(lens), out=ptr[1:])
    dst = np.concatenate(dsts).view(np.int32) if len(dsts) > 1 else np.array(dsts[0]).view(np.int32)  # a copy
    return np.concatenate(rows), ptr, dst


def snapshot_pages(db: PageDB, txn: lmdb.Transaction) -> int:
    """Number of pages committed in the snapshot ``txn``."""
    raw = txn.get(b"meta", db=db.dbs[b"meta"])
    assert raw is not None, "page database without its metadata record"
    return int(json.loads(bytes(raw)).get("n_pages", 0))


__all__ = [
    "EverySource",
    "LinkOperator",
    "MatrixLinks",
    "StreamedLinks",
    "database_adjacency",
    "database_links",
    "database_rows",
    "snapshot_pages",
]
