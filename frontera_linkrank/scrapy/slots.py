"""Requests the frontier handed out, until their outcome comes back.

Politeness: a request is handed to Scrapy only while its downloader slot
holds fewer than its capacity (``LINKRANK_OVERUSED_SLOT_FACTOR`` times the
slot's concurrency, :func:`.config.slot_capacity`); requests for a full
slot wait here in the frontier's order, and the frontier is asked for
pages of other hosts meanwhile (:meth:`SlotBuffer.busy`), so one slow host
never fills the downloader. A request handed to Scrapy is *in flight*
until its response or failure is reported, by its frontier key.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from scrapy import Request


class SlotBuffer:
    """Waiting requests per downloader slot, and those in flight.

    >>> b = SlotBuffer()
    >>> b.add("a", "r1"); b.add("a", "r2"); b.add("b", "r3")
    >>> b.pop_ready(lambda slot: 1, lambda r: (r, "u"))
    'r1'
    >>> b.pop_ready(lambda slot: 1, lambda r: (r, "u")), b.busy(lambda slot: 1)
    ('r3', ['a', 'b'])
    >>> b.release("r1"), b.release("r1"), len(b)
    ('a', None, 1)
    """

    def __init__(self) -> None:
        self.waiting: dict[str, collections.deque[tuple[int, Any]]] = {}  # slot -> (sequence, request)
        self.n_waiting = 0
        self.in_flight: dict[str, tuple[str, str]] = {}  # key (hex) -> (slot, URL)
        self.load: collections.Counter[str] = collections.Counter()  # slot -> requests in flight
        self._seq = 0

    def __len__(self) -> int:
        """Requests waiting (not in flight)."""
        return self.n_waiting

    def add(self, slot: str, request: Request) -> None:
        """A request handed out by the frontier, for downloader slot ``slot``."""
        self.waiting.setdefault(slot, collections.deque()).append((self._seq, request))
        self._seq += 1
        self.n_waiting += 1

    def busy(self, capacity: Callable[[str], int]) -> list[str]:
        """Slots that take no more requests: full ones, and those with requests waiting here."""
        full = {slot for slot, n in self.load.items() if n >= capacity(slot)}
        return sorted(full.union(self.waiting))

    def pop_ready(self, capacity: Callable[[str], int], lease: Callable[[Any], tuple[str, str]]) -> Any:
        """The first waiting request whose slot has room (now in flight,
        under ``lease(request)`` = (key, URL)), or None."""
        best = None
        for slot, queue in self.waiting.items():
            if self.load[slot] < capacity(slot) and (best is None or queue[0][0] < best[1]):
                best = (slot, queue[0][0])
        if best is None:
            return None
        slot = best[0]
        queue = self.waiting[slot]
        _, request = queue.popleft()
        if not queue:
            del self.waiting[slot]
        self.n_waiting -= 1
        key, url = lease(request)
        self.in_flight[key] = (slot, url)
        self.load[slot] += 1
        return request

    def release(self, key: Any) -> str | None:
        """Forget the in-flight request ``key`` and free its slot; the slot, or None."""
        out = self.in_flight.pop(key, None)
        if out is None:
            return None
        slot = out[0]
        self.load[slot] -= 1
        if self.load[slot] <= 0:
            del self.load[slot]
        return slot
