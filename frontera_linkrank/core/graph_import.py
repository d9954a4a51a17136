"""Bulk loading of a link graph into a page database (no crawl involved).

Used to build a page database from a previous crawl's link list
(``page_db_import``) and by tests and benchmarks that need a database of a
known graph. Pages get their fingerprint and host like crawled ones; pages
with out-links are recorded as crawled once, the others as unfetched.
AOPIC cash is not moved: in a fresh database it stays with the virtual
page; in a crawled one, new pages join the virtual page's target set owed
nothing, and pages whose state changes are settled first (their owed cash
made explicit), so the cash books still balance.

- :func:`add_graph`: a whole graph in memory, one commit.
- :class:`LinkLoader`: links streamed in chunks (one commit per chunk), for
  inputs larger than memory; a page's links may be spread over the input.

Loading is idempotent: pages are matched by fingerprint, and a page given
links gets exactly those (distinct, no self-links) as its current
out-links, replacing what it had; loading the same links again changes
nothing.

Examples
--------
>>> import tempfile
>>> from frontera_linkrank.storage.pagedb import PageDB
>>> db = PageDB(tempfile.mkdtemp() + "/db", sync=False)
>>> urls = ["http://a.test/", "http://a.test/x", "http://b.test/"]
>>> add_graph(db, urls, [0, 0, 0, 1], [1, 2, 2, 1], crawl_time=1e9).tolist()
[0, 1, 2]
>>> db.vertices.n_out[:3].tolist(), db.vertices.state[:3].tolist()  # 1->1 dropped, 0->2 once
([2, 0, 0], [2, 0, 0])
>>> db.close()
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from ..numeric import at_least, unique
from ..scheduling.lifecycle import mark_imported
from ..storage.urls import check_url, fingerprint
from .status import STALE_STATUS

if TYPE_CHECKING:
    from ..storage.pagedb import PageDB


def add_pages(
    db: PageDB,
    urls: Sequence[str],
    fps: Sequence[bytes] | None = None,
    hosts: Sequence[str] | Mapping[int, str] | None = None,
) -> np.ndarray:
    """Page index of each URL, adding the pages not in ``db`` yet (writer;
    not committed).

    Pages are matched by fingerprint, so a URL listed twice, or two URLs
    with the same canonical form, are one page.

    Parameters
    ----------
    db : PageDB
    urls : list of str
    fps : list of bytes, optional
        20-byte fingerprints of ``urls`` (computed if omitted).
    hosts : list of str, optional
        Host name of each URL (taken from the URL if omitted).

    Returns
    -------
    ndarray of int64
    """
    n = len(urls)
    if fps is None:
        fps = [fingerprint(u) for u in urls]
    index = np.empty(n, np.int64)
    new = []
    find = db.find
    for k, fp in enumerate(fps):
        i = find(fp)
        if i is None:
            new.append(k)
        else:
            index[k] = i
    if new:
        if hosts is None:
            hosts = {k: check_url(urls[k]) for k in new}
        first: dict[bytes, int] = {}
        keep = [k for k in new if first.setdefault(fps[k], k) == k]
        start = db.add_pages([fps[k] for k in keep], [urls[k] for k in keep], [db.host_id(hosts[k]) for k in keep])
        # Owed nothing by the virtual page's accumulator (as the crawl's join_new).
        db.vertices.stamp[start : start + len(keep)] = _accumulator(db)
        for j, k in enumerate(keep):
            index[k] = start + j
        for k in new:
            index[k] = index[first[fps[k]]]
    return index


def set_out_links(
    db: PageDB,
    src: np.ndarray | Sequence[int],
    dst: np.ndarray | Sequence[int],
    crawl_time: float | None = None,
    keep_crawl_times: bool = False,
) -> int:
    """Make the links ``src[k] -> dst[k]`` (page indices) the current
    out-links of their sources, replacing stored ones (writer; not
    committed). Duplicates count once; self-links are dropped.

    Sources become crawled. A page never crawled gets one crawl at
    ``crawl_time`` (default: now); an already crawled page keeps its count
    and its times widen to include ``crawl_time`` (not with
    ``keep_crawl_times``).

    Returns the number of distinct links stored.
    """
    src = np.asarray(src, np.int64)
    dst = np.asarray(dst, np.int64)
    keep = src != dst
    src, dst = src[keep], dst[keep]
    if not len(src):
        return 0
    # Distinct links, grouped by source.
    m = db.n_pages + 1
    key = unique(src * m + dst)
    src, dst = key // m, key % m
    cuts = np.flatnonzero(np.diff(src)) + 1
    starts = np.r_[0, cuts]
    ends = np.r_[cuts, len(src)]
    add = db.edges.add
    for a, b in zip(starts.tolist(), ends.tolist()):
        add(int(src[a]), dst[a:b])
    pages = src[starts]
    db.vertices.n_out[pages] = ends - starts
    mark_imported(db, pages, crawl_time, keep_crawl_times)
    return len(key)


def _accumulator(db: PageDB) -> float:
    """The AOPIC accumulator of the last commit (0 in a fresh database)."""
    return float((db.meta.get("aopic") or {}).get("A", 0.0))


def add_graph(
    db: PageDB,
    urls: Sequence[str],
    src: np.ndarray | Sequence[int],
    dst: np.ndarray | Sequence[int],
    crawl_time: float | None = None,
    fps: Sequence[bytes] | None = None,
    hosts: Sequence[str] | None = None,
) -> np.ndarray:
    """Add pages ``urls`` and links ``src[k] -> dst[k]`` (indices into
    ``urls``) to the writer ``db``, and commit.

    Pages already in the database are reused (matched by fingerprint); a
    page given links gets them as its current out-links (replacing
    stored ones), without duplicates or self-links.

    Parameters
    ----------
    db : PageDB
        Opened for writing.
    urls : list of str
    src, dst : array of int
    crawl_time : float, optional
        Crawl time recorded for pages with out-links (default: now).
    fps : list of bytes, optional
        20-byte fingerprints of ``urls`` (computed if omitted).
    hosts : list of str, optional
        Host name of each URL (taken from the URL if omitted).

    Returns
    -------
    ndarray of int64
        Page index of each URL.
    """
    index = add_pages(db, urls, fps, hosts)
    set_out_links(db, index[np.asarray(src, np.int64)], index[np.asarray(dst, np.int64)], crawl_time)
    db.commit(STALE_STATUS)
    return index


class LinkLoader:
    """Stream links (page indices) into a writer ``db``, a chunk at a time.

    Every page given links ends up with the union of all its links passed
    to this loader as its current out-links (replacing what it had), however
    they are spread over the chunks. :meth:`add` commits each chunk;
    :meth:`finish` must be called at the end.

    Memory: a link list grouped by source (a crawl's, ``page_db_dump
    links``) is written as it comes, holding only the current source's
    links between chunks. Links of a source seen again after its links were
    written are kept aside (8 bytes each) and merged with the written row
    in :meth:`finish`, so an unordered list costs up to 8 bytes per link.

    Parameters
    ----------
    db : PageDB
    crawl_time, keep_crawl_times
        See :func:`set_out_links`.
    """

    def __init__(self, db: PageDB, crawl_time: float | None = None, keep_crawl_times: bool = False) -> None:
        self.db = db
        self.crawl_time = time.time() if crawl_time is None else float(crawl_time)
        self.keep_crawl_times = keep_crawl_times
        self._written = np.zeros(0, bool)  # sources whose row this loader wrote
        self._held = (np.zeros(0, np.int64), np.zeros(0, np.int64))
        self._late: list[tuple[np.ndarray, np.ndarray]] = []  # (src, dst) uint32 arrays of sources already written
        self.late_links = 0

    def add(self, src: np.ndarray | Sequence[int], dst: np.ndarray | Sequence[int]) -> None:
        """Add links ``src[k] -> dst[k]`` (in input order) and commit."""
        src = np.asarray(src, np.int64)
        dst = np.asarray(dst, np.int64)
        if len(src):
            # The last source of the chunk may go on in the next one: hold
            # its links back so that a grouped input writes each row once.
            hs, hd = self._held
            src, dst = np.concatenate([hs, src]), np.concatenate([hd, dst])
            tail = src == src[-1]
            self._held = (src[tail], dst[tail])
            self._write(src[~tail], dst[~tail])
        self.db.commit(STALE_STATUS)

    def _write(self, src: np.ndarray, dst: np.ndarray) -> None:
        if not len(src):
            return
        n = self.db.n_pages
        self._written = at_least(self._written, n)
        late = self._written[src]
        if late.any():
            self._late.append((src[late].astype(np.uint32), dst[late].astype(np.uint32)))
            self.late_links += int(late.sum())
            src, dst = src[~late], dst[~late]
        set_out_links(self.db, src, dst, self.crawl_time, self.keep_crawl_times)
        self._written[src] = True

    def finish(self) -> None:
        """Write the held and late links and commit."""
        db = self.db
        self._write(*self._held)
        self._held = (np.zeros(0, np.int64), np.zeros(0, np.int64))
        if self._late:
            db.commit(STALE_STATUS)  # the rows to merge with are then in the snapshot
            late_src = np.concatenate([s for s, _ in self._late]).astype(np.int64)
            late_dst = np.concatenate([d for _, d in self._late]).astype(np.int64)
            self._late = []
            wanted = np.zeros(db.n_pages, bool)
            wanted[late_src] = True
            parts_s, parts_d = [late_src], [late_dst]
            with db.snapshot() as txn:
                for s, ptr, d in db.edges.iter_current(txn, db.n_pages):
                    owner = np.repeat(np.asarray(s, np.int64), np.diff(np.asarray(ptr, np.int64)))
                    pick = wanted[owner]
                    if pick.any():
                        parts_s.append(owner[pick])
                        parts_d.append(np.asarray(d, np.int64)[pick])
            set_out_links(db, np.concatenate(parts_s), np.concatenate(parts_d), self.crawl_time, self.keep_crawl_times)
        db.commit(STALE_STATUS)
