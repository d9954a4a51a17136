"""``LinkRankSpiderMiddleware``: the page's links and outcome to the frontier.

The scheduler puts it in place by itself (:func:`install`), as the
outermost spider middleware: it sees the output after Scrapy's depth,
URL-length and referer middlewares and the project's own, and error
responses after ``HttpErrorMiddleware``. Naming it in the settings works
too, at an order below 50 (the add-on does so)::

    SPIDER_MIDDLEWARES = {"frontera_linkrank.scrapy.LinkRankSpiderMiddleware": 30}

For each response it schedules the requests the callback yields as
Scrapy's engine would (the ``request_scheduled`` signal, where Scrapy's
offsite middleware drops what ``allowed_domains`` excludes, then the
scheduler, ``request_dropped`` for a duplicate), and collects those the
frontier takes: the page's links. When the output is exhausted, it
reports the page to the scheduler: its response (status, and the content
score the callback put in ``response.meta["linkrank_score"]``), then its
links. Items pass through untouched. Responses that never reach the
callback (404 and the other statuses Scrapy turns into ``HttpError``, or a
callback that raised) are reported too, with no links.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import AsyncIterable, AsyncIterator
from typing import TYPE_CHECKING, Any

from scrapy import Request

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Response

logger = logging.getLogger(__name__)

SETUP_HINT = (
    'enable the frontier with ADDONS = {"frontera_linkrank.scrapy.Addon": 0}, or add '
    'SPIDER_MIDDLEWARES = {"frontera_linkrank.scrapy.LinkRankSpiderMiddleware": 30}'
)


class SetupError(RuntimeError):
    """The spider middleware cannot be put in place."""


class LinkRankSpiderMiddleware:
    """Spider middleware of :class:`~frontera_linkrank.scrapy.LinkRankScheduler`."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self._open: set[int] = set()  # ids of responses whose output is being collected
        self._warned = False

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> LinkRankSpiderMiddleware:
        return cls(crawler)

    def _scheduler(self) -> Any:
        # Any scheduler that takes a page's output (LinkRankScheduler does):
        # checked by its method, so this module need not import the scheduler.
        engine = self.crawler.engine
        scheduler = getattr(engine, "scheduler", None)  # Scrapy >= 2.19
        if scheduler is None:
            slot = getattr(engine, "slot", None) or getattr(engine, "_slot", None)
            scheduler = getattr(slot, "scheduler", None)
        if callable(getattr(scheduler, "response_done", None)) and callable(getattr(scheduler, "schedule_link", None)):
            return scheduler
        if not self._warned:
            self._warned = True
            logger.warning(
                "LinkRankSpiderMiddleware is enabled but SCHEDULER is not LinkRankScheduler: it does nothing"
            )
        return None

    async def process_spider_output(self, response: Response, result: AsyncIterable[Any]) -> AsyncIterator[Any]:
        scheduler = self._scheduler()
        if scheduler is None:
            async for x in result:
                yield x
            return
        links: list = []
        self._open.add(id(response))
        try:
            async for x in result:
                if isinstance(x, Request):
                    scheduler.schedule_link(x, links)  # scheduled here: never reaches the engine
                else:
                    yield x
        finally:
            self._open.discard(id(response))
            scheduler.response_done(response, links)

    def process_spider_exception(self, response: Response, exception: Exception) -> None:
        # An exception before the output was collected (the callback raised
        # at once): report the page now. Otherwise the output's end reports it.
        if id(response) not in self._open:
            scheduler = self._scheduler()
            if scheduler is not None:
                scheduler.response_done(response, [])
        return None


def install(crawler: Crawler) -> bool:
    """Put :class:`LinkRankSpiderMiddleware` in the crawler's spider
    middleware chain if the settings did not; True if it was added.

    The settings are frozen and the chain built before Scrapy creates the
    scheduler, so the scheduler adds the middleware to the chain itself:
    outermost, where the settings would put it at an order below 25. The
    chain is a list of methods per hook (``process_spider_output`` and
    ``process_spider_exception`` from the innermost middleware to the
    outermost, with None where a middleware has no such method, both lists
    aligned); anything else (another Scrapy) raises :class:`SetupError`.
    """
    spidermw = crawler.engine.scraper.spidermw
    middlewares = getattr(spidermw, "middlewares", None)
    if middlewares is not None and any(isinstance(m, LinkRankSpiderMiddleware) for m in middlewares):
        return False
    methods = getattr(spidermw, "methods", None)
    output = methods.setdefault("process_spider_output", deque()) if isinstance(methods, dict) else None
    exception = methods.setdefault("process_spider_exception", deque()) if isinstance(methods, dict) else None
    if not isinstance(middlewares, tuple) or not isinstance(output, deque) or not isinstance(exception, deque):
        raise SetupError(f"this Scrapy's spider middleware chain cannot be extended at run time: {SETUP_HINT}")
    if len(output) != len(exception):
        raise SetupError(f"this Scrapy's spider middleware chain is not as expected: {SETUP_HINT}")
    mw = LinkRankSpiderMiddleware.from_crawler(crawler)
    output.append(mw.process_spider_output)
    exception.append(mw.process_spider_exception)
    spidermw.middlewares = (mw, *middlewares)
    logger.info("LinkRankSpiderMiddleware added as the outermost spider middleware")
    return True
