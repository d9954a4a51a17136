"""Requests kept in memory for one run: those the page database cannot
store whole.

Scrapy keeps a request its disk queues cannot serialise (a lambda
callback, a response object in ``cb_kwargs``...) in its memory queue: it
is fetched in this run and lost if the crawl stops first. The frontier
does the same: such a request still enters the frontier (so it is
deduplicated and ordered like any link), with what can be stored and the
names of what cannot; the request itself waits here, by fingerprint, and
is what Scrapy fetches when the frontier hands its page out. After a
restart it is gone, and the page is dropped with an error naming the parts
that could not be stored (see :func:`.converters.to_scrapy`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..core.codec import FINGERPRINT_KEY
from ..storage.vertices import UNFETCHED
from .converters import KEEP_REQUEST, UNSTORED_KEY

if TYPE_CHECKING:
    from scrapy import Request

    from ..core.codec import OutgoingRequest as FRequest

logger = logging.getLogger(__name__)


class KeptRequests:
    """Scrapy requests of this run by frontier key (40 hex characters).

    Parameters
    ----------
    backend : callable() -> frontier
        The scheduler's frontier: a request whose page its frontier core
        knows as fetched (or failed) is not kept, since the page is not
        handed out again; with a shared frontier (no core here) every one is.
    stats : Scrapy stats collector, optional
        Counts ``linkrank/requests_in_memory``.
    """

    def __init__(self, backend: Callable[[], Any], stats: Any = None) -> None:
        self.backend = backend
        self.stats = stats
        self.requests: dict[str, Request] = {}
        self._logged: set[str] = set()

    def __len__(self) -> int:
        return len(self.requests)

    def take(self, frequests: list[FRequest]) -> int:
        """Take the Scrapy requests out of ``frequests`` that could not be
        stored whole (``meta[KEEP_REQUEST]``) and keep them (the first one
        of a page wins, as in the frontier); one warning per part name.
        Returns how many were kept."""
        kept = 0
        for fr in frequests:
            request = fr.meta.pop(KEEP_REQUEST, None)
            if request is None:
                continue
            fp = fr.meta[FINGERPRINT_KEY].decode("ascii")
            if fp not in self.requests and self._is_new(fr):
                self.requests[fp] = request
                kept += 1
                if self.stats is not None:
                    self.stats.inc_value("linkrank/requests_in_memory")
            new = [name for name in fr.meta.get(UNSTORED_KEY, ()) if name not in self._logged]
            if new:
                self._logged.update(new)
                logger.warning(
                    "%s: the %s of this request cannot be stored in the page database (not plain data): "
                    "the request is kept in memory and fetched in this run only (logged once per name)",
                    fr.url, ", ".join(new),
                )
        return kept

    def _is_new(self, fr: FRequest) -> bool:
        core = getattr(self.backend(), "core", None)
        return core is None or core.state(fr) in (None, UNFETCHED)

    def get(self, fp: str) -> Request | None:
        """The request kept for fingerprint ``fp``, or None."""
        return self.requests.get(fp)

    def done(self, fp: str) -> None:
        """The page of ``fp`` was fetched: its request is not needed any more."""
        self.requests.pop(fp, None)
