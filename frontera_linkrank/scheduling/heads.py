"""The best-first queue's state per host, held in arrays until it is used.

A rebuild of the queue (a ranking installed, a database opened) gives
every host with waiting pages a head and an entry in the heap of hosts,
but between two rebuilds a crawl touches few of its hosts. Until it
touches one:

- :class:`PackedHeads` holds its head in arrays (16 bytes an entry, 21 a
  host) instead of a heap of Python tuples and a dict entry per page; the
  queue unpacks a head, exactly as the rebuild built it, the first time
  anything reads or changes it;
- :class:`ParkedHosts` holds its entry out of the heap of hosts (24 bytes),
  taken in when it may come first.

:class:`HostEntries` holds each host's newest entry in the heap of hosts
in two flat arrays.
"""

from __future__ import annotations

import math
from array import array

import numpy as np

from ..numeric import spans


def by_host(pages: np.ndarray, hosts: np.ndarray, keys: np.ndarray) -> tuple[np.ndarray, ...]:
    """``(order, hosts, starts, counts)``: the entries in the heads' order
    within each host (by host, then key, then page), and each host's group."""
    order = np.lexsort((pages, -keys, hosts))
    h = hosts[order]
    starts = np.flatnonzero(np.r_[True, h[1:] != h[:-1]])
    return order, h[starts].astype(np.int64), starts, np.diff(np.r_[starts, len(order)])


class PackedHeads:
    """Heads of ``hosts[i]``: ``sizes[i]`` entries each, taken in order from
    ``pages`` and ``keys`` (each host's best first, as its heap orders them).

    Examples
    --------
    >>> h = PackedHeads(np.array([3, 1]), np.array([2, 1]), np.array([7, 8, 9]), np.array([0.5, 0.2, 0.9]))
    >>> len(h), h.holds(np.array([1, 2, 3])).tolist()
    (3, [1, 3])
    >>> h.take(3)
    ([-0.5, -0.2], [7, 8])
    >>> h.take(3), len(h), h.pages().tolist()
    (([], []), 1, [9])
    """

    def __init__(self, hosts: np.ndarray, sizes: np.ndarray, pages: np.ndarray, keys: np.ndarray) -> None:
        hosts = np.asarray(hosts, np.int64)
        sizes = np.asarray(sizes, np.int64)
        starts = np.cumsum(sizes) - sizes
        self._start = np.full(int(hosts.max()) + 1 if len(hosts) else 0, -1, np.int64)  # host -> first entry, -1
        self._start[hosts] = starts
        # host -> 1 while packed: a bytearray, read per host in the queue's loops without numpy's overhead
        self._held = bytearray((self._start >= 0).astype(np.uint8).tobytes())
        self._size = np.zeros(len(self._start), np.int32)
        self._size[hosts] = sizes
        self._neg = -np.asarray(keys, np.float64)  # the heap's entries: (-key, page)
        self._pages = np.asarray(pages, np.int64)
        self._hosts = hosts
        self._left = int(sizes.sum())

    def __len__(self) -> int:
        """Entries still packed."""
        return self._left

    def firsts(self) -> tuple[np.ndarray, np.ndarray]:
        """Each host's first entry, ``(-key, page)`` as two arrays, in the order of ``hosts``."""
        at = self._start[self._hosts]
        return self._neg[at], self._pages[at]

    def take(self, host: int) -> tuple[list[float], list[int]]:
        """``(negated keys, pages)`` of ``host``'s head, no longer held here
        (empty when it holds none)."""
        if host >= len(self._held) or not self._held[host]:
            return [], []
        at, n = int(self._start[host]), int(self._size[host])
        self._start[host] = -1
        self._held[host] = 0
        self._left -= n
        return self._neg[at : at + n].tolist(), self._pages[at : at + n].tolist()

    def holds(self, hosts: np.ndarray) -> np.ndarray:
        """The hosts among ``hosts`` whose heads are still packed (sorted, once each)."""
        h = np.unique(np.asarray(hosts, np.int64))
        h = h[h < len(self._start)]
        return h[self._start[h] >= 0]

    def pages(self) -> np.ndarray:
        """The pages of the heads still packed."""
        at = self._start[self._hosts]
        kept = at >= 0
        return self._pages[spans(at[kept], at[kept] + self._size[self._hosts[kept]])]


class HostEntries:
    """host -> one heap entry ``(-key, page)``, or none: two flat arrays
    (16 bytes a host) where a dict would hold a tuple and two numbers.

    >>> e = HostEntries()
    >>> e[5] = (-0.5, 12)
    >>> e.get(5), e.get(4), e.get(99)
    ((-0.5, 12), None, None)
    >>> e.pop(5); e.get(5)
    >>> e.set_many(np.array([2, 40]), np.array([-1.0, -2.0]), np.array([3, 4])); e.get(40)
    (-2.0, 4)
    """

    def __init__(self) -> None:
        self._neg = array("d")  # nan: no entry
        self._page = array("q")

    def get(self, host: int) -> tuple[float, int] | None:
        if host < len(self._neg):
            neg = self._neg[host]
            if neg == neg:
                return neg, self._page[host]
        return None

    def _room(self, host: int) -> None:
        short = host + 1 - len(self._neg)
        if short > 0:
            grow = max(short, len(self._neg))  # doubling: amortized O(1) per host
            self._neg.extend(array("d", [math.nan]) * grow)
            self._page.extend(array("q", [0]) * grow)

    def __setitem__(self, host: int, entry: tuple[float, int]) -> None:
        self._room(host)
        self._neg[host], self._page[host] = entry

    def pop(self, host: int) -> None:
        if host < len(self._neg):
            self._neg[host] = math.nan

    def set_many(self, hosts: np.ndarray, neg: np.ndarray, pages: np.ndarray) -> None:
        """``self[hosts[i]] = (neg[i], pages[i])`` for every i."""
        if len(hosts):
            self._room(int(hosts.max()))
            np.frombuffer(self._neg, np.float64)[hosts] = neg  # views of the arrays, let go at once
            np.frombuffer(self._page, np.int64)[hosts] = pages


class ParkedHosts:
    """Hosts' entries ``(-key, page, host)`` kept out of the heap of hosts, in
    the heap's order, 24 bytes each: a rebuild registers every host with
    waiting pages, and the heap needs only those that can come first. The
    queue takes them in, a chunk at a time, whenever its heap's best is no
    better than :attr:`first`, so a parked host is never passed over.

    >>> p = ParkedHosts(np.array([-0.5, -0.9, -0.5]), np.array([4, 8, 2]), np.array([1, 2, 3]))
    >>> p.first, p.take(2), p.first, p.take(5), p.first
    ((-0.9, 8, 2), [(-0.9, 8, 2), (-0.5, 2, 3)], (-0.5, 4, 1), [(-0.5, 4, 1)], None)
    """

    def __init__(self, neg: np.ndarray, pages: np.ndarray, hosts: np.ndarray) -> None:
        order = np.lexsort((hosts, pages, neg))
        self._neg, self._pages, self._hosts = neg[order], pages[order], hosts[order]
        self._at = 0
        self.first = self._entry(0)

    def _entry(self, i: int) -> tuple[float, int, int] | None:
        if i >= len(self._neg):
            return None
        return float(self._neg[i]), int(self._pages[i]), int(self._hosts[i])

    def take(self, k: int) -> list[tuple[float, int, int]]:
        """The next ``k`` entries (fewer at the end)."""
        a, b = self._at, min(self._at + k, len(self._neg))
        self._at = b
        self.first = self._entry(b)
        return list(zip(self._neg[a:b].tolist(), self._pages[a:b].tolist(), self._hosts[a:b].tolist()))


__all__ = ["HostEntries", "PackedHeads", "ParkedHosts", "by_host"]
