"""A plain lazy best-first queue grouped by host, for the simulated baselines.

Every waiting page has an entry in memory: simple, and independent of the
frontier's own queue (:mod:`frontera_linkrank.scheduling.queue`, which
bounds memory per host), so a baseline built on it is a reference for the
frontier's order. Each host has a heap of ``(-key, page)`` entries; a heap of hosts holds each
host's best key. Taking the best page overall is O(log hosts + log pages),
and a host that is overused (its downloader slot is busy) or has reached its
per-batch cap is skipped as a whole, keeping its pages for later.

Priorities only grow while a page waits (AOPIC cash accumulates), so the
queue is *lazy*: raising a page's key pushes a new entry, and entries whose
key is no longer the page's current key, or whose page left the frontier,
are dropped when they surface. Ties go to the lower page index, i.e. the
page discovered first.

Hosts belong to one of two classes whose keys are compared with an offset
(``offsets[c]`` added to every key of class c). AOPIC needs it when ω's cash
is owed to some hosts' pages only (policy "hosts"): their keys are
``C - stamp`` and the global accumulator ``A`` is the class offset.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable

import numpy as np


class LazyHostQueue:
    """Lazy two-level priority queue of frontier pages.

    Parameters
    ----------
    is_live : callable(page, key) -> bool
        True if ``key`` is still the page's current key and the page is
        still waiting to be fetched.

    Examples
    --------
    >>> keys = {1: 0.5, 2: 0.9, 3: 0.1}
    >>> q = LazyHostQueue(lambda p, k: keys.get(p) == k)
    >>> for p, h in ((1, 0), (2, 0), (3, 1)):
    ...     q.push(p, h, keys[p])
    >>> q.pop_batch(2)
    [2, 1]
    >>> q.pop_batch(5, max_per_host=1)
    [3]
    """

    def __init__(self, is_live: Callable[[int, float], bool]) -> None:
        self._is_live = is_live
        self._heaps: dict[int, list[tuple[float, int]]] = {}  # host -> [(-key, page)]
        self._tops: tuple[list[tuple[float, int, int]], ...] = ([], [])  # per class: [(-best key, its page, host)]
        self._host_class: dict[int, int] = {}  # host -> 0 or 1
        # host -> (negkey, page) of its newest entry in a top heap: older
        # entries of the host that surface are dropped, not re-inserted.
        self._registered: dict[int, tuple[float, int]] = {}
        self.entries = 0  # entries in all host heaps, live or stale

    def __len__(self) -> int:
        return self.entries

    def set_host_class(self, host: int, cls: int) -> None:
        """Put ``host`` in class ``cls`` (0 or 1): its entries queued from now on get ``offsets[cls]``."""
        self._host_class[host] = cls

    def push(self, page: int, host: int, key: float) -> None:
        """Offer ``page`` of ``host`` with priority ``key`` (higher first)."""
        heap = self._heaps.get(host)
        entry = (-key, page)
        if heap is None:
            self._heaps[host] = [entry]
            self._register(host, entry)
        else:
            heapq.heappush(heap, entry)
            if heap[0] is entry:  # new best of its host
                self._register(host, entry)
        self.entries += 1

    def _register(self, host: int, entry: tuple[float, int]) -> None:
        heapq.heappush(self._tops[self._host_class.get(host, 0)], entry + (host,))
        self._registered[host] = entry

    def push_many(self, pages: np.ndarray, hosts: np.ndarray, keys: np.ndarray) -> None:
        """:meth:`push` for each ``pages[k]``, ``hosts[k]``, ``keys[k]`` in turn."""
        # push() inlined: this runs once per link that raised a key.
        heaps, register, heappush = self._heaps, self._register, heapq.heappush
        get = heaps.get
        for page, host, key in zip(pages.tolist(), hosts.tolist(), keys.tolist()):
            entry = (-key, page)
            heap = get(host)
            if heap is None:
                heaps[host] = [entry]
                register(host, entry)
            else:
                heappush(heap, entry)
                if heap[0] is entry:  # new best of its host
                    register(host, entry)
        self.entries += len(pages)

    def rebuild(self, pages: np.ndarray, hosts: np.ndarray, keys: np.ndarray) -> None:
        """Replace the contents with exactly these pages (numpy arrays)."""
        self._heaps = {}
        self._tops = ([], [])
        self._registered = {}
        self.entries = len(pages)
        if not len(pages):
            return
        order = np.lexsort((pages, -keys, hosts))
        pages, hosts, keys = pages[order], hosts[order], keys[order]
        cuts = np.flatnonzero(np.diff(hosts)) + 1
        starts = [0, *cuts.tolist()]
        ends = [*cuts.tolist(), len(pages)]
        entries = list(zip((-keys).tolist(), pages.tolist()))
        heaps, tops, registered = self._heaps, self._tops, self._registered
        cls = self._host_class.get
        for a, b, host in zip(starts, ends, hosts[starts].tolist()):
            # A list sorted ascending is a valid heap.
            heap = heaps[host] = entries[a:b]
            best = heap[0]
            tops[cls(host, 0)].append(best + (host,))
            registered[host] = best
        for top in self._tops:
            heapq.heapify(top)

    def _clean_host(self, host: int) -> list[tuple[float, int]] | None:
        """Drop stale entries from the top of a host heap; return it (or None)."""
        heap = self._heaps.get(host)
        if heap is None:
            return None
        is_live = self._is_live
        while heap and not is_live(heap[0][1], -heap[0][0]):
            heapq.heappop(heap)
            self.entries -= 1
        if not heap:
            del self._heaps[host]
            return None
        return heap

    def _peek(self, cls: int) -> tuple[float, int, int] | None:
        """Valid best ``(negkey, page, host)`` of a class, dropping stale
        host entries."""
        top = self._tops[cls]
        while top:
            negkey, page, host = top[0]
            heap = self._clean_host(host)
            if heap is None:
                heapq.heappop(top)
                self._registered.pop(host, None)
            elif heap[0] == (negkey, page):
                return top[0]
            elif self._registered.get(host) == heap[0]:
                heapq.heappop(top)  # superseded: the host's newer entry is in a top heap
            else:
                # The host's best changed since this entry; fix it.
                heapq.heapreplace(top, heap[0] + (host,))
                self._registered[host] = heap[0]
        return None

    def pop_batch(
        self,
        n: int,
        skip_host: Callable[[int], bool] | None = None,
        max_per_host: int = 0,
        offsets: tuple[float, float] = (0.0, 0.0),
        counts: dict[int, int] | None = None,
    ) -> list[int]:
        """Remove and return up to ``n`` best live pages.

        ``skip_host(host)`` -> True keeps a host's pages for later (an
        overused downloader slot); ``max_per_host`` caps pages per host in
        this batch (0: no cap), counting the pages already in ``counts``
        (host -> pages; updated).
        """
        out: list[int] = []
        set_aside: list[tuple[int, tuple[float, int, int]]] = []
        counts = {} if counts is None else counts
        while len(out) < n:
            best = None
            for cls in (0, 1):
                got = self._peek(cls)
                if got is not None:
                    value = offsets[cls] - got[0]
                    if best is None or value > best[0] or (value == best[0] and got[1] < best[2]):
                        best = (value, cls, got[1], got[2])
            if best is None:
                break
            _, cls, _, host = best
            entry = heapq.heappop(self._tops[cls])
            if (skip_host is not None and skip_host(host)) or (
                max_per_host and counts.get(host, 0) >= max_per_host
            ):
                set_aside.append((cls, entry))
                continue
            heap = self._heaps[host]
            _, page = heapq.heappop(heap)
            self.entries -= 1
            out.append(page)
            counts[host] = counts.get(host, 0) + 1
            if heap:  # its next entry is validated when it surfaces (_peek)
                self._register(host, heap[0])
            else:
                del self._heaps[host]
                self._registered.pop(host, None)
        for cls, entry in set_aside:
            heapq.heappush(self._tops[cls], entry)
        return out

    def hosts(self) -> list[int]:
        """Hosts with entries (live or not yet cleaned)."""
        return list(self._heaps)
