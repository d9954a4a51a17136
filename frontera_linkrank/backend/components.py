"""Frontera's three backend components, as views of one page database.

Frontera splits a backend into metadata (what is known about pages), a
queue (what to fetch next) and states (per-fingerprint crawl state). Here
all three live in the same LMDB page database and in-memory arrays, so the
components are thin views over the :class:`~frontera_linkrank.core.FrontierCore`;
they exist so that code written against Frontera's interfaces works unchanged.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from frontera.core.components import Metadata, Queue, States

from ..storage.vertices import CRAWLED, ERROR, LEASED, UNFETCHED

if TYPE_CHECKING:
    from frontera.core.models import Request, Response

    from ..core import FrontierCore

# Page state -> Frontera state (a page waiting in the queue is QUEUED).
_FRONTERA_STATE = {UNFETCHED: States.QUEUED, LEASED: States.QUEUED, CRAWLED: States.CRAWLED, ERROR: States.ERROR}


class LinkRankMetadata(Metadata):
    """Metadata: records seeds, crawled pages, links and errors."""

    def __init__(self, core: FrontierCore) -> None:
        self.core = core

    def add_seeds(self, seeds: Iterable[Request]) -> None:
        self.core.add_seeds(seeds)

    def page_crawled(self, response: Response) -> None:
        self.core.page_fetched(response)

    def links_extracted(self, request: Request, links: list[Request]) -> None:
        self.core.links_found(request, links)

    def request_error(self, page: Request, error: Any) -> None:
        self.core.page_failed(page, error)


class LinkRankQueue(Queue):
    """Queue: best-first by the configured policy; one partition."""

    def __init__(self, core: FrontierCore) -> None:
        self.core = core

    def get_next_requests(self, max_n_requests: int, partition_id: int = 0, **kwargs: Any) -> list[Request]:
        key_type = kwargs.get("key_type", "domain")
        return self.core.next_requests(max_n_requests, key_type, kwargs.get("overused_keys") or ())

    def schedule(self, batch: Iterable[tuple[bytes, float | None, Request, bool]]) -> None:
        """Add the requests of ``(fingerprint, score, request, schedule)``
        tuples with ``schedule`` true as pages; the score becomes the
        page's hint (used by the ``score`` policy)."""
        for _fp, score, request, schedule in batch:
            if schedule:
                self.core.schedule(request, score)

    def count(self) -> int:
        return self.core.frontier.n_queued


class LinkRankStates(States):
    """States: the crawl state of each fingerprint, read from the page table.

    The page database owns the states (they change through page_crawled,
    request_error and leasing), so writes through this view are not taken:
    ``update_cache`` and ``flush`` do nothing.
    """

    def __init__(self, core: FrontierCore) -> None:
        self.core = core

    def _state(self, obj: Request) -> int:
        state = self.core.state(obj)
        return States.NOT_CRAWLED if state is None else _FRONTERA_STATE[state]

    def set_states(self, objs: Request | list[Request] | tuple[Request, ...]) -> None:
        objs = objs if isinstance(objs, (list, tuple)) else [objs]
        for obj in objs:
            obj.meta[b"state"] = self._state(obj)

    def update_cache(self, objs: Any) -> None:
        pass

    def flush(self, force_clear: bool = False) -> None:
        pass

    def fetch(self, fingerprints: Iterable[bytes]) -> None:
        pass
