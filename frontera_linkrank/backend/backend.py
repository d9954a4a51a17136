"""``LinkRankBackend``: the Frontera backend, a thin adapter over
:class:`~frontera_linkrank.core.FrontierCore`.

Frontera calls the backend with its own models (``Request`` and
``Response`` with bytes meta keys, ``meta[b'fingerprint']`` set by the
fingerprint middleware); the core reads the same attributes, so a call is
passed on as it is, and the requests handed out are built with the
manager's request model. Everything else (batching, leases, AOPIC,
rankings, recrawl) is the core's.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np
from frontera.core.components import Backend
from frontera.core.models import Request

from ..core import FrontierCore
from ..settings import LinkRankSettings
from ..storage.pagedb import PageDB
from .components import LinkRankMetadata, LinkRankQueue, LinkRankStates


class LinkRankBackend(Backend):
    """Frontera backend: LMDB page database, inline AOPIC, best-first queue.

    Build it through Frontera (``BACKEND = "frontera_linkrank.LinkRankBackend"``)
    or directly with a settings mapping::

        backend = LinkRankBackend(settings={"LINKRANK_PATH": "crawl_db"})

    All ``LINKRANK_*`` settings are listed in
    :mod:`frontera_linkrank.default_settings`.
    """

    component_name = "LinkRank Backend"

    def __init__(self, manager: Any = None, settings: Any = None, clock: Callable[[], float] = time.time) -> None:
        source = settings if settings is not None else (manager.settings if manager is not None else None)
        self.manager = manager
        model = manager.request_model if manager is not None else Request
        self.core = FrontierCore(LinkRankSettings(source), clock=clock, request_factory=model)
        self._metadata = LinkRankMetadata(self.core)
        self._queue = LinkRankQueue(self.core)
        self._states = LinkRankStates(self.core)

    @classmethod
    def from_manager(cls, manager: Any) -> LinkRankBackend:
        return cls(manager)

    # -- Frontera component properties -------------------------------------------------------
    @property
    def metadata(self) -> LinkRankMetadata:
        return self._metadata

    @property
    def queue(self) -> LinkRankQueue:
        return self._queue

    @property
    def states(self) -> LinkRankStates:
        return self._states

    @property
    def db(self) -> PageDB:
        """The page database (for tools and tests that read it)."""
        return self.core.db

    @property
    def settings(self) -> LinkRankSettings:
        return self.core.settings

    # -- Frontera API -------------------------------------------------------------------------
    def frontier_start(self) -> None:
        pass

    def frontier_stop(self) -> None:
        self.core.close()

    def add_seeds(self, seeds: list) -> None:
        """Seed requests; ω's cash is split over the new ones (by
        ``meta[b'seed_weight']`` if given, else equally)."""
        self.core.add_seeds(seeds)

    def page_crawled(self, response: Any) -> None:
        """A fetched page (any status, redirect chains understood); its links
        may follow in :meth:`links_extracted`."""
        self.core.page_fetched(response)

    def links_extracted(self, request: Any, links: list) -> None:
        self.core.links_found(request, links)

    def request_error(self, request: Any, error: Any) -> None:
        """A fetch failed: retried later, or given up after ``LINKRANK_MAX_RETRIES``."""
        self.core.page_failed(request, error)

    def finished(self) -> bool:
        return self.core.finished()

    def get_next_requests(self, max_n_requests: int, **kwargs: Any) -> list:
        """Lease and return up to ``max_n_requests`` requests, best first.

        kwargs from Frontera: ``key_type`` ("domain" or "ip") and
        ``overused_keys`` (hosts or IPs whose pages are kept for later).
        """
        return self.core.next_requests(max_n_requests, kwargs.get("key_type", "domain"),
                                       kwargs.get("overused_keys") or ())

    # -- reporting ----------------------------------------------------------------------------
    def stats(self) -> dict[str, Any]:
        """Figures for logs and Scrapy's stats collector."""
        return self.core.stats()

    def importance(self, idx: np.ndarray | None = None) -> np.ndarray:
        """AOPIC importance estimate of pages ``idx`` (default all)."""
        return self.core.importance(idx)
