"""``LinkRankSpiderMiddleware``: the page's links and outcome to the frontier.

Enable it beside the scheduler, at an order below 50 so that it is the
outermost spider middleware (it sees the output after Scrapy's depth,
URL-length and referer middlewares, and error responses after
``HttpErrorMiddleware``)::

    SPIDER_MIDDLEWARES = {"frontera_linkrank.scrapy.LinkRankSpiderMiddleware": 30}

For each response of a frontier request it collects the requests the
callback yields (the page's links; ``meta["dont_frontier"]`` ones pass
through to Scrapy's queue) and, when the output is exhausted, reports the
page to the scheduler: ``page_crawled`` with the response's status and the
content score the callback put in ``response.meta["linkrank_score"]``,
then ``links_extracted``. Items pass through untouched. Responses that
never reach the callback (404 and the other statuses Scrapy turns into
``HttpError``, or a callback that raised) are reported too, with no links.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterable, AsyncIterator
from typing import TYPE_CHECKING, Any

from scrapy import Request

from .converters import DONT_FRONTIER, FRONTIER_META, to_frontera

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Response

logger = logging.getLogger(__name__)


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
        if callable(getattr(scheduler, "response_done", None)):
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
        spider = self.crawler.spider
        links = []
        self._open.add(id(response))
        try:
            async for x in result:
                if not isinstance(x, Request):
                    yield x
                    continue
                if x.meta.get(DONT_FRONTIER):
                    x.meta.pop(FRONTIER_META, None)  # a new request, not a follow-up of this page's
                    yield x
                    continue
                try:
                    links.append(to_frontera(x, spider))
                except ValueError as e:
                    logger.warning("%s goes through Scrapy's queue, not the frontier: %s", x.url, e)
                    x.meta[DONT_FRONTIER] = True
                    x.meta.pop(FRONTIER_META, None)
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
