"""The scheduler's frontier in this process: a :class:`~..core.FrontierCore`
over a page database, with the calls the scheduler makes.

The shared frontier's client (:mod:`.remote`) answers the same calls, so
the scheduler is written once for both: ``add_seeds``,
``get_next_requests``, ``page_crawled``, ``links_extracted``,
``request_error``, ``finished``, ``stats`` and ``stop``, with requests and
responses as the core reads them (:class:`~..core.codec.OutgoingRequest`,
:class:`.converters.FetchedPage`). Nothing of Frontera is imported.

The page database records its key scheme (:mod:`..storage.identity`): this
frontier keys requests by method, canonical URL and body (``"request"``),
and moves a database keyed by URL alone to that scheme when it opens it
(plain GETs keep their keys).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from ..core import FrontierCore
from ..settings import LinkRankSettings
from ..storage.identity import REQUEST_KEYS, SECTION, key_scheme
from ..storage.vertices import CRAWLED, ERROR

logger = logging.getLogger(__name__)


class LocalFrontier:
    """A frontier core over the page database at ``settings.PATH``."""

    def __init__(self, settings: LinkRankSettings) -> None:
        self.core = core = FrontierCore(settings)
        self.backend = self  # the scheduler (and remote.py's manager) read stats() of their backend
        db = core.db
        was = key_scheme(db.meta_section(SECTION))
        if was != REQUEST_KEYS and db.n_pages:
            logger.info("%s: pages keyed by URL until now; new requests are keyed by method, URL and body "
                        "(plain GETs keep their keys)", settings.PATH)
        db.own_meta_section(SECTION, lambda: {"scheme": REQUEST_KEYS})

    # -- what the scheduler reports ---------------------------------------------------------
    def add_seeds(self, seeds: Iterable[Any]) -> None:
        self.core.add_seeds(seeds)

    def page_crawled(self, response: Any) -> None:
        self.core.page_fetched(response)

    def links_extracted(self, request: Any, links: list) -> None:
        self.core.links_found(request, links)

    def request_error(self, request: Any, error: str) -> None:
        self.core.page_failed(request, error)

    # -- what it asks -------------------------------------------------------------------------
    def get_next_requests(self, max_n: int, key_type: str = "domain", overused_keys: Iterable[str] = ()) -> list:
        return self.core.next_requests(max_n, key_type, overused_keys or ())

    def known(self, key: bytes) -> bool:
        """Whether the page of 20-byte ``key`` is in the database (links
        not yet applied are not)."""
        return self.core.db.find(key) is not None

    def fetched(self, key: bytes) -> bool:
        """Whether the page of 20-byte ``key`` was fetched (crawled, or
        given up after errors): not queued nor leased."""
        i = self.core.db.find(key)
        return i is not None and int(self.core.db.vertices.state[i]) in (CRAWLED, ERROR)

    def pending(self) -> int:
        """Reports recorded and not yet applied."""
        return len(self.core.batch)

    @property
    def finished(self) -> bool:
        return self.core.finished()

    @property
    def stopped(self) -> Any:
        """The error that stopped the frontier (a commit that could not be written), or None."""
        return self.core.stopped

    def stats(self) -> dict[str, Any]:
        return self.core.stats()

    def url_of(self, key: bytes) -> str | None:
        return self.core.url_of(key)

    def stop(self) -> None:
        """Apply and commit what is pending, and close the page database."""
        self.core.close()
