"""Request priorities: a page of a higher priority is handed out first.

A page takes the priority of the request that made it (Scrapy's
``Request.priority``, in the request's meta as ``b"scrapy_priority"``; a
later request for the same page is a duplicate and changes nothing), 0
when it has none. The queue keeps one best-first queue per priority level
(:class:`LeveledQueue`) and takes pages from the highest level first:

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

>>> q = LeveledQueue(lambda page, key: True, {3: 10}.get)
>>> q.push_many(np.array([1, 2, 3]), np.array([0, 0, 0]), np.array([0.9, 0.5, 0.1]))
>>> q.pop_batch(3)
[3, 1, 2]
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..storage.packed import Unreadable
from ..storage.vertices import F_EXTRAS, UNFETCHED, VertexTable
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


class LeveledQueue:
    """One :class:`~.queue.BestFirstQueue` per priority level, with the
    same interface; ``level(page)`` is a page's priority (None: 0)."""

    def __init__(self, is_live: Callable[[int, float], bool], level: Callable[[int], int | None]) -> None:
        self._is_live = is_live
        self._level = level
        self._classes: dict[int, int] = {}
        self._queues: dict[int, BestFirstQueue] = {0: BestFirstQueue(is_live)}

    def __len__(self) -> int:
        return sum(len(q) for q in self._queues.values())

    @property
    def entries(self) -> int:
        return len(self)

    def _queue(self, level: int) -> BestFirstQueue:
        q = self._queues.get(level)
        if q is None:
            q = self._queues[level] = BestFirstQueue(self._is_live)
            for host, cls in self._classes.items():
                q.set_host_class(host, cls)
        return q

    def _split(self, pages: np.ndarray) -> np.ndarray | None:
        """Levels of ``pages``, or None when all are 0."""
        get = self._level
        levels = np.fromiter((get(p) or 0 for p in pages.tolist()), np.int64, len(pages))
        return levels if levels.any() else None

    def set_host_class(self, host: int, cls: int) -> None:
        self._classes[host] = cls
        for q in self._queues.values():
            q.set_host_class(host, cls)

    def push_many(self, pages: np.ndarray, hosts: np.ndarray, keys: np.ndarray) -> None:
        levels = self._split(pages)
        if levels is None:
            self._queues[0].push_many(pages, hosts, keys)
            return
        for level in np.unique(levels).tolist():
            m = levels == level
            self._queue(level).push_many(pages[m], hosts[m], keys[m])

    def rebuild(self, pages: np.ndarray, hosts: np.ndarray, keys: np.ndarray) -> None:
        self._queues = {0: self._queues[0]}
        levels = self._split(pages)
        if levels is None:
            self._queues[0].rebuild(pages, hosts, keys)
            return
        self._queues[0].rebuild(pages[:0], hosts[:0], keys[:0])
        for level in np.unique(levels).tolist():
            m = levels == level
            self._queue(level).rebuild(pages[m], hosts[m], keys[m])

    def pop_batch(self, n: int, skip_host: Callable[[int], bool] | None = None, max_per_host: int = 0,
                  offsets: tuple[float, float] = (0.0, 0.0), counts: dict[int, int] | None = None) -> list[int]:
        """The best ``n`` pages, from the highest level down (``counts`` shared)."""
        counts = {} if counts is None else counts
        out: list[int] = []
        for level in sorted(self._queues, reverse=True):
            if len(out) >= n:
                break
            out += self._queues[level].pop_batch(n - len(out), skip_host, max_per_host, offsets, counts)
        return out

    def hosts(self) -> list[int]:
        return sorted({h for q in self._queues.values() for h in q.hosts()})


class PrioritizedFrontier(Frontier):
    """:class:`~.frontier.Frontier` whose queue has priority levels
    (``priorities``, filled as pages are made)."""

    def __init__(self, *args: Any, priorities: Priorities, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.priorities = priorities
        self.queue = LeveledQueue(self._is_live, priorities.get)  # type: ignore[assignment]
