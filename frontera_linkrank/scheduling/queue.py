"""Best-first frontier queue, grouped by host, with a bounded head per host.

Each host keeps in memory only its *head*: a heap of ``(-key, page)``
entries for its best waiting pages, a few dozen for most hosts
(:func:`head_size`). Its other waiting pages stay where they are, listed under the host in the
page database (:class:`~frontera_linkrank.storage.hostpages.HostPages`),
and the host remembers one entry for them, its *floor*: the best of
them as the heap orders entries (``(-key, page)``: higher key first,
then the page found first), which none of them beats. A page whose key rises above its host's floor
joins the head; when the head runs out, the host's list is read back, the
keys computed afresh, and the best become the new head (a *refill*).
A refill reads at most :data:`READ_BACK` pages for each page it puts in
the head (up to :data:`HEAD_CAP` entries), so that a host with a million
waiting pages is not read back whole for every thousand it hands out.
Memory is then bounded per host, not per page.

A heap of hosts (one per class, see below) holds each host's best key:
its head's best, or its floor when the head is empty, an upper bound of
what a refill will find; taking the best page overall is O(log hosts +
log head). A host that is overused (its downloader slot is busy) or has
reached its per-batch cap is skipped as a whole.

Priorities only grow while a page waits (AOPIC cash accumulates), so the
heads are *lazy*: raising a page's key pushes a new entry, and entries
whose key is no longer the page's live key, or whose page left the
queue, are dropped when they surface. Ties go to the lower page index,
i.e. the page discovered first. A policy whose keys can fall rebuilds the
queue (:meth:`BestFirstQueue.rebuild_heads`: one sort of the waiting pages).
A rebuild's heads and its hosts' entries in the heap of hosts stay in
arrays (:mod:`.heads`) until the host is first read or changed, or may
come first: before the next rebuild, most hosts are not.
Opening a database (:meth:`BestFirstQueue.rebuild`) sets each host's floor to
its best key, or to the best outside the head it had at the last close.

Hosts belong to one of two classes whose keys are compared with an offset
(``offsets[c]`` added to every key of class c). AOPIC needs it when ω's cash
is owed to some hosts' pages only (policy "hosts"): their keys are
``C - stamp`` and the global accumulator ``A`` is the class offset.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable

import numpy as np

from ..numeric import at_least, best_first, spans
from .heads import HostEntries, PackedHeads, ParkedHosts, by_host

HEAD_MIN = 4
"""Entries a refill puts in a host's head, at least."""
HEAD_MAX = 256
"""... and at most, by the square root rule (a head may grow to twice its
size before it is trimmed)."""
READ_BACK = 64
"""A refill puts in the head at least one in this many of the host's waiting pages."""
HEAD_CAP = 1 << 14
"""Entries a refill puts in any host's head, at most."""
PARK_CHUNK = 1024
"""Parked hosts (:class:`~.heads.ParkedHosts`) taken into the heap of hosts at a time."""


def head_size(waiting: np.ndarray | int) -> np.ndarray | int:
    """Entries a refill puts in the head of a host with ``waiting`` pages
    outside it: about their square root (between :data:`HEAD_MIN` and
    :data:`HEAD_MAX`), or ``waiting / READ_BACK`` (up to :data:`HEAD_CAP`)
    when that is more; never more than ``waiting``. A refill then reads at
    most :data:`READ_BACK` pages per page it brings into the head for any
    host of up to ``READ_BACK * HEAD_CAP`` waiting pages, and the heads of
    large hosts hold one entry in ``READ_BACK`` of their waiting pages.

    >>> head_size(np.array([0, 3, 100, 10_000, 100_000, 10**9])).tolist()
    [0, 3, 10, 156, 1562, 16384]
    """
    w = np.asarray(waiting, np.int64)
    k = np.maximum(np.clip(np.sqrt(w).astype(np.int64), HEAD_MIN, HEAD_MAX), np.minimum(w // READ_BACK, HEAD_CAP))
    k = np.minimum(k, w)
    return k if k.ndim else int(k)


Refill = Callable[[int], tuple[np.ndarray, np.ndarray]]
"""``refill(host) -> (pages, keys)``: the host's waiting pages not in its
head, with their current keys."""


class BestFirstQueue:
    """Best-first queue of frontier pages with bounded heads per host.

    Parameters
    ----------
    refill : callable(host) -> (pages, keys)
        The host's waiting pages outside its head, and their keys now.
    taken : callable(page), optional
        Told of each page as it is taken (before any later refill in the
        same batch reads the host's list again).

    Examples
    --------
    >>> keys = {1: 0.5, 2: 0.9, 3: 0.1}
    >>> q = BestFirstQueue(lambda h: (np.zeros(0, np.int64), np.zeros(0)))
    >>> for p, h in ((1, 0), (2, 0), (3, 1)):
    ...     q.push(p, h, keys[p])
    >>> q.pop_batch(2)
    [2, 1]
    >>> q.pop_batch(5, max_per_host=1)
    [3]
    """

    def __init__(self, refill: Refill, taken: Callable[[int], None] | None = None) -> None:
        self._refill = refill
        self._taken = taken
        self._heaps: dict[int, list[tuple[float, int]]] = {}  # host -> head [(-key, page)]
        self._packed: PackedHeads | None = None  # heads of a rebuild not read or changed since
        self.live: dict[int, float] = {}  # page in a head -> its live key
        self._head_n: dict[int, int] = {}  # host -> pages in its head (live entries)
        self._size: dict[int, int] = {}  # host -> its head's size when above HEAD_MAX (a large host's)
        self.floor = np.full(16, -math.inf)  # host -> key of the best waiting page outside its head
        self.floor_page = np.zeros(16, np.int64)  # ... and that page (ties: the lowest index)
        self._tops: tuple[list[tuple[float, int, int]], ...] = ([], [])  # per class: [(-best key, page, host)]
        self._parked: list[ParkedHosts | None] = [None, None]  # per class: a rebuild's hosts not in _tops yet
        self._class = np.zeros(16, np.uint8)  # host -> 0 or 1
        # host -> (negkey, page) of its newest entry in a top heap: older
        # entries of the host that surface are dropped, not re-inserted.
        self._registered = HostEntries()
        self.entries = 0  # entries in all heads, live or stale
        self.refills = 0

    def __len__(self) -> int:
        return self.entries

    def set_host_classes(self, hosts: np.ndarray, classes: np.ndarray) -> None:
        """Put ``hosts[k]`` in class ``classes[k]`` (0 or 1): its entries queued from now on get ``offsets[cls]``."""
        self._class = at_least(self._class, int(hosts.max()) + 1 if len(hosts) else 0)
        self._class[hosts] = classes

    def _floor_of(self, host: int) -> tuple[float, int] | None:
        """The host's floor as a heap entry ``(-key, page)``, or None."""
        if host < len(self.floor) and self.floor[host] > -math.inf:
            return (-float(self.floor[host]), int(self.floor_page[host]))
        return None

    def _set_floor(self, host: int, entry: tuple[float, int] | None) -> None:
        if host >= len(self.floor):
            self.floor, self.floor_page = at_least(self.floor, host + 1, -math.inf), at_least(self.floor_page, host + 1)
        if entry is None:
            self.floor[host] = -math.inf
        else:
            self.floor[host], self.floor_page[host] = -entry[0], entry[1]

    def beats_floor(self, pages: np.ndarray, hosts: np.ndarray, keys: np.ndarray) -> np.ndarray:
        """Whether each page's entry would come before its host's floor."""
        out = np.ones(len(pages), bool)
        known = hosts < len(self.floor)
        h = hosts[known]
        fk, k = self.floor[h], keys[known]
        out[known] = (k > fk) | ((k == fk) & (pages[known] < self.floor_page[h]))
        return out

    def _leave_out(self, host: int, entry: tuple[float, int]) -> None:
        """A waiting page with heap entry ``entry`` is left outside the head."""
        floor = self._floor_of(host)
        if floor is None or entry < floor:
            self._set_floor(host, entry)

    # -- entering ------------------------------------------------------------------
    def push(self, page: int, host: int, key: float) -> None:
        """Put ``page`` of ``host`` in its head with key ``key`` (higher first)."""
        if self._packed is not None:
            self._unpack(host)
        live = self.live
        if page not in live:
            self._head_n[host] = self._head_n.get(host, 0) + 1
        live[page] = key
        entry = (-key, page)
        heapq.heappush(self._heaps.setdefault(host, []), entry)
        self.entries += 1
        best = self._registered.get(host)
        if best is None or entry < best:
            self._register(host, entry)
        if self._head_n[host] > 2 * self._size.get(host, HEAD_MAX):
            self._trim(host)

    def _register(self, host: int, entry: tuple[float, int]) -> None:
        heapq.heappush(self._tops[self._class[host] if host < len(self._class) else 0], entry + (host,))
        self._registered[host] = entry

    def push_many(self, pages: np.ndarray, hosts: np.ndarray, keys: np.ndarray) -> None:
        """For each ``pages[k]``: into its host's head if ``keys[k]`` is above
        the host's floor or the page is there already, else left to the
        host's list (the floor already bounds it)."""
        self._unpack_hosts(hosts)
        push, live = self.push, self.live
        for page, host, key in zip(pages.tolist(), hosts.tolist(), keys.tolist()):
            # The floor is read now: a trim while pushing may have raised it.
            if page in live:
                push(page, host, key)
            else:
                floor = self._floor_of(host)
                if floor is None or (-key, page) < floor:
                    push(page, host, key)

    def _trim(self, host: int) -> None:
        """A head grown past twice its size (:data:`HEAD_MAX`, or a large
        host's :func:`head_size`): keep its best that many, leave the rest
        to the host's list (floor raised)."""
        live = self.live
        heap = self._heaps[host]
        entries = sorted({(-live[p], p) for _, p in heap if p in live})
        size = self._size.get(host, HEAD_MAX)
        keep, drop = entries[:size], entries[size:]
        for _, p in drop:
            del live[p]
        self.entries += len(keep) - len(heap)
        self._heaps[host] = keep  # sorted ascending: a valid heap
        self._head_n[host] = len(keep)
        if drop:
            self._leave_out(host, drop[0])

    def discard(self, page: int, host: int) -> None:
        """``page`` of ``host`` left the queue (fetched without being
        handed out, given up): its head entry, if any, is now stale."""
        if self._packed is not None:
            self._unpack(host)
        if self.live.pop(page, None) is not None:
            self.forget_head_page(host)

    def forget_head_page(self, host: int) -> None:
        """A page of ``host``'s head left it (bookkeeping of the head size)."""
        n = self._head_n.get(host, 0)
        if n > 1:
            self._head_n[host] = n - 1
        else:
            self._head_n.pop(host, None)

    def queued_keys(self, pages: np.ndarray, hosts: np.ndarray) -> np.ndarray:
        """The key each of ``pages`` (of ``hosts``) has in its host's head (nan: not in it)."""
        self._unpack_hosts(hosts)
        live = self.live
        return np.fromiter((live.get(p, np.nan) for p in pages.tolist()), np.float64, len(pages))

    def head_pages(self) -> np.ndarray:
        """The pages in the heads, packed or not."""
        held = np.fromiter(self.live, np.int64, len(self.live))
        return held if self._packed is None else np.concatenate((held, self._packed.pages()))

    def _unpack_hosts(self, hosts: np.ndarray) -> None:
        if self._packed is not None:
            for host in self._packed.holds(hosts).tolist():
                self._unpack(host)

    def _unpack(self, host: int) -> None:
        """``host``'s packed head, if it has one, into its heap, as the rebuild would have put it."""
        packed = self._packed
        neg, pages = packed.take(host) if packed is not None else ([], [])
        if not pages:
            return
        self._heaps[host] = list(zip(neg, pages))  # sorted: a valid heap
        self.live.update(zip(pages, [-k for k in neg]))
        self._head_n[host] = len(pages)
        if not len(packed):
            self._packed = None

    def _reset(self, hosts: np.ndarray) -> None:
        self._heaps = {}
        self._packed = None
        self.live = {}
        self._head_n = {}
        self._size = {}
        self._tops = ([], [])
        self._parked = [None, None]
        self._registered = HostEntries()
        self.entries = 0
        size = max(16, int(hosts.max()) + 1) if len(hosts) else 16
        self.floor = np.full(max(size, len(self.floor)), -math.inf)
        self.floor_page = np.zeros(len(self.floor), np.int64)

    def _register_all(self, hosts: np.ndarray, neg: np.ndarray, pages: np.ndarray) -> None:
        """Register host ``hosts[i]``'s entry ``(neg[i], pages[i])`` (none registered before):
        parked, to join the heap of hosts when it may come first."""
        hosts = np.asarray(hosts, np.int64)
        self._class = at_least(self._class, int(hosts.max()) + 1 if len(hosts) else 0)
        self._registered.set_many(hosts, neg, pages)
        classes = self._class[hosts]
        for cls in (0, 1):
            mine = classes == cls
            self._parked[cls] = ParkedHosts(neg[mine], pages[mine], hosts[mine]) if mine.any() else None

    def _unpark(self, cls: int) -> None:
        parked, top = self._parked[cls], self._tops[cls]
        assert parked is not None
        for entry in parked.take(PARK_CHUNK):
            heapq.heappush(top, entry)
        if parked.first is None:
            self._parked[cls] = None

    def rebuild(self, hosts: np.ndarray, best: np.ndarray, best_page: np.ndarray,
                heads: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None) -> None:
        """Empty every head; host ``hosts[k]`` has waiting pages whose best is
        page ``best_page[k]`` with key ``best[k]`` (its floor): it is
        refilled when it comes up (a database opened: one pass, no sort).
        ``heads``: ``(pages, hosts, keys)`` of other waiting pages, put in
        their hosts' heads now (the floors bound the pages outside them)."""
        self._reset(np.concatenate((hosts, heads[1])) if heads is not None else hosts)
        self.floor[hosts] = best
        self.floor_page[hosts] = best_page
        top, neg, first = np.asarray(hosts, np.int64), -np.asarray(best, np.float64), np.asarray(best_page, np.int64)
        if heads is not None and len(heads[0]):
            pages, h, keys = heads
            order, gh, starts, counts = by_host(pages, h, keys)
            self._set_heads(gh, counts, pages[order], keys[order])
            # A host's top entry: its floor, or its head's first when that comes first (or it has no floor).
            floored = np.zeros(len(self.floor), bool)
            floored[top] = True
            top = np.flatnonzero(floored | (np.bincount(gh, minlength=len(floored)) > 0))  # a union without a sort
            neg, first = -self.floor[top], self.floor_page[top]
            i, hneg, hfirst = np.searchsorted(top, gh), -keys[order[starts]], pages[order[starts]]
            better = ~floored[gh] | (hneg < neg[i]) | ((hneg == neg[i]) & (hfirst < first[i]))
            neg[i[better]], first[i[better]] = hneg[better], hfirst[better]
            for host in gh[counts > 2 * HEAD_MAX].tolist():  # heads of a close: at most HEAD_MAX kept
                self._unpack(host)
                self._trim(host)
        self._register_all(top, neg, first)

    def rebuild_heads(self, pages: np.ndarray, hosts: np.ndarray, keys: np.ndarray) -> None:
        """Every head afresh from all the waiting ``pages`` (of ``hosts``,
        keyed ``keys``): what refilling every host now would give, in one
        sort instead of one read of each host's list (keys fell: a ranking
        was installed)."""
        self._reset(hosts)
        if not len(pages):
            return
        # Only the order is a temporary of every page: the hosts' groups and
        # their first entries are read through it.
        order, group_hosts, starts, counts = by_host(pages, hosts, keys)
        take = head_size(counts)
        self._size.update((h, k) for h, k in zip(group_hosts.tolist(), take.tolist()) if k > HEAD_MAX)
        cut = take < counts
        out = order[starts[cut] + take[cut]]  # each host's best left outside: its floor
        self.floor[group_hosts[cut]] = keys[out]
        self.floor_page[group_hosts[cut]] = pages[out]
        head = order[spans(starts, starts + take)]
        del order
        self._register_all(group_hosts, *self._set_heads(group_hosts, take, pages[head], keys[head]))

    def _set_heads(self, hosts: np.ndarray, sizes: np.ndarray, pages: np.ndarray,
                   keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Heads of ``hosts`` (emptied, none packed): ``sizes[i]`` entries for the i-th, from
        ``pages``, ``keys`` in that order (each host's best first), packed until their host
        is touched; returns each host's first entry, ``(-key, page)`` as two arrays."""
        packed = PackedHeads(hosts, sizes, pages, keys)
        self._packed = packed if len(packed) else None
        self.entries += len(pages)
        return packed.firsts()

    # -- leaving ------------------------------------------------------------------
    def _fill(self, host: int) -> None:
        """Refill ``host``'s (empty) head from its list: the best
        :func:`head_size` of its waiting pages join it; the floor becomes
        the best left outside."""
        pages, keys = self._refill(host)
        self.refills += 1
        self._set_floor(host, None)
        k = head_size(len(pages))
        if k > HEAD_MAX:
            self._size[host] = k
        else:
            self._size.pop(host, None)
        if not len(pages):
            return
        if k < len(pages):
            order = best_first(keys, pages, k + 1)  # the heap's order: key, then page
            rest = order[k]
            self._set_floor(host, (-float(keys[rest]), int(pages[rest])))
            pages, keys = pages[order[:k]], keys[order[:k]]
        heap = self._heaps.setdefault(host, [])
        live = self.live
        for p, key in zip(pages.tolist(), keys.tolist()):
            if p not in live:
                self._head_n[host] = self._head_n.get(host, 0) + 1
            live[p] = key
            heap.append((-key, p))
        heapq.heapify(heap)
        self.entries += len(pages)

    def _clean_host(self, host: int) -> list[tuple[float, int]] | None:
        """Drop stale entries from the top of a host's head; return it (or None)."""
        if self._packed is not None:
            self._unpack(host)
        heap = self._heaps.get(host)
        if heap is None:
            return None
        live = self.live
        while heap and live.get(heap[0][1]) != -heap[0][0]:
            heapq.heappop(heap)
            self.entries -= 1
        if not heap:
            del self._heaps[host]
            self._head_n.pop(host, None)
            return None
        return heap

    def _best(self, host: int) -> tuple[tuple[float, int] | None, bool]:
        """``(entry, from_head)``: the host's best entry, its head's, or its
        floor when its head is empty (None if it has nothing)."""
        heap = self._clean_host(host)
        if heap is not None:
            return heap[0], True
        return self._floor_of(host), False

    def _peek(self, cls: int) -> tuple[float, int, int] | None:
        """Valid best ``(negkey, page, host)`` of a class, dropping stale
        host entries and refilling a host whose floor comes up."""
        top = self._tops[cls]
        while True:
            parked = self._parked[cls]
            if parked is not None and (not top or top[0] > parked.first):
                self._unpark(cls)  # a parked host may come first
                continue
            if not top:
                return None
            negkey, page, host = top[0]
            best, in_head = self._best(host)
            if best is None:
                heapq.heappop(top)
                self._registered.pop(host)
            elif best == (negkey, page):
                if in_head:
                    return top[0]
                self._fill(host)  # its floor came up: read its list back
                best, _ = self._best(host)
                if best is None:
                    heapq.heappop(top)
                    self._registered.pop(host)
                else:
                    heapq.heapreplace(top, best + (host,))
                    self._registered[host] = best
            elif self._registered.get(host) == best:
                heapq.heappop(top)  # superseded: the host's newer entry is in a top heap
            else:
                # The host's best changed since this entry; fix it.
                heapq.heapreplace(top, best + (host,))
                self._registered[host] = best

    def pop_batch(self, n: int, skip_host: Callable[[int], bool] | None = None, max_per_host: int = 0,
                  offsets: tuple[float, float] = (0.0, 0.0), counts: dict[int, int] | None = None) -> list[int]:
        """Remove and return up to ``n`` best live pages.

        ``skip_host(host)`` -> True keeps a host's pages for later (an
        overused downloader slot); ``max_per_host`` caps pages per host in
        this batch (0: no cap), counting the pages already in ``counts``
        (host -> pages; updated).
        """
        out: list[int] = []
        set_aside: list[tuple[int, tuple[float, int, int]]] = []
        counts = {} if counts is None else counts
        live = self.live
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
            del live[page]
            self.forget_head_page(host)
            if self._taken is not None:
                self._taken(page)
            out.append(page)
            counts[host] = counts.get(host, 0) + 1
            nxt = heap[0] if heap else None
            if nxt is None:
                del self._heaps[host]
                nxt = self._floor_of(host)
            if nxt is not None:  # validated when it surfaces (_peek)
                self._register(host, nxt)
            else:
                self._registered.pop(host)
        for cls, entry in set_aside:
            heapq.heappush(self._tops[cls], entry)
        return out

    def _floor_entry(self, host: int, cls: int, offsets: tuple[float, float]) -> tuple[float, int, bool, int, int]:
        floor = self._floor_of(host)
        assert floor is not None
        return (floor[0] - offsets[cls], floor[1], True, host, cls)
