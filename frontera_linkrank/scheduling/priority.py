"""Request priorities: a page of a higher priority is handed out first.

A page takes the priority of the request that made it (Scrapy's
``Request.priority``, in the request's meta as ``b"scrapy_priority"``; a
later request for the same page is a duplicate and changes nothing), 0
when it has none. The queue keeps one best-first queue per priority level
(:class:`PrioritizedFrontier`) and takes pages from the highest level first:

- among pages of one priority, the crawl policy's order, as without
  priorities (a crawl that sets none has one level: nothing changes);
- politeness holds across levels: a busy host is skipped at every level,
  and ``LINKRANK_MAX_REQUESTS_PER_HOST`` counts a batch's pages of all
  levels;
- a negative priority puts a page after every page of priority 0.

Priorities live in memory (only the pages that have one) and in the
pages' stored request parts; the metadata section ``"priority"`` says a
crawl used some, and a database reopened then reads them back from the
stored parts of its unfetched pages (:meth:`Priorities.load`).

>>> from frontera_linkrank.storage.vertices import VertexTable
>>> t = VertexTable(); _ = t.append(4)
>>> p = Priorities(); p.levels[3] = 10
>>> keys = np.array([0.0, 0.9, 0.5, 0.1])
>>> f = PrioritizedFrontier(t, lambda idx: keys[idx], priorities=p)
>>> f.offer([1, 2, 3])
>>> f.take(3)
[3, 1, 2]
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..storage.packed import Unreadable
from ..storage.vertices import F_EXTRAS, UNFETCHED, VertexTable
from . import lookahead
from .frontier import Frontier
from .queue import BestFirstQueue

PRIORITY_KEY = b"scrapy_priority"  # request meta: the request's priority (an int)
SECTION = "priority"  # metadata section: {"pages": pages given a priority so far}


class Priorities:
    """The priority of each page that has one (page index -> int)."""

    def __init__(self, db: Any = None) -> None:
        self.levels: dict[int, int] = {}
        self.pages = 0  # pages given a priority (the metadata section's count)
        self._db = db  # its metadata section is written once a page has a priority
        self._owned = db is None or bool(getattr(db, "readonly", False))

    def note(self, page: int, meta: Any) -> None:
        """Page ``page`` was made by a request with ``meta``: keep its priority."""
        value = meta.get(PRIORITY_KEY) if isinstance(meta, dict) else None
        if isinstance(value, int) and not isinstance(value, bool) and value:
            self.levels[page] = value
            self.pages += 1
            if not self._owned and self._db is not None:
                self._owned = True
                self._db.own_meta_section(SECTION, lambda: {"pages": self.pages})

    def get(self, page: int) -> int | None:
        return self.levels.get(page)

    def load(self, table: VertexTable) -> None:
        """Read the priorities of the unfetched pages back from their
        stored request parts (when the database's metadata says some were set)."""
        db = self._db
        section = db.meta_section(SECTION)
        if not (isinstance(section, dict) and section.get("pages")):
            return
        n = table.n
        pages = np.flatnonzero((table.state[:n] == UNFETCHED) & ((table.flags[:n] & F_EXTRAS) != 0))
        with db.snapshot() as txn:
            for start in range(0, len(pages), 100_000):
                chunk = pages[start : start + 100_000].tolist()
                for page, parts in db.request_extras(chunk, txn).items():
                    if not isinstance(parts, Unreadable):
                        self.note(page, parts[3])
        self.pages = int(section["pages"])  # (note() counted them again)


class PrioritizedFrontier(Frontier):
    """:class:`~.frontier.Frontier` with a best-first queue per priority
    level (``priorities``, filled as pages are made), taken from the
    highest level down; each level's queue bounds its heads per host as
    the plain one does, finding a host's waiting pages of that level in
    the host's list."""

    def __init__(self, *args: Any, priorities: Priorities, **kwargs: Any) -> None:
        self.priorities = priorities
        self.levels: dict[int, BestFirstQueue] = {}
        super().__init__(*args, **kwargs)
        self.levels[0] = self.queue

    def _queues(self) -> list[BestFirstQueue]:
        return list(self.levels.values()) or [self.queue]

    def _level_queue(self, level: int) -> BestFirstQueue:
        q = self.levels.get(level)
        if q is None:
            q = self.levels[level] = BestFirstQueue(lambda h, lv=level: self._refill_level(h, lv), self._taken)
            q.set_host_classes(*self.classified())
        return q

    def _levels_of(self, pages: np.ndarray) -> np.ndarray | None:
        """Priorities of ``pages``, or None when none has one."""
        if not self.priorities.levels:
            return None
        get = self.priorities.levels.get
        levels = np.fromiter((get(p, 0) for p in pages.tolist()), np.int64, len(pages))
        return levels if levels.any() else None

    def _by_level(self, pages: np.ndarray, rebuild: bool = False) -> list[tuple[BestFirstQueue, np.ndarray | slice]]:
        levels = self._levels_of(pages)
        if levels is None:
            if rebuild:
                for q in list(self.levels.values()):
                    if q is not self.queue:
                        self._rebuild_queue(q, *(np.zeros(0, np.int64),) * 2, np.zeros(0))
            return [(self.queue, slice(None))]
        out = []
        wanted = set(np.unique(levels).tolist()) | ({0} if rebuild else set())
        if rebuild:
            wanted |= set(self.levels)
        for level in sorted(wanted, reverse=True):
            out.append((self._level_queue(level), levels == level))
        return out

    def _queue_of(self, page: int) -> BestFirstQueue:
        return self.levels.get(self.priorities.levels.get(page, 0), self.queue)

    def _refill(self, host: int) -> tuple[np.ndarray, np.ndarray]:
        return self._refill_level(host, 0)

    def _refill_level(self, host: int, level: int) -> tuple[np.ndarray, np.ndarray]:
        pages = self._waiting_pages(host)
        levels = self._levels_of(pages)
        if levels is not None:
            pages = pages[levels == level]
        elif level:
            pages = pages[:0]
        return pages, self.priority(pages).astype(np.float64)

    def take(self, n: int, skip_host: Callable[[int], bool] | None = None, max_per_host: int = 0,
             offsets: tuple[float, float] = (0.0, 0.0), counts: dict | None = None) -> list[int]:
        """The best ``n`` pages, from the highest level down (``counts`` shared)."""
        counts = {} if counts is None else counts
        out: list[int] = []
        for level in sorted(self.levels, reverse=True):
            if len(out) >= n:
                break
            out += self.levels[level].pop_batch(n - len(out), skip_host, max_per_host, offsets, counts)
        return out

    def peek(self, n: int, offsets: tuple[float, float] = (0.0, 0.0)) -> list[tuple[int, float]]:
        """The ``n`` pages :meth:`take` would hand out first, from the
        highest level down, with no host skipped or capped (not taken)."""
        out: list[tuple[int, float]] = []
        for level in sorted(self.levels, reverse=True):
            if len(out) >= n:
                break
            out += lookahead.peek(self.levels[level], n - len(out), offsets)
        return out
