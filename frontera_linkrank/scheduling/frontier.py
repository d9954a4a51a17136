"""The set of pages waiting to be fetched, their leases and retry waits.

A page is in exactly one of: *queued* (waiting, in the priority queue),
*waiting a retry* (its last fetch failed), *leased* (handed to the crawler)
or *done* (crawled or given up; it left the frontier). The page state
stored in the database is ``UNFETCHED`` for the first two, ``LEASED`` for
the third; this module keeps the in-memory side: the queue (bounded per host, see
:mod:`.queue`), the deadlines and the counts that make ``finished()``
cheap. Memory per page: one byte (queued or not).
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import Protocol

import numpy as np

from ..numeric import at_least, unique, value_at
from ..storage.vertices import LEASED, UNFETCHED, VertexTable
from . import lookahead
from .queue import BestFirstQueue

KEYS_AT_ONCE = 1 << 20
"""Pages whose keys a rebuild computes in one call of the policy."""


def _with_heads(head: np.ndarray, pages: np.ndarray, hosts: np.ndarray, keys: np.ndarray) -> tuple:
    """``(heads, in_heads)``: the pages ``head`` marks, and those that come
    before the last of them on their host (the leases a close left,
    offered again), as ``(pages, hosts, keys)`` for the heads, and the
    mask of them among ``pages``; the other pages' best is each host's
    floor. ``(None, None)`` when more pages come before them than they
    are: they were stored under other keys."""
    hp, hh, hk = pages[head], hosts[head], keys[head]
    size = int(hosts.max()) + 1
    last = np.full(size, np.inf)  # each host's last head entry (heap order: lowest key, then highest page)
    np.minimum.at(last, hh, hk)
    last_page = np.full(size, -1, np.int64)
    at = hk == last[hh]
    np.maximum.at(last_page, hh[at], hp[at])
    # Each page against its host's bound, a slice at a time; pages tied with it (few) compare pages too.
    before = np.empty(len(pages), bool)
    for lo in range(0, len(pages), KEYS_AT_ONCE):
        sl = slice(lo, lo + KEYS_AT_ONCE)
        h, k = hosts[sl].astype(np.intp), keys[sl]
        bound = last[h]
        before[sl] = k > bound
        tied = np.flatnonzero(k == bound)
        before[lo + tied] = pages[lo + tied] < last_page[h[tied]]
    before &= ~head
    if int(before.sum()) > len(hp):
        return None, None
    before |= head
    return (pages[before], hosts[before], keys[before]), before


class HostLists(Protocol):
    """Where a host's pages are listed (the page database's
    :class:`~frontera_linkrank.storage.hostpages.HostPages`, through
    :meth:`~frontera_linkrank.storage.pagedb.PageDB.host_pages_of`)."""

    def pages_of(self, host: int) -> np.ndarray:
        """Every page listed under ``host``."""
        ...

    def replace_pages(self, host: int, pages: np.ndarray) -> None:
        """Make ``pages`` the whole list of ``host``."""
        ...


class Frontier:
    """Queue, leases and retries of the pages of ``table``.

    Parameters
    ----------
    table : VertexTable
        Page arrays (``state``, ``host`` are used).
    priority : callable(idx ndarray) -> ndarray of float
        Current keys of pages (higher is fetched first).
    host_class : callable(host ids ndarray) -> ndarray of 0 or 1
        Classes of hosts for :class:`BestFirstQueue` offsets.
    tolerance : float
        A page in its host's head whose key rose is queued again only when
        it rose by more than ``tolerance`` times its queued value (the key
        plus its class offset, as the queue compares them; any rise of a
        value at or below 0): each re-queue is a heap push, and cash keys
        rise with every link to the page. The queued (lower) entry stays
        live, so the page is fetched at most that much later in value
        order.
    offsets : callable() -> (float, float), optional
        The current class offsets (those given to :meth:`take`); needed
        with a tolerance when they are not 0.
    lists : HostLists, optional
        The hosts' page lists (default: found by scanning ``table``, for
        small tables and tests).
    """

    def __init__(self, table: VertexTable, priority: Callable[[np.ndarray], np.ndarray],
                 host_class: Callable[[np.ndarray], np.ndarray] = np.zeros_like, tolerance: float = 0.0,
                 offsets: Callable[[], tuple[float, float]] | None = None, lists: HostLists | None = None) -> None:
        self.table = table
        self.priority = priority
        self.host_class = host_class
        self.tolerance = float(tolerance)
        self.offsets = offsets
        self.lists = lists
        self._queued = np.zeros(1024, np.uint8)  # 1: waiting in the queue (in a head or in its host's list)
        self.queue = BestFirstQueue(self._refill, self._taken)
        self.leases = collections.deque()  # (lease time, page), in time order
        self.lease_time: dict[int, float] = {}  # leased page -> when it was handed out
        self.retries = collections.deque()  # (ready time, page), in time order
        self._waiting = set()  # pages in self.retries
        self.n_queued = 0
        self.n_leased = 0
        self._class = np.full(16, -1, np.int8)  # host -> its class, -1 before its first page is queued
        self._class_used = [False, False]

    def _ensure(self, n):
        self._queued = at_least(self._queued, n)

    def _classify(self, hosts: np.ndarray) -> None:
        """Classify the hosts among ``hosts`` seen for the first time."""
        if not len(hosts):
            return
        hosts = np.asarray(hosts, np.int64)
        self._class = at_least(self._class, int(hosts.max()) + 1, -1)
        new = unique(hosts[self._class[hosts] < 0])
        if not len(new):
            return
        classes = np.asarray(self.host_class(new), np.int8)
        self._class[new] = classes
        for c in (0, 1):
            self._class_used[c] = self._class_used[c] or bool((classes == c).any())
        for queue in self._queues():
            queue.set_host_classes(new, classes)

    def classified(self) -> tuple[np.ndarray, np.ndarray]:
        """``(hosts, classes)`` of the hosts classified so far."""
        hosts = np.flatnonzero(self._class >= 0)
        return hosts, self._class[hosts]

    def _queues(self) -> list[BestFirstQueue]:
        return [self.queue]

    def _taken(self, page: int) -> None:
        self._queued[page] = 0
        self.n_queued -= 1

    def _refill(self, host: int) -> tuple[np.ndarray, np.ndarray]:
        """The waiting pages of ``host`` outside its head (which is empty
        when the queue asks) and their keys; a list that is mostly done
        is rewritten with only the pages that may still wait."""
        pages = self._waiting_pages(host)
        return pages, self.priority(pages).astype(np.float64)

    def _waiting_pages(self, host: int) -> np.ndarray:
        """The queued pages listed under ``host``."""
        t = self.table
        if self.lists is not None:
            listed = self.lists.pages_of(host).astype(np.int64)
            listed = listed[listed < t.n]
        else:
            listed = np.flatnonzero(t.host[: t.n] == host)
        pages = listed[self._queued[listed] == 1]
        if self.lists is not None and len(listed) > 64 and 2 * len(pages) < len(listed):
            state = t.state[listed]
            self.lists.replace_pages(host, listed[(state == UNFETCHED) | (state == LEASED)])
        return pages

    # -- entering the queue --------------------------------------------------------
    def rebuild(self, eager: bool = True, heads: np.ndarray | None = None) -> None:
        """Queue every ``UNFETCHED`` page afresh (at open, when keys fell):
        ``eager``, each host's head is filled now from one sort of the
        waiting pages; otherwise (a database opened) each host's floor is
        its best key and its head fills when it comes up, or, for the
        waiting pages among ``heads`` (those of :meth:`head_pages` at the
        last close), the head holds them and the floor is the best of the
        others."""
        t = self.table
        n = t.n
        self._ensure(n)
        self._queued[:] = 0
        pages = np.flatnonzero(t.state[:n] == UNFETCHED)
        if self._waiting:
            pages = np.setdiff1d(pages, np.fromiter(self._waiting, np.int64), assume_unique=True)
        keys = np.empty(len(pages))
        hosts = t.host[pages]  # its own 4 bytes a page: a rebuild's temporaries are of every waiting page
        seen = np.zeros(int(hosts.max()) + 1 if len(hosts) else 0, bool)
        for lo in range(0, len(pages), KEYS_AT_ONCE):  # a policy's temporaries stay those of a slice
            keys[lo : lo + KEYS_AT_ONCE] = self.priority(pages[lo : lo + KEYS_AT_ONCE])
            seen[hosts[lo : lo + KEYS_AT_ONCE]] = True
        self._queued[pages] = 1
        self._class[:] = -1
        self._class_used = [False, False]
        self._classify(np.flatnonzero(seen))
        head = None
        if heads is not None and not eager:
            mark = np.zeros(n, bool)
            mark[heads[(heads >= 0) & (heads < n)]] = True
            head = mark[pages]
            del mark
        for queue, m in self._by_level(pages, rebuild=True):
            self._rebuild_queue(queue, pages[m], hosts[m], keys[m], eager, None if head is None else head[m])
        self.n_queued = len(pages)
        self.n_leased = int((t.state[:n] == LEASED).sum())

    @staticmethod
    def _rebuild_queue(queue: BestFirstQueue, pages: np.ndarray, hosts: np.ndarray, keys: np.ndarray,
                       eager: bool = True, head: np.ndarray | None = None) -> None:
        """``queue``'s heads afresh (``eager``), or emptied with each host's
        floor its best page, or holding the pages ``head`` marks and each
        host's floor its best page outside them."""
        if eager:
            queue.rebuild_heads(pages, hosts, keys)
            return
        heads = in_heads = None
        if head is not None and head.any():
            heads, in_heads = _with_heads(head, pages, hosts, keys)
        if not len(hosts):
            queue.rebuild(hosts, keys, pages, heads)
            return
        # The floors are the best of the pages outside the heads, found a
        # slice at a time: temporaries of every waiting page would cost more
        # in fresh memory than the work itself.
        size = int(hosts.max()) + 1
        counts, best = np.zeros(size, np.int64), np.full(size, -np.inf)
        first = np.full(size, np.iinfo(np.int64).max)

        def outside(lo: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
            sl = slice(lo, lo + KEYS_AT_ONCE)
            h, k, p = hosts[sl].astype(np.intp), keys[sl], pages[sl]
            if in_heads is None:
                return h, k, p
            out = ~in_heads[sl]
            return h[out], k[out], p[out]

        for lo in range(0, len(pages), KEYS_AT_ONCE):
            h, k, _ = outside(lo)
            counts += np.bincount(h, minlength=size)
            np.maximum.at(best, h, k)
        for lo in range(0, len(pages), KEYS_AT_ONCE):
            h, k, p = outside(lo)
            top = k == best[h]
            np.minimum.at(first, h[top], p[top])  # ties: the page found first
        present = np.flatnonzero(counts)
        queue.rebuild(present, best[present], first[present], heads)

    def _by_level(self, pages: np.ndarray, rebuild: bool = False) -> list[tuple[BestFirstQueue, np.ndarray | slice]]:
        """``(queue, pages)`` of each queue the pages go to: a mask, or
        ``slice(None)`` for all of them (one queue here; a queue per request
        priority in :mod:`.priority`)."""
        return [(self.queue, slice(None))]

    def _queue_of(self, page: int) -> BestFirstQueue:
        """The queue ``page`` waits in."""
        return self.queue

    def head_pages(self) -> np.ndarray:
        """The pages in the queues' heads (to be given to :meth:`rebuild` by the next open)."""
        return np.concatenate([q.head_pages() for q in self._queues()])

    def offer(self, pages: object) -> None:
        """(Re)queue ``UNFETCHED`` pages among ``pages``: a page new to the
        queue, or whose key rose above its host's floor, joins its host's
        head; one in the head whose key rose (by more than the tolerance)
        is queued again."""
        t = self.table
        self._ensure(t.n)
        pages = np.asarray(pages, np.int64)
        pages = pages[t.state[pages] == UNFETCHED]
        if self._waiting and len(pages):
            pages = pages[~np.isin(pages, np.fromiter(self._waiting, np.int64))]
        if not len(pages):
            return
        keys = self.priority(pages).astype(np.float64)
        hosts = t.host[pages].astype(np.int64)
        new = self._queued[pages] == 0
        if new.any():
            self._queued[pages[new]] = 1
            self.n_queued += int(new.sum())
        for queue, m in self._by_level(pages):
            self._offer_to(queue, pages[m], hosts[m], keys[m])

    def _offer_to(self, queue: BestFirstQueue, pages: np.ndarray, hosts: np.ndarray, keys: np.ndarray) -> None:
        old = queue.queued_keys(pages, hosts)
        in_head = ~np.isnan(old)
        above = queue.beats_floor(pages, hosts, keys)
        if in_head.any():
            rises = keys > (self._requeue_above(old, pages) if self.tolerance else old)
            enter = np.where(in_head, rises, above)
        else:
            enter = above
        if not enter.any():
            return
        pages, hosts, keys = pages[enter], hosts[enter], keys[enter]
        self._classify(hosts)
        queue.push_many(pages, hosts, keys)

    def _requeue_above(self, old: np.ndarray, pages: np.ndarray) -> np.ndarray:
        """The key above which a page in a head is queued again (the
        tolerance; nan for pages not in a head, whose hosts may not be
        classified yet)."""
        off = self.offsets() if self.offsets is not None else (0.0, 0.0)
        used = self._class_used
        if not (used[0] and used[1]) or off[0] == off[1]:
            value = old + off[0 if used[0] else 1]
        else:  # hosts of both classes (AOPIC's target set "hosts")
            cls = value_at(self._class, self.table.host[pages], 0)
            value = old + np.where(cls == 1, off[1], off[0])
        return np.where(value > 0, old + self.tolerance * value, old)

    def discard(self, page: int) -> None:
        """A queued or waiting page was fetched without being handed out, or given up."""
        if page < len(self._queued) and self._queued[page]:
            self._queued[page] = 0
            self.n_queued -= 1
            self._queue_of(page).discard(page, int(self.table.host[page]))
        self._waiting.discard(page)

    # -- handing out -------------------------------------------------------------------
    def take(self, n: int, skip_host: Callable[[int], bool] | None = None, max_per_host: int = 0,
             offsets: tuple[float, float] = (0.0, 0.0), counts: dict | None = None) -> list[int]:
        """Pop up to ``n`` best pages off the queue (the caller leases them:
        :meth:`PageLifecycle.take`). ``counts`` (host -> pages already in
        this batch) is updated."""
        counts = {} if counts is None else counts
        return self.queue.pop_batch(n, skip_host, max_per_host, offsets, counts)

    def peek(self, n: int, offsets: tuple[float, float] = (0.0, 0.0)) -> list[tuple[int, float]]:
        """``[(page, key)]``: the ``n`` pages :meth:`take` would hand out
        first with no host skipped or capped, without taking them."""
        return lookahead.peek(self.queue, n, offsets)

    def leased(self, pages: list[int], now: float) -> None:
        """``pages`` were handed out at ``now`` (their state is LEASED)."""
        self.leases.extend((now, p) for p in pages)
        self.lease_time.update((p, now) for p in pages)
        self.n_leased += len(pages)

    def lease_done(self, page: int) -> None:
        """A leased page was crawled or failed (its state is about to change)."""
        if self.table.state[page] == LEASED:
            self.n_leased -= 1
        self.lease_time.pop(page, None)
        # Finished leases stay in the time-ordered deque until they would
        # expire; drop them once they outnumber the open ones, so memory
        # follows the requests in flight, not the pages fetched in an hour.
        if len(self.leases) > 2 * len(self.lease_time) + 4096:
            self.leases = collections.deque(
                (when, p) for when, p in self.leases if self.lease_time.get(p) == when)

    def expired(self, now: float, timeout: float) -> list[int]:
        """Pages whose lease is older than ``timeout`` and still current
        (the caller changes their state: :meth:`PageLifecycle.expire`)."""
        t = self.table
        out = []
        while self.leases and self.leases[0][0] <= now - timeout:
            when, page = self.leases.popleft()
            if t.state[page] == LEASED and self.lease_time.get(page) == when:
                out.append(page)
        return out

    def wait_retry(self, page: int, ready: float) -> None:
        """Page failed and will be retried at time ``ready`` (state UNFETCHED)."""
        self.discard(page)
        self._waiting.add(page)
        self.retries.append((ready, page))

    def release_retries(self, now: float) -> list[int]:
        back = []
        while self.retries and self.retries[0][0] <= now:
            _, page = self.retries.popleft()
            if page in self._waiting:
                self._waiting.discard(page)
                back.append(page)
        if back:
            self.offer(back)
        return back

    @property
    def n_waiting(self) -> int:
        return len(self._waiting)

    def is_empty(self) -> bool:
        return self.n_queued == 0 and self.n_leased == 0 and not self._waiting
