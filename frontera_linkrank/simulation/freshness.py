"""How fresh do the stored copies stay? A recrawl simulation on a changing web.

A :class:`~frontera_linkrank.testweb.web.TestWeb` serves a link graph whose
pages change as Poisson processes (rates drawn log-uniformly over a wide
range, seeded). The backend crawls it on a simulated clock, one fetch every
``1/fetch_rate`` seconds, with recrawl on: every answer comes from the test
web at the simulated time, conditional requests included (``304`` when the
stored ``ETag`` is current). Crawls with different refresh policies do the
same number of fetches.

Freshness at time ``t``: a page is fresh when its stored copy is its
current version. The *importance-weighted* freshness sums the true
PageRank of the fresh pages (pages never fetched are not fresh); the
simulation reports its average over sample times in the measured window
(after the pages have all been found).

>>> import numpy as np
>>> from frontera_linkrank.simulation.graphs import Graph
>>> g = Graph(np.array([0, 1, 2, 3]), np.array([1, 2, 0]), urls=[f"http://h.test/{i}" for i in range(3)])
>>> r = simulate_freshness(g, "value", fetches=60, change_range=(0.01, 0.1), min_interval=1)
>>> r.fetches, 0 <= r.weighted <= 1
(60, True)
"""

from __future__ import annotations

import math
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from frontera.core.models import Request, Response
from numpy.typing import ArrayLike

from ..testweb.web import TestWeb
from .metrics import reference_pagerank

if TYPE_CHECKING:
    from ..backend.backend import LinkRankBackend
    from .graphs import Graph


@dataclass
class FreshnessResult:
    """What a freshness simulation measured."""

    policy: str
    fetches: int
    weighted: float  # importance-weighted freshness, averaged over the window
    plain: float  # share of fresh pages, averaged over the window
    not_modified: int  # 304 answers
    changes_detected: int
    refreshes: int
    curve: list[tuple[float, float]] = field(default_factory=list)  # (time, weighted freshness)


class _Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


class _Sampler:
    """Freshness at the sample ``times`` as the simulated clock passes them;
    a stored copy is fresh until ``stale_at`` (the page's next change after
    its fetch)."""

    def __init__(self, truth: np.ndarray, stale_at: np.ndarray, times: np.ndarray) -> None:
        self.truth, self.stale_at, self.times = truth, stale_at, times
        self.curve: list[tuple[float, float]] = []
        self.plain: list[float] = []
        self.next = 0

    def __call__(self, upto: float) -> None:
        while self.next < len(self.times) and self.times[self.next] <= upto:
            t = self.times[self.next]
            fresh = self.stale_at > t
            self.curve.append((float(t), float(self.truth[fresh].sum() / self.truth.sum())))
            self.plain.append(float(fresh.mean()))
            self.next += 1


def _request(graph: Graph, v: int) -> Request:
    r = Request(graph.urls[v])
    r.meta[b"fingerprint"] = graph.fingerprints[v]
    return r


def _fetch(
    backend: LinkRankBackend,
    graph: Graph,
    web: TestWeb,
    clock: _Clock,
    sample: _Sampler,
    fetches: int,
    batch: int,
    fetch_rate: float,
    t_end: float,
) -> int:
    """The crawl: up to ``fetches`` fetches, one every ``1/fetch_rate``
    simulated seconds, each answered by ``web`` at that time. Returns the
    fetches done."""
    done = 0
    while done < fetches:
        reqs = backend.get_next_requests(min(batch, fetches - done))
        if not reqs:  # nothing to do: the crawler waits a fetch slot
            clock.t += 1.0 / fetch_rate
            sample(clock.t)
            if clock.t > t_end:
                break
            continue
        for r in reqs:
            clock.t += 1.0 / fetch_rate
            sample(clock.t)
            v = graph.index[r.url]
            headers = r.headers or {}
            inm = headers.get(b"If-None-Match")
            status, resp_headers, body = web.answer(r.url, clock.t, inm.decode() if isinstance(inm, bytes) else inm)
            if status == 200:
                sample.stale_at[v] = web.next_change(v, clock.t)
            backend.page_crawled(Response(r.url, status_code=status, headers=resp_headers, body=body, request=r))
            if status == 200:
                backend.links_extracted(r, [_request(graph, w) for w in graph.out(v).tolist()])
            done += 1
    return done


# Recrawl on, leases that never expire, a commit per batch only (the
# interval is in simulated seconds).
_RECRAWL = {"LINKRANK_RECRAWL": True, "LINKRANK_LEASE_TIMEOUT": 1e12, "LINKRANK_COMMIT_INTERVAL": 0}


def change_rates(n: int, lo: float, hi: float, seed: int = 0) -> np.ndarray:
    """Per-page change rates (per second), log-uniform in ``[lo, hi]``."""
    rng = np.random.default_rng(seed)
    return np.exp(rng.uniform(math.log(lo), math.log(hi), n))


def simulate_freshness(
    graph: Graph,
    policy: str,
    fetches: int,
    fetch_rate: float = 1.0,
    change_range: tuple[float, float] = (1e-4, 1e-1),
    seeds: Sequence[int] = (0,),
    batch: int = 10,
    min_interval: float = 0.0,
    samples: int = 200,
    window: float = 0.5,
    seed: int = 0,
    truth: ArrayLike | None = None,
    settings: dict[str, Any] | None = None,
    workdir: str | None = None,
) -> FreshnessResult:
    """Crawl ``graph`` with recrawl policy ``policy`` for ``fetches`` fetches.

    Parameters
    ----------
    graph : Graph
    policy : {"value", "uniform", "change_rate"}
    fetches : int
        Fetches in all (new pages and refreshes).
    fetch_rate : float
        Fetches per simulated second.
    change_range : (float, float)
        Change rates per second are drawn log-uniformly in this range.
    seeds : list of int
        Seed pages.
    batch : int
        Requests asked of the backend at a time.
    min_interval : float
        ``LINKRANK_RECRAWL_MIN_INTERVAL``.
    samples : int
        Freshness sample times in the measured window.
    window : float
        The measured window is the last ``window`` share of the run.
    truth : array, optional
        Importance of each page (default: its PageRank).
    settings : dict, optional
        More ``LINKRANK_*`` settings.
    """
    from ..backend.backend import LinkRankBackend

    n = graph.n
    truth = reference_pagerank(graph.indptr, graph.indices) if truth is None else np.asarray(truth)
    start = 1_000_000.0
    web = TestWeb(graph, seed=seed, change_rates=change_rates(n, *change_range, seed=seed), start_time=start)
    clock = _Clock(start)
    own = workdir is None
    workdir = workdir or tempfile.mkdtemp(prefix="linkrank-fresh-")
    attrs = {
        "LINKRANK_PATH": f"{workdir}/db",
        "LINKRANK_SYNC": False,
        **_RECRAWL,
        "LINKRANK_RECRAWL_POLICY": policy,
        "LINKRANK_RECRAWL_MIN_INTERVAL": min_interval,
        "LINKRANK_RECRAWL_CALIBRATE_PAGES": max(batch, n // 10),
        **(settings or {}),
    }
    backend = LinkRankBackend(settings=attrs, clock=clock)
    t_end = start + fetches / fetch_rate
    t_window = t_end - window * (t_end - start)
    sample = _Sampler(truth, np.full(n, -math.inf), np.linspace(t_window, t_end, samples))
    try:
        backend.add_seeds([_request(graph, v) for v in seeds])
        done = _fetch(backend, graph, web, clock, sample, fetches, batch, fetch_rate, t_end)
        sample(math.inf)
        stats = backend.stats()
        assert abs(backend.core.aopic.residual()) < 1e-9, "cash not conserved"
    finally:
        backend.frontier_stop()
        if own:
            shutil.rmtree(workdir, ignore_errors=True)
    weighted = [f for _, f in sample.curve]
    return FreshnessResult(
        policy,
        done,
        float(np.mean(weighted)) if weighted else 0.0,
        float(np.mean(sample.plain)) if sample.plain else 0.0,
        int(stats.get("not_modified", 0)),
        int(stats.get("changes_detected", 0)),
        int(stats.get("refreshes_out", 0)),
        sample.curve,
    )
