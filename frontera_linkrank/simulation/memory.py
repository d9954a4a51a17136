"""The in-memory Frontera backend the baselines of :mod:`.baselines` share.

Pages by fingerprint, crawled once, host names as
:func:`~frontera_linkrank.storage.urls.check_url` gives them, and a
best-first queue grouped by host. ``get_next_requests`` honours
``overused_keys`` (host names): pages of an overused host stay queued.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from frontera.core.components import Backend

from ..default_settings import LINKRANK_MAX_URL_LENGTH
from ..storage.urls import RejectedURL, check_url, fingerprint
from .lazyqueue import LazyHostQueue

if TYPE_CHECKING:
    from frontera.core.manager import FrontierManager
    from frontera.core.models import Request, Response

QUEUED, LEASED, CRAWLED = 0, 1, 2

# An importance estimate: the fingerprints of the known pages and a value each.
Estimate = tuple[Sequence[bytes], np.ndarray]

__all__ = ["CRAWLED", "LEASED", "QUEUED", "Estimate", "SimulatedBackend"]


class SimulatedBackend(Backend):
    """Common part: pages by fingerprint, one-time crawl, host names,
    a best-first queue grouped by host (:class:`~.lazyqueue.LazyHostQueue`).

    Subclasses set a page's key in :meth:`_key_of_new` (higher is fetched
    first, ties go to the page found first) and may raise it later with
    :meth:`_raise_key`; :meth:`_crawled` sees every crawled page's links.
    """

    component_name = "Simulation baseline"

    def __init__(self, manager: FrontierManager) -> None:
        self.manager = manager
        self.settings = manager.settings
        self.pages: dict[bytes, int] = {}  # fingerprint (meta bytes) -> page id, discovery order
        self.fps: list[bytes] = []  # page id -> fingerprint
        self.requests: list[Request] = []  # page id -> the Request it was found with
        self.state = bytearray()
        self.host: list[int] = []  # page id -> host id
        self.host_ids: dict[str, int] = {}
        self.host_names: list[str] = []
        self.key: list[float] = []  # page id -> current key
        self.depth: list[int] = []
        self.n_crawled = 0
        self._n_queued = 0
        self._q = LazyHostQueue(self._is_live)

    @classmethod
    def from_manager(cls, manager: FrontierManager) -> SimulatedBackend:
        """Frontera's constructor hook."""
        return cls(manager)

    # Frontera's component views: the simulator uses the Backend API only.
    @property
    def metadata(self) -> None:
        """No metadata component."""
        return None

    @property
    def queue(self) -> None:
        """No queue component."""
        return None

    @property
    def states(self) -> None:
        """No states component."""
        return None

    def frontier_start(self) -> None:
        """Nothing to open."""

    def frontier_stop(self) -> None:
        """Nothing to close."""

    # -- pages ------------------------------------------------------------------------
    def _fp(self, request: Request | Response) -> bytes:
        fp = request.meta.get(b"fingerprint")
        return fp if fp is not None else fingerprint(request.url).hex().encode()

    def _add(self, fp: bytes, request: Request, depth: int) -> int | None:
        """Id of a new page, or None if its URL cannot be fetched (the
        URLs LinkRankBackend rejects, with its default length limit)."""
        try:
            name = check_url(request.url, LINKRANK_MAX_URL_LENGTH)
        except RejectedURL:
            return None
        h = self.host_ids.get(name)
        if h is None:
            h = self.host_ids[name] = len(self.host_names)
            self.host_names.append(name)
        i = len(self.fps)
        self.pages[fp] = i
        self.fps.append(fp)
        self.requests.append(request)
        self.state.append(QUEUED)
        self.host.append(h)
        self.depth.append(depth)
        self.key.append(0.0)
        self._n_queued += 1
        return i

    def _enqueue(self, new: list[int]) -> None:
        """Key and queue new pages (ids in discovery order)."""
        key, host, push = self.key, self.host, self._q.push
        for i in new:
            k = key[i] = self._key_of_new(i)
            push(i, host[i], k)

    def _key_of_new(self, i: int) -> float:
        raise NotImplementedError

    def _raise_key(self, i: int, k: float) -> None:
        if self.state[i] == QUEUED and k > self.key[i]:
            self.key[i] = k
            self._q.push(i, self.host[i], k)

    def _is_live(self, page: int, key: float) -> bool:
        return self.state[page] == QUEUED and self.key[page] == key

    # -- Frontera API -------------------------------------------------------------------
    def add_seeds(self, seeds: Sequence[Request]) -> None:
        """Queue the seeds not known yet."""
        new = []
        for seed in seeds:
            fp = self._fp(seed)
            if fp not in self.pages:
                i = self._add(fp, seed, 0)
                if i is not None:
                    new.append(i)
        self._found(new, seeds)
        self._enqueue(new)

    def page_crawled(self, response: Response) -> None:
        """Mark the page crawled."""
        fp = self._fp(response)
        i = self.pages.get(fp)
        if i is not None:
            self._mark_crawled(i)

    def _mark_crawled(self, i: int) -> None:
        if self.state[i] == QUEUED:
            self._n_queued -= 1
        if self.state[i] != CRAWLED:
            self.state[i] = CRAWLED
            self.n_crawled += 1

    def request_error(self, request: Request, error: str) -> None:
        """A failed fetch counts as the page's one try."""
        i = self.pages.get(self._fp(request))
        if i is not None:
            self._mark_crawled(i)  # one try: simulated fetches do not fail

    def links_extracted(self, request: Request, links: Sequence[Request]) -> None:
        """Queue the new pages among ``links``; the crawled page's hook."""
        pages = self.pages
        src = pages.get(self._fp(request))
        depth = self.depth[src] + 1 if src is not None else 1
        kids: list[int] = []
        new: list[int] = []
        add = self._add
        for link in links:
            fp = link.meta.get(b"fingerprint")
            if fp is None:
                fp = self._fp(link)
            i = pages.get(fp)
            if i is None:
                i = add(fp, link, depth)
                if i is None:
                    continue
                new.append(i)
            kids.append(i)
        self._found(new, links)
        self._enqueue(new)
        if src is not None:
            self._crawled(src, kids)

    def _found(self, new: list[int], requests: Sequence[Request]) -> None:
        """Hook: pages ``new`` were just discovered among ``requests``."""

    def _crawled(self, src: int, kids: list[int]) -> None:
        """Hook: crawled page ``src`` links to pages ``kids`` (ids, in link order)."""

    def finished(self) -> bool:
        """No page left queued."""
        return self._n_queued == 0

    def get_next_requests(self, max_n_requests: int, **kwargs: Any) -> list[Request]:
        """Up to ``max_n_requests`` best queued pages, none of a host in
        ``overused_keys``."""
        if max_n_requests <= 0:
            return []
        pages = self._take(max_n_requests, self._skip(kwargs.get("overused_keys")))
        state = self.state
        for i in pages:
            state[i] = LEASED
        self._n_queued -= len(pages)
        return [self.requests[i] for i in pages]

    def _skip(self, overused: Iterable[str] | None) -> Callable[[int], bool] | None:
        if not overused:
            return None
        overused = overused if isinstance(overused, (set, frozenset)) else set(overused)
        names = self.host_names
        return lambda h: names[h] in overused

    def _take(self, n: int, skip_host: Callable[[int], bool] | None) -> list[int]:
        return self._q.pop_batch(n, skip_host)

    # -- importance estimate -------------------------------------------------------------
    def estimate(self) -> Estimate | None:
        """``(fingerprints, values)`` of the known pages, or None if this
        baseline has no importance estimate."""
        return None
