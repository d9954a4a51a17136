"""What a :class:`~.queue.BestFirstQueue` hands out next, without taking it.

The status pages and ``frontera-linkrank top --queued`` list the next
pages in the order the queue would hand them out; this reads the queue's
heads and floors for that and changes nothing a crawl would see (a
host's list read back is only merged here, its head is not refilled).
"""

from __future__ import annotations

import heapq

import numpy as np

from .queue import BestFirstQueue


def peek(queue: BestFirstQueue, n: int, offsets: tuple[float, float] = (0.0, 0.0)) -> list[tuple[int, float]]:
    """``[(page, key + class offset)]``: the ``n`` best pages of ``queue``
    in the order :meth:`~.queue.BestFirstQueue.pop_batch` hands them out
    when no host is skipped or capped. Only the first hosts of each class
    are read, enough that no page of another can be among the ``n`` best
    (:func:`_first_hosts`); a host whose head runs out is read back, with
    its keys now, as a refill reads it."""
    merge: list[tuple[float, int, bool, int, int]] = []  # (-value, page, is a floor, host, class)
    heads: dict[int, list[tuple[float, int]]] = {}
    for cls in (0, 1):
        for host, in_head in _first_hosts(queue, cls, n, heads):
            heads[host] = [e for e in queue._heaps[host] if queue.live.get(e[1]) == -e[0]] if in_head else []
            merge += [(neg - offsets[cls], p, False, host, cls) for neg, p in heads[host]]
            if not in_head:
                merge.append(queue._floor_entry(host, cls, offsets))
    heapq.heapify(merge)
    left = {h: len(e) for h, e in heads.items()}
    out: list[tuple[int, float]] = []
    while merge and len(out) < n:
        neg, page, is_floor, host, cls = heapq.heappop(merge)
        if not is_floor:
            out.append((page, -neg))
            left[host] -= 1
            if not left[host] and host in heads and queue._floor_of(host) is not None:
                heapq.heappush(merge, queue._floor_entry(host, cls, offsets))  # surfaces once its head is done
            continue
        held = [p for _, p in heads.pop(host)]  # read back once: every page it has left
        pages, keys = queue._refill(host)
        keep = ~np.isin(pages, held)
        pages, keys = pages[keep], keys[keep]
        best = np.lexsort((pages, -keys))[: n - len(out)]  # no page past these can be among the n
        for p, k in zip(pages[best].tolist(), keys[best].tolist()):
            heapq.heappush(merge, (-k - offsets[cls], p, False, host, cls))
        left[host] += len(best)
    return out


def _first_hosts(queue: BestFirstQueue, cls: int, n: int, seen: dict) -> list[tuple[int, bool]]:
    """``[(host, its best is in its head)]``: hosts of class ``cls`` not in
    ``seen``, enough that the ``n`` best pages of the class are theirs.

    The heap of hosts holds each host's entry as it was registered, which
    may be better than the host's best now (its best page was taken or
    left the queue): hosts are taken in the heap's order until ``n`` of
    them have a best page no worse than the entry reached, which every
    host not reached yet is worse than or equal to.
    """
    want = 4 * n
    while True:
        firsts = _tops(queue, cls, want)
        chosen: dict[int, bool] = {}
        pending: list[tuple[float, int]] = []  # the chosen hosts' best entries, not yet reached
        reached = 0
        for negkey, page, host in firsts:
            if host not in chosen and host not in seen:
                best, in_head = queue._best(host)
                if best is not None:
                    chosen[host] = in_head
                    heapq.heappush(pending, best)
            while pending and pending[0] <= (negkey, page):
                heapq.heappop(pending)
                reached += 1
            if reached >= n:
                return list(chosen.items())
        if len(firsts) < want:
            return list(chosen.items())
        want *= 4  # stale entries crowded the first ones out


def _tops(queue: BestFirstQueue, cls: int, n: int) -> list[tuple[float, int, int]]:
    """The ``n`` first entries ``(-key, page, host)`` of class ``cls``'s heap
    of hosts, live or stale, with every parked host that could be among them
    taken in."""
    while True:
        firsts = heapq.nsmallest(n, queue._tops[cls])
        parked = queue._parked[cls]
        if parked is None or (len(firsts) == n and parked.first is not None and firsts[-1] < parked.first):
            return firsts
        queue._unpark(cls)
