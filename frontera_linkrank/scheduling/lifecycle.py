"""The page lifecycle: every change of a page's crawl state happens here.

A state change touches three books that must agree: the AOPIC books (a
page's membership of the virtual page's target set can depend on its
state, so the cash it is owed is settled before and its stamp reset
after: ``leave`` / ``join``), the frontier's counters (queued, leased,
waiting) and the page database's dirty set (what the next commit writes).
:class:`PageLifecycle` does all three in each transition, so no caller can
forget one.

==============  ============  ===================================  =======================
from            to            transition                           caller
==============  ============  ===================================  =======================
(new)           UNFETCHED     :meth:`created`                      page registry
UNFETCHED       LEASED        :meth:`take` (best-first)            frontier core
CRAWLED         LEASED+R      :meth:`lease_refresh`                recrawler
LEASED          UNFETCHED     :meth:`expire` (lease timed out)     frontier core
LEASED+R        CRAWLED       :meth:`expire`, :meth:`refresh_returned`  recrawler
LEASED          UNFETCHED/    :meth:`recover_leases` (at open:     frontier core
                CRAWLED       the previous process is gone)
UNFETCHED,      CRAWLED       :meth:`crawled` (an AOPIC read)      batch application
LEASED
LEASED,         UNFETCHED     :meth:`retry` (fetch failed, wait)   frontier core
UNFETCHED
any             ERROR         :meth:`give_up` (cash to ω)          frontier core
(imported)      CRAWLED       :func:`mark_imported`, :func:`restore`  graph import tools
==============  ============  ===================================  =======================

``+R`` is the ``F_REFRESH`` flag: a crawled page handed out again.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from ..scoring.aopic import Aopic
from ..storage.coldrecords import ColdRecords, TableColdRecords
from ..storage.vertices import CRAWLED, ERROR, F_CRAWLED, F_REFRESH, LEASED, UNFETCHED, VertexTable
from .frontier import Frontier

_NOT_REFRESH = 0xFF ^ F_REFRESH


class PageLifecycle:
    """State transitions of the pages of ``table`` (see the module docstring).

    Parameters
    ----------
    table : VertexTable
        The page arrays.
    aopic : Aopic
        The cash books.
    frontier : Frontier
        Queue, leases and retries.
    touch : callable(index or int array)
        Marks pages changed in the current batch (``PageDB.touch``).
    cold : ColdRecords, optional
        The pages' cold fields (``lease``, ``n_crawls``; default: in ``table``).
    """

    def __init__(self, table: VertexTable, aopic: Aopic, frontier: Frontier,
                 touch: Callable[[object], None], cold: ColdRecords | TableColdRecords | None = None) -> None:
        self.table = table
        self.aopic = aopic
        self.frontier = frontier
        self.touch = touch
        self.cold = cold if cold is not None else TableColdRecords(table, touch)

    # -- entering the frontier -------------------------------------------------------
    def created(self, start: int, k: int) -> None:
        """Pages ``start .. start+k-1`` were appended (state UNFETCHED)."""
        self.aopic.join_new(start, k)

    def recover_leases(self) -> int:
        """At open: leases of a previous process go back (a refresh to the
        crawled pages, a new page to the queue). Returns how many."""
        v = self.table
        leased = np.flatnonzero(v.state[: v.n] == LEASED)
        if len(leased):
            v.state[leased] = np.where(v.flags[leased] & F_REFRESH, CRAWLED, UNFETCHED)
            v.flags[leased] &= _NOT_REFRESH
            self.cold.set("lease", leased, 0.0)
            self.touch(leased)
        return len(leased)

    # -- handing out -------------------------------------------------------------------
    def take(self, n: int, now: float, skip_host: Callable[[int], bool] | None = None, max_per_host: int = 0,
             offsets: tuple[float, float] = (0.0, 0.0), counts: dict | None = None) -> list[int]:
        """Lease up to ``n`` best queued pages (see :meth:`Frontier.take`)."""
        pages = self.frontier.take(n, skip_host, max_per_host, offsets, counts)
        if pages:
            self._lease(pages, now)
        return pages

    def lease_refresh(self, pages: list[int], now: float) -> None:
        """Hand out crawled pages again (recrawl)."""
        idx = np.asarray(pages, np.int64)
        self.table.flags[idx] |= F_REFRESH
        self._lease(pages, now)

    def _lease(self, pages: list[int], now: float) -> None:
        idx = np.asarray(pages, np.int64)
        self.table.state[idx] = LEASED
        self.cold.set("lease", idx, now)
        self.frontier.leased(pages, now)
        self.touch(idx)

    def expire(self, now: float, timeout: float) -> list[int]:
        """Leases older than ``timeout``: new pages go back to the queue,
        refreshes back to the crawled pages. Returns the refreshes (the
        recrawler schedules them again)."""
        t = self.table
        back, refresh = [], []
        for page in self.frontier.expired(now, timeout):
            if t.flags[page] & F_REFRESH:
                refresh.append(page)
            else:
                self.frontier.lease_done(page)
                t.state[page] = UNFETCHED
                back.append(page)
        if back:
            self.touch(np.asarray(back, np.int64))
            self.frontier.offer(back)
        for page in refresh:
            self.refresh_returned(page)
        return refresh

    def refresh_returned(self, page: int) -> None:
        """A leased refresh came back unfetched (expired, failed): the page
        stays crawled with its stored copy."""
        t = self.table
        t.flags[page] &= _NOT_REFRESH
        if t.state[page] == LEASED:
            self.frontier.lease_done(page)
            t.state[page] = CRAWLED
        self.touch(page)

    # -- outcomes ------------------------------------------------------------------------
    def crawled(self, i: int, children: np.ndarray, n_dropped: int, when: float,
                same_host: np.ndarray | None = None, dropped_same_host: int = 0) -> None:
        """Page ``i`` was fetched: AOPIC reads it (its cash goes to
        ``children``) and it becomes CRAWLED."""
        t, aopic = self.table, self.aopic
        state = t.state[i]
        if state == LEASED:
            self.frontier.lease_done(i)
        elif state == UNFETCHED:
            self.frontier.discard(i)  # fetched without being handed out
        aopic.leave(i)
        aopic.read(i, children, n_dropped, when, same_host=same_host, dropped_same_host=dropped_same_host)
        t.state[i] = CRAWLED
        t.flags[i] |= F_CRAWLED
        self.cold.set1("n_crawls", i, self.cold.get1("n_crawls", i) + 1)
        aopic.join(i)
        self.touch(i)

    def retry(self, i: int, ready: float) -> None:
        """A fetch of page ``i`` failed; it waits until ``ready`` (UNFETCHED)."""
        self.frontier.lease_done(i)
        self.table.state[i] = UNFETCHED
        self.frontier.wait_retry(i, ready)
        self.touch(i)

    def give_up(self, i: int) -> None:
        """Page ``i`` failed for good: ERROR. It will never be read, so its
        cash goes to ω."""
        t, aopic = self.table, self.aopic
        self.frontier.lease_done(i)
        self.frontier.discard(i)
        aopic.leave(i)
        t.state[i] = ERROR
        t.flags[i] &= _NOT_REFRESH
        aopic.omega += float(t.cash[i])
        t.cash[i] = 0.0
        aopic.join(i)
        self.touch(i)


def settle(db: object, pages: np.ndarray) -> None:
    """Make the cash owed to ``pages`` explicit (books of the last commit)
    before a tool changes their crawl fields outside a crawl: a change of
    crawl count may move a page out of the virtual page's target set,
    which would drop what it is owed (a crawl's ``leave`` does the same)."""
    saved = db.meta.get("aopic")
    if saved:
        v = db.vertices
        books = Aopic.from_saved(v, saved, db.host_ids)
        member = pages[books.member_mask(pages)]
        v.cash[member] += books.A - v.stamp[member]
        v.stamp[pages] = books.A


def mark_imported(db: object, pages: np.ndarray, crawl_time: float | None = None,
                  keep_crawl_times: bool = False) -> None:
    """Imported pages ``pages`` (given out-links by a graph import) become
    CRAWLED, outside any crawl (settled first, see :func:`settle`).

    A page never crawled gets one crawl at ``crawl_time`` (default: now);
    an already crawled page keeps its count and its times widen to include
    ``crawl_time`` (not with ``keep_crawl_times``).
    """
    if crawl_time is None:
        crawl_time = time.time()
    v = db.vertices
    settle(db, pages)
    v.state[pages] = CRAWLED
    first = v.n_crawls[pages] == 0
    new = pages[first]
    v.n_crawls[new] = 1
    v.flags[new] |= F_CRAWLED
    v.first_crawl[new] = crawl_time
    v.last_crawl[new] = crawl_time
    if not keep_crawl_times:
        v.first_crawl[pages] = np.minimum(v.first_crawl[pages], crawl_time)
        v.last_crawl[pages] = np.maximum(v.last_crawl[pages], crawl_time)
    db.touch(pages)


def restore(db: object, pages: np.ndarray, set_fields: Callable[[], None]) -> None:
    """Pages ``pages`` get their fields back from a dump (``set_fields``
    writes them); those with crawls become CRAWLED (settled first, see
    :func:`settle`)."""
    settle(db, pages)
    set_fields()
    v = db.vertices
    crawled = v.n_crawls[pages] > 0
    v.state[pages[crawled]] = CRAWLED
    v.flags[pages] = np.where(crawled, v.flags[pages] | F_CRAWLED, v.flags[pages] & (0xFF ^ F_CRAWLED))
    db.touch(pages)
