"""Baseline crawl orders of docs/algorithms.md §6 as small Frontera backends.

Each baseline is a :class:`frontera.core.components.Backend`, driven
through ``FrontierManager`` exactly like ``LinkRankBackend``, so every
policy is measured the same way (same requests, same fetch loop, same
politeness). They keep everything in memory and never crawl a page twice:

========================  ==================================================
``BFSBackend``            Frontera's memory BFS order, exactly (depth, then
                          the order Frontera numbers links in); faster, and
                          it keeps overused hosts' pages for later
``RandomBackend``         a uniformly random frontier page
``BacklinkBackend``       most links from crawled pages (Cho et al. 1998)
``LargerSitesFirstBackend`` the host with most pending pages first
                          (Baeza-Yates et al. 2005), its pages in discovery
                          order
``TextbookOPICBackend``   OPIC as published (Abiteboul et al. 2003): the
                          largest cash first; a read passes all its cash
                          to its out-links (no damping)
``BatchPageRankBackend``  PageRank of the known graph, recomputed every
                          ``SIMULATION_PAGERANK_EVERY`` crawled pages
``OmniscientBackend``     the highest *true* PageRank in the frontier
                          (``SIMULATION_ORACLE``: fingerprint -> score)
========================  ==================================================

Settings (Frontera settings of the manager): ``SIMULATION_RANDOM_SEED``
(random), ``SIMULATION_PAGERANK_EVERY`` and ``SIMULATION_DAMPING`` (batch
PageRank), ``SIMULATION_ORACLE`` (omniscient).

``get_next_requests`` honours ``overused_keys`` (host names, as
:func:`~frontera_linkrank.storage.urls.check_url` gives them): pages of an
overused host stay queued. Backends with an importance estimate expose it
as :meth:`SimulatedBackend.estimate`.

Examples
--------
>>> from frontera import FrontierManager, Settings
>>> from frontera.core.models import Request, Response
>>> m = FrontierManager.from_settings(Settings(attributes={
...     "BACKEND": "frontera_linkrank.simulation.baselines.BacklinkBackend", "MIDDLEWARES": []}))
>>> def req(u):
...     r = Request(u); r.meta[b"fingerprint"] = u.encode(); return r
>>> m.add_seeds([req("http://a/")])
>>> [r.url for r in m.get_next_requests(5)]
['http://a/']
>>> def fetch(u, links):
...     m.page_crawled(Response(u, request=req(u))); m.links_extracted(req(u), [req(x) for x in links])
>>> fetch("http://a/", ["http://b/", "http://c/", "http://d/"])
>>> [r.url for r in m.get_next_requests(1)]  # one backlink each: the first found
['http://b/']
>>> fetch("http://b/", ["http://d/"])
>>> [r.url for r in m.get_next_requests(5)]  # d has two backlinks now
['http://d/', 'http://c/']
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.sparse as sp

from ..scoring.pagerank import pagerank
from .memory import QUEUED, Estimate, SimulatedBackend

if TYPE_CHECKING:
    from frontera.core.manager import FrontierManager
    from frontera.core.models import Request

__all__ = [
    "BFSBackend",
    "BacklinkBackend",
    "BatchPageRankBackend",
    "LargerSitesFirstBackend",
    "OmniscientBackend",
    "RandomBackend",
    "SimulatedBackend",
    "TextbookOPICBackend",
]


class BFSBackend(SimulatedBackend):
    """Breadth-first: Frontera's memory BFS order, reproduced exactly.

    Frontera numbers every link it is told about (``meta[b'id']``, seeds
    first; a link to a known page still takes a number, and of duplicate
    links on one page the last one is queued) and pops the smallest
    ``(depth, id)``. The same keys here, without a Request copy and a
    comparison callback per page.
    """

    component_name = "Simulation BFS"

    def __init__(self, manager: FrontierManager) -> None:
        super().__init__(manager)
        self._next_id = 0
        self._ids: dict[int, int] = {}

    def _found(self, new: list[int], requests: Sequence[Request]) -> None:
        # The number Frontera gives a new page: that of its last occurrence.
        base = self._next_id
        self._next_id += len(requests)
        if not new:
            return
        pages = self.pages
        wanted = {self.fps[i] for i in new}
        ids = self._ids
        for k, r in enumerate(requests):
            fp = r.meta.get(b"fingerprint")
            if fp is None:
                fp = self._fp(r)
            if fp in wanted:
                ids[pages[fp]] = base + k

    def _key_of_new(self, i: int) -> float:
        # Exact in float64 while depth < 2**13 and ids < 2**40.
        return -float(self.depth[i] * (1 << 40) + self._ids.pop(i))


class RandomBackend(SimulatedBackend):
    """A uniformly random frontier page (``SIMULATION_RANDOM_SEED``)."""

    component_name = "Simulation random"

    def __init__(self, manager: FrontierManager) -> None:
        super().__init__(manager)
        self._rng = np.random.default_rng(self.settings.get("SIMULATION_RANDOM_SEED", 0))
        self._pool: list[float] = []

    def _key_of_new(self, i: int) -> float:
        # A random key drawn once: the best of the frontier is a uniform pick.
        if not self._pool:
            self._pool = self._rng.random(4096).tolist()
        return self._pool.pop()


class BacklinkBackend(SimulatedBackend):
    """Most distinct crawled pages linking to it first (backlink count)."""

    component_name = "Simulation backlink count"

    def __init__(self, manager: FrontierManager) -> None:
        super().__init__(manager)
        self.backlinks: list[int] = []

    def _add(self, fp: bytes, request: Request, depth: int) -> int | None:
        i = super()._add(fp, request, depth)
        if i is not None:
            self.backlinks.append(0)
        return i

    def _key_of_new(self, i: int) -> float:
        return float(self.backlinks[i])

    def _crawled(self, src: int, kids: list[int]) -> None:
        bl, state, key, host, push = self.backlinks, self.state, self.key, self.host, self._q.push
        for i in set(kids):
            if i == src:
                continue
            bl[i] += 1
            if state[i] == QUEUED:
                key[i] = float(bl[i])
                push(i, host[i], key[i])

    def estimate(self) -> Estimate:
        """Backlink counts."""
        return self.fps, np.asarray(self.backlinks, np.float64)


class LargerSitesFirstBackend(SimulatedBackend):
    """The host with most pending (queued) pages first; its pages in
    discovery order. Ties between hosts: the host found first."""

    component_name = "Simulation larger sites first"

    def __init__(self, manager: FrontierManager) -> None:
        super().__init__(manager)
        self._pending: dict[int, deque[int]] = {}  # host -> queued pages
        self._heap: list[tuple[int, int]] = []  # (-pending count, host), lazy: checked against _pending

    def _enqueue(self, new: list[int]) -> None:
        host, pending, heap = self.host, self._pending, self._heap
        touched = set()
        for i in new:
            h = host[i]
            dq = pending.get(h)
            if dq is None:
                dq = pending[h] = deque()
            dq.append(i)
            touched.add(h)
        for h in touched:
            heapq.heappush(heap, (-len(pending[h]), h))

    def _take(self, n: int, skip_host: Callable[[int], bool] | None) -> list[int]:
        pending, heap = self._pending, self._heap
        out: list[int] = []
        aside: list[tuple[int, int]] = []
        while len(out) < n and heap:
            neg, h = heap[0]
            dq = pending.get(h)
            if dq is None or -neg != len(dq):
                heapq.heappop(heap)  # stale
                continue
            if skip_host is not None and skip_host(h):
                aside.append(heapq.heappop(heap))
                continue
            out.append(dq.popleft())
            if dq:
                heapq.heapreplace(heap, (-len(dq), h))
            else:
                heapq.heappop(heap)
                del pending[h]
        for entry in aside:
            heapq.heappush(heap, entry)
        return out


class BatchPageRankBackend(SimulatedBackend):
    """PageRank of the known graph (crawled pages' links, all known pages),
    recomputed every ``SIMULATION_PAGERANK_EVERY`` crawled pages with
    :func:`~frontera_linkrank.scoring.pagerank.pagerank` (the previous
    result starts the iteration); pages found since the last computation
    have key 0 and come after the ranked ones, in discovery order."""

    component_name = "Simulation batch PageRank"

    def __init__(self, manager: FrontierManager) -> None:
        super().__init__(manager)
        self.every = int(self.settings.get("SIMULATION_PAGERANK_EVERY", 1000))
        if self.every < 1:
            raise ValueError("SIMULATION_PAGERANK_EVERY must be >= 1")
        self.damping = float(self.settings.get("SIMULATION_DAMPING", 0.85))
        self._src: list[np.ndarray] = []
        self._dst: list[np.ndarray] = []
        self._ranked_at = 0
        self.scores = np.zeros(0)
        self.n_rankings = 0

    def _key_of_new(self, i: int) -> float:
        return 0.0

    def _crawled(self, src: int, kids: list[int]) -> None:
        dst = np.unique(np.asarray(kids, np.int64))
        dst = dst[dst != src]
        if len(dst):
            self._src.append(np.full(len(dst), src, np.int64))
            self._dst.append(dst)

    def get_next_requests(self, max_n_requests: int, **kwargs: Any) -> list[Request]:
        """Rank first when ``SIMULATION_PAGERANK_EVERY`` pages were crawled since the last ranking."""
        if self.n_crawled - self._ranked_at >= self.every:
            self.rank()
        return super().get_next_requests(max_n_requests, **kwargs)

    def rank(self) -> None:
        """PageRank of the known graph now; requeue the queued pages by it."""
        n = len(self.fps)
        src = np.concatenate(self._src) if self._src else np.zeros(0, np.int64)
        dst = np.concatenate(self._dst) if self._dst else np.zeros(0, np.int64)
        self._src, self._dst = [src], [dst]
        x0 = None
        if len(self.scores):
            x0 = np.concatenate([self.scores, np.full(n - len(self.scores), 1.0 / n)])
        adjacency = sp.csr_matrix((np.ones(len(src)), (src, dst)), shape=(n, n))
        self.scores = pagerank(adjacency, self.damping, x0=x0).scores
        self._ranked_at = self.n_crawled
        self.n_rankings += 1
        queued = np.flatnonzero(np.frombuffer(bytes(self.state), np.uint8) == QUEUED)
        keys = self.scores[queued]
        key = self.key
        for i, k in zip(queued.tolist(), keys.tolist()):
            key[i] = k
        self._q.rebuild(queued, np.asarray(self.host, np.int64)[queued], keys)

    def estimate(self) -> Estimate:
        """The last PageRank (0 for pages found since)."""
        vals = np.zeros(len(self.fps))
        vals[: len(self.scores)] = self.scores
        return self.fps, vals


class TextbookOPICBackend(SimulatedBackend):
    """OPIC as published (Abiteboul, Preda and Cobena 2003), greedy by cash.

    The seeds share a cash of 1. Reading a page adds its cash to its
    history and gives all of it, in equal shares, to its distinct
    out-links (no damping); a page without out-links gives its cash to the
    virtual page, which here keeps it (spreading it evenly over every page
    would not reorder the pages it reaches alike). The frontier page with
    the most cash is fetched first. Each page is read as soon as its links
    arrive, so with batches of 1 this is the paper's one page at a time.
    Cash that reaches a crawled page stays there: in a one-pass crawl it is
    never read again (docs/algorithms.md §7 on why the project's ``opic``
    differs).
    """

    component_name = "Simulation textbook OPIC"

    def __init__(self, manager: FrontierManager) -> None:
        super().__init__(manager)
        self.cash: list[float] = []
        self.history: list[float] = []
        self.omega = 1.0  # the virtual page's cash; all of it before the seeds

    def _add(self, fp: bytes, request: Request, depth: int) -> int | None:
        i = super()._add(fp, request, depth)
        if i is not None:
            self.cash.append(0.0)
            self.history.append(0.0)
        return i

    def add_seeds(self, seeds: Sequence[Request]) -> None:
        """Queue the new seeds with equal shares of the virtual page's cash."""
        seeding = [fp for fp in map(self._fp, seeds) if fp not in self.pages]
        if seeding and self.omega > 0:
            self._seed_cash = self.omega / len(set(seeding))
            self.omega = 0.0
        super().add_seeds(seeds)
        self._seed_cash = 0.0

    _seed_cash = 0.0

    def _key_of_new(self, i: int) -> float:
        if self._seed_cash and self.depth[i] == 0:
            self.cash[i] = self._seed_cash
        return self.cash[i]

    def _crawled(self, src: int, kids: list[int]) -> None:
        cash = self.cash
        c = cash[src]
        self.history[src] += c
        cash[src] = 0.0
        targets = [k for k in dict.fromkeys(kids) if k != src]
        if not targets:
            self.omega += c
            return
        share = c / len(targets)
        raise_key = self._raise_key
        for k in targets:
            cash[k] += share
            raise_key(k, cash[k])

    def estimate(self) -> Estimate:
        """OPIC importance ``(H + C) / sum(H + C)``."""
        v = np.asarray(self.history) + np.asarray(self.cash)
        total = v.sum()
        return self.fps, v / total if total > 0 else v


class OmniscientBackend(SimulatedBackend):
    """The frontier page with the highest true score first (the reachable
    upper bound of docs/algorithms.md §6). ``SIMULATION_ORACLE`` maps a page's
    ``meta[b'fingerprint']`` to its true score (pages absent: 0)."""

    component_name = "Simulation omniscient"

    def __init__(self, manager: FrontierManager) -> None:
        super().__init__(manager)
        self.oracle = self.settings.get("SIMULATION_ORACLE")
        if self.oracle is None:
            raise ValueError("OmniscientBackend needs SIMULATION_ORACLE (fingerprint -> true score)")

    def _key_of_new(self, i: int) -> float:
        k = self.oracle.get(self.fps[i], 0.0)
        return float(k) if math.isfinite(k) else 0.0


BACKENDS = {
    "bfs": "frontera_linkrank.simulation.baselines.BFSBackend",
    "random": "frontera_linkrank.simulation.baselines.RandomBackend",
    "backlinks": "frontera_linkrank.simulation.baselines.BacklinkBackend",
    "larger-sites-first": "frontera_linkrank.simulation.baselines.LargerSitesFirstBackend",
    "opic-textbook": "frontera_linkrank.simulation.baselines.TextbookOPICBackend",
    "batch-pagerank": "frontera_linkrank.simulation.baselines.BatchPageRankBackend",
    "omniscient": "frontera_linkrank.simulation.baselines.OmniscientBackend",
    "frontera-bfs": "frontera.contrib.backends.memory.BFS",
}
