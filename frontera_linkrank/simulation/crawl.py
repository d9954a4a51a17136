"""Drive a Frontera backend over a known graph through ``FrontierManager``.

Fetching page ``p`` reports it crawled (status 200) and reveals its
out-links, nothing else; the order in which the frontier hands pages out is
the result.

Two fetch loops:

- *batches* (default): ask the frontier for ``batch`` requests, fetch them
  all, repeat. No clock.
- *polite* (:class:`Politeness`): a simulated clock in seconds. Each fetch
  takes one second and a host fetches one page at a time, starting a new
  one no sooner than ``delay`` seconds after the last; the crawler holds at
  most ``concurrency`` requests (waiting or being fetched), like Scrapy's
  ``CONCURRENT_REQUESTS``; a host with ``per_host`` requests waiting is
  passed to the frontier in ``overused_keys`` (Scrapy's busy downloader
  slot). A backend that ignores ``overused_keys`` (Frontera's memory
  backends) sees its requests wait in the host's slot, as in a real crawl.
"""

from __future__ import annotations

import heapq
import os
import shutil
import tempfile
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from frontera import FrontierManager, Settings
from frontera.core.models import Request, Response

from ..storage.urls import RejectedURL, check_url

if TYPE_CHECKING:
    import numpy as np

    from .graphs import Graph

BFS = "frontera.contrib.backends.memory.BFS"
LINKRANK = "frontera_linkrank.LinkRankBackend"

# Settings every simulated LinkRankBackend gets (``settings`` may override):
# reproducible runs do not depend on the wall clock.
SIMULATION_DEFAULTS = {
    "LINKRANK_SYNC": False,  # a throw-away database
    "LINKRANK_COMMIT_INTERVAL": 0,  # commits at batch boundaries only
    "LINKRANK_RANK_BACKGROUND": False,  # rankings inline, at the same page counts every run
    "LINKRANK_RANK_INTERVAL": 0,  # rankings by page count, not by wall-clock time
}


class _Link(Request):
    """A plain GET request with a precomputed fingerprint.

    ``Request.__init__`` converts and validates every argument; here the
    URL is already text and the rest is constant, so building one of these
    per link costs a third as much. It is a ``Request`` in every other way.
    """

    def __init__(self, url: str, fp: bytes) -> None:  # super().__init__ skipped on purpose
        self._url = url
        self._method = b"GET"
        self._headers = {}
        self._cookies = {}
        self._meta = {b"scrapy_meta": {}, b"fingerprint": fp}
        self._body = ""


@dataclass
class Politeness:
    """Host politeness of the simulated crawler (see the module docstring)."""

    delay: float = 1.0  # seconds between the starts of two fetches of a host
    concurrency: int = 16  # requests the crawler holds (waiting + being fetched)
    per_host: int = 1  # waiting requests that make a host overused

    def __post_init__(self) -> None:
        if not self.delay >= 0:
            raise ValueError("host delay must be >= 0 seconds")
        if self.concurrency < 1 or self.per_host < 1:
            raise ValueError("concurrency and per-host requests must be >= 1")


@dataclass
class CrawlResult:
    """What a simulated crawl did."""

    order: list[int]  # graph vertices, in fetch order
    seconds: float  # wall-clock time of the crawl, observations excluded
    times: list[float] | None = None  # simulated time of each fetch (polite crawls)
    observations: list[tuple[int, Any]] = field(default_factory=list)  # (checkpoint, observer result), in crawl order
    observe_seconds: float = 0.0


def simulate(
    graph: Graph,
    backend: str,
    seeds: Iterable[int],
    budget: int,
    batch: int = 100,
    settings: Mapping[str, Any] | None = None,
    workdir: str | None = None,
) -> list[int]:
    """Crawl ``graph`` with ``backend`` from ``seeds`` until ``budget`` pages
    are fetched or the frontier is exhausted; return the fetch order.

    ``settings`` (dict) are added to the Frontera settings; a frontera_linkrank
    backend gets a fresh page database under ``workdir`` (a temporary
    directory by default, removed afterwards; ``workdir/db`` is kept) with
    fsync off.
    """
    return crawl(graph, backend, seeds, budget, batch=batch, settings=settings, workdir=workdir).order


def crawl(
    graph: Graph,
    backend: str,
    seeds: Iterable[int],
    budget: int,
    batch: int = 100,
    settings: Mapping[str, Any] | None = None,
    workdir: str | None = None,
    politeness: Politeness | None = None,
    observe: Callable[[Any, int], Any] | None = None,
    checkpoints: Iterable[int] = (),
    progress: Callable[[int], Any] | None = None,
) -> CrawlResult:
    """Simulated crawl of ``graph``; returns a :class:`CrawlResult`.

    Parameters
    ----------
    graph : Graph
    backend : str
        Frontera ``BACKEND`` (dotted path).
    seeds : list of int
        Seed vertices (duplicates are dropped).
    budget : int
        Stop after this many fetched pages.
    batch : int
        Requests asked at a time (batch loop).
    settings : dict, optional
        Extra Frontera settings (``LINKRANK_*``, ``SIMULATION_*`` ...).
    workdir : str, optional
        Where a page database goes (``workdir/db``); a temporary directory
        (removed afterwards) by default.
    politeness : Politeness, optional
        Use the polite loop with a simulated clock.
    observe : callable(backend, n_crawled) -> object, optional
        Called when the number of fetched pages first reaches one or more
        of ``checkpoints`` (at the end of the batch or step that crossed
        them), right after the frontier applied everything fetched so far
        (it just answered a request for more); each result is recorded as
        ``(checkpoint, result)``. Its time is not counted in ``seconds``.
    progress : callable(n_new_pages), optional
        Called after each step with the number of pages just fetched.
    """
    own_dir = workdir is None
    workdir = workdir or tempfile.mkdtemp(prefix="linkrank-sim-")
    try:
        sim = _Simulation(graph, backend, batch, settings, workdir, politeness, observe, checkpoints, progress)
        return sim.run(seeds, budget)
    finally:
        if own_dir:
            shutil.rmtree(workdir, ignore_errors=True)


class _Simulation:
    def __init__(
        self,
        graph: Graph,
        backend: str,
        batch: int,
        settings: Mapping[str, Any] | None,
        workdir: str,
        politeness: Politeness | None,
        observe: Callable[[Any, int], Any] | None,
        checkpoints: Iterable[int],
        progress: Callable[[int], Any] | None,
    ) -> None:
        attrs = {
            "BACKEND": backend,
            "MIDDLEWARES": [],  # fingerprints are precomputed (Graph.fingerprints)
            "MAX_NEXT_REQUESTS": batch,
            "LINKRANK_PATH": os.path.join(workdir, "db"),
            **SIMULATION_DEFAULTS,
        }
        attrs.update(settings or {})
        if batch < 1:
            raise ValueError("batch must be >= 1")
        self.graph = graph
        self.batch = batch
        self.politeness = politeness
        self.observe = observe
        self.checkpoints = sorted(set(int(c) for c in checkpoints))
        self.progress = progress
        self.manager = FrontierManager.from_settings(Settings(attributes=attrs))
        self.order: list[int] = []
        self.seen: set[int] = set()
        self.observations: list[tuple[int, Any]] = []
        self.observe_seconds = 0.0
        self._hosts: dict[int, str] = {}

    # -- one fetch ----------------------------------------------------------------------
    def _fetch(self, request: Request, v: int) -> None:
        """Report page ``v`` crawled and its links extracted."""
        if v in self.seen:
            raise AssertionError(f"page {v} ({request.url}) handed out twice")
        self.seen.add(v)
        self.order.append(v)
        g = self.graph
        m = self.manager
        m.page_crawled(Response(request.url, request=request))
        urls, fps = g.urls, g.fingerprints
        a, b = g.indptr[v], g.indptr[v + 1]
        m.links_extracted(request, [_Link(urls[w], fps[w]) for w in g.indices[a:b].tolist()])

    def _vertex(self, request: Request) -> int:
        v = self.graph.index.get(request.url)
        if v is None:
            raise AssertionError(f"the frontier handed out {request.url!r}, which is not in the graph")
        return v

    def _host(self, v: int) -> str:
        h = self._hosts.get(v)
        if h is None:
            url = self.graph.urls[v]
            try:
                h = check_url(url)
            except RejectedURL:
                h = url
            self._hosts[v] = h
        return h

    def _maybe_observe(self) -> None:
        n = len(self.order)
        due = []
        while self.checkpoints and n >= self.checkpoints[0]:
            due.append(self.checkpoints.pop(0))
        if due and self.observe is not None:
            t = time.perf_counter()
            got = self.observe(self.manager.backend, n)
            self.observations.extend((c, got) for c in due)
            self.observe_seconds += time.perf_counter() - t

    def _final_observe(self) -> None:
        """Observe checkpoints reached by the last fetches. The frontier
        first applies them: LinkRankBackend and the baselines do when asked
        for zero requests (Frontera's memory backends apply them at once,
        and would hand out *every* page on zero)."""
        n = len(self.order)
        if self.observe is None or not any(c <= n for c in self.checkpoints):
            return
        backend = self.manager.backend
        if not backend.__class__.__module__.startswith("frontera."):
            t = time.perf_counter()
            backend.get_next_requests(0)
            self.observe_seconds += time.perf_counter() - t
        self._maybe_observe()

    # -- the loops ------------------------------------------------------------------------
    def run(self, seeds: Iterable[int], budget: int) -> CrawlResult:
        m = self.manager
        g = self.graph
        seeds = list(dict.fromkeys(int(s) for s in seeds))
        if not seeds:
            raise ValueError("no seeds")
        start = time.perf_counter()
        m.add_seeds([_Link(g.urls[v], g.fingerprints[v]) for v in seeds])
        times = None
        try:
            if self.politeness is None:
                self._run_batches(budget)
            else:
                times = self._run_polite(budget)
            self._final_observe()
        finally:
            m.stop()
        seconds = time.perf_counter() - start - self.observe_seconds
        return CrawlResult(self.order, seconds, times, self.observations, self.observe_seconds)

    def _run_batches(self, budget: int) -> None:
        m = self.manager
        order = self.order
        while len(order) < budget:
            reqs = m.get_next_requests(min(self.batch, budget - len(order)))
            self._maybe_observe()
            if not reqs:
                break
            for r in reqs:
                self._fetch(r, self._vertex(r))
            if self.progress is not None:
                self.progress(len(reqs))

    def _run_polite(self, budget: int) -> list[float]:
        p = self.politeness
        m = self.manager
        order = self.order
        times: list[float] = []
        now = 0.0
        step = max(1.0, p.delay)  # a host's next fetch: one second to fetch, `delay` between starts
        slots: dict[str, deque[tuple[Request, int]]] = {}  # host -> deque of (request, vertex) waiting
        ready: list[tuple[float, int, str]] = []  # heap of (time the host may start its next fetch, seq, host)
        free_at: dict[str, float] = {}  # host -> earliest start of its next fetch
        overused: set[str] = set()
        outstanding = 0
        seq = 0
        while len(order) < budget:
            want = min(p.concurrency - outstanding, budget - len(order) - outstanding)
            if want > 0:
                reqs = m.get_next_requests(want, key_type="domain", overused_keys=overused)
                self._maybe_observe()
                for r in reqs:
                    v = self._vertex(r)
                    h = self._host(v)
                    dq = slots.get(h)
                    if dq is None:
                        dq = slots[h] = deque()
                        seq += 1
                        heapq.heappush(ready, (max(now, free_at.get(h, now)), seq, h))
                    dq.append((r, v))
                    outstanding += 1
                    if len(dq) >= p.per_host:
                        overused.add(h)
            if not ready:
                break  # nothing waiting and the frontier had nothing to give
            if ready[0][0] > now:
                now = ready[0][0]
            fetched = 0
            while ready and ready[0][0] <= now and len(order) < budget:
                _, _, h = heapq.heappop(ready)
                dq = slots[h]
                r, v = dq.popleft()
                outstanding -= 1
                self._fetch(r, v)
                times.append(now + 1.0)  # the fetch ends a second later
                fetched += 1
                free_at[h] = now + step
                if len(dq) < p.per_host:
                    overused.discard(h)
                if dq:
                    seq += 1
                    heapq.heappush(ready, (free_at[h], seq, h))
                else:
                    del slots[h]
            now += 1.0
            if self.progress is not None and fetched:
                self.progress(fetched)
        return times


def compare(
    graph: Graph,
    runs: Mapping[str, tuple[str, Mapping[str, Any] | None]],
    truth: np.ndarray,
    fractions: Sequence[float],
    seeds: Iterable[int],
    budget: int,
    batch: int = 100,
) -> dict[str, tuple[list[float], float, int]]:
    """Run ``runs`` (``{name: (backend, settings)}``) from the same seeds and
    return ``{name: (collected truth at each fraction, seconds, pages)}``."""
    from .metrics import collected

    out = {}
    for name, (backend, settings) in runs.items():
        t = time.perf_counter()
        order = simulate(graph, backend, seeds, budget, batch=batch, settings=settings)
        out[name] = (collected(order, truth, fractions), time.perf_counter() - t, len(order))
    return out
