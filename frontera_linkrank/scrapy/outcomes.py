"""The outcome of each request the frontier handed out, reported once.

A frontier request's ``meta["linkrank"]`` (``{"key", "depth", "url"}``)
names its lease; Scrapy copies it to the request's redirects and retries,
so the response is matched to its lease by the request handed out,
whatever its URL. :class:`Outcomes` is the part of
:class:`~.scheduler.LinkRankScheduler` that reports them: the response and
the page's links (:meth:`Outcomes.response_done`, called by the spider
middleware) or the failure (:meth:`Outcomes.request_failed`, called by the
errback the scheduler puts on each frontier request, before the spider's
own). Requests handed out that never come back (a component dropped them,
or replaced them with requests of its own) are given up when the engine
is idle, so the crawl never waits for them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from scrapy.exceptions import IgnoreRequest
from scrapy.spidermiddlewares.httperror import HttpError

from ..core.codec import FINGERPRINT_KEY, RETRIED_KEY, OutgoingRequest
from ..storage.urls import RejectedURL, fingerprint
from .converters import FRONTIER_META, fetched_page

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.http import Response
    from twisted.python.failure import Failure

    from .kept import KeptRequests
    from .slots import SlotBuffer

logger = logging.getLogger("frontera_linkrank.scrapy.scheduler")


class FrontierErrback:
    """The errback of a frontier request: reports the failure, then calls
    the spider's own errback (or lets Scrapy log the failure as usual)."""

    __slots__ = ("scheduler", "errback", "__weakref__")

    def __init__(self, scheduler: Outcomes, errback: Callable[[Failure], Any] | None) -> None:
        self.scheduler = scheduler
        self.errback = errback

    def __call__(self, failure: Failure) -> Any:
        # HttpError: the response reached the spider middleware, which reports it.
        if not failure.check(HttpError):
            self.scheduler.request_failed(failure.request, failure)
        if self.errback is None:
            return failure
        return self.errback(failure)


class Outcomes:
    """Reporting outcomes to the frontier (a part of the scheduler, which
    sets these attributes)."""

    manager: Any
    slots: SlotBuffer
    stats: Any
    crawler: Any
    _kept: KeptRequests
    _seeds: list
    _reports: int
    _fetched: int
    _failed: int

    def _finish(self, meta: dict[str, Any]) -> tuple[str, str] | None:
        """Mark the frontier request of ``meta`` finished: its (key, URL),
        or None if it is not one in flight (not a frontier request, or
        already reported)."""
        info = meta.get(FRONTIER_META)
        if not isinstance(info, dict) or info.get("refetch"):
            return None
        key = info.get("key")
        if self._release(key) is None:
            return None
        self._reports += 1
        return key, info.get("url")

    def _release(self, key: Any) -> Any:
        """Forget the in-flight request ``key`` and free its slot; the slot key, or None."""
        return self.slots.release(key)

    def response_done(self, response: Response, links: list[OutgoingRequest]) -> None:
        """A response of the crawl and the frontier links its page yielded.
        Reported once per frontier request; links of pages the frontier
        did not hand out enter it as seeds."""
        if self.manager is None:
            return
        self._kept.take(links)
        done = self._finish(response.meta) or self._refetched(response.meta)
        if done is None:
            if links:
                self._seeds.extend(links)
            return
        key, url = done
        if self._kept:
            self._kept.done(key)
        chain = list(response.meta.get("redirect_urls") or ())
        if chain and not self._same_page(chain[0], key):
            chain = []  # (a request not keyed by its URL alone: recorded as the page's response)
        page = fetched_page(response, url, key.encode("ascii"), chain)
        self.manager.page_crawled(page)
        self._fetched += 1 + len(set(chain))
        if links:
            self.manager.links_extracted(page.request, links)
        self.stats.inc_value("linkrank/links_extracted", len(links))

    def _refetched(self, meta: dict[str, Any]) -> tuple[str, str] | None:
        """The (key, URL) of a ``dont_filter`` refetch whose page was fetched
        before: recorded as a new fetch of it. (A page still queued or
        leased is fetched by the frontier too, as Scrapy fetches each
        ``dont_filter`` request: its refetch is not recorded.)"""
        info = meta.get(FRONTIER_META)
        if not (isinstance(info, dict) and info.get("refetch")):
            return None
        fetched = getattr(self.manager, "fetched", None)
        if fetched is None or not fetched(bytes.fromhex(info["key"])):
            return None
        return info["key"], info["url"]

    @staticmethod
    def _same_page(url: str, key: str) -> bool:
        try:
            return fingerprint(url).hex() == key
        except RejectedURL:
            return False

    def request_failed(self, request: Request, failure: Failure) -> None:
        """A frontier request failed without a response (network error,
        refused by robots.txt or another downloader middleware)."""
        done = self._finish(request.meta) if self.manager is not None else None
        if done is None:
            return
        key, url = done
        meta: dict[bytes, Any] = {FINGERPRINT_KEY: key.encode("ascii")}
        if failure.check(IgnoreRequest) or request.meta.get("dont_retry"):
            # Permanent (robots.txt, offsite, too many redirects) or not to be retried.
            meta[b"dont_retry"] = True
        elif self._scrapy_retries:
            meta[RETRIED_KEY] = True  # Scrapy retried it already: the frontier does not
        exc = failure.value
        self.manager.request_error(OutgoingRequest(url, meta=meta), f"{type(exc).__name__}: {exc}"[:1000])
        self._failed += 1
        self.stats.inc_value(f"linkrank/errors/{type(exc).__name__}")

    # -- lost requests and the end of the crawl ----------------------------------------------
    def _engine_idle(self) -> bool:
        engine = self.crawler.engine
        slot = getattr(engine.scraper, "slot", None)
        return not engine.downloader.active and (slot is None or slot.is_idle())

    def _reclaim_lost(self) -> None:
        """Requests handed out whose outcome never came back (a component
        dropped them, or replaced them with requests of its own): given up,
        so the crawl does not wait for them."""
        lost = list(self._in_flight.items())
        logger.warning("%d requests handed out never came back from Scrapy (dropped or replaced by a component): "
                       "recorded as failed", len(lost))
        for key, (_, url) in lost:
            self._release(key)
            meta = {FINGERPRINT_KEY: key.encode("ascii"), b"dont_retry": True}
            self.manager.request_error(OutgoingRequest(url, meta=meta), "lost in Scrapy")
        self._reports += 1
        self.stats.inc_value("linkrank/lost", len(lost))
